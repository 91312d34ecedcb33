// Failover at the port level (issue 24 item 4): a primary with a synchronous standby, writers
// appending without pause through PostgresStreams over a multi-host URL (both hosts,
// target_session_attrs=read-write); each cycle SIGKILLs the primary's postmaster (its whole
// process group: a power cut), promotes the standby, and rebuilds the old primary as the new
// synchronous standby (pg_basebackup from the promoted one, same port) so the next cycle can kill
// again. Both servers name the standby in synchronous_standby_names from the start, so a
// promoted standby accepts no commit until its own standby streams (what Patroni's
// synchronous_mode_strict does): an acknowledged append is always on two servers.
//
// After each promotion the history checker (port-history.ts) reads everything back: every
// acknowledged append present with its exact content and checksum, every stream contiguous,
// every unknown outcome settled by operationStatus after recover() and wholly present or wholly
// absent. 0 lost over FAILOVER_KILLS kills (default 1, a token run inside `npm test`;
// `npm run test:failover` runs 20).
//
// The second test plants a defect and shows the checker catches it: writers that acknowledge
// at admission instead of after the commit (the checker must find acknowledged appends lost),
// then rows damaged behind the port's back (a gap, a checksum that fails).
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { openPool, resolveStoreUrl, type Sql } from '../../src/daemon/store/postgres/connection.js';
import { migrate } from '../../src/daemon/store/postgres/migrate.js';
import { PostgresStreams } from '../../src/daemon/store/postgres/stream-store.js';
import { newStreamMeta } from '../../src/daemon/store/stream-meta.js';
import { PgCluster, pgAvailable, type PgPair } from '../helpers/pg-cluster.mjs';
import { intFromEnv } from '../reliability/lib/prng.js';
import { PortHistory, type CheckResult } from './port-history.js';

const childPath = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/writer-child.mjs');
const KILLS = intFromEnv('FAILOVER_KILLS', 1);
const WRITERS = 3;
const STREAMS_PER_WRITER = 2;
/** Appends each writer acknowledges on the current primary before it is killed. */
const ACKS_BEFORE_KILL = 10;
const STANDBY = 'yello_standby';
const T = '2026-12-02T06:00:00.000Z';

const pairs: PgPair[] = [];
const pools: Sql[] = [];
afterAll(async () => {
  for (const p of pools) await p.end({ timeout: 1 }).catch(() => {});
  for (const p of pairs) await p.stop();
}, 60_000);

function pctl(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

interface Run {
  kills: number;
  history: PortHistory;
  checks: CheckResult[];
  recoverMs: number[];
  promoteMs: number[];
  rebuildMs: number[];
  cycleMs: number[];
  writerRestarts: number;
  streamIds: string[];
  url: string;
  pair: PgPair;
}

/** Writer processes that keep appending; one that dies is replaced and settles what it left open. */
class Writers {
  readonly #procs = new Map<string, ChildProcess>();
  readonly lastAck = new Map<string, number>();
  readonly acks = new Map<string, number>();
  restarts = 0;
  #incarnation = 0;
  #stopping = false;

  constructor(
    readonly url: string,
    readonly history: PortHistory,
    readonly streams: Map<string, string[]>,
    readonly env: NodeJS.ProcessEnv,
  ) {}

  start(): void {
    for (const name of this.streams.keys()) this.#spawn(name, []);
  }

  #spawn(name: string, settle: Array<[string, string]>): void {
    const proc = spawn(
      process.execPath,
      [childPath, this.url, name, String(this.#incarnation++), (this.streams.get(name) ?? []).join(','), JSON.stringify(settle)],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...this.env },
      },
    );
    this.#procs.set(name, proc);
    let buffer = '';
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const l of lines) {
        if (process.env.FAILOVER_DEBUG && !/^(try|ack) /.test(l)) process.stderr.write(`[${name}] ${l}\n`);
        this.history.line(l, Date.now(), (w, at) => {
          this.lastAck.set(w, at);
          this.acks.set(w, (this.acks.get(w) ?? 0) + 1);
        });
      }
    });
    if (process.env.FAILOVER_DEBUG) proc.stderr.on('data', (d: Buffer) => process.stderr.write(`[${name}] ${d.toString()}`));
    else proc.stderr.resume();
    proc.once('exit', (code, signal) => {
      if (this.#stopping) return;
      if (process.env.FAILOVER_DEBUG) process.stderr.write(`[${name}] exited ${code ?? signal}\n`);
      // postgres.js 3.4.9 may crash on a session lost in a transaction (driver-connection-loss.test.ts).
      this.restarts++;
      this.#spawn(name, this.history.unsettled(name));
    });
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all(
      [...this.#procs.values()].map(async (p) => {
        if (p.exitCode !== null || p.signalCode !== null) return;
        const exited = new Promise((r) => p.once('exit', r));
        p.kill('SIGKILL');
        await exited;
      }),
    );
  }
}

