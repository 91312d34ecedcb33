// Pins behaviour of src/daemon/store/verified-reads.ts on its LevelDB read-error paths: a real
// ClassicLevel in a temp dir, written, compacted into a table file, closed, its data blocks damaged
// on disk, reopened and read through VerifiedReads. LevelDB then answers LEVEL_CORRUPTION ("bad
// block type") for the damaged blocks, which must come back as STORAGE_FAILURE/CORRUPT naming the
// key or the range read; an iterator the store was closed under (and reopened since) is
// SHUTTING_DOWN.

import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { YelloError } from '../../src/shared/errors.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { VerifiedReads } from '../../src/daemon/store/leveldb/verified-reads.js';
import { makeTempDir } from '../helpers/daemon-process.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => {});
});

const STREAM = 'chat_c:agt_a';
const COUNT = 2000;
const rec = (position: number) => K.record(STREAM, 1, position);
const FIRST = rec(1);
const LAST = rec(COUNT);
// Every record key of the stream sorts inside [LOW, HIGH).
const LOW = `r/${STREAM}/`;
const HIGH = `r/${STREAM}0`;

/** Reads a little-endian base-128 varint at `at`; returns the value and the next offset. */
function varint(b: Buffer, at: number): [number, number] {
  let v = 0;
  let shift = 0;
  for (;;) {
    const byte = b[at++]!;
    v += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return [v, at];
    shift += 7;
  }
}

/**
 * A store of COUNT records in one table file (.ldb), whose data blocks are damaged: every byte
 * before the metaindex block (the footer's first handle) is inverted, so each data block's
 * trailer names no known block type. The index and the footer stay intact: LevelDB opens the
 * store and finds the blocks, and fails reading them.
 */
async function damagedStore(): Promise<ClassicLevel> {
  const dir = await makeTempDir('yl-mutc-vr-');
  const location = path.join(dir, 'db');
  cleanup.push(() => {
    rmSync(dir, { recursive: true, force: true });
    return Promise.resolve();
  });
  const w = new ClassicLevel<string, string>(location);
  await w.open();
  await w.batch(
    Array.from({ length: COUNT }, (_, i) => ({
      type: 'put' as const,
      key: rec(i + 1),
      value: encodeValue(rec(i + 1), `"${'x'.repeat(100)}${i}"`),
    })),
  );
  await w.compactRange(LOW, HIGH);
  await w.close();
  const tables = readdirSync(location).filter((f) => f.endsWith('.ldb'));
  expect(tables).toHaveLength(1);
  const file = path.join(location, tables[0]!);
  const bytes = readFileSync(file);
  const footer = bytes.length - 48;
  const [metaindexOffset] = varint(bytes, footer);
  expect(metaindexOffset).toBeGreaterThan(4096);
  for (let i = 0; i < metaindexOffset; i++) bytes[i] = bytes[i]! ^ 0xff;
  writeFileSync(file, bytes);
  const db = new ClassicLevel<string, string>(location);
  await db.open();
  cleanup.push(() => db.close());
  return db;
}

const readError = 'LevelDB could not read it (LEVEL_CORRUPTION: Corruption: bad block type)';

/** The type and details of the error `p` rejects with (a YelloError). */
async function rejection(p: Promise<unknown>): Promise<{ type: string; details: Record<string, unknown> }> {
  let err: unknown = null;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(YelloError);
  const e = err as YelloError;
  return { type: e.type, details: { ...e.details } };
}

async function drain<T>(g: AsyncGenerator<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of g) out.push(x);
  return out;
}

