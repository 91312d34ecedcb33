// Pins behaviour of src/daemon/streams/subscriptions.ts and subscription-pump.ts (chats.follow,
// chats.watch, chats.unfollow). In-process on a real LevelDB in a temp dir: the daemon's
// Subscriptions over its StreamStore, with a connection that records what it is sent
// (test/helpers/in-process-store.ts). The socket suites (follow.test.ts, follow-from.test.ts,
// chats-watch.test.ts) show the same end to end.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import type { Caller } from '../../src/daemon/caller.js';
import { MAX_SUBSCRIPTIONS_PER_CONNECTION } from '../../src/daemon/streams/subscriptions.js';
import { YelloError } from '../../src/shared/errors.js';
import type { ChatBatchNotification, ChatBreakNotification } from '../../src/shared/types.js';
import { appendMessages, chatWithWriter, openInProcess, RecordingConnection, type InProcessStore } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

async function fresh(): Promise<InProcessStore> {
  const s = await openInProcess();
  open.push(s);
  return s;
}

/** A recording connection whose close the test triggers (RecordingConnection ignores onClose). */
function closableConnection(): RecordingConnection & { close(): void } {
  const closers: Array<() => void> = [];
  const conn = Object.assign(new RecordingConnection(), {
    onClose(listener: () => void): void {
      closers.push(listener);
    },
    close(): void {
      for (const l of closers.splice(0)) l();
    },
  });
  return conn;
}

const batches = (c: RecordingConnection) =>
  c.notifications.filter((n) => n.method === 'chats.batch').map((n) => n.params as ChatBatchNotification);
const positions = (c: RecordingConnection) => batches(c).flatMap((b) => b.records.map((r) => Number(r.position)));
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

async function failure(fn: () => unknown): Promise<Record<string, unknown>> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(YelloError);
    return { type: (err as YelloError).type, ...(err as YelloError).details };
  }
  throw new Error('expected a refusal');
}

const agentId = (c: Caller) => (c as { agentId: string }).agentId;

