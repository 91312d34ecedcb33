// The crash checker must not be vacuous: against a synthetic store (no daemon), every invariant
// of test/helpers/history-checker.ts is shown to catch its violation, and a clean store passes.

import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { HistoryChecker, type AppendInput, type RpcCaller } from '../helpers/history-checker.js';
import type { MethodResults } from '../../src/shared/methods.js';
import type { OperationInfo } from '../../src/shared/results.js';
import type { ChatMessage, RecordWrapper, StoredRecord, StreamState } from '../../src/shared/types.js';
import type { ResultOf } from '../helpers/wire-client.mjs';
import { clientMessageIdFor, jwkThumbprint, signedPayload, type WireResponse } from '../helpers/wire-fixtures.js';

const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = publicKey.export({ format: 'jwk' }) as { kty: string; crv: string; x: string; y: string };
const kid = jwkThumbprint(jwk);
const b64 = (b: Buffer) => b.toString('base64url');

const CHAT = 'chat_T';
const A = 'agt_A';
const B = 'agt_B';
const SA = `${CHAT}:${A}`;
const SB = `${CHAT}:${B}`;

/** A record wrapper without the header #push fills in. */
type WrapperBody = RecordWrapper extends infer W
  ? W extends RecordWrapper
    ? Omit<W, 'version' | 'chatId' | 'authorAgentId' | 'operationId' | 'recordIndex'>
    : never
  : never;

/** The message of the stored record at `index` of `streamId` (for tampering with it). */
function messageAt(store: FakeStore, streamId: string, index: number): ChatMessage {
  const w = store.records.get(streamId)![index]!.wrapper;
  if (w.type !== 'chat.message') throw new Error(`record ${index} of ${streamId} is a ${w.type}`);
  return w.message;
}

/** A tiny in-memory stand-in for the daemon's read side. */
class FakeStore implements RpcCaller {
  readonly records = new Map<string, StoredRecord[]>([
    [SA, []],
    [SB, []],
  ]);
  readonly ops = new Map<string, OperationInfo>();
  epoch = new Map<string, string>([
    [SA, '0'],
    [SB, '0'],
  ]);
  /** Overrides for operations.get answers. */
  readonly opOverride = new Map<string, Pick<OperationInfo, 'operationId' | 'state'>>();
  clock = 0;

