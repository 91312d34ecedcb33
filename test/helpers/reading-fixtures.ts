// Fixtures for the reading-side integration files (receipts, history, follow, retention).
// Everything goes over the real socket through the raw line client; nothing here imports src/.

import { expect } from 'vitest';
import type { MethodResults, ParamsIn } from '../../src/shared/methods.js';
import type { ChatBatchNotification, ChatBreakNotification, StoredRecord } from '../../src/shared/types.js';
import type { DaemonProcess } from './daemon-process.js';
import {
  claim,
  connectAs,
  messageOf,
  connectWire,
  createPair,
  jsonPreview,
  ok,
  uniq,
  type TestPair,
  type Wire,
  type WireErrorData,
  type WireNotification,
  type WireResponse,
} from './wire-fixtures.js';

// ---------------------------------------------------------------------------------------------
// Error codes of §3.

export const CODES = {
  INVALID_PARAMS: -32602,
  UNAUTHENTICATED: 4001,
  PERMISSION_DENIED: 4003,
  NOT_FOUND: 4004,
  FENCED: 4090,
  POSITION_MISMATCH: 4091,
  OPERATION_CONFLICT: 4093,
  DUPLICATE_MESSAGE: 4094,
  INVALID_RECEIPT: 4095,
  POLICY_REJECTED: 4220,
  STORAGE_FAILURE: 5030,
  CONTINUITY_BREAK: 4100,
  RATE_LIMITED: 4290,
} as const;

export type ErrorType = keyof typeof CODES;

/** Asserts that `resp` is the JSON-RPC error `type` (code and data.type) and returns its data. */
export function expectError(resp: WireResponse, type: ErrorType, what = ''): WireErrorData {
  expect(resp.result, `${what} expected ${type}, got a result: ${jsonPreview(resp.result)}`).toBeUndefined();
  expect(resp.error, `${what} expected ${type}`).toBeDefined();
  expect({ code: resp.error!.code, type: resp.error!.data?.type }, `${what} ${JSON.stringify(resp.error)}`).toEqual({
    code: CODES[type],
    type,
  });
  return resp.error!.data ?? {};
}

// ---------------------------------------------------------------------------------------------
// Records.

/** `n` chat.message input records with unique message ids under `prefix`. */
export function messages(prefix: string, n: number, pad = 0): { type: 'chat.message'; messageId: string; content: string }[] {
  const filler = pad > 0 ? ' ' + 'lorem ipsum dolor sit amet '.repeat(Math.ceil(pad / 27)).slice(0, pad) : '';
  return Array.from({ length: n }, (_, i) => ({
    type: 'chat.message' as const,
    messageId: `${prefix}.${i}`,
    content: `message ${prefix} number ${i}${filler}`,
  }));
}

export function receipt(peerStreamId: string, peerGeneration: string, nextPosition: string, batchId: string): ReceiptInput {
  return { type: 'chat.receipt', peerStreamId, peerGeneration, nextPosition, batchId };
}

/** The transcript order of §6: signature.createdAt, then fromAgentId, then position numerically. */
export function transcriptCompare(a: StoredRecord, b: StoredRecord): number {
  const ma = messageOf(a);
  const mb = messageOf(b);
  const ta = ma.signature.createdAt;
  const tb = mb.signature.createdAt;
  if (ta !== tb) return ta < tb ? -1 : 1;
  const fa = ma.fromAgentId;
  const fb = mb.fromAgentId;
  if (fa !== fb) return fa < fb ? -1 : 1;
  const pa = BigInt(a.position);
  const pb = BigInt(b.position);
  return pa < pb ? -1 : pa > pb ? 1 : 0;
}

/** A short identity of a stored record for equality checks. */
export function recKey(r: StoredRecord): string {
  return `${r.streamId}@${r.generation}#${r.position}`;
}

/** The positions from..to-1 as decimal strings. */
export function positions(from: bigint | string | number, to: bigint | string | number): string[] {
  const out: string[] = [];
  for (let p = BigInt(from); p < BigInt(to); p++) out.push(p.toString());
  return out;
}

// ---------------------------------------------------------------------------------------------
// A coordinator for one stream: claims it, tracks the position, and serializes its appends.