async function until(what: string, ms: number, cond: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function failoverRun(kills: number, options: { env?: NodeJS.ProcessEnv; asyncLaggingStandby?: boolean } = {}): Promise<Run> {
  const lagging = options.asyncLaggingStandby === true;
  const pair = await PgCluster.startPair({
    config: [
      ...(lagging ? [] : [`synchronous_standby_names = '${STANDBY}'`]),
      // A standby whose primary is gone retries every 5 s by default: the promotion and the rebuilt
      // standby's first connection would wait for it.
      'wal_retrieve_retry_interval = 100ms',
    ],
  });
  pairs.push(pair);
  if (lagging) {
    // An asynchronous standby (what docs/multi-host.md says loses acknowledged appends).
    await pair.primary.psql("alter system set synchronous_standby_names = ''");
    await pair.primary.psql('select pg_reload_conf()');
  }
  const url = pair.url();
  const setup = openPool(resolveStoreUrl(url), { max: 1 });
  await migrate(setup);
  const port = await PostgresStreams.open(setup);
  const streams = new Map<string, string[]>();
  for (let w = 0; w < WRITERS; w++) {
    const ids: string[] = [];
    for (let s = 0; s < STREAMS_PER_WRITER / 2; s++) {
      const chat = `c${w}x${s}`;
      await port.createStreams([newStreamMeta(chat, 'alice', 'bob', T), newStreamMeta(chat, 'bob', 'alice', T)]);
      ids.push(`${chat}:alice`, `${chat}:bob`);
    }
    streams.set(`w${w}`, ids);
  }
  await port.close();
  await setup.end({ timeout: 1 });

  const history = new PortHistory();
  const writers = new Writers(url, history, streams, options.env ?? {});
  const run: Run = {
    kills: 0,
    history,
    checks: [],
    recoverMs: [],
    promoteMs: [],
    rebuildMs: [],
    cycleMs: [],
    writerRestarts: 0,
    streamIds: [...streams.values()].flat(),
    url,
    pair,
  };
  let primary = pair.primary;
  let standby = pair.standby;
  writers.start();
  try {
    for (let k = 0; k < kills; k++) {
      const cycleStart = Date.now();
      const base = new Map([...streams.keys()].map((w) => [w, writers.acks.get(w) ?? 0]));
      await until(`${ACKS_BEFORE_KILL} acknowledged appends of every writer`, 60_000, () =>
        [...streams.keys()].every((w) => (writers.acks.get(w) ?? 0) - (base.get(w) ?? 0) >= ACKS_BEFORE_KILL),
      );
      if (lagging) {
        // The standby stops receiving (its WAL receiver stopped) while the primary goes on
        // acknowledging alone; the primary dies before the standby catches up.
        const receiver = Number(await standby.psql('select pid from pg_stat_wal_receiver'));
        const startupBefore = await standby.psql("select pid from pg_stat_activity where backend_type = 'startup'");
        process.kill(receiver, 'SIGSTOP');
        try {
          const lagFrom = new Map([...streams.keys()].map((w) => [w, writers.acks.get(w) ?? 0]));
          await until(`${ACKS_BEFORE_KILL} appends of every writer acknowledged by the primary alone`, 60_000, () =>
            [...streams.keys()].every((w) => (writers.acks.get(w) ?? 0) - (lagFrom.get(w) ?? 0) >= ACKS_BEFORE_KILL),
          );
          await primary.kill('SIGKILL');
        } finally {
          // Killed, not continued: WAL the primary sent into the receiver's socket buffer before it
          // died would otherwise still arrive. The standby restarts its recovery from what it has.
          process.kill(receiver, 'SIGKILL');
        }
        // A killed WAL receiver is a crashed child: the standby's postmaster restarts its recovery.
        // A promotion asked for before the new startup process runs is lost (the postmaster
        // forwards it only to a running one) and pg_ctl promote waits out its 30 s (CI,
        // 2026-12-07), so wait for the new startup process first.
        await until('the standby recovering again after its WAL receiver was killed', 60_000, async () => {
          const now = await standby.psql("select pid from pg_stat_activity where backend_type = 'startup'").catch(() => '');
          return now !== '' && now !== startupBefore;
        });
      }
      const killedAt = Date.now();
      if (process.env.FAILOVER_DEBUG) process.stderr.write(`[harness] kill ${k + 1}: ${JSON.stringify([...writers.acks])}\n`);
      if (!lagging) await primary.kill('SIGKILL');
      await standby.promote();
      const promotedAt = Date.now();
      [primary, standby] = [standby, primary];
      await standby.rebuildAsStandbyOf(primary, STANDBY);
      const rebuiltAt = Date.now();
      if (process.env.FAILOVER_DEBUG)
        process.stderr.write(`[harness] promoted in ${promotedAt - killedAt} ms, rebuilt in ${rebuiltAt - promotedAt} ms\n`);
      await until('an acknowledged append of every writer after the kill', 60_000, () =>
        [...streams.keys()].every((w) => (writers.lastAck.get(w) ?? 0) > killedAt),
      );
      const recoveredAt = Math.max(...[...streams.keys()].map((w) => writers.lastAck.get(w) ?? 0));
      run.kills++;
      run.promoteMs.push(promotedAt - killedAt);
      run.rebuildMs.push(rebuiltAt - promotedAt);
      run.recoverMs.push(recoveredAt - killedAt);
      const check = openPool(resolveStoreUrl(url), { max: 2 });
      pools.push(check);
      const c = await history.check(check, run.streamIds, { final: false });
      run.checks.push(c);
      // One line a cycle, so that a run that stops early (a writer stalled) still shows what held.
      console.log(
        `[failover] kill ${k + 1}: acknowledged ${c.acknowledged} lost ${c.lost.length} not whole ${c.notWhole.length} discontinuities ${c.discontinuities.length} promote ${promotedAt - killedAt} ms rebuild ${rebuiltAt - promotedAt} ms recover ${recoveredAt - killedAt} ms hung ${history.hung.length}`,
      );
      await check.end({ timeout: 1 });
      run.cycleMs.push(Date.now() - cycleStart);
    }
  } finally {
    await writers.stop();
    run.writerRestarts = writers.restarts;
  }
  // The writers are gone; once their sessions are too, what the tables hold is final, and the
  // appends they left in flight are settled the way a restarted writer would (operationStatus).
  await until(
    'the writers’ sessions to end',
    30_000,
    async () => (await primary.psql(`select count(*) from pg_stat_activity where application_name = 'yellod'`)) === '0',
  );
  const final = openPool(resolveStoreUrl(url), { max: 2 });
  pools.push(final);
  const settler = await PostgresStreams.open(final);
  for (const e of history.ops.values())
    if (e.state === 'tried' || e.state === 'unknown') {
      const s = await settler.operationStatus(e.streamId, e.op);
      history.line(
        s.state === 'committed'
          ? `settled ${e.streamId} ${e.op} committed ${s.operation.firstPosition} ${s.operation.nextPosition - s.operation.firstPosition}`
          : `settled ${e.streamId} ${e.op} absent`,
        Date.now(),
      );
    }
  await settler.close();
  run.checks.push(await history.check(final, run.streamIds, { final: true }));
  return run;
}

function summary(run: Run): Record<string, unknown> {
  const last = run.checks.at(-1)!;
  const unknownSeen = [...run.history.ops.values()].filter((e) => e.wasUnknown).length;
  return {
    kills: run.kills,
    acknowledged: last.acknowledged,
    lost: last.lost.length,
    unknown: unknownSeen,
    unknownSettledCommitted: last.unknownCommitted,
    unknownSettledAbsent: last.unknownAbsent,
    refusedWhileReadOnly: run.history.refused,
    records: last.records,
    writerRestarts: run.writerRestarts,
    recoverHangs: run.history.hung.length,
    recoverMs: { p50: pctl(run.recoverMs, 0.5), max: Math.max(...run.recoverMs) },
    promoteMs: { p50: pctl(run.promoteMs, 0.5), max: Math.max(...run.promoteMs) },
    rebuildMs: { p50: pctl(run.rebuildMs, 0.5), max: Math.max(...run.rebuildMs) },
    cycleMs: { p50: pctl(run.cycleMs, 0.5), max: Math.max(...run.cycleMs) },
  };
}

describe.runIf(pgAvailable())('PostgreSQL failover: primary SIGKILLed under load, synchronous standby promoted', () => {
  it(
    `loses no acknowledged append over ${KILLS} primary kills`,
    async () => {
      const run = await failoverRun(KILLS);
      const s = summary(run);
      console.log(`[failover] ${JSON.stringify(s)}`);
      expect(run.history.odd).toEqual([]);
      expect(run.kills).toBe(KILLS);
      // A recover() that never returned is the open defect of docs/multi-host.md (2 in 20 kills in
      // CI before recover() bounded its wait for a commit still unanswered): the watchdog in
      // writer-child.mjs names it and replaces the writer, and the count is printed above. Until
      // its cause is found it fails the run only with FAILOVER_STRICT_HANGS=1 (what a fix must
      // pass); losses, gaps and odd answers fail it always.
      if (process.env.FAILOVER_STRICT_HANGS === '1') expect(run.history.hung).toEqual([]);
      else if (run.history.hung.length > 0) console.warn(`[failover] OPEN DEFECT: ${run.history.hung.length} recover() hangs`);
      for (const c of run.checks) {
        expect(c.lost).toEqual([]);
        expect(c.notWhole).toEqual([]);
        expect(c.discontinuities).toEqual([]);
      }
      const last = run.checks.at(-1)!;
      expect(last.open).toBe(0);
      // The load was real: every cycle acknowledged appends of every writer before and after the kill.
      expect(last.acknowledged).toBeGreaterThanOrEqual(KILLS * WRITERS * ACKS_BEFORE_KILL);
      // Every outcome the kills made unknown was settled, one way or the other.
      const unknown = [...run.history.ops.values()].filter((e) => e.wasUnknown).length;
      expect(last.unknownCommitted + last.unknownAbsent).toBe(unknown);
    },
    KILLS * 60_000 + 120_000,
  );

  it('the checker catches loss (planted: writers acknowledge at admission) and damage (a gap, a failing checksum)', async () => {
    const run = await failoverRun(1, { env: { PLANT_EARLY_ACK: '1' } });
    const last = run.checks.at(-1)!;
    console.log(`[failover planted early ack] ${JSON.stringify({ ...summary(run), lostExamples: last.lost.slice(0, 3) })}`);
    expect(last.lost.length).toBeGreaterThan(0);

    // Damage behind the port's back, on the current primary: one record deleted, one body edited.
    const sql = openPool(resolveStoreUrl(run.url), { max: 1 });
    pools.push(sql);
    const [victim, edited] = run.streamIds;
    await sql`delete from records where stream_id = ${victim!} and position = 3`;
    await sql`update records set body = replace(body, '#0 ', '#0!') where stream_id = ${edited!} and position = 0`;
    const damaged = await run.history.check(sql, run.streamIds, { final: true });
    expect(damaged.discontinuities).toContain(`${victim!}@3: gap`);
    expect(damaged.discontinuities).toContain(`${edited!}@0: unreadable (checksum) or not a message`);
    expect(damaged.lost.length).toBeGreaterThan(last.lost.length);
  }, 180_000);

  it('an asynchronous standby promoted behind the primary loses acknowledged appends, and the checker says so', async () => {
    // What docs/multi-host.md lists under "does not hold": the same writers and checker, with the
    // standby asynchronous and behind when the primary dies. A run that lost nothing here would
    // mean the failover runs above could not see a loss either.
    const run = await failoverRun(1, { asyncLaggingStandby: true });
    const last = run.checks.at(-1)!;
    console.log(`[failover async standby] ${JSON.stringify({ ...summary(run), lostExamples: last.lost.slice(0, 3) })}`);
    expect(run.history.odd).toEqual([]);
    expect(last.lost.length).toBeGreaterThan(0);
  }, 180_000);
});
