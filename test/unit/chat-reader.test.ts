// Pins behaviour of src/daemon/streams/chat-reader.ts (the long poll of `streams.read`,
// `chats.history` snapshot paging and the live cursors, docs/protocol.md §6.5, §6.6, §6.9).
// In-process on a real LevelDB in a temp dir (no daemon, so a mutant costs milliseconds): the
// reader the daemon builds, over the real append path. Message times are pinned with a fake Date
// (timers stay real), so the transcript order (createdAt, fromAgentId, position) of §6 is exercised
// on ties as well.

import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Caller } from '../../src/daemon/caller.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { YelloError } from '../../src/shared/errors.js';
import type { StoredRecord } from '../../src/shared/types.js';
import { openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

async function fresh(): Promise<InProcessStore> {
  const s = await openInProcess();
  open.push(s);
  return s;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

type Writer = { caller: Caller; agentId: string; streamId: string; token: string };
type Duo = { chatId: string; a: Writer; b: Writer; reader: Caller };

/** Two agents with a chat, each holding its outbound stream (A = agentA's, B = agentB's). */
async function duo(s: InProcessStore): Promise<Duo> {
  const sfx = randomBytes(3).toString('hex');
  const x = await s.directory.createAgent(`alice${sfx}`, 'Alice', undefined);
  const y = await s.directory.createAgent(`bob${sfx}`, 'Bob', undefined);
  await s.directory.setPolicy(x.agent.id, 'off');
  await s.directory.setPolicy(y.agent.id, 'off');
  const alice = s.directory.authenticate(x.token)!;
  const bob = s.directory.authenticate(y.token)!;
  const { chat } = await s.directory.openChat(alice, x.agent.id, y.agent.id);
  const writer = async (caller: Caller, agentId: string): Promise<Writer> => {
    const streamId = `${chat.id}:${agentId}`;
    const claim = await s.streams.claim(caller, { streamId, replace: false });
    return { caller, agentId, streamId, token: claim.coordinatorToken };
  };
  const wa = chat.agentAId === x.agent.id ? await writer(alice, x.agent.id) : await writer(bob, y.agent.id);
  const wb = chat.agentAId === x.agent.id ? await writer(bob, y.agent.id) : await writer(alice, x.agent.id);
  return { chatId: chat.id, a: wa, b: wb, reader: bob };
}

let op = 0;
/** One append of `contents` (one message each) to `w`'s stream, signed at `at` when given. */
async function send(s: InProcessStore, w: Writer, contents: string[], at?: string): Promise<void> {
  if (at !== undefined) vi.setSystemTime(new Date(at));
  const head = s.streams.get(w.caller, w.streamId);
  await s.streams.append(w.caller, {
    streamId: w.streamId,
    coordinatorToken: w.token,
    generation: Number(head.generation),
    expectedPosition: Number(head.nextPosition),
    operationId: `op-${++op}`,
    records: contents.map((c) => ({ type: 'chat.message' as const, messageId: `id-${c}`, content: c })),
  });
}

const text = (r: StoredRecord) => (r.wrapper.type === 'chat.message' ? r.wrapper.message.content : `<${r.wrapper.type}>`);

async function failure(p: Promise<unknown> | (() => unknown)): Promise<Record<string, unknown> & { type: string }> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    if (err instanceof YelloError) return { type: err.type, ...(err.details as Record<string, unknown>) };
    throw err;
  }
  throw new Error('expected a YelloError');
}

/** Every page of `chats.history` from a first call: each page's contents and whether a cursor followed. */
async function pages(s: InProcessStore, d: Duo, limit: number, direction?: 'forward' | 'backward', maxBytes?: number) {
  const out: string[][] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 60; i++) {
    const page = await s.reader.history(
      d.reader,
      { chatId: d.chatId, limit, ...(cursor === undefined ? { direction } : { cursor }) },
      maxBytes,
    );
    out.push(page.entries.map(text));
    if (page.nextCursor === null) return out;
    cursor = page.nextCursor;
  }
  throw new Error('chats.history did not end');
}

