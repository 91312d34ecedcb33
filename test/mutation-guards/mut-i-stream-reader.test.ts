// Kills mutants of src/daemon/streams/stream-reader.ts that the seventh mutation round (m8s,
// test/MUTATION.md "mut (seventh round, 2026-12-04)") found alive. Over the real socket with a
// real daemon; the store is read directly only while the daemon is stopped.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { YelloError } from '../../src/shared/errors.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';
import { reconnectChat, setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { waitFor } from '../helpers/wait.js';
import { ok, uniq, type Wire, type WireError } from '../helpers/wire-fixtures.js';

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

describe('stream reader (mut-i mutation guards)', () => {
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
    console.log(`mut-i shutdown reads: ${calls} reads, ${errors.length} errors`);
    const kinds = new Set(errors.map((e) => `${String(e.data?.type)}/${String(e.data?.reason)}`));
    expect(calls).toBeGreaterThan(40);
    expect(kinds, `${errors.length} errors in ${calls} reads`).toEqual(new Set(errors.length > 0 ? ['STORAGE_FAILURE/SHUTTING_DOWN'] : []));
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
    const first = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '1' }), 'streams.read');
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
// the commit's callback gets there (retention.test.ts's 30,000-record test did not, test/MUTATION.md).
describe('stream reader, in-process (mut-i mutation guards)', () => {
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
