// Storage errors injected in-process between the layers (Storage, StreamStore, Subscriptions),
// on a real LevelDB in a temp dir. The daemon-process suites (test/faults/) show the same rules
// over the socket; these pin each layer's behaviour.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { YelloError } from '../../src/shared/errors.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import type { StreamTail } from '../../src/daemon/store/record-layout.js';
import { appendMessages, chatWithWriter, openInProcess, RecordingConnection, type InProcessStore } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

async function fresh(options?: Parameters<typeof openInProcess>[1], dir?: string): Promise<InProcessStore> {
  const s = await openInProcess(dir, options);
  open.push(s);
  return s;
}

/** Close `s`, change the raw LevelDB with `edit`, and open the same dir again. */
async function reopenAfter(s: InProcessStore, edit: (db: ClassicLevel) => Promise<void>): Promise<InProcessStore> {
  await s.store.storage.close();
  open.splice(open.indexOf(s), 1);
  const db = new ClassicLevel<string, string>(path.join(s.dir, 'db'));
  await db.open();
  await edit(db);
  await db.close();
  const again = await openInProcess(s.dir);
  open.push(again);
  return again;
}

function storageError(fn: () => unknown): Record<string, unknown> {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(YelloError);
    return { type: (err as YelloError).type, ...(err as YelloError).details };
  }
  throw new Error('expected a YelloError');
}

describe('Storage', () => {
  it('answers a value that fails its checksum with STORAGE_FAILURE/CORRUPT naming the key, never a different value', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 3);
    const key = K.record(w.streamId, 1, 2);
    s = await reopenAfter(s, async (db) => {
      const raw = (await db.get(key))!;
      await db.put(key, raw.replace('"m 1"', '"m 7"'));
    });
    expect(storageError(() => s.store.storage.get(key))).toMatchObject({
      type: 'STORAGE_FAILURE',
      reason: 'CORRUPT',
      key,
      streamId: w.streamId,
      generation: '1',
      fromPosition: '2',
    });
  });

  it('catches a value that moved to another key (the checksum covers the key)', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 3);
    s = await reopenAfter(s, async (db) => {
      await db.put(K.record(w.streamId, 1, 2), (await db.get(K.record(w.streamId, 1, 1)))!);
    });
    expect(storageError(() => s.store.storage.get(K.record(w.streamId, 1, 2)))).toMatchObject({ reason: 'CORRUPT' });
  });

  it('answers a failed synced write, and everything queued behind it, with outcome unknown, keeps them in doubt, and refuses later writes as not written', async () => {
    let fail = false;
    const s = await fresh({ injectFailure: () => fail });
    fail = true;
    const a = s.store.storage.write([{ type: 'put', key: 'test/a', value: 1 }]);
    const b = s.store.storage.write([{ type: 'put', key: 'test/b', value: 2 }]);
    for (const p of [a, b]) {
      const err = await p.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(YelloError);
      expect((err as YelloError).details).toMatchObject({ reason: 'WRITE_FAILED', outcome: 'unknown' });
    }
    expect(s.store.storage.readOnly).toBe(true);
    expect(s.store.storage.inDoubt('test/a') && s.store.storage.inDoubt('test/b')).toBe(true);
    expect(s.store.storage.get('test/a')).toBeUndefined();
    expect(
      storageError(() => {
        s.store.storage.assertWritable('op-1');
      }),
    ).toMatchObject({
      reason: 'READ_ONLY',
      outcome: 'not-written',
      operationId: 'op-1',
    });
  });

  it('checkpoints the write-ahead-log guard once an era has touched many streams, keeping only later touches', async () => {
    const s = await fresh();
    const storage = s.store.storage;
    for (let i = 0; i < 1100; i++) {
      await storage.write([{ type: 'put', key: `test/${i}`, value: i }], [{ streamId: `chat_x:agt_${i}`, generation: 1, position: 0 }]);
    }
    await waitFor(() => storage.stats.checkpoints >= 1, 'a checkpoint', 10_000);
    await storage.write([{ type: 'put', key: 'test/after', value: 1 }], [{ streamId: 'chat_x:agt_after', generation: 1, position: 5 }]);
    await waitFor(() => readFileSync(path.join(s.dir, 'wal-guard'), 'utf8').includes('agt_after'), 'the later touch recorded', 5_000);
    const lines = readFileSync(path.join(s.dir, 'wal-guard'), 'utf8').trim().split('\n');
    expect(lines.length).toBeLessThan(200);
    expect(lines.some((l) => l.endsWith('chat_x:agt_after 1 5'))).toBe(true);
  });
});