describe('verified reads of a damaged table block (LEVEL_CORRUPTION)', () => {
  it('get: CORRUPT naming the key and where it is, with what LevelDB said', async () => {
    const reads = new VerifiedReads(await damagedStore());
    let err: unknown = null;
    try {
      reads.get(rec(10));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(YelloError);
    expect((err as YelloError).type).toBe('STORAGE_FAILURE');
    expect({ ...(err as YelloError).details }).toEqual({
      operationId: null,
      reason: 'CORRUPT',
      outcome: null,
      key: rec(10),
      streamId: STREAM,
      generation: '1',
      fromPosition: '10',
      detail: readError,
    });
  });

  it('entries, entriesChecked and keys: CORRUPT at the start of the range read (gte, else gt, else lt)', async () => {
    const reads = new VerifiedReads(await damagedStore());
    const corruptAt = (key: string, position: string) => ({
      type: 'STORAGE_FAILURE',
      details: {
        operationId: null,
        reason: 'CORRUPT',
        outcome: null,
        key,
        streamId: STREAM,
        generation: '1',
        fromPosition: position,
        detail: readError,
      },
    });
    expect(await rejection(drain(reads.entries({ gte: FIRST, lt: HIGH })))).toEqual(corruptAt(FIRST, '1'));
    expect(await rejection(drain(reads.entries({ gt: rec(3), lt: HIGH })))).toEqual(corruptAt(rec(3), '3'));
    expect(await rejection(drain(reads.entries({ lt: rec(7), reverse: true })))).toEqual(corruptAt(rec(7), '7'));
    // A scan that goes on past bad values still ends at an error LevelDB raises.
    expect(await rejection(drain(reads.entriesChecked({ gte: rec(2), lt: HIGH })))).toEqual(corruptAt(rec(2), '2'));
    expect(await rejection(drain(reads.keys({ gt: rec(4), lt: LAST })))).toEqual(corruptAt(rec(4), '4'));
    expect(await rejection(drain(reads.keys({ lt: rec(9) })))).toEqual(corruptAt(rec(9), '9'));
  });

  it('lastKey: CORRUPT at the start of the range', async () => {
    const reads = new VerifiedReads(await damagedStore());
    expect(await rejection(reads.lastKey({ gte: rec(5), lt: HIGH }))).toEqual({
      type: 'STORAGE_FAILURE',
      details: {
        operationId: null,
        reason: 'CORRUPT',
        outcome: null,
        key: rec(5),
        streamId: STREAM,
        generation: '1',
        fromPosition: '5',
        detail: readError,
      },
    });
  });

  it('the iterator of a failed scan is closed (the store closes without waiting on it)', async () => {
    const db = await damagedStore();
    const opened: Array<{ next(): Promise<unknown> }> = [];
    const iterator = db.iterator.bind(db);
    // Records each iterator VerifiedReads opens, to look at it after the scan failed.
    db.iterator = ((options: Parameters<typeof iterator>[0]) => {
      const i = iterator(options);
      opened.push(i);
      return i;
    }) as typeof db.iterator;
    const reads = new VerifiedReads(db);
    await rejection(drain(reads.entries({ gte: FIRST, lt: HIGH })));
    expect(opened).toHaveLength(1);
    // The store is still open: only a closed iterator refuses a read as not open.
    expect(db.status).toBe('open');
    await expect(opened[0]!.next()).rejects.toMatchObject({ code: 'LEVEL_ITERATOR_NOT_OPEN' });
  });
});

describe('a read the store was closed under, while the store is open again', () => {
  it('is SHUTTING_DOWN (LEVEL_ITERATOR_NOT_OPEN), never CORRUPT, although the store is open now', async () => {
    const dir = await makeTempDir('yl-mutc-vr-');
    const db = new ClassicLevel<string, string>(path.join(dir, 'db'));
    cleanup.push(async () => {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    });
    await db.open();
    await db.batch([1, 2, 3].map((p) => ({ type: 'put' as const, key: rec(p), value: encodeValue(rec(p), String(p)) })));
    const reads = new VerifiedReads(db);
    const scan = reads.entries({ gte: LOW, lt: HIGH });
    expect((await scan.next()).value).toMatchObject({ key: rec(1), value: 1 });
    await db.close();
    await db.open();
    expect(db.status).toBe('open');
    expect(await rejection(scan.next())).toEqual({
      type: 'STORAGE_FAILURE',
      details: { operationId: null, reason: 'SHUTTING_DOWN', outcome: null },
    });
    // The reopened store reads as before.
    expect(reads.get(rec(2))).toBe(2);
  });
});