describe('chats.follow deliveries', () => {
  it('catches up from storage in batches of 500, then delivers each commit live at the seam, with exact positions and a cursor', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const head = s.streams.get(w.alice, w.streamId);
    await s.streams.append(w.alice, {
      streamId: w.streamId,
      coordinatorToken: w.token,
      generation: 1,
      expectedPosition: Number(head.nextPosition),
      operationId: 'op-many',
      records: Array.from({ length: 700 }, (_, i) => ({ type: 'chat.message' as const, messageId: `many-${i}`, content: `${i}` })),
    });
    const conn = new RecordingConnection();
    const cursor = s.reader.liveCursor({
      chatId: w.chatId,
      streams: { [w.streamId]: { generation: 1, position: 0 }, [`${w.chatId}:${agentId(w.bob)}`]: { generation: 1, position: 0 } },
    });
    const sub = await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor }, conn);
    expect(sub.subscriptionId).toMatch(/^sub_/);
    expect(typeof sub.cursor).toBe('string');
    // Nothing before the response is written (deliveries start on the next turn).
    expect(conn.notifications).toEqual([]);
    await waitFor(() => positions(conn).length === 701, 'the catch-up', 10_000);
    const [b1, b2] = batches(conn);
    expect(b1).toMatchObject({
      subscriptionId: sub.subscriptionId,
      streamId: w.streamId,
      generation: '1',
      fromPosition: '0',
      nextPosition: '500',
    });
    expect(b1!.records).toHaveLength(500);
    expect(b2).toMatchObject({ fromPosition: '500', nextPosition: '701' });
    expect(b1!.batchId).toBe(s.streams.batchId(w.bob, w.streamId, 1, 0, 500));
    const read = await s.streams.read(w.bob, { streamId: w.streamId, generation: 1, fromPosition: 0, limit: 500, maxBytes: 10_000_000 });
    expect(b1!.batchId).toBe(read.batchId);
    expect(b2!.batchId).toBe(s.streams.batchId(w.bob, w.streamId, 1, 500, 701));
    expect(positions(conn)).toEqual(range(0, 701));
    // Live: one batch per commit, continuing exactly.
    await appendMessages(s, w, 2, 'live');
    await waitFor(() => positions(conn).length === 703, 'the live records', 5_000);
    const live = batches(conn).slice(2);
    expect(live.map((b) => [b.fromPosition, b.nextPosition])).toEqual([
      ['701', '702'],
      ['702', '703'],
    ]);
    // Each batch's cursor continues after it: a follow from the last cursor gets only what comes next.
    const again = new RecordingConnection();
    await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: live[1]!.cursor }, again);
    await appendMessages(s, w, 1, 'next');
    await waitFor(() => positions(again).length === 1, 'the next record', 5_000);
    expect(positions(again)).toEqual([703]);
  });

  it('a congested connection gets nothing until drain, then everything owed, in order', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 3);
    const conn = new RecordingConnection();
    conn.congested = true;
    const cursor = s.reader.liveCursor({
      chatId: w.chatId,
      streams: { [w.streamId]: { generation: 1, position: 0 }, [`${w.chatId}:${agentId(w.bob)}`]: { generation: 1, position: 0 } },
    });
    await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor }, conn);
    await appendMessages(s, w, 2, 'while-congested');
    // Time is the subject: nothing may be sent to a congested connection.
    await new Promise((r) => setTimeout(r, 100));
    expect(conn.notifications).toEqual([]);
    conn.drain();
    await waitFor(() => positions(conn).length === 6, 'the owed records', 5_000);
    expect(positions(conn)).toEqual(range(0, 6));
    // Congested again while live: the commit waits for drain.
    conn.congested = true;
    await appendMessages(s, w, 1, 'later');
    await new Promise((r) => setTimeout(r, 100));
    expect(positions(conn)).toEqual(range(0, 6));
    conn.drain();
    await waitFor(() => positions(conn).length === 7, 'the later record', 5_000);
    expect(positions(conn)).toEqual(range(0, 7));
  });

  it('one catch-up read per connection at a time; another connection reads meanwhile', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 3);
    const others = await Promise.all([chatWithWriter(s), chatWithWriter(s)]);
    for (const o of others) await appendMessages(s, o, 3);
    const original = s.streams.range.bind(s.streams);
    let reading = 0;
    let most = 0;
    s.streams.range = async (...args: Parameters<typeof original>) => {
      reading++;
      most = Math.max(most, reading);
      try {
        await new Promise((r) => setTimeout(r, 20));
        return await original(...args);
      } finally {
        reading--;
      }
    };
    const conn = new RecordingConnection();
    const start = (x: { chatId: string; streamId: string; bob: Caller }) =>
      s.reader.liveCursor({
        chatId: x.chatId,
        streams: { [x.streamId]: { generation: 1, position: 0 }, [`${x.chatId}:${agentId(x.bob)}`]: { generation: 1, position: 0 } },
      });
    await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: start(w) }, conn);
    for (const o of others) await s.subscriptions.follow(o.bob, { chatId: o.chatId, cursor: start(o) }, conn);
    await waitFor(() => positions(conn).length === 12, 'every catch-up', 10_000);
    expect(most).toBe(1);
    const perStream = new Map<string, number[]>();
    for (const b of batches(conn))
      perStream.set(b.streamId, [...(perStream.get(b.streamId) ?? []), ...b.records.map((r) => Number(r.position))]);
    expect([...perStream.values()]).toEqual([range(0, 4), range(0, 4), range(0, 4)]);
  });
});