describe('StreamStore', () => {
  it('reports a record missing above the trim point as corrupt (and marks the stream), and one below it as trimmed', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 6);
    await s.streams.trim(w.streamId, 2, true);
    s = await reopenAfter(s, async (db) => db.del(K.record(w.streamId, 1, 4)));
    const read = (from: string) =>
      s.streams.read(w.bob, { streamId: w.streamId, generation: 1, fromPosition: Number(from), limit: 1000, maxBytes: PAGE_BYTES });
    const first = await read('2');
    expect(first.records.map((r) => r.position)).toEqual(['2', '3']);
    await expect(read('4')).rejects.toMatchObject({
      type: 'STORAGE_FAILURE',
      details: { reason: 'CORRUPT', streamId: w.streamId, fromPosition: '4' },
    });
    await expect(read('1')).rejects.toMatchObject({ type: 'CONTINUITY_BREAK', details: { reason: 'PREFIX_UNAVAILABLE' } });
    expect(s.integrity.list()).toEqual([expect.objectContaining({ streamId: w.streamId, generation: '1', fromPosition: '4' })]);
  });

  it('marks a stream whose head is behind its records at load, refuses appends, and a reset starts clean past the mark', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 5);
    s = await reopenAfter(s, async (db) => {
      // The tail holds what every append changes: make it stale, with a valid checksum.
      const key = K.tail(w.streamId);
      const tail = JSON.parse((await db.get(key))!.slice(8)) as StreamTail;
      tail[1] = 3;
      await db.put(key, encodeValue(key, JSON.stringify(tail)));
    });
    const append = () =>
      s.streams.append(w.alice, {
        streamId: w.streamId,
        coordinatorToken: w.token,
        generation: 1,
        expectedPosition: 3,
        operationId: 'op-over',
        records: [{ type: 'chat.message', messageId: 'over', content: 'would overwrite' }],
      });
    await expect(append()).rejects.toMatchObject({
      type: 'STORAGE_FAILURE',
      details: { reason: 'CORRUPT', fromPosition: '3', operationId: 'op-over', outcome: 'not-written' },
    });
    const state = await s.streams.reset(w.streamId, 'recover from a stale head');
    expect(state.generation).toBe('2');
    const claim = await s.streams.claim(w.alice, { streamId: w.streamId, replace: true });
    await s.streams.append(w.alice, {
      streamId: w.streamId,
      coordinatorToken: claim.coordinatorToken,
      generation: 2,
      expectedPosition: Number(claim.nextPosition),
      operationId: 'op-new',
      records: [{ type: 'chat.message', messageId: 'new', content: 'clean' }],
    });
    // The sealed generation still serves what lies below the mark.
    const old = await s.streams.read(w.bob, { streamId: w.streamId, generation: 1, fromPosition: 0, limit: 1000, maxBytes: PAGE_BYTES });
    expect(old.records.map((r) => r.position)).toEqual(['0', '1', '2']);
  });

  it('rebuilds an unreadable head from its records on reset', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 4);
    s = await reopenAfter(s, async (db) => db.put(K.stream(w.streamId), 'garbage that fails its checksum'));
    expect(() => s.streams.get(w.bob, w.streamId)).toThrow(/integrity/);
    expect(s.integrity.list()[0]).toMatchObject({ streamId: w.streamId, generation: null });
    const state = await s.streams.reset(w.streamId, 'head lost');
    expect(state).toMatchObject({ generation: '2', firstPosition: '0', nextPosition: '0' });
    expect(s.integrity.list()).toEqual([expect.objectContaining({ generation: '1', fromPosition: '5' })]);
    const old = await s.streams.read(w.bob, { streamId: w.streamId, generation: 1, fromPosition: 0, limit: 1000, maxBytes: PAGE_BYTES });
    expect(old.records).toHaveLength(5);
  });

  it('never calls an operation "unknown" when its index entry is lost but the operation log has it', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 3, 'lost');
    const ops = await s.streams.operations(w.alice, w.streamId, undefined, 10);
    const target = ops.operations[1]!.operationId;
    s = await reopenAfter(s, async (db) => db.del(K.operation(w.streamId, target)));
    expect((await s.streams.operation(w.alice, w.streamId, 'op-never-sent')).state).toBe('unknown');
    await expect(s.streams.operation(w.alice, w.streamId, target)).rejects.toMatchObject({
      type: 'STORAGE_FAILURE',
      details: { reason: 'CORRUPT', streamId: w.streamId, fromPosition: '2' },
    });
    // From then on the stream is marked: what is absent from it may have been lost.
    await expect(s.streams.operation(w.alice, w.streamId, 'op-never-sent')).rejects.toMatchObject({ details: { reason: 'CORRUPT' } });
  });

  it('names the operation of an append whose synced write failed; operations.get says pending, not unknown', async () => {
    let fail = false;
    const s = await fresh({ injectFailure: () => fail });
    const w = await chatWithWriter(s);
    fail = true;
    const err = await s.streams
      .append(w.alice, {
        streamId: w.streamId,
        coordinatorToken: w.token,
        generation: 1,
        expectedPosition: 1,
        operationId: 'op-doubt',
        records: [{ type: 'chat.message', messageId: 'x', content: 'x' }],
      })
      .catch((e: unknown) => e);
    expect((err as YelloError).details).toMatchObject({ operationId: 'op-doubt', reason: 'WRITE_FAILED', outcome: 'unknown' });
    expect((await s.streams.operation(w.alice, w.streamId, 'op-doubt')).state).toBe('pending');
  });
});

