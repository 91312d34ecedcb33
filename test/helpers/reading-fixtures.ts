// Fixtures for the reading-side integration files (receipts, history, follow, retention).
// Everything goes over the real socket through the raw line client; nothing here imports src/.

import net from 'node:net';
import { expect } from 'vitest';
import type { DaemonProcess } from './daemon-process.js';
import { waitFor } from './wait.js';
import {
  RpcLineClient,
  claim,
  connectAs,
  createPair,
  ok,
  uniq,
  type RpcNotification,
  type RpcResponse,
  type TestPair,
} from './rpc-line-client.js';

/* eslint-disable @typescript-eslint/no-explicit-any */

// ---------------------------------------------------------------------------------------------
// Error codes of §3.

export const CODES = {
  INVALID_PARAMS: -32602,
  UNAUTHENTICATED: 4001,
  PERMISSION_DENIED: 4003,
  NOT_FOUND: 4004,
  FENCED: 4090,
  POSITION_MISMATCH: 4091,
  INVALID_RECEIPT: 4095,
  CONTINUITY_BREAK: 4100,
  RATE_LIMITED: 4290,
} as const;

export type ErrorType = keyof typeof CODES;

/** Asserts that `resp` is the JSON-RPC error `type` (code and data.type) and returns its data. */
export function expectError(resp: RpcResponse, type: ErrorType, what = ''): any {
  expect(resp.result, `${what} expected ${type}, got a result: ${JSON.stringify(resp.result)?.slice(0, 300)}`).toBeUndefined();
  expect(resp.error, `${what} expected ${type}`).toBeDefined();
  expect({ code: resp.error!.code, type: resp.error!.data?.type }, `${what} ${JSON.stringify(resp.error)}`).toEqual({ code: CODES[type], type });
  return resp.error!.data;
}

// ---------------------------------------------------------------------------------------------
// Records.

/** `n` chat.message input records with unique message ids under `prefix`. */
export function messages(prefix: string, n: number, pad = 0): { type: 'chat.message'; messageId: string; content: string }[] {
  const filler = pad > 0 ? ' ' + 'lorem ipsum dolor sit amet '.repeat(Math.ceil(pad / 27)).slice(0, pad) : '';
  return Array.from({ length: n }, (_, i) => ({ type: 'chat.message' as const, messageId: `${prefix}.${i}`, content: `message ${prefix} number ${i}${filler}` }));
}

export function receipt(peerStreamId: string, peerGeneration: string, nextPosition: string, batchId: string): any {
  return { type: 'chat.receipt', peerStreamId, peerGeneration, nextPosition, batchId };
}

/** The transcript order of §6: signature.createdAt, then fromAgentId, then position numerically. */
export function transcriptCompare(a: any, b: any): number {
  const ta = a.wrapper.message.signature.createdAt as string;
  const tb = b.wrapper.message.signature.createdAt as string;
  if (ta !== tb) return ta < tb ? -1 : 1;
  const fa = a.wrapper.message.fromAgentId as string;
  const fb = b.wrapper.message.fromAgentId as string;
  if (fa !== fb) return fa < fb ? -1 : 1;
  const pa = BigInt(a.position);
  const pb = BigInt(b.position);
  return pa < pb ? -1 : pa > pb ? 1 : 0;
}