describe('subscription bookkeeping', () => {
  it(`allows ${MAX_SUBSCRIPTIONS_PER_CONNECTION} follows and watches per connection, then RATE_LIMITED; unfollow makes room`, async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const conn = new RecordingConnection();
    const ids: string[] = [];
    for (let i = 0; i < MAX_SUBSCRIPTIONS_PER_CONNECTION - 1; i++) {
      ids.push((await s.subscriptions.follow(w.bob, { chatId: w.chatId }, conn)).subscriptionId);
    }
    const watch = s.subscriptions.watch(agentId(w.bob), conn);
    expect(s.subscriptions.count).toBe(MAX_SUBSCRIPTIONS_PER_CONNECTION);
    expect(await failure(() => s.subscriptions.follow(w.bob, { chatId: w.chatId }, conn))).toEqual({
      type: 'RATE_LIMITED',
      retryAfterMs: 1000,
    });
    expect(await failure(() => s.subscriptions.watch(agentId(w.bob), conn))).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 1000 });
    // Another connection has its own room.
    const other = new RecordingConnection();
    await s.subscriptions.follow(w.bob, { chatId: w.chatId }, other);
    expect(s.subscriptions.count).toBe(MAX_SUBSCRIPTIONS_PER_CONNECTION + 1);
    expect(s.subscriptions.unfollow(ids[0]!, conn)).toEqual({ subscriptionId: ids[0], ended: true });
    await s.subscriptions.follow(w.bob, { chatId: w.chatId }, conn);
    expect(s.subscriptions.unfollow(watch.subscriptionId, conn)).toEqual({ subscriptionId: watch.subscriptionId, ended: true });
    s.subscriptions.watch(agentId(w.bob), conn);
    s.subscriptions.endAll();
    expect(s.subscriptions.count).toBe(0);
  });

  it('unfollow: only on the connection that holds it (NOT_FOUND otherwise, and for an unknown id); nothing is delivered after', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const conn = new RecordingConnection();
    const other = new RecordingConnection();
    const { subscriptionId } = await s.subscriptions.follow(w.bob, { chatId: w.chatId }, conn);
    const watch = s.subscriptions.watch(agentId(w.bob), conn);
    expect(await failure(() => s.subscriptions.unfollow(subscriptionId, other))).toMatchObject({
      type: 'NOT_FOUND',
      kind: 'subscription',
      id: subscriptionId,
    });
    expect(await failure(() => s.subscriptions.unfollow(watch.subscriptionId, other))).toMatchObject({
      type: 'NOT_FOUND',
      id: watch.subscriptionId,
    });
    expect(await failure(() => s.subscriptions.unfollow('sub_unknown', conn))).toMatchObject({ type: 'NOT_FOUND', id: 'sub_unknown' });
    await appendMessages(s, w, 1, 'before');
    await waitFor(() => positions(conn).length === 1, 'the first record', 5_000);
    s.subscriptions.unfollow(subscriptionId, conn);
    expect(await failure(() => s.subscriptions.unfollow(subscriptionId, conn))).toMatchObject({ type: 'NOT_FOUND' });
    await appendMessages(s, w, 2, 'after');
    await new Promise((r) => setTimeout(r, 100)); // time is the subject: nothing more may arrive
    expect(positions(conn)).toHaveLength(1);
    expect(s.subscriptions.count).toBe(1);
  });

  it('a closed connection’s follows and watches end', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const conn = closableConnection();
    await s.subscriptions.follow(w.bob, { chatId: w.chatId }, conn);
    s.subscriptions.watch(agentId(w.bob), conn);
    expect(s.subscriptions.count).toBe(2);
    conn.close();
    expect(s.subscriptions.count).toBe(0);
    await appendMessages(s, w, 1);
    await new Promise((r) => setTimeout(r, 100)); // time is the subject: nothing may arrive
    expect(conn.notifications).toEqual([]);
  });

  it('chats.opened goes to the watches of either agent of the new chat only', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const carol = await s.directory.createAgent(`carol${Date.now()}`, 'Carol', undefined);
    const dave = await s.directory.createAgent(`dave${Date.now()}`, 'Dave', undefined);
    const toCarol = new RecordingConnection();
    const toDave = new RecordingConnection();
    const toAlice = new RecordingConnection();
    const carolWatch = s.subscriptions.watch(carol.agent.id, toCarol);
    s.subscriptions.watch(dave.agent.id, toDave);
    const aliceWatch = s.subscriptions.watch(agentId(w.alice), toAlice);
    const { chat } = await s.directory.openChat(w.alice, agentId(w.alice), carol.agent.id);
    s.subscriptions.opened(chat);
    expect(toCarol.notifications).toEqual([{ method: 'chats.opened', params: { subscriptionId: carolWatch.subscriptionId, chat } }]);
    expect(toAlice.notifications).toEqual([{ method: 'chats.opened', params: { subscriptionId: aliceWatch.subscriptionId, chat } }]);
    expect(toDave.notifications).toEqual([]);
  });
});

