// The fault suite's own checker (test/helpers/integrity-checker.ts judgeTrial and
// test/helpers/store-damage.ts): a daemon that flags everything, or refuses to start, must fail
// a trial, not pass as one that found the damage; false alarms are counted apart from damage
// found. storeDamage is checked on a real LevelDB.

import { rm } from 'node:fs/promises';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../helpers/daemon-process.js';
import { judgeTrial, type IntegrityReport } from '../helpers/integrity-checker.js';
import { copyStore, damagedStreams, storeDamage, type StoreDamage } from '../helpers/store-damage.js';

const STREAMS = ['chat_a:agt_1', 'chat_a:agt_2', 'chat_b:agt_3', 'chat_b:agt_4'];
const record = (streamId: string, position: number) => `r/${streamId}/0000000000000001/${String(position).padStart(16, '0')}`;

/** A report in which every stream's 12 appends were reported corrupt (nothing intact). */
function flagsEverything(): IntegrityReport {
  return {
    acked: 48,
    intact: 0,
    reportedCorrupt: 48,
    reportedByStream: Object.fromEntries(STREAMS.map((s) => [s, 12])),
    violations: [],
    corruptStreams: [...STREAMS],
  };
}

/** One stream reported (its 12 appends), the other 36 appends intact. */
function flagsOne(streamId: string): IntegrityReport {
  return { acked: 48, intact: 36, reportedCorrupt: 12, reportedByStream: { [streamId]: 12 }, violations: [], corruptStreams: [streamId] };
}

const oneRecordChanged: StoreDamage = { unreadable: false, changedKeys: [record(STREAMS[0]!, 3)] };
const nothingChanged: StoreDamage = { unreadable: false, changedKeys: [] };

describe('judgeTrial', () => {
  it('fails a daemon that flags every stream when one record of one stream changed, counting the rest as false alarms', () => {
    const j = judgeTrial({ report: flagsEverything(), damage: oneRecordChanged, streamIds: STREAMS, unlocalisedLoss: false });
    expect(j.failures).toHaveLength(3);
    expect(j).toMatchObject({ intact: 0, reportedDamaged: 12, falseAlarms: 36, refusedToStart: false });
  });

  it('fails a daemon that flags everything when nothing changed, even after a log loss it cannot localise', () => {
    const j = judgeTrial({ report: flagsEverything(), damage: nothingChanged, streamIds: STREAMS, unlocalisedLoss: true });
    expect(j.failures.length).toBeGreaterThan(0);
    expect(j.falseAlarms).toBe(48);
    expect(j.reportedDamaged).toBe(0);
  });

  it('counts, without failing, the streams a log loss leaves suspect though their own data survived', () => {
    const j = judgeTrial({ report: flagsEverything(), damage: oneRecordChanged, streamIds: STREAMS, unlocalisedLoss: true });
    expect(j.failures).toEqual([]);
    expect(j).toMatchObject({ reportedDamaged: 12, falseAlarms: 36 });
  });

  it('fails a daemon that refuses to start on a store LevelDB reads, and accepts a refusal when LevelDB cannot read it', () => {
    const refusedReadable = judgeTrial({ report: null, damage: oneRecordChanged, streamIds: STREAMS, unlocalisedLoss: false });
    expect(refusedReadable.refusedToStart).toBe(true);
    expect(refusedReadable.failures).toHaveLength(1);
    const refusedNothing = judgeTrial({ report: null, damage: nothingChanged, streamIds: STREAMS, unlocalisedLoss: true });
    expect(refusedNothing.failures).toHaveLength(1);
    const refusedUnreadable = judgeTrial({
      report: null,
      damage: { unreadable: true, changedKeys: [] },
      streamIds: STREAMS,
      unlocalisedLoss: false,
    });
    expect(refusedUnreadable).toMatchObject({ refusedToStart: true, failures: [] });
    const refusedFormat = judgeTrial({
      report: null,
      damage: { unreadable: false, changedKeys: ['meta/format'] },
      streamIds: STREAMS,
      unlocalisedLoss: false,
    });
    expect(refusedFormat.failures).toEqual([]);
  });

  it('passes a daemon that reports exactly the damaged stream, and keeps violations as failures', () => {
    const j = judgeTrial({ report: flagsOne(STREAMS[0]!), damage: oneRecordChanged, streamIds: STREAMS, unlocalisedLoss: false });
    expect(j).toEqual({ intact: 36, reportedDamaged: 12, falseAlarms: 0, refusedToStart: false, failures: [] });
    const lost = { ...flagsOne(STREAMS[0]!), violations: ['x: acknowledged but silently absent'] };
    expect(judgeTrial({ report: lost, damage: oneRecordChanged, streamIds: STREAMS, unlocalisedLoss: false }).failures).toEqual([
      'x: acknowledged but silently absent',
    ]);
  });

  it('gives the daemon the benefit of the doubt when a shared key (a grant, a chat, a token) changed', () => {
    expect(damagedStreams({ unreadable: false, changedKeys: ['g/agt_1/agt_2'] }, STREAMS)).toEqual(new Set(STREAMS));
    expect(damagedStreams({ unreadable: false, changedKeys: [record(STREAMS[1]!, 0), `h/${STREAMS[2]}`] }, STREAMS)).toEqual(
      new Set([STREAMS[1], STREAMS[2]]),
    );
  });
});

describe('storeDamage', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('names every key whose value changed, vanished or appeared, reading copies with LevelDB alone', async () => {
    const dir = await makeTempDir('yl-damage-');
    dirs.push(dir);
    const dbDir = path.join(dir, 'db');
    const db = new ClassicLevel<string, string>(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    await db.batch(Array.from({ length: 50 }, (_, i) => ({ type: 'put' as const, key: record(STREAMS[i % 4]!, i), value: `v${i}` })));
    await db.close();
    const pristine = copyStore(dbDir, path.join(dir, 'pristine'));
    const same = await storeDamage(pristine, copyStore(dbDir, path.join(dir, 'same')));
    expect(same).toEqual({ unreadable: false, changedKeys: [] });

    await db.open();
    await db.batch([
      { type: 'put', key: record(STREAMS[0]!, 0), value: 'changed' },
      { type: 'del', key: record(STREAMS[1]!, 1) },
      { type: 'put', key: 'r/stray', value: 'new' },
    ]);
    await db.close();
    const damage = await storeDamage(pristine, copyStore(dbDir, path.join(dir, 'flipped')));
    expect(damage).toEqual({ unreadable: false, changedKeys: [record(STREAMS[0]!, 0), record(STREAMS[1]!, 1), 'r/stray'].sort() });
  });
});
