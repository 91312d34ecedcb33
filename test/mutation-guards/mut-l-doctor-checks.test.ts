// Kills three mutants of src/daemon/store/leveldb/doctor-checks.ts that r1-arguments.md
// ("The r1 survivors matched to their arguments") calls killable, and that
// mut-c-doctor-checks.test.ts lets live:
// - 71:15 `damaged = true` → `false`: `damaged` only decides whether doctor.ts marks the stream
//   after `checkRecord`. Every mark asserted so far comes from a gap or a checksum failure,
//   which doctor.ts marks itself, and "a healthy store marks nothing" marks nothing either way.
//   Here a record's own problem (its content no longer matching its hash) must mark the stream.
// - 86:28 `scan.expect === null` → `true`: a trim may leave the first retained record in the
//   middle of its operation, and only the first record of a generation may continue it. The
//   current generation's records below its start are skipped by doctor.ts before this check,
//   a sealed generation's are not, and no test kept such a record in a sealed generation.
// - 119:9 `scan.lastCreatedAt !== null` → `true`: with no createdAt before it, a string compared
//   with null is compared as a number, so a createdAt of "-1" is "less" than null. The existing
//   createdAt test edits a later message, never a generation's first.
// In process, on a real LevelDB in a temp dir (test/helpers/in-process-store.ts), like
// mut-c-doctor-checks.test.ts: values are edited through Storage, so their checksums are valid
// and only the check in question can notice.

import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { checkStore } from '../../src/daemon/store/leveldb/doctor.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import type { DoctorProblem } from '../../src/shared/types.js';
import { appendOperation, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

const opened: InProcessStore[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close().catch(() => {});
});

type Writer = Awaited<ReturnType<typeof chatWithWriter>>;

interface World {
  s: InProcessStore;
  w: Writer;
  /** The operation ids in append order. */
  ops: string[];
  rec: (position: number, generation?: number) => string;
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the stored shape
  get: <T>(key: string) => T;
  put: (key: string, value: unknown) => Promise<void>;
  doctor: (mark?: boolean) => ReturnType<typeof checkStore>;
}

/**
 * alice's stream: the claim's fence at 0, then one operation of `size` messages per entry of
 * `shape` (the default: 1 at 1, 2..4 and 5; nextPosition 6).
 */
async function world(shape: number[] = [1, 3, 1]): Promise<World> {
  const s = await openInProcess();
  opened.push(s);
  const w = await chatWithWriter(s);
  const ops: string[] = [];
  for (const [i, size] of shape.entries()) ops.push(await appendOperation(s, w, size, `m${i}`));
  return {
    s,
    w,
    ops,
    rec: (position, generation = 1) => K.record(w.streamId, generation, position),
    get: <T>(key: string) => s.store.storage.get<T>(key)!,
    put: (key, value) => s.store.storage.write([{ type: 'put', key, value }]),
    doctor: (mark = false) => checkStore(s.store.storage, s.integrity, new Signer(path.join(s.dir, 'keys')), { mark }),
  };
}

/** The compact message record at `position` (generation 1), changed by `edit`, stored back. */
async function editCompact(x: World, position: number, edit: (r: unknown[]) => void): Promise<void> {
  const r = [...x.get<unknown[]>(x.rec(position))];
  edit(r);
  await x.put(x.rec(position), r);
}

const P = (
  kind: string,
  key: string | null,
  streamId: string | null,
  generation: string | null,
  position: string | null,
  detail: string,
): DoctorProblem => ({ kind, key, streamId, generation, position, detail });

const kidOf = (x: World, position: number) => x.get<unknown[]>(x.rec(position))[6] as string;

describe('doctor checks: a record’s own problem, a sealed trimmed generation, a first createdAt', () => {
  it('a record whose content no longer matches its hash marks the stream from that record', async () => {
    const x = await world();
    const S = x.w.streamId;
    await editCompact(x, 3, (r) => (r[4] = 'changed'));
    const r = await x.doctor(true);
    expect(r.problems).toEqual([P('record', x.rec(3), S, '1', '3', 'contentSha256 does not match the content')]);
    // No gap and no checksum failure: only the record's own check can have asked for the mark.
    expect(r.corruptStreams.map((c) => [c.streamId, c.generation, c.fromPosition])).toEqual([[S, '1', '3']]);
    expect(x.s.integrity.list()).toHaveLength(1);
  });

  it('a sealed generation: a record a crashed trim left below its start is not damage, and nothing is marked', async () => {
    // Operation 1 holds 2..4. The trim to 4 cuts it in two; record 3 is put back with its
    // stored value (what a trim of over 10,000 records cut off by a crash after its first delete
    // chunk leaves), and the reset seals generation 1 with its start at 4 before any compaction
    // removes record 3 again (compaction sweeps only the current generation).
    const x = await world([1, 3, 1]);
    const S = x.w.streamId;
    const raw3 = x.get<unknown>(x.rec(3));
    expect(await x.s.streams.trim(S, 4, true)).toEqual({ firstPosition: '4' });
    await x.put(x.rec(3), raw3);
    await x.s.streams.reset(S, 'test');
    expect(x.s.streams.get(x.w.alice, S)).toMatchObject({ generation: '2', firstPosition: '0', nextPosition: '0' });
    // Record 3 is trimmed already (reads of generation 1 fail closed below 4), as a leftover of
    // the current generation is: the doctor reported it and the healthy record 4 after it, and
    // with marking on (the default) marked the retained generation corrupt.
    const r = await x.doctor(true);
    expect(r.problems).toEqual([]);
    expect(r.corruptStreams).toEqual([]);
    const batch = await x.s.streams.read(x.w.bob, { streamId: S, generation: 1, fromPosition: 4, limit: 10, maxBytes: PAGE_BYTES });
    expect(batch.records.map((rec) => rec.position)).toEqual(['4', '5']);
  });

  it('the sealed generation without the leftover record: the record at its start continues the trimmed operation', async () => {
    // The same store without record 3 put back: record 4 is the generation's first and healthy.
    const x = await world([1, 3, 1]);
    const S = x.w.streamId;
    await x.s.streams.trim(S, 4, true);
    await x.s.streams.reset(S, 'test');
    expect((await x.doctor()).problems).toEqual([]);
  });

  it('a first message with createdAt "-1" fails its signature only; nothing before it to go backwards from', async () => {
    const x = await world([2]);
    const S = x.w.streamId;
    // Position 0 is the claim's fence (no createdAt checked); 1 is the generation's first message.
    await editCompact(x, 1, (r) => (r[8] = '-1'));
    expect((await x.doctor()).problems).toEqual([P('record', x.rec(1), S, '1', '1', `the signature does not verify (kid ${kidOf(x, 1)})`)]);
  });
});