describe('Subscriptions', () => {
  async function followed(s: InProcessStore) {
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 3);
    const conn = new RecordingConnection();
    conn.congested = true; // hold deliveries until the fault is in place
    const sub = await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor: undefined, from: undefined }, conn);
    return { w, conn, sub };
  }

  it('ends a subscription whose catch-up hits a plain error with chats.error (INTERNAL), and nothing escapes as an unhandled rejection', async () => {
    const s = await fresh();
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 3);
      const head = s.streams.get(w.bob, w.streamId);
      const cursor = s.reader.liveCursor({
        chatId: w.chatId,
        streams: {
          [w.streamId]: { generation: 1, position: 0 },
          [`${w.chatId}:${w.bob.role === 'agent' ? w.bob.agentId : ''}`]: { generation: 1, position: 0 },
        },
      });
      s.streams.range = () => Promise.reject(new Error('a plain error from below'));
      const conn = new RecordingConnection();
      await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor, from: undefined }, conn);
      await waitFor(() => conn.notifications.length > 0, 'a notification', 5_000);
      // Nothing else may arrive (and nothing escape as an unhandled rejection) within 50 ms.
      await new Promise((r) => setTimeout(r, 50));
      expect(conn.notifications).toHaveLength(1);
      expect(conn.notifications[0]).toMatchObject({
        method: 'chats.error',
        params: { error: { code: -32603, data: { type: 'INTERNAL' } } },
      });
      expect(head.nextPosition).toBe('4');
      expect(unhandled).toEqual([]);
      expect(s.subscriptions.count).toBe(0);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('turns corrupt data met during catch-up into chats.error with STORAGE_FAILURE/CORRUPT, never chats.break with a reason outside the three', async () => {
    const s = await fresh();
    const { w, conn } = await followed(s);
    const cursor = s.reader.liveCursor({
      chatId: w.chatId,
      streams: {
        [w.streamId]: { generation: 1, position: 0 },
        [`${w.chatId}:${(w.bob as { agentId: string }).agentId}`]: { generation: 1, position: 0 },
      },
    });
    s.streams.range = () => Promise.reject(s.streams.missing(w.streamId, 1, 2));
    const conn2 = new RecordingConnection();
    await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor, from: undefined }, conn2);
    await waitFor(() => conn2.notifications.length > 0, 'a notification', 5_000);
    expect(conn2.notifications[0]).toMatchObject({
      method: 'chats.error',
      params: { error: { code: 5030, data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: w.streamId } } },
    });
    // The first subscription (at the ends) is told too: the stream was marked under it.
    conn.drain();
    await waitFor(() => conn.notifications.some((n) => n.method === 'chats.error'), 'chats.error for the live follower', 5_000);
    expect(conn.notifications.filter((n) => n.method === 'chats.break')).toEqual([]);
  });

  it('still ends a trimmed-under subscription with chats.break and one of the three reasons', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 4);
    const cursor = s.reader.liveCursor({
      chatId: w.chatId,
      streams: {
        [w.streamId]: { generation: 1, position: 0 },
        [`${w.chatId}:${(w.bob as { agentId: string }).agentId}`]: { generation: 1, position: 0 },
      },
    });
    const conn = new RecordingConnection();
    conn.congested = true;
    await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor, from: undefined }, conn);
    await s.streams.trim(w.streamId, 3, true);
    await waitFor(() => conn.notifications.length > 0, 'a notification', 5_000);
    expect(conn.notifications[0]).toMatchObject({ method: 'chats.break', params: { reason: 'PREFIX_UNAVAILABLE', streamId: w.streamId } });
  });
});
