// Kills mutants of src/daemon/streams/stream-reader.ts (`streams.read`, `streams.get` and the
// continuity checks other readers share, docs/protocol.md §6.6, §6.10) that the mutation run
// left alive (test/MUTATION.md, "Stream core (mut-a, 2026-12-02)"). Over the real socket.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { describe, expect, it } from 'vitest';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { expectError, reconnectChat, setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { ok, uniq } from '../helpers/wire-fixtures.js';

const { daemon, admin, restart } = useDaemon();

type ReadParams = { limit?: number; maxBytes?: number };

async function read(c: ReadingChat, generation: string, fromPosition: string, extra: ReadParams = {}) {
  return ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation, fromPosition, ...extra }), 'streams.read');
}

describe('stream reader (mut-a mutation guards)', () => {
  it('a generation that is neither current nor sealed is GENERATION_CHANGED naming the one asked for and the current one', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('g', 2);
    const data = expectError(
      await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '2', fromPosition: '0' }),
      'CONTINUITY_BREAK',
    );
    expect(data).toEqual({ type: 'CONTINUITY_BREAK', reason: 'GENERATION_CHANGED', streamId: c.streamA, expected: '2', actual: '1' });
  });

  it('a missing stream is STREAM_MISSING, naming it, with actual null', async () => {
    const c = await setupChat(daemon(), admin());
    const missing = `${c.chatId}:agt_WWWWWWWWWWWWWWWWWWWWWWWWWW`;
    const data = expectError(
      await admin().call('streams.read', { streamId: missing, generation: '1', fromPosition: '0' }),
      'CONTINUITY_BREAK',
    );
    expect(data).toEqual({ type: 'CONTINUITY_BREAK', reason: 'STREAM_MISSING', streamId: missing, expected: missing, actual: null });
  });

  it('reads exactly limit records from fromPosition, an empty batch at nextPosition, INVALID_PARAMS past it', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('l', 5); // fence 0, messages 1..5
    const two = await read(c, '1', '2', { limit: 2 });
    expect({ from: two.fromPosition, next: two.nextPosition, positions: two.records.map((r) => r.position), sealed: two.sealed }).toEqual({
      from: '2',
      next: '4',
      positions: ['2', '3'],
      sealed: false,
    });
    const one = await read(c, '1', '5', { limit: 3 });
    expect(one.records.map((r) => r.position)).toEqual(['5']);
    const empty = await read(c, '1', '6');
    expect({ from: empty.fromPosition, next: empty.nextPosition, n: empty.records.length }).toEqual({ from: '6', next: '6', n: 0 });
    const beyond = expectError(
      await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '7' }),
      'INVALID_PARAMS',
    );
    expect(beyond.path).toBe('fromPosition');
  });

  it('a batchId an agent was shown acknowledges; one the admin was shown, of the same range, is NOT_PRESENTED', async () => {
    // stream-reader.ts batchId: the reader sealed into the id is the agent, or "admin".
    const c = await setupChat(daemon(), admin());
    await c.wa.send('r', 2);
    const shownToAdmin = ok(await admin().call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
    const shownToBob = await read(c, '1', '0');
    expect(shownToBob.nextPosition).toBe(shownToAdmin.nextPosition);
    expect(shownToAdmin.batchId).not.toBe(shownToBob.batchId);
    const receiptOf = (batchId: string) => ({
      type: 'chat.receipt',
      peerStreamId: c.streamA,
      peerGeneration: '1',
      nextPosition: shownToBob.nextPosition,
      batchId,
    });
    const refused = expectError(await c.wb.tryAppend([receiptOf(shownToAdmin.batchId)]), 'INVALID_RECEIPT');
    expect(refused.reason).toBe('NOT_PRESENTED');
    await c.wb.append([receiptOf(shownToBob.batchId)]);
    expect(ok(await admin().call('streams.get', { streamId: c.streamA })).acknowledged).toEqual({ generation: '1', nextPosition: '3' });
  });

  it('chats.follow from a live cursor of an older generation is GENERATION_CHANGED; from one below a trim PREFIX_UNAVAILABLE', async () => {
    // stream-reader.ts checkContinuity (follow-start and subscriptions share it), data by value.
    const reset = await setupChat(daemon(), admin());
    const trimmed = await setupChat(daemon(), admin());
    const cursorOf = async (c: ReadingChat) =>
      ok(await c.bob.client.call('chats.history', { chatId: c.chatId, limit: 1 }), 'chats.history').liveCursor;
    await reset.wa.send(uniq('f'), 3);
    const atReset = await cursorOf(reset);
    ok(await admin().call('streams.reset', { streamId: reset.streamA, reason: 'continuity' }), 'streams.reset');
    await trimmed.wa.send(uniq('t'), 1); // fence 0, message 1: head 2
    const atTrim = await cursorOf(trimmed);
    await trimmed.wa.send(uniq('t'), 3); // head 5
    ok(await admin().call('streams.trim', { streamId: trimmed.streamA, beforePosition: '4', force: true }), 'streams.trim');
    for (const [c, cursor, expected] of [
      [reset, atReset, { reason: 'GENERATION_CHANGED', expected: '1', actual: '2' }],
      [trimmed, atTrim, { reason: 'PREFIX_UNAVAILABLE', expected: '2', actual: '4' }],
    ] as const) {
      const r = await c.bob.client.call('chats.follow', { chatId: c.chatId, cursor });
      expect({ code: r.error?.code, data: r.error?.data }, expected.reason).toEqual({
        code: 4100,
        data: { type: 'CONTINUITY_BREAK', streamId: c.streamA, ...expected },
      });
    }
  });

  it('streams.get of an unknown stream is NOT_FOUND naming kind and id', async () => {
    const c = await setupChat(daemon(), admin());
    const missing = `${c.chatId}:agt_WWWWWWWWWWWWWWWWWWWWWWWWWW`;
    const data = expectError(await admin().call('streams.get', { streamId: missing }), 'NOT_FOUND');
    expect(data).toEqual({ type: 'NOT_FOUND', kind: 'stream', id: missing });
  });

  it('the mark of a record failing its checksum or gone inside the head says which record and what happened', async () => {
    // stream-reader.ts scan/missing: the mark's detail (daemon.status, yello doctor).
    const flipped = await setupChat(daemon(), admin());
    const gone = await setupChat(daemon(), admin());
    const tail = await setupChat(daemon(), admin());
    const behind = await setupChat(daemon(), admin());
    await behind.wa.send(uniq('b'), 3);
    await flipped.wa.send(uniq('f'), 5);
    await gone.wa.send(uniq('g'), 5);
    await tail.wa.send(uniq('t'), 5);
    await daemon().stop();
    await damageStoredRecord(daemon().dataDir, flipped.streamA, 3);
    const db = new ClassicLevel(path.join(daemon().dataDir, 'db'));
    await db.open();
    try {
      const pad = (n: number): string => n.toString().padStart(16, '0');
      await db.del(`r/${gone.streamA}/${pad(1)}/${pad(3)}`, { sync: true });
      // Every record from 3 to the head gone: the head check marks 5 (its last record).
      for (const p of [3, 4, 5]) await db.del(`r/${tail.streamA}/${pad(1)}/${pad(p)}`, { sync: true });
      // A stale tail (head at 3, a record at 3): the head check marks 3, exactly the head.
      const key = `h/${behind.streamA}`;
      const t = JSON.parse((await db.get(key))!.slice(8)) as unknown[];
      t[1] = 3;
      await db.put(key, encodeValue(key, JSON.stringify(t)), { sync: true });
    } finally {
      await db.close();
    }
    await restart();
    for (const c of [flipped, gone, tail]) {
      await reconnectChat(daemon(), c);
      expect((await read(c, '1', '1')).records.map((r) => r.position)).toEqual(['1', '2']);
    }
    // stream-reader.ts range: a page that finds no record of a non-empty range is CORRUPT from
    // there, never an empty batch (which would say "nothing more yet").
    const empty = await tail.bob.client.call('streams.read', { streamId: tail.streamA, generation: '1', fromPosition: '3' });
    expect({ code: empty.error?.code, data: empty.error?.data }).toMatchObject({
      code: 5030,
      data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: tail.streamA, fromPosition: '3' },
    });
    // A transcript that reaches the mark is refused (chat-reader.ts through assertReadable).
    const refused = await flipped.bob.client.call('chats.history', { chatId: flipped.chatId });
    expect({ code: refused.error?.code, data: refused.error?.data }).toMatchObject({
      code: 5030,
      data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: flipped.streamA, fromPosition: '3' },
    });
    // Also when the mark lies exactly at the snapshot's head, where no record is read.
    await reconnectChat(daemon(), behind);
    const atHead = await behind.bob.client.call('chats.history', { chatId: behind.chatId });
    expect({ code: atHead.error?.code, data: atHead.error?.data }).toMatchObject({
      code: 5030,
      data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: behind.streamA, fromPosition: '3' },
    });
    const marks = ok(await admin().call('daemon.status', {})).integrity.corruptStreams;
    expect(marks.find((m) => m.streamId === flipped.streamA)).toMatchObject({ fromPosition: '3', detail: 'record 3 fails its checksum' });
    expect(marks.find((m) => m.streamId === gone.streamA)).toMatchObject({
      fromPosition: '3',
      detail: 'record 3 is missing above the trim point',
    });
  });
});
