// Pins behaviour of src/daemon/streams/stream-reader.ts (`streams.read`, `streams.get` and the
// continuity checks other readers share, docs/protocol.md §6.6, §6.10) that the rest of the suite
// leaves unchecked. Over the real socket.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { describe, expect, it, afterEach } from 'vitest';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { expectError, reconnectChat, setupChat, type ReadingChat, ok } from '../helpers/reading-fixtures.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { uniq, type WireResponse, type Wire, type WireError } from '../helpers/wire-fixtures.js';
import { YelloError } from '../../src/shared/errors.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';

const { daemon, admin, restart } = useDaemon();

type ReadParams = { limit?: number; maxBytes?: number };

async function read(c: ReadingChat, generation: string, fromPosition: string, extra: ReadParams = {}) {
  return ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation, fromPosition, ...extra }), 'streams.read');
}

describe('streams.read and streams.get', () => {
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

// Pins behaviour of src/daemon/streams/stream-reader.ts (`streams.read`, `streams.get`,
// docs/protocol.md §6.6) that the rest of the suite leaves unchecked. Over the real socket, against
// a real daemon.
describe('pages, sealed generations, trimmed prefixes and damaged records', () => {
  const { daemon, admin, restart } = useDaemon();

  /** Deletes the stored record at `position` of generation 1 of `streamId` (the daemon is stopped). */
  async function deleteStoredRecord(dataDir: string, streamId: string, position: number): Promise<void> {
    const db = new ClassicLevel<string, string>(path.join(dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    try {
      const pad = (n: number): string => n.toString().padStart(16, '0');
      const key = `r/${streamId}/${pad(1)}/${pad(position)}`;
      expect(await db.get(key), key).toBeDefined();
      await db.del(key, { sync: true });
    } finally {
      await db.close();
    }
  }

  /** The response is STORAGE_FAILURE (5030) / CORRUPT of `streamId` from `fromPosition`. */
  function expectCorrupt(r: WireResponse, streamId: string, fromPosition: string): void {
    expect(r.result, 'expected STORAGE_FAILURE/CORRUPT, got a result').toBeUndefined();
    expect(r.error?.code).toBe(5030);
    expect(r.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId, fromPosition });
  }

  type ReadParams = { limit?: number; maxBytes?: number };

  async function read(c: ReadingChat, generation: string, fromPosition: string, extra: ReadParams = {}) {
    return ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation, fromPosition, ...extra }), 'streams.read');
  }

  describe('stream reader', () => {
    it('maxBytes: 1 stops after exactly one record; without it the page holds every record', async () => {
      // stream-reader.ts read: the page budget is `Math.min(p.maxBytes, PAGE_BYTES)`, and range stops
      // after the record that reaches it (`bytes >= maxBytes`).
      const c = await setupChat(daemon(), admin());
      await c.wa.send('m', 4); // fence 0, messages 1..4
      const tiny = await read(c, '1', '1', { maxBytes: 1 });
      expect(tiny.records.map((r) => r.position)).toEqual(['1']);
      expect(tiny.nextPosition).toBe('2');
      const all = await read(c, '1', '1');
      expect(all.records.map((r) => r.position)).toEqual(['1', '2', '3', '4']);
      expect(all.nextPosition).toBe('5');
    });

    it('reads each of two sealed generations within its own bounds (sealed: true), and the current one with sealed: false', async () => {
      // stream-reader.ts bounds: the sealed generation is looked up by number.
      const c = await setupChat(daemon(), admin());
      await c.wa.send('g1', 3); // generation 1: fence + 3 = end 4
      ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'one' }), 'streams.reset');
      await c.wa.reclaim();
      await c.wa.send('g2', 1); // generation 2: fence + 1 = end 2
      ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'two' }), 'streams.reset');
      await c.wa.reclaim(); // generation 3: fence = end 1
      const g1 = await read(c, '1', '0');
      expect({ next: g1.nextPosition, n: g1.records.length, sealed: g1.sealed }).toEqual({ next: '4', n: 4, sealed: true });
      const g2 = await read(c, '2', '0');
      expect({ next: g2.nextPosition, n: g2.records.length, sealed: g2.sealed }).toEqual({ next: '2', n: 2, sealed: true });
      expect(g2.records.every((r) => r.generation === '2')).toBe(true);
      const g3 = await read(c, '3', '0');
      expect({ next: g3.nextPosition, n: g3.records.length, sealed: g3.sealed }).toEqual({ next: '1', n: 1, sealed: false });
      // Beyond a sealed generation's end is INVALID_PARAMS at fromPosition, like the current one's.
      const beyond = expectError(
        await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '2', fromPosition: '3' }),
        'INVALID_PARAMS',
      );
      expect(beyond.path).toBe('fromPosition');
    });

    it('a fromPosition below a trimmed start is PREFIX_UNAVAILABLE naming the position asked for and the retained start', async () => {
      const c = await setupChat(daemon(), admin());
      await c.wa.send('m', 4);
      ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '3', force: true }), 'streams.trim');
      const data = expectError(
        await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '1' }),
        'CONTINUITY_BREAK',
      );
      expect(data).toEqual({ type: 'CONTINUITY_BREAK', reason: 'PREFIX_UNAVAILABLE', streamId: c.streamA, expected: '1', actual: '3' });
      expect((await read(c, '1', '3')).records.map((r) => r.position)).toEqual(['3', '4']);
    });

    it('streams.get of an unknown stream is NOT_FOUND', async () => {
      const c = await setupChat(daemon(), admin());
      const missing = `${c.chatId}:agt_WWWWWWWWWWWWWWWWWWWWWWWWWW`;
      expectError(await admin().call('streams.get', { streamId: missing }), 'NOT_FOUND');
    });

    it('a record gone or failing its checksum ends the page before it (the records before it are served) and is CORRUPT from there', async () => {
      // stream-reader.ts scan/missing/range: a record not at the expected position above the trim
      // point is corruption (a mark from there), never PREFIX_UNAVAILABLE and never skipped; a
      // checksum failure marks the stream at that record; damage after the first record of a page
      // ends the page early instead of failing it.
      const gone = await setupChat(daemon(), admin());
      const flipped = await setupChat(daemon(), admin());
      await gone.wa.send('g', 5); // fence 0, messages 1..5
      await flipped.wa.send('f', 5);
      await daemon().stop();
      await deleteStoredRecord(daemon().dataDir, gone.streamA, 3);
      await damageStoredRecord(daemon().dataDir, flipped.streamA, 3);
      await restart();
      await reconnectChat(daemon(), gone);
      await reconnectChat(daemon(), flipped);
      for (const c of [gone, flipped]) {
        const page = await read(c, '1', '1');
        expect(
          page.records.map((r) => r.position),
          c === gone ? 'deleted record' : 'flipped record',
        ).toEqual(['1', '2']);
        expect(page.nextPosition).toBe('3');
        expectCorrupt(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '3' }), c.streamA, '3');
        expectCorrupt(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '4' }), c.streamA, '3');
        expect((await read(c, '1', '0', { limit: 2 })).records.map((r) => r.position)).toEqual(['0', '1']);
      }
      const marks = ok(await admin().call('daemon.status', {})).integrity.corruptStreams;
      for (const c of [gone, flipped]) {
        expect(marks.find((m) => m.streamId === c.streamA)).toMatchObject({ generation: '1', fromPosition: '3' });
      }
    });
  });
});