export class StreamWriter {
  client: Wire;
  readonly streamId: string;
  token: string;
  generation: string;
  next: string;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(client: Wire, streamId: string, token: string, generation: string, next: string) {
    this.client = client;
    this.streamId = streamId;
    this.token = token;
    this.generation = generation;
    this.next = next;
  }

  static async claim(client: Wire, streamId: string, replace = false): Promise<StreamWriter> {
    const c = await claim(client, streamId, replace);
    return new StreamWriter(client, streamId, c.coordinatorToken, c.generation, c.nextPosition);
  }

  /** Claims again (replace) and adopts the new token; appends a writer fence. */
  async reclaim(): Promise<MethodResults['streams.claim']> {
    const c = await claim(this.client, this.streamId, true);
    this.token = c.coordinatorToken;
    this.generation = c.generation;
    this.next = c.nextPosition;
    return c;
  }

  /** Sends one append at the tracked position; resolves with the raw response; advances on success. */
  tryAppend(records: unknown[], operationId = uniq('op'), timeoutMs = 20_000): Promise<WireResponse<MethodResults['streams.append']>> {
    const run = async (): Promise<WireResponse<MethodResults['streams.append']>> => {
      const r = await this.client.call(
        'streams.append',
        {
          streamId: this.streamId,
          coordinatorToken: this.token,
          generation: this.generation,
          expectedPosition: this.next,
          operationId,
          records,
        },
        timeoutMs,
      );
      if (r.result) this.next = r.result.nextPosition;
      return r;
    };
    const p = this.#chain.then(run, run);
    this.#chain = p.catch(() => undefined);
    return p;
  }

  /** Appends and requires success; resolves with the append result. */
  async append(records: unknown[], operationId?: string): Promise<MethodResults['streams.append']> {
    return ok(await this.tryAppend(records, operationId), `streams.append to ${this.streamId}`);
  }

  /** Appends `n` messages in one operation. */
  send(prefix: string, n = 1, pad = 0): Promise<MethodResults['streams.append']> {
    return this.append(messages(prefix, n, pad));
  }
}

// ---------------------------------------------------------------------------------------------
// Two agents (alice, bob) with grants both ways, PII policy off, their chat, and both
// outbound streams claimed.

export interface ReadingChat {
  pair: TestPair;
  chatId: string;
  alice: TestPair['a'];
  bob: TestPair['b'];
  /** alice's outbound stream. */
  streamA: string;
  /** bob's outbound stream. */
  streamB: string;
  wa: StreamWriter;
  wb: StreamWriter;
}

export async function setupChat(daemon: DaemonProcess, admin: Wire, opts: { claim?: boolean } = {}): Promise<ReadingChat> {
  const pair = await createPair(admin, daemon.socketPath);
  ok(await admin.call('agents.setPolicy', { agentId: pair.a.id, pii: 'off' }), 'agents.setPolicy');
  ok(await admin.call('agents.setPolicy', { agentId: pair.b.id, pii: 'off' }), 'agents.setPolicy');
  const doClaim = opts.claim ?? true;
  const wa = doClaim ? await StreamWriter.claim(pair.a.client, pair.streamA) : new StreamWriter(pair.a.client, pair.streamA, '', '1', '0');
  const wb = doClaim ? await StreamWriter.claim(pair.b.client, pair.streamB) : new StreamWriter(pair.b.client, pair.streamB, '', '1', '0');
  return { pair, chatId: pair.chatId, alice: pair.a, bob: pair.b, streamA: pair.streamA, streamB: pair.streamB, wa, wb };
}

/** After a daemon restart: fresh hello'd connections for both agents and their writers. */
export async function reconnectChat(daemon: DaemonProcess, chat: ReadingChat): Promise<void> {
  chat.alice.client = await daemon.connectAs(chat.alice.token);
  chat.bob.client = await daemon.connectAs(chat.bob.token);
  chat.wa.client = chat.alice.client;
  chat.wb.client = chat.bob.client;
}

export async function streamState(client: Wire, streamId: string): Promise<MethodResults['streams.get']> {
  return ok(await client.call('streams.get', { streamId }), `streams.get ${streamId}`);
}

// ---------------------------------------------------------------------------------------------
// Follow notifications.