describe('ChatReader.read (the long poll of streams.read)', () => {
  const req = (w: Writer, fromPosition: number, waitMs: number, maxBytes = 1 << 20) => ({
    streamId: w.streamId,
    generation: 1,
    fromPosition,
    limit: 100,
    maxBytes,
    waitMs,
  });

  it('answers records that are there at once, without waiting', async () => {
    const s = await fresh();
    const d = await duo(s);
    await send(s, d.a, ['r0', 'r1']);
    const t0 = Date.now();
    const r = await s.reader.read(d.reader, req(d.a, 1, 5_000));
    expect(r.records.map(text)).toEqual(['r0', 'r1']);
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  it('at the head, waits for the next commit of its own stream, not of the other stream of the chat', async () => {
    const s = await fresh();
    const d = await duo(s);
    await send(s, d.a, ['first']);
    const from = Number(s.streams.get(d.a.caller, d.a.streamId).nextPosition);
    let answered = false;
    const pending = s.reader.read(d.reader, req(d.a, from, 10_000)).finally(() => (answered = true));
    await sleep(150);
    expect(answered).toBe(false);
    await send(s, d.b, ['other side']);
    await sleep(300); // a poll woken by the other stream would answer (empty) or re-wait: it must not answer
    expect(answered).toBe(false);
    const t0 = Date.now();
    await send(s, d.a, ['own']);
    const r = await pending;
    expect(r.records.map(text)).toEqual(['own']);
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  it('every poll waiting on a stream is woken by one commit, and a later poll waits again', async () => {
    const s = await fresh();
    const d = await duo(s);
    const from = Number(s.streams.get(d.a.caller, d.a.streamId).nextPosition);
    const p1 = s.reader.read(d.reader, req(d.a, from, 10_000));
    const p2 = s.reader.read(d.reader, req(d.a, from, 10_000));
    await sleep(100);
    const t0 = Date.now();
    await send(s, d.a, ['both']);
    expect((await p1).records.map(text)).toEqual(['both']);
    expect((await p2).records.map(text)).toEqual(['both']);
    expect(Date.now() - t0).toBeLessThan(2_000);
    let answered = false;
    const p3 = s.reader.read(d.reader, req(d.a, from + 1, 10_000)).finally(() => (answered = true));
    await sleep(200);
    expect(answered).toBe(false);
    await send(s, d.a, ['again']);
    expect((await p3).records.map(text)).toEqual(['again']);
  });

  it('with nothing to read, answers an empty batch after waitMs, not before', async () => {
    const s = await fresh();
    const d = await duo(s);
    const from = Number(s.streams.get(d.a.caller, d.a.streamId).nextPosition);
    const t0 = Date.now();
    const r = await s.reader.read(d.reader, req(d.a, from, 400));
    const took = Date.now() - t0;
    expect(r).toMatchObject({ records: [], sealed: false, fromPosition: String(from), nextPosition: String(from) });
    expect(took).toBeGreaterThanOrEqual(380);
    expect(took).toBeLessThan(3_000);
    const t1 = Date.now();
    expect((await s.reader.read(d.reader, req(d.a, from, 0))).records).toEqual([]);
    expect(Date.now() - t1).toBeLessThan(300);
  });

  it('a reset wakes a poll at the head of the sealed generation, which answers sealed at once', async () => {
    const s = await fresh();
    const d = await duo(s);
    await send(s, d.a, ['x', 'y']);
    const from = Number(s.streams.get(d.a.caller, d.a.streamId).nextPosition);
    const pending = s.reader.read(d.reader, req(d.a, from, 10_000));
    await sleep(100);
    const t0 = Date.now();
    await s.streams.reset(d.a.streamId, 'wake the poll');
    const r = await pending;
    expect(r).toMatchObject({ generation: '1', records: [], sealed: true, nextPosition: String(from) });
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  it('a page is bounded by the smaller of maxBytes and the page budget asked at each read (always one record)', async () => {
    const s = await fresh();
    const d = await duo(s);
    await send(s, d.a, ['p0', 'p1', 'p2']);
    expect((await s.reader.read(d.reader, req(d.a, 1, 0), () => 1)).records.map(text)).toEqual(['p0']);
    expect((await s.reader.read(d.reader, req(d.a, 1, 0, 1), () => 1 << 20)).records.map(text)).toEqual(['p0']);
    expect((await s.reader.read(d.reader, req(d.a, 1, 0), () => 1 << 20)).records.map(text)).toEqual(['p0', 'p1', 'p2']);
  });
});

describe('ChatReader live cursors', () => {
  it('a live cursor opens to the generations and positions it was made with, per stream', async () => {
    const s = await fresh();
    const d = await duo(s);
    const streams = { [d.a.streamId]: { generation: 3, position: 7 }, [d.b.streamId]: { generation: 1, position: 0 } };
    const token = s.reader.liveCursor({ chatId: d.chatId, streams });
    expect(s.reader.openLiveCursor(d.chatId, token, [d.a.streamId, d.b.streamId])).toEqual({ chatId: d.chatId, streams });
  });

  it('refuses a token that is not a live cursor, one of another chat, and one that does not cover both streams: INVALID_PARAMS at cursor', async () => {
    const s = await fresh();
    const d = await duo(s);
    const ids: [string, string] = [d.a.streamId, d.b.streamId];
    const both = { [d.a.streamId]: { generation: 1, position: 0 }, [d.b.streamId]: { generation: 1, position: 0 } };
    const history = (await s.reader.history(d.reader, { chatId: d.chatId, limit: 5 })).liveCursor;
    expect(s.reader.openLiveCursor(d.chatId, history, ids).chatId).toBe(d.chatId);
    const historyCursor = await (async () => {
      await send(s, d.a, ['h1', 'h2']);
      return (await s.reader.history(d.reader, { chatId: d.chatId, limit: 1 })).nextCursor!;
    })();
    for (const token of ['garbage', historyCursor]) {
      expect(await failure(() => s.reader.openLiveCursor(d.chatId, token, ids)), token).toMatchObject({
        type: 'INVALID_PARAMS',
        path: 'cursor',
      });
    }
    const other = s.reader.liveCursor({ chatId: 'chat_other', streams: both });
    expect(await failure(() => s.reader.openLiveCursor(d.chatId, other, ids))).toMatchObject({ type: 'INVALID_PARAMS', path: 'cursor' });
    const half = s.reader.liveCursor({ chatId: d.chatId, streams: { [d.a.streamId]: { generation: 1, position: 0 } } });
    expect(await failure(() => s.reader.openLiveCursor(d.chatId, half, ids))).toMatchObject({ type: 'INVALID_PARAMS', path: 'cursor' });
  });
});

describe('ChatReader.history (chats.history snapshot paging)', () => {
  /**
   * A at t1 [a1, a2], B at t2 [b1], A and B both at t3 (a3 on A, b2 b3 on B), B at t4 [b4]:
   * transcript order t1 a1 a2, t2 b1, t3 by author id then position, t4 b4.
   */
  async function transcript(s: InProcessStore, d: Duo): Promise<string[]> {
    vi.useFakeTimers({ toFake: ['Date'] });
    await send(s, d.a, ['a1', 'a2'], '2030-01-01T00:00:01.000Z');
    await send(s, d.b, ['b1'], '2030-01-01T00:00:02.000Z');
    await send(s, d.a, ['a3'], '2030-01-01T00:00:03.000Z');
    await send(s, d.b, ['b2', 'b3'], '2030-01-01T00:00:03.000Z');
    await send(s, d.b, ['b4'], '2030-01-01T00:00:04.000Z');
    vi.useRealTimers();
    const tie = d.a.agentId < d.b.agentId ? ['a3', 'b2', 'b3'] : ['b2', 'b3', 'a3'];
    return ['a1', 'a2', 'b1', ...tie, 'b4'];
  }

  it('pages over both streams in transcript order (createdAt, author, position), forward and backward, each entry once', async () => {
    const s = await fresh();
    const d = await duo(s);
    const all = await transcript(s, d);
    // A receipt on B: not an entry.
    const shown = await s.streams.read(d.b.caller, {
      streamId: d.a.streamId,
      generation: 1,
      fromPosition: 0,
      limit: 100,
      maxBytes: 1 << 20,
    });
    const head = s.streams.get(d.b.caller, d.b.streamId);
    await s.streams.append(d.b.caller, {
      streamId: d.b.streamId,
      coordinatorToken: d.b.token,
      generation: 1,
      expectedPosition: Number(head.nextPosition),
      operationId: 'op-receipt',
      records: [
        {
          type: 'chat.receipt',
          peerStreamId: d.a.streamId,
          peerGeneration: '1',
          nextPosition: shown.nextPosition,
          batchId: shown.batchId,
        },
      ],
    });
    for (let limit = 1; limit <= 8; limit++) {
      const fwd = await pages(s, d, limit, 'forward');
      expect(fwd.flat(), `forward ${limit}`).toEqual(all);
      const back = await pages(s, d, limit, 'backward');
      expect([...back].reverse().flat(), `backward ${limit}`).toEqual(all);
      for (const p of [...fwd, ...back]) expect(p.length, `limit ${limit}`).toBeLessThanOrEqual(limit);
    }
    // Exact page shapes: no empty page after the last entries, in either direction.
    expect(await pages(s, d, 3, 'forward')).toEqual([all.slice(0, 3), all.slice(3, 6), all.slice(6)]);
    expect(await pages(s, d, 7, 'forward')).toEqual([all]);
    expect(await pages(s, d, 3, 'backward')).toEqual([all.slice(4), all.slice(1, 4), all.slice(0, 1)]);
    expect(await pages(s, d, 7, 'backward')).toEqual([all]);
    expect(await pages(s, d, 100)).toEqual([all]);
    // No direction: the latest entries first (backward).
    const latest = await s.reader.history(d.reader, { chatId: d.chatId, limit: 2 });
    expect(latest.entries.map(text)).toEqual(all.slice(-2));
    expect(latest.nextCursor).not.toBeNull();
  });

  it('a page ends once its records reach maxBytes (always one entry), on both sides', async () => {
    const s = await fresh();
    const d = await duo(s);
    const all = await transcript(s, d);
    const sizes: number[] = [];
    for await (const r of s.streams.scan(d.a.streamId, 1, 0, 4)) sizes.push(r.bytes);
    const one = sizes[sizes.length - 1]!; // a1's stored size; every message here has the same size
    for (const dir of ['forward', 'backward'] as const) {
      const byOne = await pages(s, d, 100, dir, 1);
      // (Backward, the last page may be empty: the claim's fence at position 0 is left to scan.)
      const full = (ps: string[][]) => ps.slice(0, -1).every((p) => p.length === 1) && ps[ps.length - 1]!.length <= 1;
      expect(full(byOne), dir).toBe(true);
      expect((dir === 'forward' ? byOne : [...byOne].reverse()).flat()).toEqual(all);
      // Exactly one record's size: the page ends at that record.
      const byRecord = await pages(s, d, 100, dir, one);
      expect(full(byRecord), dir).toBe(true);
      expect(byRecord.flat(), dir).toHaveLength(all.length);
      // One byte more: two records a page.
      expect((await pages(s, d, 100, dir, one + 1))[0], dir).toHaveLength(2);
    }
  });

  it('an empty chat and a chat with one silent side page to the end', async () => {
    const s = await fresh();
    const d = await duo(s);
    expect(await pages(s, d, 5, 'forward')).toEqual([[]]);
    expect(await pages(s, d, 5, 'backward')).toEqual([[]]);
    await send(s, d.b, ['only b1', 'only b2', 'only b3']);
    expect(await pages(s, d, 2, 'forward')).toEqual([['only b1', 'only b2'], ['only b3']]);
    expect(await pages(s, d, 2, 'backward')).toEqual([['only b2', 'only b3'], ['only b1']]);
  });

  it('is a snapshot: later messages are not in later pages; its live cursor names the snapshot head of both streams', async () => {
    const s = await fresh();
    const d = await duo(s);
    await send(s, d.a, ['s1', 's2']);
    await send(s, d.b, ['s3']);
    const ha = Number(s.streams.get(d.a.caller, d.a.streamId).nextPosition);
    const hb = Number(s.streams.get(d.b.caller, d.b.streamId).nextPosition);
    const first = await s.reader.history(d.reader, { chatId: d.chatId, limit: 1, direction: 'forward' });
    await send(s, d.a, ['late a']);
    await send(s, d.b, ['late b']);
    const ids: [string, string] = [d.a.streamId, d.b.streamId];
    const live = {
      chatId: d.chatId,
      streams: { [d.a.streamId]: { generation: 1, position: ha }, [d.b.streamId]: { generation: 1, position: hb } },
    };
    expect(s.reader.openLiveCursor(d.chatId, first.liveCursor, ids)).toEqual(live);
    const rest: string[] = first.entries.map(text);
    let cursor = first.nextCursor;
    while (cursor !== null) {
      const page = await s.reader.history(d.reader, { chatId: d.chatId, cursor, limit: 1 });
      expect(s.reader.openLiveCursor(d.chatId, page.liveCursor, ids)).toEqual(live);
      rest.push(...page.entries.map(text));
      cursor = page.nextCursor;
    }
    expect(rest.sort()).toEqual(['s1', 's2', 's3']);
  });

  it('a cursor keeps its direction; a cursor that is not a history cursor, or of another chat, is INVALID_PARAMS at cursor', async () => {
    const s = await fresh();
    const d = await duo(s);
    await send(s, d.a, ['d1', 'd2', 'd3']);
    const first = await s.reader.history(d.reader, { chatId: d.chatId, limit: 1, direction: 'forward' });
    expect(first.entries.map(text)).toEqual(['d1']);
    const call = (cursor: string, direction?: 'forward' | 'backward') =>
      s.reader.history(d.reader, { chatId: d.chatId, cursor, limit: 1, ...(direction ? { direction } : {}) });
    expect(await failure(call(first.nextCursor!, 'backward'))).toMatchObject({ type: 'INVALID_PARAMS', path: 'direction' });
    expect((await call(first.nextCursor!, 'forward')).entries.map(text)).toEqual(['d2']);
    expect((await call(first.nextCursor!)).entries.map(text)).toEqual(['d2']);
    const back = await s.reader.history(d.reader, { chatId: d.chatId, limit: 1 });
    expect(await failure(call(back.nextCursor!, 'forward'))).toMatchObject({ type: 'INVALID_PARAMS', path: 'direction' });
    expect((await call(back.nextCursor!, 'backward')).entries.map(text)).toEqual(['d2']);
    for (const token of ['garbage', first.liveCursor]) {
      expect(await failure(call(token)), token).toMatchObject({ type: 'INVALID_PARAMS', path: 'cursor' });
    }
    // A cursor of this chat presented for another chat of the same reader.
    const e = await duo(s);
    const other = await s.directory.openChat(d.reader, (d.reader as { agentId: string }).agentId, e.a.agentId);
    expect(other.chat.id).not.toBe(d.chatId);
    expect(await failure(s.reader.history(d.reader, { chatId: other.chat.id, cursor: first.nextCursor!, limit: 1 }))).toMatchObject({
      type: 'INVALID_PARAMS',
      path: 'cursor',
    });
  });

  it('a cursor of a stream reset since is GENERATION_CHANGED naming that stream and both generations (either side)', async () => {
    for (const side of ['a', 'b'] as const) {
      const s = await fresh();
      const d = await duo(s);
      await send(s, d.a, ['g1', 'g2']);
      await send(s, d.b, ['g3', 'g4']);
      const first = await s.reader.history(d.reader, { chatId: d.chatId, limit: 1 });
      await s.streams.reset(d[side].streamId, 'history cursor');
      expect(await failure(s.reader.history(d.reader, { chatId: d.chatId, cursor: first.nextCursor!, limit: 1 })), side).toEqual({
        type: 'CONTINUITY_BREAK',
        reason: 'GENERATION_CHANGED',
        streamId: d[side].streamId,
        expected: '1',
        actual: '2',
      });
      // A first call after the reset reads the new generation (empty on that side).
      const now = await pages(s, d, 10, 'forward');
      expect(now, side).toEqual([side === 'a' ? ['g3', 'g4'] : ['g1', 'g2']]);
    }
  });

  it('forward: a cursor below a trim made since is PREFIX_UNAVAILABLE; backward paging ends at the retained start', async () => {
    const s = await fresh();
    const d = await duo(s);
    await send(s, d.a, ['t1', 't2', 't3', 't4', 't5']);
    const fwd = await s.reader.history(d.reader, { chatId: d.chatId, limit: 2, direction: 'forward' });
    const back = await s.reader.history(d.reader, { chatId: d.chatId, limit: 2 });
    expect(fwd.entries.map(text)).toEqual(['t1', 't2']);
    expect(back.entries.map(text)).toEqual(['t4', 't5']);
    // Positions: 0 is the claim's fence, t1..t5 at 1..5. Trim below 4 (t1, t2, t3).
    await s.streams.trim(d.a.streamId, 4, true);
    expect(await failure(s.reader.history(d.reader, { chatId: d.chatId, cursor: fwd.nextCursor!, limit: 2 }))).toEqual({
      type: 'CONTINUITY_BREAK',
      reason: 'PREFIX_UNAVAILABLE',
      streamId: d.a.streamId,
      expected: '3',
      actual: '4',
    });
    const next = await s.reader.history(d.reader, { chatId: d.chatId, cursor: back.nextCursor!, limit: 2 });
    expect(next).toMatchObject({ entries: [], nextCursor: null });
    // A new snapshot starts at the retained start.
    expect(await pages(s, d, 10, 'forward')).toEqual([['t4', 't5']]);
    expect(await pages(s, d, 1, 'backward')).toEqual([['t5'], ['t4']]);
  });

  it('a corruption mark inside the snapshot, or exactly at its head, refuses the page', async () => {
    const s = await fresh();
    const d = await duo(s);
    await send(s, d.a, ['c1', 'c2']);
    await send(s, d.b, ['c3']);
    const head = Number(s.streams.get(d.b.caller, d.b.streamId).nextPosition);
    s.integrity.mark({ streamId: d.b.streamId, generation: 1, fromPosition: head, detail: 'planted at the head' });
    for (const direction of ['forward', 'backward'] as const) {
      expect(await failure(s.reader.history(d.reader, { chatId: d.chatId, limit: 5, direction })), direction).toMatchObject({
        type: 'STORAGE_FAILURE',
        streamId: d.b.streamId,
      });
    }
  });

  it('a record missing inside the snapshot (lost, not trimmed) is a failure, never a skip, in both directions', async () => {
    for (const [direction, lost] of [
      ['forward', 3],
      ['backward', 0],
    ] as const) {
      const s = await fresh();
      const d = await duo(s);
      await send(s, d.a, ['l1', 'l2', 'l3']); // positions 1..3 after the claim's fence at 0 (backward: the lowest one lost)
      // The record deleted under the head, as a lost write would leave it.
      await s.store.storage.write([{ type: 'del', key: K.record(d.a.streamId, 1, lost) }]);
      expect(await failure(s.reader.history(d.reader, { chatId: d.chatId, limit: 10, direction })), direction).toMatchObject({
        type: 'STORAGE_FAILURE',
        streamId: d.a.streamId,
      });
    }
  });
  // 186:45, the PREFIX_UNAVAILABLE check of a forward page emptied. A trim deletes its first 10,000
  // records with its commit and leaves the rest to the sweep: a forward cursor standing among those
  // must fail, not be served them.
  it('a forward cursor inside a trimmed prefix whose records are still on disk (the sweep not yet run) is PREFIX_UNAVAILABLE', async () => {
    const s = await fresh();
    const d = await duo(s);
    for (let k = 0; k < 25; k++)
      await send(
        s,
        d.a,
        Array.from({ length: 1000 }, (_, i) => `t${k}-${i}`),
      );
    const first = await s.reader.history(d.reader, { chatId: d.chatId, limit: 20_000, direction: 'forward' }, 1 << 30);
    expect(first.entries).toHaveLength(20_000);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const sweep = s.port.streams.sweepTrimmed.bind(s.port.streams);
    s.port.streams.sweepTrimmed = async (...args) => {
      await held;
      return sweep(...args);
    };
    const trim = s.streams.trim(d.a.streamId, 24_000, true);
    try {
      await vi.waitFor(() => {
        expect(s.streams.get(d.reader, d.a.streamId).firstPosition).toBe('24000');
      });
      // The commit deleted [0, 10000); what the cursor points at (20,001) is still stored.
      expect(await s.store.storage.get(K.record(d.a.streamId, 1, 20_001))).toBeDefined();
      expect(await failure(s.reader.history(d.reader, { chatId: d.chatId, limit: 10, cursor: first.nextCursor! }))).toMatchObject({
        type: 'CONTINUITY_BREAK',
        reason: 'PREFIX_UNAVAILABLE',
        streamId: d.a.streamId,
      });
    } finally {
      release();
    }
    expect(await trim).toEqual({ firstPosition: '24000' });
  });
});
