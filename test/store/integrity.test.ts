// Pins behaviour of src/daemon/store/integrity.ts and src/daemon/store/leveldb/verified-reads.ts.
// The fault suites show corruption end to end; here each rule of the corruption marks (which one
// wins, what blocks a write or a read, what is stored and found again after a restart) and of the
// verified reads (the error and its details for each failure) is asserted on a real LevelDB in a
// temp dir.

import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { YelloError, errors } from '../../src/shared/errors.js';
import { Integrity, corruptError, isCorrupt, type CorruptMark } from '../../src/daemon/store/integrity.js';
import { openStore, type OpenedStore } from '../../src/daemon/store/leveldb/store-open.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { VerifiedReads } from '../../src/daemon/store/leveldb/verified-reads.js';
import { makeTempDir } from '../helpers/daemon-process.js';
import { levelMarkStore } from '../../src/daemon/store/leveldb/level-store.js';
import { silentLog } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => {});
});

async function store(dir?: string, injectFailure?: () => boolean): Promise<{ dir: string; s: OpenedStore }> {
  const root = dir ?? (await makeTempDir('yl-core-int-'));
  mkdirSync(path.join(root, 'db'), { recursive: true });
  const s = await openStore(root, silentLog, { injectFailure: injectFailure ?? null });
  cleanup.push(async () => {
    await s.storage.close();
    if (!dir) rmSync(root, { recursive: true, force: true });
  });
  return { dir: root, s };
}

/** The type and details of what `fn` throws (a YelloError). */
function thrown(fn: () => unknown): { type: string; message: string; details: Record<string, unknown> } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(YelloError);
    const e = err as YelloError;
    return { type: e.type, message: e.message, details: { ...e.details } };
  }
  throw new Error('expected a YelloError');
}

const mark = (streamId: string, generation: number | null, fromPosition: number, detail = 'd'): Omit<CorruptMark, 'detectedAt'> => ({
  streamId,
  generation,
  fromPosition,
  detail,
});