/** Every notification of `subscriptionId`, in arrival order. */
export function notificationsOf(client: { notifications: WireNotification[] }, subscriptionId: string): WireNotification[] {
  return client.notifications.filter((n) => (n.params as { subscriptionId?: unknown } | undefined)?.subscriptionId === subscriptionId);
}

/** The params of every `method` notification of `subscriptionId` (the contract's §6.5 shapes). */
function paramsOf<P>(client: { notifications: WireNotification[] }, method: string, subscriptionId: string): P[] {
  return client.notifications
    .filter((n) => n.method === method && (n.params as { subscriptionId?: unknown } | undefined)?.subscriptionId === subscriptionId)
    .map((n) => n.params as P);
}

export function batchesOf(client: { notifications: WireNotification[] }, subscriptionId: string): ChatBatchNotification[] {
  return paramsOf(client, 'chats.batch', subscriptionId);
}

export function breaksOf(client: { notifications: WireNotification[] }, subscriptionId: string): ChatBreakNotification[] {
  return paramsOf(client, 'chats.break', subscriptionId);
}

/** The end a subscription reached on `streamId` (from its batches), or `start` if none. */
export function reached(batches: ChatBatchNotification[], streamId: string, start: string): string {
  const mine = batches.filter((b) => b.streamId === streamId);
  return mine.at(-1)?.nextPosition ?? start;
}

/**
 * Checks the batches of one stream are well-formed and tile [from, to) exactly once, in order:
 * each batch non-empty, its records at fromPosition.. consecutively, the next batch starting
 * where the previous ended. Returns the records.
 */
export function expectContiguous(
  batches: ChatBatchNotification[],
  streamId: string,
  generation: string,
  from: string,
  to: string,
  what = '',
): StoredRecord[] {
  const mine = batches.filter((b) => b.streamId === streamId);
  const records: StoredRecord[] = [];
  let at = BigInt(from);
  for (const b of mine) {
    const label = `${what} batch ${b.fromPosition}..${b.nextPosition} of ${streamId}`;
    expect(b.generation, label).toBe(generation);
    expect(b.fromPosition, `${label}: gap or duplicate (expected to start at ${at})`).toBe(at.toString());
    expect(b.records.length, label).toBeGreaterThan(0);
    expect(BigInt(b.nextPosition) - BigInt(b.fromPosition), label).toBe(BigInt(b.records.length));
    b.records.forEach((r, i) => {
      expect(r.streamId).toBe(streamId);
      expect(r.generation).toBe(generation);
      expect(r.position).toBe((BigInt(b.fromPosition) + BigInt(i)).toString());
    });
    expect(typeof b.batchId, label).toBe('string');
    expect(typeof b.cursor, label).toBe('string');
    records.push(...b.records);
    at = BigInt(b.nextPosition);
  }
  expect(at.toString(), `${what} ${streamId} delivered up to`).toBe(to);
  return records;
}

// ---------------------------------------------------------------------------------------------
// A follower that stops reading, for backpressure.

/**
 * A fresh connection as `token` that follows `chatId` and stops reading its socket right as
 * the follow response arrives, so nothing after it is read until `client.socket.resume()`;
 * `client.bytesReceived` shows what it did read.
 */
export async function followPaused(
  socketPath: string,
  token: string,
  chatId: string,
  cursor?: string,
): Promise<{ client: Wire; subscriptionId: string; cursor: string }> {
  const client = await connectWire(socketPath);
  ok(await client.hello(token), 'session.hello');
  const id = client.newId();
  // Paused from the listener that sees the response, before anything after it is parsed.
  const pause = (r: WireResponse): void => {
    if (r.id !== id) return;
    client.socket.pause();
    client.off('response', pause);
  };
  client.on('response', pause);
  const params = cursor === undefined ? { chatId } : { chatId, cursor };
  const r = await client.callRaw<MethodResults['chats.follow']>(
    id,
    JSON.stringify({ jsonrpc: '2.0', id, method: 'chats.follow', params }) + '\n',
    10_000,
    'chats.follow',
  );
  return { client, ...ok(r, 'chats.follow') };
}

/** A chat.receipt input record of streams.append, as the contract's schema types it. */
export type ReceiptInput = Extract<ParamsIn<'streams.append'>['records'][number], { type: 'chat.receipt' }>;

export { connectAs, ok, uniq };