/** A short identity of a stored record for equality checks. */
export function recKey(r: any): string {
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
  client: RpcLineClient;
  readonly streamId: string;
  token: string;
  generation: string;
  next: string;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(client: RpcLineClient, streamId: string, token: string, generation: string, next: string) {
    this.client = client;
    this.streamId = streamId;
    this.token = token;
    this.generation = generation;
    this.next = next;
  }

  static async claim(client: RpcLineClient, streamId: string, replace = false): Promise<StreamWriter> {
    const c = await claim(client, streamId, replace);
    return new StreamWriter(client, streamId, c.coordinatorToken as string, c.generation as string, c.nextPosition as string);
  }

  /** Claims again (replace) and adopts the new token; appends a writer fence. */
  async reclaim(): Promise<any> {
    const c = await claim(this.client, this.streamId, true);
    this.token = c.coordinatorToken;
    this.generation = c.generation;
    this.next = c.nextPosition;
    return c;
  }

  /** Sends one append at the tracked position; resolves with the raw response; advances on success. */
  tryAppend(records: unknown[], operationId = uniq('op'), timeoutMs = 20_000): Promise<RpcResponse> {
    const run = async (): Promise<RpcResponse> => {
      const r = await this.client.call(
        'streams.append',
        { streamId: this.streamId, coordinatorToken: this.token, generation: this.generation, expectedPosition: this.next, operationId, records },
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
  async append(records: unknown[], operationId?: string): Promise<any> {
    return ok(await this.tryAppend(records, operationId), `streams.append to ${this.streamId}`);
  }

  /** Appends `n` messages in one operation. */
  send(prefix: string, n = 1, pad = 0): Promise<any> {
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

export async function setupChat(daemon: DaemonProcess, admin: RpcLineClient, opts: { claim?: boolean } = {}): Promise<ReadingChat> {
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

export async function streamState(client: RpcLineClient, streamId: string): Promise<any> {
  return ok(await client.call('streams.get', { streamId }), `streams.get ${streamId}`);
}

// ---------------------------------------------------------------------------------------------
// Follow notifications.

export function batchesOf(client: { notifications: RpcNotification[] }, subscriptionId: string): any[] {
  return client.notifications.filter((n) => n.method === 'chats.batch' && n.params?.subscriptionId === subscriptionId).map((n) => n.params);
}

export function breaksOf(client: { notifications: RpcNotification[] }, subscriptionId: string): any[] {
  return client.notifications.filter((n) => n.method === 'chats.break' && n.params?.subscriptionId === subscriptionId).map((n) => n.params);
}

/** The end a subscription reached on `streamId` (from its batches), or `start` if none. */
export function reached(batches: any[], streamId: string, start: string): string {
  const mine = batches.filter((b) => b.streamId === streamId);
  return mine.length ? (mine.at(-1).nextPosition as string) : start;
}

/**
 * Checks the batches of one stream are well-formed and tile [from, to) exactly once, in order:
 * each batch non-empty, its records at fromPosition.. consecutively, the next batch starting
 * where the previous ended. Returns the records.
 */
export function expectContiguous(batches: any[], streamId: string, generation: string, from: string, to: string, what = ''): any[] {
  const mine = batches.filter((b) => b.streamId === streamId);
  const records: any[] = [];
  let at = BigInt(from);
  for (const b of mine) {
    const label = `${what} batch ${b.fromPosition}..${b.nextPosition} of ${streamId}`;
    expect(b.generation, label).toBe(generation);
    expect(b.fromPosition, `${label}: gap or duplicate (expected to start at ${at})`).toBe(at.toString());
    expect(b.records.length, label).toBeGreaterThan(0);
    expect(BigInt(b.nextPosition) - BigInt(b.fromPosition), label).toBe(BigInt(b.records.length));
    b.records.forEach((r: any, i: number) => {
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
// A raw follower on its own net.Socket, for backpressure: it parses lines only while flowing,
// and can stop reading the socket altogether with pause().

export class RawFollower {
  readonly socket: net.Socket;
  readonly notifications: RpcNotification[] = [];
  readonly responses = new Map<number, RpcResponse>();
  bytesRead = 0;
  #buf = '';
  #id = 1;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.bytesRead += Buffer.byteLength(chunk);
      this.#buf += chunk;
      let nl: number;
      while ((nl = this.#buf.indexOf('\n')) >= 0) {
        const line = this.#buf.slice(0, nl);
        this.#buf = this.#buf.slice(nl + 1);
        if (!line.trim()) continue;
        const msg = JSON.parse(line);
        if (msg && typeof msg.method === 'string' && !('id' in msg)) this.notifications.push(msg);
        else if (msg && typeof msg.id === 'number') this.responses.set(msg.id, msg);
      }
    });
    socket.on('error', () => undefined);
  }

  static connect(socketPath: string): Promise<RawFollower> {
    return new Promise((resolve, reject) => {
      const s = net.connect(socketPath);
      s.once('connect', () => resolve(new RawFollower(s)));
      s.once('error', reject);
    });
  }

  async call(method: string, params: unknown, timeoutMs = 10_000): Promise<RpcResponse> {
    const id = this.#id++;
    this.socket.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    return (await waitFor(() => this.responses.get(id), `response to ${method}`, timeoutMs, 5))!;
  }

  /** Hello, follow, and (with `pause`) stop reading the socket right after the follow response. */
  async follow(token: string, chatId: string, cursor?: string, pause = true): Promise<{ subscriptionId: string; cursor: string }> {
    ok(await this.call('session.hello', { token }), 'session.hello');
    const id = this.#id++;
    const params = cursor === undefined ? { chatId } : { chatId, cursor };
    // Pause from inside the data handler that delivers the response, so nothing after it is read.
    const result = new Promise<any>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no chats.follow response')), 10_000);
      const onData = (): void => {
        const r = this.responses.get(id);
        if (!r) return;
        clearTimeout(timer);
        this.socket.removeListener('data', onData);
        if (pause) this.socket.pause();
        resolve(r);
      };
      this.socket.on('data', onData);
    });
    this.socket.write(JSON.stringify({ jsonrpc: '2.0', id, method: 'chats.follow', params }) + '\n');
    return ok(await result, 'chats.follow');
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  close(): void {
    this.socket.destroy();
  }
}

export { connectAs, ok, uniq };