// Pins behaviour of src/daemon/streams/stream-reader.ts that the tests above leave
// unchecked. Over the real socket with a real daemon; the store is read directly only while the
// daemon is stopped.
describe('page bytes, a store closing, checksums and trims', () => {
  const { daemon, admin, restart } = useDaemon();

  const pad = (n: number): string => n.toString().padStart(16, '0');

  /** The stored size (what `range` counts against `maxBytes`) of each record of generation 1 at `positions`. */
  async function storedSizes(c: ReadingChat, positions: number[]): Promise<number[]> {
    await daemon().stop();
    const db = new ClassicLevel<string, string>(path.join(daemon().dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    try {
      const sizes: number[] = [];
      for (const p of positions) {
        const raw = await db.get(`r/${c.streamA}/${pad(1)}/${pad(p)}`);
        if (raw === undefined) throw new Error(`no record ${p}`);
        sizes.push(raw.length);
      }
      return sizes;
    } finally {
      await db.close();
      await restart();
      await reconnectChat(daemon(), c);
    }
  }

  describe('stream reader over the socket', () => {
    it('a page stops at the record that brings it to exactly maxBytes, and goes on while it is below', async () => {
      // stream-reader.ts range: `bytes >= maxBytes` (a page reaching the budget exactly is full).
      const c = await setupChat(daemon(), admin());
      await c.wa.send(uniq('m'), 3); // fence 0, messages 1..3
      const [one, two] = await storedSizes(c, [1, 2]);
      const page = async (maxBytes: number) =>
        ok(
          await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '1', maxBytes }),
          'streams.read',
        ).records.map((r) => r.position);
      expect(await page(one!)).toEqual(['1']);
      expect(await page(one! + 1)).toEqual(['1', '2']);
      expect(await page(one! + two!)).toEqual(['1', '2']);
      expect(await page(one! + two! + 1)).toEqual(['1', '2', '3']);
    });

    it('a streams.read meeting the store closing is SHUTTING_DOWN: never a corruption mark, never a page cut short', async () => {
      // stream-reader.ts range: only a CORRUPT error is swallowed, and only after a record. A read
      // failing because the store closed under it (verified-reads.ts: SHUTTING_DOWN) is neither
      // taken for a record missing above the trim point (pages of one record: the failing step of
      // the iterator is the first one) nor answered with the records read before it (whole pages:
      // an undamaged stream's page ends at its head). Rounds until 40 reads have failed (or 15).
      const c = await setupChat(daemon(), admin());
      await c.wa.send(uniq('s'), 30); // fence 0, messages 1..30: head 31
      const errors: WireError[] = [];
      const short: string[] = [];
      let calls = 0;
      for (let round = 0; round < 15 && errors.length < 40; round++) {
        const readers = await Promise.all([0, 1, 2, 3].map(() => daemon().connectAs(c.bob.token)));
        const counts = readers.map(() => 0);
        const loops = readers.map((r: Wire, i) =>
          Promise.all(
            [0, 1, 2, 3].map(async (j) => {
              const whole = j >= 2;
              for (let n = 0; ; n++) {
                const from = whole ? (n + i) % 10 : (n * 7 + i * 4 + j) % 31;
                const params = { streamId: c.streamA, generation: '1', fromPosition: String(from), ...(whole ? {} : { limit: 1 }) };
                let resp;
                try {
                  resp = await r.call('streams.read', params, 20_000);
                } catch (err) {
                  if ((err as Error).message === 'connection closed') return;
                  throw err;
                }
                counts[i]!++;
                if (resp.error) errors.push(resp.error);
                else if (whole && resp.result!.records.length !== 31 - from) short.push(`${from}: ${resp.result!.records.length}`);
              }
            }),
          ),
        );
        await waitFor(() => counts.every((n) => n >= 10), 'every reader looping', 20_000);
        expect(await daemon().stop(), 'the daemon stops cleanly').toBe(0);
        await Promise.all(loops);
        calls += counts.reduce((a, b) => a + b, 0);
        await restart();
      }
      console.log(`shutdown reads: ${calls} reads, ${errors.length} errors`);
      const kinds = new Set(errors.map((e) => `${String(e.data?.type)}/${String(e.data?.reason)}`));
      expect(calls).toBeGreaterThan(40);
      expect(kinds, `${errors.length} errors in ${calls} reads`).toEqual(
        new Set(errors.length > 0 ? ['STORAGE_FAILURE/SHUTTING_DOWN'] : []),
      );
      expect(short, 'pages cut short (from: records)').toEqual([]);
      expect(ok(await admin().call('daemon.status', {})).integrity.corruptStreams).toEqual([]);
    }, 120_000);

    it('a record failing its checksum right after a missing one is marked where the check failed, then the gap below it', async () => {
      // stream-reader.ts scan: the mark of a checksum failure is at the position the records
      // iterator names (the damaged record's key), not at the position the scan expected next.
      const c = await setupChat(daemon(), admin());
      await c.wa.send(uniq('g'), 6); // fence 0, messages 1..6
      await daemon().stop();
      await damageStoredRecord(daemon().dataDir, c.streamA, 4); // key order: position 4
      const db = new ClassicLevel<string, string>(path.join(daemon().dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
      await db.open();
      try {
        await db.del(`r/${c.streamA}/${pad(1)}/${pad(3)}`, { sync: true });
      } finally {
        await db.close();
      }
      await restart();
      await reconnectChat(daemon(), c);
      const markOf = async () =>
        ok(await admin().call('daemon.status', {}))
          .integrity.corruptStreams.filter((m) => m.streamId === c.streamA)
          .map((m) => ({
            generation: m.generation,
            fromPosition: m.fromPosition,
            detail: m.detail,
          }));
      expect(await markOf(), 'the startup check finds the last record intact').toEqual([]);
      const first = ok(
        await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '1' }),
        'streams.read',
      );
      expect(first.records.map((r) => r.position)).toEqual(['1', '2']);
      expect(await markOf()).toEqual([{ generation: '1', fromPosition: '4', detail: 'record 4 fails its checksum' }]);
      const gap = await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '3' });
      expect({ code: gap.error?.code, data: gap.error?.data }).toMatchObject({
        code: 5030,
        data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: c.streamA, fromPosition: '3' },
      });
      expect(await markOf()).toEqual([{ generation: '1', fromPosition: '3', detail: 'record 3 is missing above the trim point' }]);
    });

    it('a read finding the record at the trim point gone is CORRUPT there, not PREFIX_UNAVAILABLE', async () => {
      // stream-reader.ts missing: only a position below firstPosition was trimmed; the record at
      // firstPosition is retained, so its absence is damage.
      const c = await setupChat(daemon(), admin());
      await c.wa.send(uniq('t'), 6); // fence 0, messages 1..6
      ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '4', force: true }), 'streams.trim');
      await daemon().stop();
      const db = new ClassicLevel<string, string>(path.join(daemon().dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
      await db.open();
      try {
        await db.del(`r/${c.streamA}/${pad(1)}/${pad(4)}`, { sync: true });
      } finally {
        await db.close();
      }
      await restart();
      await reconnectChat(daemon(), c);
      const r = await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '4' });
      expect({ code: r.error?.code, data: r.error?.data }).toMatchObject({
        code: 5030,
        data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: c.streamA, fromPosition: '4' },
      });
      const marks = ok(await admin().call('daemon.status', {})).integrity.corruptStreams.filter((m) => m.streamId === c.streamA);
      expect(marks.map((m) => [m.fromPosition, m.detail])).toEqual([['4', 'record 4 is missing above the trim point']]);
    });
  });

  // In-process (the daemon's own StreamStore on a LevelDB in a temp dir): a scan that meets a
  // trimmed position. Over the socket a read checks the trim point and opens its iterator in the
  // same tick, and a trim deletes with the commit that moves firstPosition, so only a read racing
  // the commit's callback gets there (retention.test.ts's 30,000-record test did not).
  describe('stream reader, in-process', () => {
    const opened: InProcessStore[] = [];
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close().catch(() => {});
    });

    it('a range over positions a trim removed is CONTINUITY_BREAK/PREFIX_UNAVAILABLE naming the position and the new start, and marks nothing', async () => {
      const s = await openInProcess();
      opened.push(s);
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 6); // fence 0, messages 1..6
      expect(await s.streams.trim(w.streamId, 4, true)).toEqual({ firstPosition: '4' });
      const failure = await s.streams.range(w.streamId, 1, 1, 7, 100).then(
        () => null,
        (err: unknown) => err,
      );
      expect(failure).toBeInstanceOf(YelloError);
      expect({ type: (failure as YelloError).type, ...(failure as YelloError).details }).toEqual({
        type: 'CONTINUITY_BREAK',
        reason: 'PREFIX_UNAVAILABLE',
        streamId: w.streamId,
        expected: '1',
        actual: '4',
      });
      expect(s.integrity.readLimit(w.streamId, 1)).toBe(Infinity);
      expect((await s.streams.range(w.streamId, 1, 4, 7, 100)).map((r) => r.position)).toEqual(['4', '5', '6']);
    });

    it('a cursor position past the head is INVALID_PARAMS on cursor; at the head it continues', async () => {
      // stream-reader.ts checkContinuity: the daemon mints cursors at or below the head and a
      // generation's head never goes down, so over the socket only a store restored from an older
      // backup while newer cursors exist shows this.
      const s = await openInProcess();
      opened.push(s);
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 2); // fence 0, messages 1..2: head 3
      expect(s.streams.checkContinuity(w.streamId, 1, 3).nextPosition).toBe(3);
      let failure: unknown = null;
      try {
        s.streams.checkContinuity(w.streamId, 1, 4);
      } catch (err) {
        failure = err;
      }
      expect(failure).toBeInstanceOf(YelloError);
      expect({ type: (failure as YelloError).type, path: (failure as YelloError).details.path }).toEqual({
        type: 'INVALID_PARAMS',
        path: 'cursor',
      });
    });
  });
});
