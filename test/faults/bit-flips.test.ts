// Bit flips in the files of a stopped daemon's store: LevelDB's write-ahead log (`db/*.log`),
// its table files (`db/*.ldb`) and a stream head value. The rule (test/helpers/integrity-checker.ts):
// every acknowledged append is readable and verifies, or its stream is reported corrupt —
// never silently absent, never overwritten, never called trimmed or "unknown".
//
// FAULT_TRIALS scales the number of trials (default 4 log + 8 table trials; `npm run
// test:crash` runs more); FAULT_SEED replays a schedule.

import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { AckLog, checkAcked, judgeTrial, type IntegrityReport, type TrialJudgement } from '../helpers/integrity-checker.js';
import { copyStore, storeDamage, type StoreDamage } from '../helpers/store-damage.js';
import { messages, setupChat, type ReadingChat, type StreamWriter } from '../helpers/reading-fixtures.js';
import { ok, uniq, type WireResponse, type Result } from '../helpers/wire-fixtures.js';
import { Prng, intFromEnv, seedFrom } from '../reliability/lib/prng.js';

const TRIALS = intFromEnv('FAULT_TRIALS', 1);
const SEED = seedFrom('FAULT_SEED');
const rng = new Prng(SEED);
/** The wait for a restart on a damaged store to be ready (or to refuse). */
const RESTART_TIMEOUT_MS = 30_000;
/** A trial: load, stop, flip, restart (up to RESTART_TIMEOUT_MS) and check. */
const TRIAL_TIMEOUT_MS = 90_000;
const daemons: DaemonProcess[] = [];
type Totals = {
  trials: number;
  acked: number;
  intact: number;
  /** Reported corrupt on a stream whose stored data really changed (store-damage.ts ground truth). */
  reportedDamaged: number;
  /** Reported corrupt on a stream LevelDB reads back unchanged. */
  falseAlarms: number;
  silentlyLost: number;
  refusedToStart: number;
  /** The daemon died in one of LevelDB's own assertions (SIGABRT) reading the damaged table. */
  abortedInLevelDb: number;
  lockedOut: number;
};
const zero = (): Totals => ({
  trials: 0,
  acked: 0,
  intact: 0,
  reportedDamaged: 0,
  falseAlarms: 0,
  silentlyLost: 0,
  refusedToStart: 0,
  abortedInLevelDb: 0,
  lockedOut: 0,
});
const byKind: Record<string, Totals> = { log: zero(), table: zero(), head: zero() };
let totals = byKind.log!;

afterAll(async () => {
  for (const d of daemons) await d.cleanup();
  for (const [kind, t] of Object.entries(byKind)) {
    const reported = t.reportedDamaged + t.falseAlarms;
    const precision = reported === 0 ? 'n/a' : (t.reportedDamaged / reported).toFixed(3);
    console.log(
      `[bit-flips] ${kind}: seed=${SEED} trials=${t.trials} acked=${t.acked} intact=${t.intact} reportedDamaged=${t.reportedDamaged} falseAlarms=${t.falseAlarms} precision=${precision} refusedToStart=${t.refusedToStart} abortedInLevelDb=${t.abortedInLevelDb} agentsLockedOut=${t.lockedOut} lostSilently=${t.silentlyLost}`,
    );
  }
});

interface Loaded {
  d: DaemonProcess;
  chats: ReadingChat[];
  log: AckLog;
}

/** A daemon with two chats whose four streams each took `ops` interleaved appends. */
async function loaded(ops: number): Promise<Loaded> {
  // A process of its own: a flipped bit may abort LevelDB (SIGABRT) or refuse the start (its exit code).
  const d = await DaemonProcess.start({ process: true });
  daemons.push(d);
  const admin = await d.connectAs();
  const chats = [await setupChat(d, admin), await setupChat(d, admin)];
  const writers = chats.flatMap((c) => [c.wa, c.wb]);
  const log = new AckLog();
  for (let i = 0; i < ops; i++) {
    await Promise.all(
      writers.map(async (w, j) => {
        log.record(await w.tryAppend(messages(`m${i}w${j}`, 1 + ((i + j) % 3), 40)));
      }),
    );
  }
  return { d, chats, log };
}

function writerOf(chats: ReadingChat[], streamId: string): StreamWriter {
  for (const c of chats) {
    if (c.wa.streamId === streamId) return c.wa;
    if (c.wb.streamId === streamId) return c.wb;
  }
  throw new Error(`no writer for ${streamId}`);
}