  /** Answers like a connection: asynchronously, and a throw while answering is a rejection. */
  call<M extends string>(method: M, p: unknown = {}): Promise<WireResponse<ResultOf<MethodResults, M>>> {
    return new Promise((resolve) => {
      resolve(this.#answer(method, p));
    });
  }

  #answer<M extends string>(method: M, p: unknown): WireResponse<ResultOf<MethodResults, M>> {
    type Answer = WireResponse<ResultOf<MethodResults, M>>;
    const params = p as { streamId: string; fromPosition: string; operationId: string };
    const result = (r: unknown): Answer => ({ jsonrpc: '2.0', id: 1, result: r as ResultOf<MethodResults, M> });
    switch (method) {
      case 'keys.list':
        return result({ keys: [{ ...jwk, kid, alg: 'ES256', use: 'sig', status: 'active' }] });
      case 'chats.get':
        return result({ chat: { id: CHAT, agentAId: A, agentBId: B } });
      case 'streams.get':
        return result(this.state(params.streamId));
      case 'streams.read': {
        const rs = this.records.get(params.streamId)!;
        const from = Number(params.fromPosition);
        const out = rs.filter((r) => Number(r.position) >= from).slice(0, 1000);
        return result({
          streamId: params.streamId,
          generation: '1',
          fromPosition: params.fromPosition,
          nextPosition: String(from + out.length),
          records: out,
          batchId: 'b',
          sealed: false,
        });
      }
      case 'operations.list':
        return result({
          operations: [...this.ops.entries()].filter(([k]) => k.startsWith(`${params.streamId} `)).map(([, v]) => v),
          nextCursor: null,
        });
      case 'operations.get': {
        const k = `${params.streamId} ${params.operationId}`;
        return result(this.opOverride.get(k) ?? this.ops.get(k) ?? { operationId: params.operationId, state: 'unknown' });
      }
      default:
        return { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'nope' } };
    }
  }

  state(streamId: string): StreamState {
    const rs = this.records.get(streamId)!;
    const peer = streamId === SA ? SB : SA;
    const receipts = this.records.get(peer)!.filter((r) => r.wrapper.type === 'chat.receipt');
    const last = receipts.at(-1);
    return {
      streamId,
      chatId: CHAT,
      authorAgentId: streamId === SA ? A : B,
      generation: '1',
      firstPosition: rs[0]?.position ?? '0',
      nextPosition: String(rs.length ? Number(rs.at(-1)!.position) + 1 : 0),
      acknowledged: last?.wrapper.type === 'chat.receipt' ? { generation: '1', nextPosition: last.wrapper.receipt.nextPosition } : null,
      writer: { epoch: this.epoch.get(streamId)!, claimedAt: '', active: true, connected: true },
    };
  }

  #push(streamId: string, operationId: string, index: number, body: WrapperBody): StoredRecord {
    const rs = this.records.get(streamId)!;
    const author = streamId === SA ? A : B;
    const r: StoredRecord = {
      streamId,
      generation: '1',
      position: String(rs.length),
      wrapper: { version: 2, chatId: CHAT, authorAgentId: author, operationId, recordIndex: index, ...body },
    };
    rs.push(r);
    return r;
  }

  /** Commits an append the way the daemon would, and returns the append result. */
  append(streamId: string, operationId: string, records: AppendInput[]): MethodResults['streams.append'] {
    const author = streamId === SA ? A : B;
    const to = author === A ? B : A;
    const first = this.records.get(streamId)!.length;
    const stored = records.map((input, i) => {
      if (input.type === 'chat.receipt') {
        const { peerStreamId, peerGeneration, nextPosition, batchId } = input;
        return this.#push(streamId, operationId, i, {
          type: 'chat.receipt',
          receipt: { peerStreamId, peerGeneration, nextPosition, batchId },
        });
      }
      const createdAt = new Date(Date.UTC(2026, 0, 1, 0, 0, 0, this.clock++)).toISOString();
      const contentSha256 = b64(createHash('sha256').update(input.content, 'utf8').digest());
      const payload = signedPayload({ chatId: CHAT, fromAgentId: author, toAgentId: to, createdAt, contentSha256 });
      const value = b64(sign('sha256', Buffer.from(payload), { key: privateKey, dsaEncoding: 'ieee-p1363' }));
      return this.#push(streamId, operationId, i, {
        type: 'chat.message',
        message: {
          chatId: CHAT,
          fromAgentId: author,
          toAgentId: to,
          clientMessageId: clientMessageIdFor(CHAT, author, input.messageId),
          content: input.content,
          contentSha256,
          signature: { kid, alg: 'ES256', value, createdAt },
        },
      });
    });
    const firstPosition = String(first);
    const nextPosition = String(first + records.length);
    this.ops.set(`${streamId} ${operationId}`, {
      operationId,
      state: 'committed',
      generation: '1',
      firstPosition,
      nextPosition,
      committedAt: '',
      requestDigest: 'd',
    });
    return {
      streamId,
      generation: '1',
      operationId,
      firstPosition,
      nextPosition,
      records: structuredClone(stored),
      duplicate: false,
      redactions: [],
    };
  }

  fence(streamId: string, epoch: string): void {
    this.#push(streamId, `fence.${epoch}`, 0, { type: 'chat.writer-fence', fence: { epoch, claimedAt: '', replaced: false } });
    this.epoch.set(streamId, epoch);
  }
}

const msg = (id: string, content = `text of ${id}`): AppendInput => ({ type: 'chat.message', messageId: id, content });

/** A clean history: fences, messages both ways, a receipt of A's first two records by B. */
function scenario(): { store: FakeStore; checker: HistoryChecker } {
  const store = new FakeStore();
  const checker = new HistoryChecker();
  store.fence(SA, '1');
  store.fence(SB, '1');
  const run = (streamId: string, operationId: string, records: AppendInput[]) => {
    const h = checker.invoke('t', {
      streamId,
      generation: '1',
      expectedPosition: store.state(streamId).nextPosition,
      operationId,
      records,
    });
    checker.ok(h, store.append(streamId, operationId, records));
  };
  run(SA, 'a1', [msg('m1'), msg('m2', 'Ω 漢字 🎉')]);
  run(SB, 'b1', [msg('n1'), { type: 'chat.receipt', peerStreamId: SA, peerGeneration: '1', nextPosition: '2', batchId: 'x' }]);
  run(SA, 'a2', [msg('m3')]);
  return { store, checker };
}

