// Kills mutants of src/daemon/streams/subscriptions.ts that the mut-b and fifth rounds left alive
// (test/MUTATION.md, "subscriptions.ts: survivors not killed yet" and "heads.ts and
// subscriptions.ts (mut-g)"): the live fast path at the seam, the pump's re-checks after its
// catch-up read (unfollowed or congested meanwhile), and the corruption-mark filter at its
// boundaries. In-process on a real LevelDB in a temp dir, like mut-b-subscriptions.test.ts.

import { afterEach, describe, expect, it } from 'vitest';
import type { Caller } from '../../src/daemon/caller.js';
import type { ChatBatchNotification } from '../../src/shared/types.js';
import { appendMessages, chatWithWriter, openInProcess, RecordingConnection, type InProcessStore } from '../helpers/in-process-store.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { waitFor } from '../helpers/wait.js';

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