describe('corruption marks', () => {
  it('isCorrupt: a STORAGE_FAILURE with reason CORRUPT only', () => {
    expect(isCorrupt(corruptError({ ...mark('c:a', 1, 2), detectedAt: 'T' }))).toBe(true);
    expect(isCorrupt(errors.shuttingDown(null, null))).toBe(false);
    expect(isCorrupt(new Error('CORRUPT'))).toBe(false);
  });

  it('corruptError names the stream, generation and position as decimals, and the operation', () => {
    const e = corruptError({ ...mark('c:a', 2, 7, 'checksum'), detectedAt: 'T' }, 'op-1');
    expect(e.type).toBe('STORAGE_FAILURE');
    expect(e.details).toMatchObject({
      operationId: 'op-1',
      reason: 'CORRUPT',
      outcome: 'not-written',
      key: null,
      streamId: 'c:a',
      generation: '2',
      fromPosition: '7',
      detail: 'checksum',
    });
    expect(corruptError({ ...mark('c:a', null, 0), detectedAt: 'T' }).details).toMatchObject({
      generation: null,
      fromPosition: '0',
      outcome: null,
    });
  });

  it('mark: the lowest position of a generation wins; a higher one answers with the existing mark and tells no one', async () => {
    const { s } = await store();
    const integrity = new Integrity(levelMarkStore(s.storage), silentLog);
    const told: CorruptMark[] = [];
    integrity.onMark((m) => told.push(m));
    expect(integrity.mark(mark('c:a', 1, 5, 'first')).details).toMatchObject({ fromPosition: '5', detail: 'first' });
    expect(integrity.mark(mark('c:a', 1, 5, 'same')).details).toMatchObject({ fromPosition: '5', detail: 'first' });
    expect(integrity.mark(mark('c:a', 1, 9, 'higher')).details).toMatchObject({ fromPosition: '5', detail: 'first' });
    expect(told.map((m) => m.detail)).toEqual(['first']);
    expect(integrity.mark(mark('c:a', 1, 2, 'lower')).details).toMatchObject({ fromPosition: '2', detail: 'lower' });
    expect(integrity.mark(mark('c:a', 2, 9, 'other generation')).details).toMatchObject({ generation: '2', fromPosition: '9' });
    expect(integrity.mark(mark('c:b', 1, 7, 'other stream')).details).toMatchObject({ streamId: 'c:b', fromPosition: '7' });
    expect(told.map((m) => m.detail)).toEqual(['first', 'lower', 'other generation', 'other stream']);
    expect(told[1]!.detectedAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(integrity.list().map((m) => `${m.streamId}/${m.generation}#${m.fromPosition} ${m.detail}`)).toEqual([
      'c:a/1#2 lower',
      'c:a/2#9 other generation',
      'c:b/1#7 other stream',
    ]);
  });

  it('marks are stored and found again by load(); a read-only store keeps them in memory only', async () => {
    let fail = false;
    const { dir, s } = await store(undefined, () => fail);
    const integrity = new Integrity(levelMarkStore(s.storage), silentLog);
    integrity.mark(mark('c:a', 1, 3, 'kept'));
    integrity.mark(mark('c:h', null, 0, 'head'));
    await waitFor(async () => {
      const again = new Integrity(levelMarkStore(s.storage), silentLog);
      await again.load();
      return again.list().length === 2;
    }, 'the marks to be stored');
    fail = true;
    await expect(s.storage.write([{ type: 'put', key: 'z/1', value: 1 }])).rejects.toThrow();
    expect(s.storage.readOnly).toBe(true);
    integrity.mark(mark('c:b', 1, 0, 'not stored'));
    expect(integrity.isMarked('c:b')).toBe(true);
    await s.storage.close();
    cleanup.splice(0);
    const { s: reopened } = await store(dir);
    const loaded = new Integrity(levelMarkStore(reopened.storage), silentLog);
    await loaded.load();
    expect(
      loaded
        .list()
        .map((m) => `${m.streamId}/${m.generation}#${m.fromPosition} ${m.detail}`)
        .sort(),
    ).toEqual(['c:a/1#3 kept', 'c:h/null#0 head']);
    rmSync(dir, { recursive: true, force: true });
  });

  it('persistNow stores what remember() only remembered; remember keeps an existing lower mark', async () => {
    const { s } = await store();
    const integrity = new Integrity(levelMarkStore(s.storage), silentLog);
    const a = integrity.remember(mark('c:a', 1, 4, 'a'));
    expect(integrity.remember(mark('c:a', 1, 6, 'higher'))).toBe(a);
    expect(integrity.remember(mark('c:a', 1, 4, 'same'))).toBe(a);
    const lower = integrity.remember(mark('c:a', 1, 1, 'lower'));
    expect(lower).toMatchObject({ fromPosition: 1, detail: 'lower' });
    const loadedBefore = new Integrity(levelMarkStore(s.storage), silentLog);
    await loadedBefore.load();
    expect(loadedBefore.list()).toEqual([]);
    await integrity.persistNow([]);
    await integrity.persistNow([lower, integrity.remember(mark('c:b', null, 0, 'head'))]);
    const loaded = new Integrity(levelMarkStore(s.storage), silentLog);
    await loaded.load();
    expect(loaded.list()).toEqual(integrity.list());
    expect(loaded.list()).toHaveLength(2);
  });

  it('assertWritable: a head mark, or a mark of the current or a later generation, blocks; an older one does not', async () => {
    const { s } = await store();
    const integrity = new Integrity(levelMarkStore(s.storage), silentLog);
    integrity.remember(mark('c:a', 2, 0, 'two'));
    integrity.assertWritable('c:a', 3);
    integrity.assertWritable('c:other', 1);
    expect(
      thrown(() => {
        integrity.assertWritable('c:a', 2, 'op-x');
      }).details,
    ).toMatchObject({
      reason: 'CORRUPT',
      generation: '2',
      operationId: 'op-x',
      outcome: 'not-written',
    });
    expect(
      thrown(() => {
        integrity.assertWritable('c:a', 1);
      }).details,
    ).toMatchObject({ generation: '2', operationId: null });
    integrity.remember(mark('c:h', null, 0, 'head'));
    expect(
      thrown(() => {
        integrity.assertWritable('c:h', 9);
      }).details,
    ).toMatchObject({ generation: null });
  });

  it('assertIntact and isMarked: any mark of the stream', async () => {
    const { s } = await store();
    const integrity = new Integrity(levelMarkStore(s.storage), silentLog);
    integrity.assertIntact('c:a');
    expect(integrity.isMarked('c:a')).toBe(false);
    integrity.remember(mark('c:a', 1, 0, 'old generation'));
    expect(integrity.isMarked('c:a')).toBe(true);
    expect(
      thrown(() => {
        integrity.assertIntact('c:a');
      }).details,
    ).toMatchObject({ streamId: 'c:a', detail: 'old generation' });
  });

  it('readLimit and assertReadable: the lowest mark of the generation; a head mark stops every read', async () => {
    const { s } = await store();
    const integrity = new Integrity(levelMarkStore(s.storage), silentLog);
    expect(integrity.readLimit('c:a', 1)).toBe(Infinity);
    integrity.remember(mark('c:a', 1, 5, 'one'));
    integrity.remember(mark('c:a', 2, 3, 'two'));
    expect(integrity.readLimit('c:a', 1)).toBe(5);
    expect(integrity.readLimit('c:a', 2)).toBe(3);
    expect(integrity.readLimit('c:a', 3)).toBe(Infinity);
    integrity.assertReadable('c:a', 1, 4);
    expect(
      thrown(() => {
        integrity.assertReadable('c:a', 1, 5);
      }).details,
    ).toMatchObject({
      generation: '1',
      fromPosition: '5',
      detail: 'one',
    });
    expect(
      thrown(() => {
        integrity.assertReadable('c:a', 2, 3);
      }).details,
    ).toMatchObject({ generation: '2', detail: 'two' });
    integrity.assertReadable('c:a', 3, 1_000);
    integrity.remember(mark('c:h', 1, 9, 'gen'));
    integrity.remember(mark('c:h', null, 4, 'head'));
    expect(integrity.readLimit('c:h', 1)).toBe(0);
    expect(integrity.readLimit('c:h', 7)).toBe(0);
    expect(
      thrown(() => {
        integrity.assertReadable('c:h', 7, 0);
      }).details,
    ).toMatchObject({ generation: null, detail: 'head' });
  });

  it('highestMarkedGeneration: 0 when unmarked, a head mark counts as 0', async () => {
    const { s } = await store();
    const integrity = new Integrity(levelMarkStore(s.storage), silentLog);
    expect(integrity.highestMarkedGeneration('c:a')).toBe(0);
    integrity.remember(mark('c:a', null, 0));
    expect(integrity.highestMarkedGeneration('c:a')).toBe(0);
    integrity.remember(mark('c:a', 3, 0));
    integrity.remember(mark('c:a', 2, 0));
    expect(integrity.highestMarkedGeneration('c:a')).toBe(3);
  });

  it('narrowHeadMark turns the head mark into one of the generation found, in memory and on disk', async () => {
    const { s } = await store();
    const integrity = new Integrity(levelMarkStore(s.storage), silentLog);
    integrity.narrowHeadMark('c:none', 1, 0); // no head mark: nothing happens
    expect(integrity.list()).toEqual([]);
    integrity.mark(mark('c:a', 1, 2, 'old'));
    integrity.mark(mark('c:a', null, 0, 'head checksum'));
    await waitFor(async () => {
      const l = new Integrity(levelMarkStore(s.storage), silentLog);
      await l.load();
      return l.list().length === 2;
    }, 'the marks to be stored');
    integrity.narrowHeadMark('c:a', 3, 7);
    const show = (i: Integrity) =>
      i
        .list()
        .map((m) => `${m.streamId}/${m.generation}#${m.fromPosition} ${m.detail}`)
        .sort();
    expect(show(integrity)).toEqual(['c:a/1#2 old', 'c:a/3#7 head checksum; head rebuilt from records']);
    integrity.assertWritable('c:a', 4);
    await waitFor(async () => {
      const l = new Integrity(levelMarkStore(s.storage), silentLog);
      await l.load();
      return JSON.stringify(show(l)) === JSON.stringify(show(integrity));
    }, 'the narrowed mark to replace the head mark on disk');
  });
});

describe('verified reads', () => {
  async function db(): Promise<ClassicLevel> {
    const dir = await makeTempDir('yl-core-vr-');
    const d = new ClassicLevel<string, string>(path.join(dir, 'db'));
    await d.open();
    cleanup.push(async () => {
      await d.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return d;
  }
  const recordKey = K.record('chat_c:agt_a', 2, 5);

  it('get: the value, undefined when absent, CORRUPT naming the key and where it is when the check fails', async () => {
    const d = await db();
    await d.put('a/1', encodeValue('a/1', '{"v":1}'));
    await d.put(recordKey, encodeValue(recordKey, '{"v":2}').replace('2', '3'));
    await d.put('a/2', encodeValue('a/2', 'not json'));
    const reads = new VerifiedReads(d);
    expect(reads.get('a/1')).toEqual({ v: 1 });
    expect(reads.get('a/9')).toBeUndefined();
    expect(thrown(() => reads.get(recordKey)).details).toMatchObject({
      reason: 'CORRUPT',
      key: recordKey,
      streamId: 'chat_c:agt_a',
      generation: '2',
      fromPosition: '5',
      detail: 'checksum mismatch',
    });
    // A matching checksum over text that is not JSON is corrupt too.
    expect(thrown(() => reads.get('a/2')).details).toMatchObject({ key: 'a/2', streamId: null, detail: 'checksum mismatch' });
  });

  it('entries end at the first bad value; entriesChecked report it and go on; both give the stored size', async () => {
    const d = await db();
    const good = encodeValue('b/1', '"one"');
    await d.put('b/1', good);
    await d.put('b/2', 'garbage');
    await d.put('b/3', encodeValue('b/3', '"three"'));
    await d.put('c/1', encodeValue('c/1', '"outside"'));
    const reads = new VerifiedReads(d);
    const seen: unknown[] = [];
    await expect(
      (async () => {
        for await (const e of reads.entries({ gte: 'b/', lt: 'b0' })) seen.push(e);
      })(),
    ).rejects.toMatchObject({ type: 'STORAGE_FAILURE', details: { key: 'b/2', reason: 'CORRUPT' } });
    expect(seen).toEqual([{ key: 'b/1', value: 'one', bytes: good.length }]);
    const checked: Array<{ key: string; value: unknown; error: string | null; bytes: number }> = [];
    for await (const e of reads.entriesChecked({ gte: 'b/', lt: 'b0' }))
      checked.push({ ...e, error: e.error && (e.error.details.key as string) });
    expect(checked).toEqual([
      { key: 'b/1', value: 'one', error: null, bytes: good.length },
      { key: 'b/2', value: undefined, error: 'b/2', bytes: 7 },
      { key: 'b/3', value: 'three', error: null, bytes: encodeValue('b/3', '"three"').length },
    ]);
    const keys: string[] = [];
    for await (const k of reads.keys({ gt: 'b/1', lt: 'b0' })) keys.push(k);
    expect(keys).toEqual(['b/2', 'b/3']);
    expect(await reads.lastKey({ gte: 'b/', lt: 'b0' })).toBe('b/3');
    expect(await reads.lastKey({ gte: 'x/', lt: 'x0' })).toBeUndefined();
    const reversed: string[] = [];
    for await (const e of reads.entriesChecked({ gte: 'b/', lt: 'b0', reverse: true, limit: 2 })) reversed.push(e.key);
    expect(reversed).toEqual(['b/3', 'b/2']);
  });

  it('a read of a closed store is SHUTTING_DOWN (nothing is known about the data), never CORRUPT', async () => {
    const dir = await makeTempDir('yl-core-vr-');
    cleanup.push(() => {
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    });
    const d = new ClassicLevel<string, string>(path.join(dir, 'db'));
    await d.open();
    await d.put('a/1', encodeValue('a/1', '1'));
    const reads = new VerifiedReads(d);
    const it = reads.entries({ gte: 'a/', lt: 'a0' });
    expect((await it.next()).value).toMatchObject({ key: 'a/1' });
    await d.close();
    const shutdown = { type: 'STORAGE_FAILURE', details: { reason: 'SHUTTING_DOWN', outcome: null } };
    expect(thrown(() => reads.get('a/1'))).toMatchObject(shutdown);
    await expect(it.next()).rejects.toMatchObject(shutdown);
    await expect(
      (async () => {
        for await (const k of reads.keys({ gte: 'a/', lt: 'a0' })) expect(k).toBe('never reached');
      })(),
    ).rejects.toMatchObject(shutdown);
    await expect(reads.lastKey({ gte: 'a/', lt: 'a0' })).rejects.toMatchObject(shutdown);
  });
});
