// Kills mutants of src/daemon/streams/stream-reader.ts (`streams.read`, `streams.get`,
// docs/protocol.md §6.6) that the mutation run found alive (test/MUTATION.md, "Stream
// modules"). Over the real socket, against a real daemon.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { describe, expect, it } from 'vitest';
import { expectError, ok, reconnectChat, setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { useDaemon } from '../helpers/use-daemon.js';
import type { WireResponse } from '../helpers/wire-fixtures.js';

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

describe('stream reader (mutation guards)', () => {
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