/** One append as the stream's author at whatever position the daemon says is next. */
async function probe(chats: ReadingChat[], streamId: string): Promise<WireResponse> {
  const w = writerOf(chats, streamId);
  const st = await w.client.call('streams.get', { streamId });
  return w.client.call('streams.append', {
    streamId,
    coordinatorToken: w.token,
    generation: st.result?.generation ?? w.generation,
    expectedPosition: st.result?.nextPosition ?? w.next,
    operationId: uniq('probe'),
    records: messages(uniq('probe'), 1),
  });
}

/** Copies the stopped daemon's store aside, for the ground truth of what the fault changed. */
function keepPristine(l: Loaded): string {
  return copyStore(path.join(l.d.dataDir, 'db'), path.join(l.d.dir, `pristine-${uniq('db')}`));
}

/** What the fault really changed: the pristine copy against a copy of the damaged store. */
function damageSince(l: Loaded, pristine: string): Promise<StoreDamage> {
  return storeDamage(pristine, copyStore(path.join(l.d.dataDir, 'db'), path.join(l.d.dir, `flipped-${uniq('db')}`)));
}

/**
 * classic-level does not let us ask LevelDB to verify block checksums on reads, and LevelDB
 * 1.20 keeps its debug assertions: a flipped bit in a key length can abort the process
 * (SIGABRT, `dbformat.h … Assertion`) when it reads that block, at startup or on a later read.
 * That is loud — nothing is answered, nothing silently lost — and is counted apart; see
 * docs/reliability.md ("How a fault trial is scored").
 */
function abortedInLevelDb(d: DaemonProcess): boolean {
  return d.exitInfo?.signal === 'SIGABRT' && /leveldb.*Assertion/s.test(d.stderr);
}

/** The outcome of a trial whose daemon aborted in LevelDB: counted, not judged. */
function aborted(refusedToStart: boolean): { report: null; judgement: TrialJudgement } {
  totals.abortedInLevelDb++;
  return { report: null, judgement: { intact: 0, reportedDamaged: 0, falseAlarms: 0, refusedToStart, failures: [] } };
}

/**
 * Restart on the damaged store, check the rule and judge the trial against `damage`; a daemon
 * that refuses to start lost nothing silently, but is counted apart and must have had a reason.
 */
async function restartAndCheck(
  l: Loaded,
  damage: StoreDamage,
  unlocalisedLoss: boolean,
): Promise<{ report: IntegrityReport | null; judgement: TrialJudgement }> {
  totals.trials++;
  totals.acked += l.log.acked.length;
  const streamIds = l.chats.flatMap((c) => [c.streamA, c.streamB]);
  const judged = (report: IntegrityReport | null) => {
    const judgement = judgeTrial({ report, damage, streamIds, unlocalisedLoss });
    totals.intact += judgement.intact;
    totals.reportedDamaged += judgement.reportedDamaged;
    totals.falseAlarms += judgement.falseAlarms;
    if (judgement.refusedToStart) totals.refusedToStart++;
    return { report, judgement };
  };
  try {
    // Generous: the crash suite runs beside this one on 2 cores, and a start on a damaged
    // store reads and checks more before it is ready. Not ready in time is a failure below.
    await l.d.restart(RESTART_TIMEOUT_MS);
  } catch (err) {
    if (abortedInLevelDb(l.d)) return aborted(true);
    // Refusing to start with one clear line is a report, not a silent loss (judgeTrial says
    // whether the store gave a reason to). A start that never got ready is neither.
    expect(
      l.d.exitInfo?.code,
      `refused to start: ${l.d.stderr.trim().split('\n').at(-1) ?? ''} (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`,
    ).toBe(76);
    expect(l.d.stderr.trim().split('\n').at(-1)).toMatch(/corrupt/i);
    return judged(null);
  }
  // A flip can also hit the token index: that agent cannot say hello (loud, not a lost
  // append; `yello doctor` names the damaged index). Its stream is checked as admin only.
  const locked = new Set<string>();
  for (const c of l.chats) {
    for (const [agent, w] of [
      [c.alice, c.wa],
      [c.bob, c.wb],
    ] as const) {
      try {
        agent.client = await l.d.connectAs(agent.token);
        w.client = agent.client;
      } catch {
        locked.add(w.streamId);
      }
    }
  }
  totals.lockedOut += locked.size;
  let report: IntegrityReport;
  try {
    const admin = await l.d.connectAs();
    report = await checkAcked(admin, l.log.acked, (s) =>
      locked.has(s) ? Promise.resolve(null) : (probe(l.chats, s) as Promise<WireResponse<Result<'streams.append'>>>),
    );
  } catch (err) {
    // A daemon that dies or hangs up while it is read is the finding: say how it went.
    await l.d.waitExit(2_000).catch(() => undefined);
    if (abortedInLevelDb(l.d)) return aborted(false);
    throw new Error(
      `${err instanceof Error ? err.message : String(err)}; daemon ${l.d.exitInfo ? `exited ${JSON.stringify(l.d.exitInfo)}` : 'still running'}\nstderr: ${l.d.stderr.slice(-3000)}\nstdout: ${l.d.stdoutLines.slice(-15).join('\n')}`,
      { cause: err },
    );
  }
  totals.silentlyLost += report.violations.length;
  return judged(report);
}