describe('history checker (against a synthetic store)', () => {
  it('passes a clean history', async () => {
    const { store, checker } = scenario();
    const report = await checker.check(store);
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({ acknowledged: 3, lost: 0, messages: 4, receipts: 1, fences: 2 });
  });

  it('catches a lost acknowledged append', async () => {
    const { store, checker } = scenario();
    store.records.get(SA)!.pop();
    store.ops.delete(`${SA} a2`);
    const report = await checker.check(store);
    expect(report.lost).toBe(1);
    expect(report.problems.join('\n')).toMatch(/LOST: acknowledged .* a2/);
  });

  it('catches altered content of an acknowledged record (and its signature no longer verifying)', async () => {
    const { store, checker } = scenario();
    messageAt(store, SA, 1).content = 'something else';
    const report = await checker.check(store);
    expect(report.lost).toBe(1);
    expect(report.problems.join('\n')).toMatch(/contentSha256 does not match/);
  });

  it('catches a bad signature', async () => {
    const { store, checker } = scenario();
    const sig = messageAt(store, SB, 1).signature;
    sig.value = sig.value.slice(0, -4) + (sig.value.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/signature does not verify/);
  });

  it('catches divergence across reads (a position that changed between cycles)', async () => {
    const { store, checker } = scenario();
    expect((await checker.check(store)).problems).toEqual([]);
    // The daemon "forgets" a3 and writes another record at the same position.
    store.records.get(SA)!.pop();
    store.ops.delete(`${SA} a2`);
    checker.cycle++;
    const h = checker.invoke('t', { streamId: SA, generation: '1', expectedPosition: '3', operationId: 'a3', records: [msg('m9')] });
    checker.info(h, 'connection lost');
    store.append(SA, 'a3', [msg('m9')]);
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/DIVERGENCE at .*#3/);
  });

  it('catches a vanished tail (a position seen by a follower is gone after a crash)', async () => {
    const { store, checker } = scenario();
    checker.observe(structuredClone(store.records.get(SA)!.at(-1)), 'follower');
    store.records.get(SA)!.pop();
    store.ops.delete(`${SA} a2`);
    const h = checker.ops.find((x) => x.operationId === 'a2')!;
    h.outcome = 'info';
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/LOST: .* was seen before/);
  });

  it('catches a gap in positions', async () => {
    const { store, checker } = scenario();
    store.records.get(SA)![3]!.position = '4';
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/gap or duplicate/);
  });

  it('catches a receipt going backwards, and one that acknowledges positions that do not exist', async () => {
    const { store, checker } = scenario();
    const h = checker.invoke('t', {
      streamId: SB,
      generation: '1',
      expectedPosition: '3',
      operationId: 'b2',
      records: [{ type: 'chat.receipt', peerStreamId: SA, peerGeneration: '1', nextPosition: '1', batchId: 'y' }],
    });
    checker.ok(h, store.append(SB, 'b2', h.records));
    const h2 = checker.invoke('t', {
      streamId: SB,
      generation: '1',
      expectedPosition: '4',
      operationId: 'b3',
      records: [{ type: 'chat.receipt', peerStreamId: SA, peerGeneration: '1', nextPosition: '50', batchId: 'z' }],
    });
    checker.ok(h2, store.append(SB, 'b3', h2.records));
    const text = (await checker.check(store)).problems.join('\n');
    expect(text).toMatch(/receipt goes backwards/);
    expect(text).toMatch(/LOST: .* acknowledges .* up to 50/);
  });

  it('catches a partial append of unknown outcome', async () => {
    const { store, checker } = scenario();
    const h = checker.invoke('t', {
      streamId: SA,
      generation: '1',
      expectedPosition: '4',
      operationId: 'a9',
      records: [msg('p1'), msg('p2')],
    });
    checker.info(h, 'killed');
    store.append(SA, 'a9', [msg('p1')]);
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/PARTIAL: .* a9 .* 1 of 2/);
  });

  it('accepts an unknown-outcome append either way, whole', async () => {
    const { store, checker } = scenario();
    const h1 = checker.invoke('t', {
      streamId: SA,
      generation: '1',
      expectedPosition: '4',
      operationId: 'u1',
      records: [msg('u1a'), msg('u1b')],
    });
    checker.info(h1, 'killed');
    store.append(SA, 'u1', [msg('u1a'), msg('u1b')]);
    const h2 = checker.invoke('t', { streamId: SB, generation: '1', expectedPosition: '3', operationId: 'u2', records: [msg('u2a')] });
    checker.info(h2, 'killed');
    const report = await checker.check(store);
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({ unknownCommitted: 1, unknownNotCommitted: 1 });
  });

  it('catches an append answered with an error that committed anyway', async () => {
    const { store, checker } = scenario();
    const h = checker.invoke('t', { streamId: SA, generation: '1', expectedPosition: '4', operationId: 'f1', records: [msg('f1')] });
    checker.fail(h, { code: 4090, data: { type: 'FENCED' } });
    store.append(SA, 'f1', [msg('f1')]);
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/answered with FENCED but committed/);
  });

  it('catches a phantom write nobody invoked', async () => {
    const { store, checker } = scenario();
    store.append(SB, 'ghost', [msg('g')]);
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/PHANTOM: .* ghost/);
  });

  it('catches operations.get disagreeing with the records', async () => {
    const { store, checker } = scenario();
    store.opOverride.set(`${SA} a2`, { operationId: 'a2', state: 'unknown' });
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/operations.get says unknown but 1 records carry it/);
  });

  it('catches a client resolution that disagrees with the store', async () => {
    const { store, checker } = scenario();
    const h = checker.invoke('t', { streamId: SA, generation: '1', expectedPosition: '4', operationId: 'r1', records: [msg('r1')] });
    checker.info(h, 'killed');
    checker.resolve(h, { state: 'committed', firstPosition: '4', nextPosition: '5' });
    const report = await checker.check(store);
    expect(report.problems.join('\n')).toMatch(/learned committed=true/);
  });
});