describe('subscriptions that cannot continue', () => {
  it('a trim past the cursor ends it with chats.break PREFIX_UNAVAILABLE (expected, actual); a follower past the trim continues', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 5);
    const behind = new RecordingConnection();
    behind.congested = true; // keep it at position 0
    const bobStream = `${w.chatId}:${agentId(w.bob)}`;
    const cursor = s.reader.liveCursor({
      chatId: w.chatId,
      streams: { [w.streamId]: { generation: 1, position: 0 }, [bobStream]: { generation: 1, position: 0 } },
    });
    const sub = await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor }, behind);
    const current = new RecordingConnection();
    await s.subscriptions.follow(w.bob, { chatId: w.chatId }, current);
    await s.streams.trim(w.streamId, 3, true);
    await waitFor(() => behind.notifications.length > 0, 'the break', 5_000);
    expect(behind.notifications).toEqual([
      {
        method: 'chats.break',
        params: { subscriptionId: sub.subscriptionId, reason: 'PREFIX_UNAVAILABLE', streamId: w.streamId, expected: '0', actual: '3' },
      },
    ]);
    expect(s.subscriptions.count).toBe(1);
    await appendMessages(s, w, 1, 'goes-on');
    await waitFor(() => positions(current).length === 1, 'the record after the trim', 5_000);
    expect(positions(current)).toEqual([6]);
    expect(current.notifications.filter((n) => n.method === 'chats.break')).toEqual([]);
  });

  it('a reset ends every follower of the stream with chats.break GENERATION_CHANGED', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 2);
    const conn = new RecordingConnection();
    const sub = await s.subscriptions.follow(w.bob, { chatId: w.chatId }, conn);
    await s.streams.reset(w.streamId, 'reset under a follower');
    await waitFor(() => conn.notifications.some((n) => n.method === 'chats.break'), 'the break', 5_000);
    const br = conn.notifications.find((n) => n.method === 'chats.break')!.params as ChatBreakNotification;
    expect(br).toMatchObject({
      subscriptionId: sub.subscriptionId,
      reason: 'GENERATION_CHANGED',
      streamId: w.streamId,
      expected: '1',
      actual: '2',
    });
    expect(s.subscriptions.count).toBe(0);
  });
});

describe('watch ids, the watch cap and corruption marks', () => {
  it('watch ids are subscription ids; the cap counts only this connection’s watches; the refusal says the cap', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const other = new RecordingConnection();
    for (let i = 0; i < 10; i++) expect(s.subscriptions.watch(agentId(w.bob), other).subscriptionId).toMatch(/^sub_/);
    const conn = new RecordingConnection();
    for (let i = 0; i < MAX_SUBSCRIPTIONS_PER_CONNECTION; i++) s.subscriptions.watch(agentId(w.bob), conn);
    const refused = (() => {
      try {
        s.subscriptions.watch(agentId(w.bob), conn);
      } catch (err) {
        return err;
      }
      return null;
    })();
    expect(refused).toBeInstanceOf(YelloError);
    expect((refused as YelloError).message).toMatch(new RegExp(`max ${MAX_SUBSCRIPTIONS_PER_CONNECTION}`));
  });

  it('a corruption mark ends the followers at or past it with chats.error CORRUPT; one below it is not told', async () => {
    const first = await openInProcess();
    const w = await chatWithWriter(first);
    await appendMessages(first, w, 6); // 0..6
    await first.store.storage.close();
    const db = new ClassicLevel<string, string>(path.join(first.dir, 'db'));
    await db.open();
    await db.del(K.record(w.streamId, 1, 4));
    await db.close();
    const s = await openInProcess(first.dir);
    open.push(s);
    const bobStream = `${w.chatId}:${agentId(w.bob)}`;
    const at = (position: number) =>
      s.reader.liveCursor({
        chatId: w.chatId,
        streams: { [w.streamId]: { generation: 1, position }, [bobStream]: { generation: 1, position: 0 } },
      });
    const below = new RecordingConnection();
    below.congested = true; // stays at 2
    const past = new RecordingConnection();
    past.congested = true; // stays at 5
    const atEnd = new RecordingConnection();
    await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: at(2) }, below);
    const p = await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: at(5) }, past);
    const e = await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: at(7) }, atEnd);
    await expect(
      s.streams.read(w.bob, { streamId: w.streamId, generation: 1, fromPosition: 4, limit: 10, maxBytes: PAGE_BYTES }),
    ).rejects.toMatchObject({ type: 'STORAGE_FAILURE' });
    const errorOf = (c: RecordingConnection) => c.notifications.find((n) => n.method === 'chats.error')?.params;
    await waitFor(() => errorOf(past) !== undefined && errorOf(atEnd) !== undefined, 'chats.error for both', 5_000);
    for (const [c, id] of [
      [past, p.subscriptionId],
      [atEnd, e.subscriptionId],
    ] as const) {
      expect(errorOf(c)).toMatchObject({
        subscriptionId: id,
        error: { code: 5030, data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: w.streamId, fromPosition: '4' } },
      });
    }
    expect(below.notifications).toEqual([]);
    expect(s.subscriptions.count).toBe(1);
  });
});