function flipBit(file: string, offset: number, bit: number): void {
  const bytes = readFileSync(file);
  bytes[offset] = bytes[offset]! ^ (1 << bit);
  writeFileSync(file, bytes);
}

const filesOf = (dir: string, ext: string) =>
  readdirSync(dir)
    .filter((n) => n.endsWith(ext))
    .map((n) => path.join(dir, n))
    .filter((f) => statSync(f).size > 0);

describe('a flipped bit in the write-ahead log of a stopped daemon', () => {
  for (let t = 0; t < 4 * TRIALS; t++) {
    it(
      `never loses an acknowledged append silently (trial ${t + 1}, seed ${SEED})`,
      async () => {
        totals = byKind.log!;
        const l = await loaded(12);
        await l.d.stop();
        const logs = filesOf(path.join(l.d.dataDir, 'db'), '.log');
        expect(logs.length, 'LevelDB keeps recent writes in its log until the next open').toBeGreaterThan(0);
        const file = rng.pick(logs);
        const pristine = keepPristine(l);
        // Skip the first 4 KiB (agents, grants, chats): the flip hits appends.
        const size = statSync(file).size;
        flipBit(file, rng.range(Math.min(4096, size - 1), size - 1), rng.int(8));
        const { report, judgement } = await restartAndCheck(l, await damageSince(l, pristine), true);
        expect(judgement.failures, `seed ${SEED}`).toEqual([]);
        if (report) expect(report.intact + report.reportedCorrupt).toBe(report.acked);
      },
      TRIAL_TIMEOUT_MS,
    );
  }
});

describe('a flipped bit in a table file', () => {
  for (let t = 0; t < 8 * TRIALS; t++) {
    it(
      `never loses or changes an acknowledged append silently (trial ${t + 1}, seed ${SEED})`,
      async () => {
        totals = byKind.table!;
        const l = await loaded(6);
        await l.d.stop();
        // Move everything into table files, as a long-running store would have it.
        const db = new ClassicLevel(path.join(l.d.dataDir, 'db'));
        await db.open();
        await db.compactRange('\x00', '\xff');
        await db.close();
        const tables = filesOf(path.join(l.d.dataDir, 'db'), '.ldb');
        expect(tables.length).toBeGreaterThan(0);
        const file = rng.pick(tables);
        const pristine = keepPristine(l);
        flipBit(file, rng.int(statSync(file).size), rng.int(8));
        const { judgement } = await restartAndCheck(l, await damageSince(l, pristine), false);
        expect(judgement.failures, `seed ${SEED}`).toEqual([]);
      },
      TRIAL_TIMEOUT_MS,
    );
  }
});

describe('a changed stream head', () => {
  it('never lets new appends overwrite acknowledged positions (one bit: nextPosition 3x → 2x)', async () => {
    totals = byKind.head!;
    const l = await loaded(16);
    const stream = l.chats[0]!.streamA;
    const before = ok(await l.chats[0]!.alice.client.call('streams.get', { streamId: stream }));
    expect(before.nextPosition).toMatch(/^3\d$/);
    await l.d.stop();
    const pristine = keepPristine(l);
    const db = new ClassicLevel<string, string>(path.join(l.d.dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    // The head's nextPosition lives in its tail (`h/`, [generation, nextPosition, …]) since
    // format 2; in 0.1.0 it was in the head itself (`s/`, …"nextPosition":N…). Flip whichever holds it.
    const tailKey = `h/${stream}`;
    const key = (await db.get(tailKey)) !== undefined ? tailKey : `s/${stream}`;
    const value = (await db.get(key))!;
    const field = key === tailKey ? `[1,${before.nextPosition},` : `"nextPosition":${before.nextPosition}`;
    // One flipped bit in the tens digit: "3" (0x33) → "2" (0x32), still a valid number.
    const at = value.indexOf(field) + field.length - before.nextPosition.length - (key === tailKey ? 1 : 0);
    expect(value[at]).toBe('3');
    await db.put(key, value.slice(0, at) + '2' + value.slice(at + 1), { sync: true });
    await db.close();
    const { report, judgement } = await restartAndCheck(l, await damageSince(l, pristine), false);
    expect(judgement.failures).toEqual([]);
    expect(report!.corruptStreams).toContain(stream);
    expect(judgement.reportedDamaged).toBeGreaterThan(0);
  });
});