// Pins behaviour of src/daemon/streams/subscriptions.ts and subscription-pump.ts that the tests
// above leave unchecked: the live fast path at the seam, the pump's re-checks after its catch-up
// read (unfollowed or congested meanwhile), and the corruption-mark filter at its boundaries.
// In-process on a real LevelDB in a temp dir, like test/unit/subscriptions.test.ts.
describe('chats.follow at the seam, after its catch-up read, and over corruption marks', () => {
  const open: InProcessStore[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close().catch(() => {});
  });

  async function fresh(): Promise<InProcessStore> {
    const s = await openInProcess();
    open.push(s);
    return s;
  }

  const agentId = (c: Caller) => (c as { agentId: string }).agentId;
  const batches = (c: RecordingConnection) =>
    c.notifications.filter((n) => n.method === 'chats.batch').map((n) => n.params as ChatBatchNotification);
  const positions = (c: RecordingConnection) => batches(c).flatMap((b) => b.records.map((r) => Number(r.position)));
  const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
  const errorOf = (c: RecordingConnection) => c.notifications.find((n) => n.method === 'chats.error')?.params;
  /** One turn of the event loop: the follow's first pump (a setImmediate) has run and its read is in flight. */
  const nextTurn = () => new Promise<void>((r) => setImmediate(r));

  /** A cursor of `w`'s chat: the writer's stream at `position` (generation 1), the peer's at its start. */
  function cursorAt(s: InProcessStore, w: { chatId: string; streamId: string; bob: Caller }, position: number): string {
    return s.reader.liveCursor({
      chatId: w.chatId,
      streams: { [w.streamId]: { generation: 1, position }, [`${w.chatId}:${agentId(w.bob)}`]: { generation: 1, position: 0 } },
    });
  }

  /** Every batch says where it starts: its first record's position is its fromPosition. */
  function expectBatchesAligned(c: RecordingConnection): void {
    for (const b of batches(c)) {
      expect(b.records.length).toBeGreaterThan(0);
      expect(b.records[0]!.position).toBe(b.fromPosition);
      expect(Number(b.nextPosition)).toBe(Number(b.fromPosition) + b.records.length);
    }
  }

  describe('chats.follow: live delivery at the seam', () => {
    it('a follower at the head gets a commit straight from it: the batch is sent before the append answers, with no storage read', async () => {
      const s = await fresh();
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 2); // fence 0, messages 1..2
      const conn = new RecordingConnection();
      await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: cursorAt(s, w, 3) }, conn);
      // Let the first pump find nothing owed (it reads the head only, not records).
      await new Promise((r) => setTimeout(r, 50));
      expect(conn.notifications).toEqual([]);
      // From here on the storage reads of records are counted: the live path needs none.
      const original = s.streams.range.bind(s.streams);
      let reads = 0;
      s.streams.range = (...args: Parameters<typeof original>) => {
        reads++;
        return original(...args);
      };
      for (let i = 0; i < 3; i++) {
        await appendMessages(s, w, 1, `live${i}`);
        // The commit's own listener delivered it; no pump, no read, no later turn.
        expect(positions(conn)).toEqual(range(3, 4 + i));
      }
      expect(reads).toBe(0);
      expectBatchesAligned(conn);
      expect(batches(conn).map((b) => [b.fromPosition, b.nextPosition])).toEqual([
        ['3', '4'],
        ['4', '5'],
        ['5', '6'],
      ]);
    });

    it('a follower that still owes records when a commit lands gets the owed ones first, then the commit: no gap, no batch mislabelled', async () => {
      // The state of a subscription waiting for its turn (owed records, not pumping, room on the
      // connection): reached deterministically by a connection congested at the first pump whose
      // room comes back without a drain event yet. The commit must go through the pump, which
      // reads from the cursor; delivered "live" it would skip positions 1..2.
      const s = await fresh();
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 2); // fence 0, 1..2
      const conn = new RecordingConnection();
      conn.congested = true;
      await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: cursorAt(s, w, 1) }, conn);
      await new Promise((r) => setTimeout(r, 50));
      expect(conn.notifications).toEqual([]);
      conn.congested = false;
      await appendMessages(s, w, 1, 'late'); // 3
      await waitFor(() => positions(conn).length >= 3, 'the owed records and the commit', 5_000);
      await new Promise((r) => setTimeout(r, 50));
      expect(positions(conn)).toEqual(range(1, 4));
      expectBatchesAligned(conn);
    });
  });

  describe('chats.follow: the catch-up read and what changed during it', () => {
    it('unfollowed while its catch-up read is in flight: the records read are not sent', async () => {
      const s = await fresh();
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 5);
      const conn = new RecordingConnection();
      const { subscriptionId } = await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: cursorAt(s, w, 0) }, conn);
      await nextTurn(); // the first pump started its read
      s.subscriptions.unfollow(subscriptionId, conn);
      await new Promise((r) => setTimeout(r, 100)); // time is the subject: nothing may arrive
      expect(conn.notifications).toEqual([]);
      expect(s.subscriptions.count).toBe(0);
    });

    it('unfollowed while its catch-up read is in flight, a read that then fails on damaged data sends no chats.error either', async () => {
      const first = await openInProcess();
      const w = await chatWithWriter(first);
      await appendMessages(first, w, 3); // 0..3
      await first.store.storage.close();
      await damageStoredRecord(first.dir, w.streamId, 0); // the first record the read meets
      const s = await openInProcess(first.dir);
      open.push(s);
      const conn = new RecordingConnection();
      const { subscriptionId } = await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: cursorAt(s, w, 0) }, conn);
      await nextTurn(); // the first pump started its read, which meets the damaged record
      s.subscriptions.unfollow(subscriptionId, conn);
      await waitFor(() => s.integrity.list().length > 0, 'the read to meet the damage', 5_000);
      await new Promise((r) => setTimeout(r, 50)); // time is the subject: nothing may arrive
      expect(conn.notifications).toEqual([]);
    });

    it('a connection that filled up during the catch-up read gets nothing until drain, then all of it once, in order', async () => {
      const s = await fresh();
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 5); // 0..5
      const conn = new RecordingConnection();
      await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: cursorAt(s, w, 0) }, conn);
      await nextTurn(); // the first pump started its read with room on the connection
      conn.congested = true;
      await new Promise((r) => setTimeout(r, 100)); // time is the subject: nothing may be sent
      expect(conn.notifications).toEqual([]);
      conn.drain();
      await waitFor(() => positions(conn).length >= 6, 'the owed records after drain', 5_000);
      await new Promise((r) => setTimeout(r, 50));
      expect(positions(conn)).toEqual(range(0, 6));
      expectBatchesAligned(conn);
    });
  });

  describe('chats.follow: corruption marks', () => {
    it('a mark at exactly the position a follower stands at ends it; one just below is not told', async () => {
      const s = await fresh();
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 6); // 0..6
      const at = new RecordingConnection();
      at.congested = true; // stays at 4
      const below = new RecordingConnection();
      below.congested = true; // stays at 3
      const sub = await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: cursorAt(s, w, 4) }, at);
      await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: cursorAt(s, w, 3) }, below);
      s.integrity.mark({ streamId: w.streamId, generation: 1, fromPosition: 4, detail: 'mut-g guard' });
      expect(errorOf(at)).toMatchObject({
        subscriptionId: sub.subscriptionId,
        error: { data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: w.streamId, fromPosition: '4' } },
      });
      expect(below.notifications).toEqual([]);
      expect(s.subscriptions.count).toBe(1);
    });

    it('a whole-stream mark (a lost head: no generation) ends every follower of the stream, wherever it stands', async () => {
      const s = await fresh();
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 3); // 0..3
      const conns = [0, 2, 4].map(() => Object.assign(new RecordingConnection(), { congested: true }));
      for (const [i, position] of [0, 2, 4].entries())
        await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: cursorAt(s, w, position) }, conns[i]!);
      s.integrity.mark({ streamId: w.streamId, generation: null, fromPosition: 0, detail: 'mut-g guard: head lost' });
      for (const c of conns)
        expect(errorOf(c)).toMatchObject({ error: { data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: w.streamId } } });
      expect(s.subscriptions.count).toBe(0);
    });

    it('a head moved through another daemon on a stream nobody here follows wakes nobody and fails nothing', async () => {
      const s = await fresh();
      const w = await chatWithWriter(s);
      expect(() => {
        s.streams.moved(w.streamId);
      }).not.toThrow();
      expect(s.subscriptions.count).toBe(0);
    });

    it('a mark of a stream nobody follows is answered as CORRUPT like any other (the followers listener passes it by)', async () => {
      const s = await fresh();
      const w = await chatWithWriter(s);
      const err = s.integrity.mark({ streamId: w.streamId, generation: 1, fromPosition: 1, detail: 'mut-g guard: no follower' });
      expect(err).toMatchObject({ type: 'STORAGE_FAILURE', details: { reason: 'CORRUPT', streamId: w.streamId } });
    });
  });
});
