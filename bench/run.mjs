// yello benchmark suite: `npm run bench` (builds, then runs this file). See bench/README.md.
//
// Rows: (a) durable appends at 1/8/64 coordinators vs (b) an in-process baseline of the same
// work and (a') the straightforward pipeline server, with CPU per append by thread group;
// (f) the same load produced by the client library's Coordinator, with the client's own CPU;
// (c) append→follower push latency; (d) history page latency at growing chat sizes;
// (e) startup time and RSS with a large data dir and with 1,000 idle followers; (d2) Redis
// Streams (appendfsync always) as a peer when redis-server and redis-benchmark are on PATH;
// (h) the start of the commands an agent runs at every turn (bench/command-start.mjs).
// One process tree, one run; every daemon figure is also shown as a ratio to its baseline, and
// the issue's targets are checked against the same run at the end.

import { execFileSync, fork, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { commandStartTable, commandStartTargets, benchCommandStart } from './command-start.mjs';
import { BASELINE_GROUP, GroupCommitStore, baselineKey, makeWriters, rawHistoryPage, runBaselineAppends } from './baseline.mjs';
import {
  BENCH_DAEMON_ARGS,
  Daemon,
  PipelineServer,
  PushProbe,
  THREAD_GROUPS,
  THREAD_GROUP_NOTES,
  appendParams,
  cleanupAll,
  connectConn,
  closedLoop,
  content,
  envCounts as counts,
  envNumber as num,
  fmt,
  makeTempDir,
  openConn,
  median,
  medianByGroup,
  nowMs,
  perAppendByGroup,
  percentile,
  removeTempDir,
  repoRoot,
  rssKiB,
  setupCoordinator,
  sleep,
  table,
  threadDelta,
  threadSnapshot,
  trackChild,
  treeCpuMs,
} from './lib.mjs';
import { PgCluster, pgBinDir } from '../test/helpers/pg-cluster.mjs';

// ---- configuration ----------------------------------------------------------------------

const QUICK = process.env.BENCH_QUICK === '1';
const QUICK_MAX_RECORDS = 10_000;
const cfg = {
  quick: QUICK,
  seconds: num('BENCH_SECONDS', QUICK ? 1 : 3),
  warmupSeconds: num('BENCH_WARMUP_SECONDS', QUICK ? 0.3 : 1),
  rounds: Math.max(1, Math.round(num('BENCH_ROUNDS', 3))),
  concurrency: counts('BENCH_CONCURRENCY', '1,8,64'),
  clientConcurrency: counts('BENCH_CLIENT_CONCURRENCY', '1,64'),
  pushAppends: Math.round(num('BENCH_PUSH_APPENDS', QUICK ? 300 : 1000)),
  maxRecords: Math.min(Math.round(num('BENCH_MAX_RECORDS', 1_000_000)), QUICK ? QUICK_MAX_RECORDS : Infinity),
  pages: Math.max(1, Math.round(num('BENCH_PAGES', 50))),
  buildDepth: Math.max(1, Math.round(num('BENCH_BUILD_DEPTH', 2))),
  buildMaxSeconds: num('BENCH_BUILD_MAX_SECONDS', 3600),
  settleSeconds: num('BENCH_SETTLE_SECONDS', QUICK ? 1 : 5),
  followers: Math.round(num('BENCH_FOLLOWERS', 1000)),
  followerConnections: Math.round(num('BENCH_FOLLOWER_CONNECTIONS', 16)),
  startupRounds: Math.max(1, Math.round(num('BENCH_STARTUP_ROUNDS', 3))),
  pgPushAppends: Math.round(num('BENCH_PG_PUSH_APPENDS', QUICK ? 100 : 300)),
  commandRuns: Math.max(1, Math.round(num('BENCH_COMMAND_RUNS', QUICK ? 5 : 30))),
  // Message size of the closed loops of (a), (a'), (b), (f) and (g): issue 54's targets are at 1 KiB.
  appendBytes: Math.round(num('BENCH_CONTENT_BYTES', 1024)),
  pgRefDir: process.env.BENCH_PG_REF_DIR ? path.resolve(process.env.BENCH_PG_REF_DIR) : null,
  json: process.env.BENCH_JSON ?? null,
  only: new Set(
    (process.env.BENCH_ONLY ?? 'a,f,c,d2,d,e,g,h')
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  ),
};
const SECTIONS = ['a', 'f', 'c', 'd2', 'd', 'e', 'g', 'h'];
for (const s of cfg.only) if (!SECTIONS.includes(s)) throw new Error(`BENCH_ONLY: unknown section ${s} (${SECTIONS.join(', ')})`);
const MAX_SUBS_PER_CONNECTION = 64;
const HISTORY_LIMIT = 50;
const SCAN_LIMIT = 500;
if (Math.ceil(cfg.followers / cfg.followerConnections) > MAX_SUBS_PER_CONNECTION) {
  throw new Error(
    `BENCH_FOLLOWERS / BENCH_FOLLOWER_CONNECTIONS must be at most ${MAX_SUBS_PER_CONNECTION} (the daemon's per-connection cap)`,
  );
}
const historySizes = (() => {
  const sizes = [1_000, 100_000, 1_000_000].filter((s) => s <= cfg.maxRecords);
  if (sizes.length === 0 || sizes[sizes.length - 1] < cfg.maxRecords) sizes.push(cfg.maxRecords);
  return sizes.map((s) => s - (s % 2)); // both streams get half
})();

const log = (msg) => process.stderr.write(`[bench ${((nowMs() - T0) / 1000).toFixed(1).padStart(6)}s] ${msg}\n`);
const T0 = nowMs();
const results = {
  config: { ...cfg, only: [...cfg.only], historySizes },
  a: [],
  f: [],
  c: null,
  d: [],
  e: null,
  redis: null,
  g: null,
  notes: [],
};

// ---- cleanup on any exit ----------------------------------------------------------------

process.on('exit', cleanupAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    process.stderr.write(`bench: ${sig}, cleaning up\n`);
    cleanupAll();
    process.exit(130);
  });
}

// ---- (a) + (b): durable appends vs the in-process baseline ------------------------------

async function benchAppends(daemon, admin) {
  const maxC = Math.max(...cfg.concurrency);
  const { agent: sink } = await admin.request('agents.create', { username: 'sink', name: 'Sink' });
  log(`(a) creating ${maxC} coordinators (agent + chat + claimed stream, one connection each)`);
  const cos = await Promise.all(Array.from({ length: maxC }, (_, i) => setupCoordinator(daemon, admin, `w${i}`, sink.id)));

  const baseDir = makeTempDir('ybb-');
  const store = await GroupCommitStore.open(baseDir);
  const key = baselineKey();
  const writers = makeWriters(maxC);
  const pipeDir = makeTempDir('ybp-');
  const pipeline = new PipelineServer(pipeDir);
  let pipeCos = [];
  try {
    await pipeline.start();
    pipeCos = await pipeline.coordinators(maxC);
    for (const c of cfg.concurrency) {
      log(`(a) warm-up ${cfg.warmupSeconds}s at ${c}`);
      const w = await closedLoop(cos.slice(0, c), cfg.warmupSeconds, null, cfg.appendBytes);
      await runBaselineAppends(store, key, { writers: writers.slice(0, c), total: w.appends, maxMs: 30_000, bytes: cfg.appendBytes });
      await closedLoop(pipeCos.slice(0, c), cfg.warmupSeconds, null, cfg.appendBytes);
    }
    const perC = new Map(cfg.concurrency.map((c) => [c, { daemon: [], baseline: [], pipeline: [] }]));
    for (let r = 1; r <= cfg.rounds; r++) {
      for (const c of cfg.concurrency) {
        const d = await closedLoop(cos.slice(0, c), cfg.seconds, daemon.pid, cfg.appendBytes);
        const b = await runBaselineAppends(store, key, {
          writers: writers.slice(0, c),
          total: d.appends,
          maxMs: Math.max(30_000, cfg.seconds * 10_000),
          bytes: cfg.appendBytes,
        });
        const p = await closedLoop(pipeCos.slice(0, c), cfg.seconds, pipeline.pid, cfg.appendBytes);
        perC.get(c).daemon.push(d);
        perC.get(c).baseline.push(b);
        perC.get(c).pipeline.push(p);
        log(
          `(a) round ${r}/${cfg.rounds} c=${c}: daemon ${fmt.int(d.perSecond)}/s p50 ${fmt.ms(d.p50)} p99 ${fmt.ms(d.p99)} cpu ${fmt.int(d.serverCpuUs)} µs | baseline ${fmt.int(b.perSecond)}/s p50 ${fmt.ms(b.p50)} (${b.appends} appends) | pipeline ${fmt.int(p.perSecond)}/s p50 ${fmt.ms(p.p50)} cpu ${fmt.int(p.serverCpuUs)} µs`,
        );
      }
    }
    for (const c of cfg.concurrency) {
      const { daemon: ds, baseline: bs, pipeline: ps } = perC.get(c);
      const m = (xs, k) => median(xs.map((x) => x[k]));
      const loop = (xs) => ({
        perSecond: m(xs, 'perSecond'),
        p50: m(xs, 'p50'),
        p99: m(xs, 'p99'),
        appends: m(xs, 'appends'),
        serverCpuUs: m(xs, 'serverCpuUs'),
        clientCpuUs: m(xs, 'clientCpuUs'),
        server: medianByGroup(xs.map((x) => x.server)),
      });
      results.a.push({
        concurrency: c,
        daemon: loop(ds),
        baseline: { perSecond: m(bs, 'perSecond'), p50: m(bs, 'p50'), p99: m(bs, 'p99'), appends: m(bs, 'appends') },
        pipeline: loop(ps),
        rounds: { daemon: ds, baseline: bs, pipeline: ps },
      });
    }
  } finally {
    await store.close();
    removeTempDir(baseDir);
    for (const co of [...cos, ...pipeCos]) co.conn.close();
    await pipeline.stop();
    removeTempDir(pipeDir);
  }
}

// ---- (f): load from the client library -------------------------------------------------

/** A bench/client-load.mjs child over IPC: call(msg) sends one command and resolves with its answer. */
function forkClientLoad() {
  const child = trackChild(
    fork(path.join(repoRoot, 'bench', 'client-load.mjs'), [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, BENCH_CONTENT_BYTES: String(cfg.appendBytes) },
    }),
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const call = (msg) =>
    new Promise((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null) return reject(new Error('client-load has exited'));
      const onExit = (code) => reject(new Error(`client-load exited (${code}) during ${msg.cmd}`));
      child.once('exit', onExit);
      child.once('message', (answer) => {
        child.off('exit', onExit);
        if (answer.error) reject(new Error(`client-load ${msg.cmd}: ${answer.error}`));
        else resolve(answer);
      });
      child.send(msg);
    });
  const close = async () => {
    await call({ cmd: 'stop' }).catch(() => {});
    if (child.connected) child.disconnect();
    await Promise.race([exited, sleep(10_000)]);
  };
  return { child, call, close };
}

/** One measured window of a client-load child; CPU per append of it and of the daemon, by thread group. */
async function clientRound(load, daemonPid, seconds) {
  const c0 = threadSnapshot(load.child.pid);
  const d0 = threadSnapshot(daemonPid);
  const r = await load.call({ cmd: 'run', seconds });
  const client = perAppendByGroup(threadDelta(c0, threadSnapshot(load.child.pid)), r.appends, r.seconds);
  const daemon = perAppendByGroup(threadDelta(d0, threadSnapshot(daemonPid)), r.appends, r.seconds);
  return { appends: r.appends, seconds: r.seconds, perSecond: r.appends / r.seconds, p50: r.p50, p99: r.p99, client, daemon };
}

const CLIENT_MODES = ['raw', 'coordinator'];

async function benchClientLibrary(daemon, admin) {
  const maxC = Math.max(...cfg.clientConcurrency);
  const { agent: sink } = await admin.request('agents.create', { username: 'client-sink', name: 'Client sink' });
  log(`(f) creating 2 × ${maxC} agents with a chat each (raw and Coordinator clients)`);
  const makeClients = (prefix) =>
    Promise.all(
      Array.from({ length: maxC }, async (_, i) => {
        const { agent, token } = await admin.request('agents.create', { username: `${prefix}${i}`, name: `${prefix}${i}` });
        const conn = await openConn(daemon.socketPath, token);
        try {
          const { chat } = await conn.request('chats.open', { peerAgentId: sink.id });
          return { agentId: agent.id, token, chatId: chat.id };
        } finally {
          conn.close();
        }
      }),
    );
  const pools = { raw: await makeClients('fraw'), coordinator: await makeClients('fcoord') };
  for (const c of cfg.clientConcurrency) {
    const loads = {};
    try {
      for (const mode of CLIENT_MODES) {
        loads[mode] = forkClientLoad();
        await loads[mode].call({ cmd: 'start', mode, socketPath: daemon.socketPath, clients: pools[mode].slice(0, c) });
        log(`(f) warm-up ${cfg.warmupSeconds}s, ${c} ${mode} client(s)`);
        await loads[mode].call({ cmd: 'run', seconds: cfg.warmupSeconds });
      }
      const rounds = { raw: [], coordinator: [] };
      for (let r = 1; r <= cfg.rounds; r++) {
        for (const mode of CLIENT_MODES) {
          const x = await clientRound(loads[mode], daemon.pid, cfg.seconds);
          rounds[mode].push(x);
          log(
            `(f) round ${r}/${cfg.rounds} c=${c} ${mode}: ${fmt.int(x.perSecond)}/s p50 ${fmt.ms(x.p50)} p99 ${fmt.ms(x.p99)}, client ${fmt.int(sum(x.client.us))} µs/append (main busy ${x.client.mainBusy.toFixed(2)}), daemon ${fmt.int(sum(x.daemon.us))} µs/append`,
          );
        }
      }
      for (const mode of CLIENT_MODES) {
        const xs = rounds[mode];
        const m = (k) => median(xs.map((x) => x[k]));
        results.f.push({
          concurrency: c,
          mode,
          perSecond: m('perSecond'),
          p50: m('p50'),
          p99: m('p99'),
          appends: m('appends'),
          client: medianByGroup(xs.map((x) => x.client)),
          daemon: medianByGroup(xs.map((x) => x.daemon)),
          rounds: xs,
        });
      }
    } finally {
      for (const load of Object.values(loads)) await load.close();
    }
  }
}

const sum = (us) => Object.values(us ?? {}).reduce((a, b) => a + b, 0);

// ---- (c): append → follower push latency ------------------------------------------------

async function benchPush(daemon, admin) {
  const probe = await PushProbe.setup(daemon, admin);
  const warm = Math.min(50, Math.ceil(cfg.pushAppends / 10));
  log(`(c) ${warm} warm-up + ${cfg.pushAppends} appends, one at a time, follower on another connection`);
  try {
    await probe.run(warm);
    const { push, rtt } = await probe.run(cfg.pushAppends);
    results.c = {
      appends: push.length,
      pushP50: percentile(push, 0.5),
      pushP99: percentile(push, 0.99),
      rttP50: percentile(rtt, 0.5),
      rttP99: percentile(rtt, 0.99),
    };
  } finally {
    probe.close();
  }
}

// ---- (g): PostgreSQL beside LevelDB, real daemons; cross-daemon push -----------------------

/**
 * A LevelDB daemon and daemon A on a throwaway PostgreSQL cluster (fsync on), measured in
 * alternation in every round: closed loops at each concurrency (the daemon's CPU per append,
 * and the cluster's: postmaster + backends). Then daemon B joins A on the same database, and
 * push probes run, one after the other in each round: LevelDB same daemon, PostgreSQL same
 * daemon (A → A), PostgreSQL across daemons (writer on A, follower on B: NOTIFY → B).
 */
async function benchPostgres() {
  if (!pgBinDir()) {
    results.g = { skipped: 'PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)' };
    log(`(g) skipped: ${results.g.skipped}`);
    return;
  }
  log('(g) starting a throwaway PostgreSQL cluster');
  const cluster = await PgCluster.start();
  const daemons = [];
  const conns = [];
  try {
    await cluster.psql('create database bench');
    const store = ['--store', cluster.url('bench')];
    const level = new Daemon(makeTempDir('ybgl-'));
    const pgA = new Daemon(makeTempDir('ybga-'), { extraArgs: [...BENCH_DAEMON_ARGS, ...store] });
    daemons.push(level, pgA);
    await level.start();
    await pgA.start();
    const engines = [
      { name: 'LevelDB', daemon: level },
      { name: 'PostgreSQL', daemon: pgA, pg: true },
    ];
    const maxC = Math.max(...cfg.concurrency);
    for (const e of engines) {
      e.admin = await e.daemon.admin();
      conns.push(e.admin);
      const { agent: sink } = await e.admin.request('agents.create', { username: 'gsink', name: 'Sink' });
      log(`(g) ${e.name}: creating ${maxC} coordinators`);
      e.cos = await Promise.all(Array.from({ length: maxC }, (_, i) => setupCoordinator(e.daemon, e.admin, `g${i}`, sink.id)));
      conns.push(...e.cos.map((co) => co.conn));
    }
    for (const c of cfg.concurrency)
      for (const e of engines) {
        log(`(g) warm-up ${cfg.warmupSeconds}s at ${c} on ${e.name}`);
        await closedLoop(e.cos.slice(0, c), cfg.warmupSeconds, null, cfg.appendBytes);
      }
    const postmaster = cluster.process.pid;
    const loops = new Map(cfg.concurrency.map((c) => [c, { LevelDB: [], PostgreSQL: [] }]));
    for (let r = 1; r <= cfg.rounds; r++) {
      for (const c of cfg.concurrency) {
        // LevelDB first in odd rounds, PostgreSQL first in even ones.
        for (const e of r % 2 ? engines : [...engines].reverse()) {
          const pg0 = treeCpuMs(postmaster);
          const x = await closedLoop(e.cos.slice(0, c), cfg.seconds, e.daemon.pid, cfg.appendBytes);
          x.postgresCpuUs = e.pg ? ((treeCpuMs(postmaster) - pg0) * 1000) / x.appends : null;
          loops.get(c)[e.name].push(x);
          log(
            `(g) round ${r}/${cfg.rounds} c=${c} ${e.name}: ${fmt.int(x.perSecond)}/s p50 ${fmt.ms(x.p50)} p99 ${fmt.ms(x.p99)} daemon cpu ${fmt.int(x.serverCpuUs)} µs${e.pg ? ` postgres cpu ${fmt.int(x.postgresCpuUs)} µs` : ''}`,
          );
        }
      }
    }
    for (const e of engines) for (const co of e.cos) co.conn.close();

    log('(g) starting daemon B on the same database');
    const pgB = new Daemon(makeTempDir('ybgb-'), { extraArgs: [...BENCH_DAEMON_ARGS, ...store] });
    daemons.push(pgB);
    await pgB.start();
    const probes = [
      { name: 'LevelDB, same daemon', probe: await PushProbe.setup(level, engines[0].admin, 'gpush') },
      { name: 'PostgreSQL, same daemon (A → A)', probe: await PushProbe.setup(pgA, engines[1].admin, 'gpusha') },
      { name: 'PostgreSQL, across daemons (A → B)', probe: await PushProbe.setup(pgA, engines[1].admin, 'gpushb', pgB) },
    ];
    if (cfg.pgRefDir) {
      // The same cross-daemon probe on two daemons of another (built) checkout, on a database of
      // their own in the same cluster: before/after of a change in the same rounds.
      log(`(g) starting daemons A and B of ${cfg.pgRefDir} on a second database`);
      await cluster.psql('create database benchref');
      const ref = {
        bin: path.join(cfg.pgRefDir, 'bin', 'yello'),
        cwd: cfg.pgRefDir,
        extraArgs: [...BENCH_DAEMON_ARGS, '--store', cluster.url('benchref')],
      };
      const refA = new Daemon(makeTempDir('ybgra-'), ref);
      daemons.push(refA);
      await refA.start();
      const refB = new Daemon(makeTempDir('ybgrb-'), ref);
      daemons.push(refB);
      await refB.start();
      const refAdmin = await refA.admin();
      conns.push(refAdmin);
      probes.push({
        name: 'PostgreSQL, across daemons (A → B), BENCH_PG_REF_DIR build',
        probe: await PushProbe.setup(refA, refAdmin, 'gpushr', refB),
      });
    }
    const pushRounds = probes.map(() => []);
    const warm = Math.min(30, Math.ceil(cfg.pgPushAppends / 5));
    try {
      for (const p of probes) await p.probe.run(warm);
      for (let r = 1; r <= cfg.rounds; r++) {
        for (const [i, p] of probes.entries()) {
          const x = await p.probe.run(cfg.pgPushAppends);
          const round = {
            appends: x.push.length,
            pushP50: percentile(x.push, 0.5),
            pushP99: percentile(x.push, 0.99),
            rttP50: percentile(x.rtt, 0.5),
            afterP50: percentile(x.afterAnswer, 0.5),
            afterP99: percentile(x.afterAnswer, 0.99),
          };
          pushRounds[i].push(round);
          log(
            `(g) push round ${r}/${cfg.rounds} ${p.name}: send→push p50 ${fmt.ms(round.pushP50)} p99 ${fmt.ms(round.pushP99)}, answer→push p50 ${fmt.ms(round.afterP50)} p99 ${fmt.ms(round.afterP99)}, append RTT p50 ${fmt.ms(round.rttP50)}`,
          );
        }
      }
    } finally {
      for (const p of probes) p.probe.close();
    }
    const m = (xs, k) => median(xs.map((x) => x[k]));
    results.g = {
      loops: cfg.concurrency.map((c) => {
        const row = { concurrency: c };
        for (const e of engines) {
          const xs = loops.get(c)[e.name];
          row[e.name] = {
            perSecond: m(xs, 'perSecond'),
            p50: m(xs, 'p50'),
            p99: m(xs, 'p99'),
            serverCpuUs: m(xs, 'serverCpuUs'),
            postgresCpuUs: e.pg ? m(xs, 'postgresCpuUs') : null,
            rounds: xs.map(({ server: _server, ...rest }) => rest),
          };
        }
        return row;
      }),
      push: probes.map((p, i) => ({
        name: p.name,
        appends: m(pushRounds[i], 'appends'),
        pushP50: m(pushRounds[i], 'pushP50'),
        pushP99: m(pushRounds[i], 'pushP99'),
        rttP50: m(pushRounds[i], 'rttP50'),
        afterP50: m(pushRounds[i], 'afterP50'),
        afterP99: m(pushRounds[i], 'afterP99'),
        rounds: pushRounds[i],
      })),
    };
  } finally {
    for (const c of conns) c.close();
    for (const d of daemons) {
      await d.stop();
      removeTempDir(d.dir);
    }
    await cluster.stop();
  }
}

function postgresTables() {
  const g = results.g;
  if (!g) return [];
  if (g.skipped) return [`(g) PostgreSQL beside LevelDB: skipped — ${g.skipped}`, ''];
  const lines = [];
  const rows = [];
  for (const r of g.loops) {
    const l = r.LevelDB;
    const p = r.PostgreSQL;
    rows.push([r.concurrency, 'LevelDB', fmt.int(l.perSecond), fmt.ms(l.p50), fmt.ms(l.p99), fmt.int(l.serverCpuUs), '', '', '', '']);
    rows.push([
      r.concurrency,
      'PostgreSQL',
      fmt.int(p.perSecond),
      fmt.ms(p.p50),
      fmt.ms(p.p99),
      fmt.int(p.serverCpuUs),
      fmt.int(p.postgresCpuUs),
      fmt.ratio(p.perSecond / l.perSecond),
      fmt.ratio(p.p50 / l.p50),
      fmt.ratio(p.serverCpuUs / l.serverCpuUs),
    ]);
  }
  lines.push(
    table(
      `(g) durable appends through real daemons, LevelDB vs PostgreSQL (a throwaway cluster on the same disk, fsync on), 1 chat.message of ${fmt.int(cfg.appendBytes)} B per append — median of ${cfg.rounds} rounds × ${cfg.seconds}s, the two alternating; cpu µs per append: the daemon's (all threads) and the cluster's (postmaster + backends); ratio = PG ÷ LevelDB`,
      ['clients', 'backend', 'appends/s', 'p50 ms', 'p99 ms', 'daemon cpu µs', 'postgres cpu µs', 'ratio/s', 'ratio p50', 'ratio cpu'],
      rows,
      2,
    ),
  );
  lines.push('');
  lines.push(
    table(
      `(g) append → follower push, ${fmt.int(g.push[0]?.appends)} appends one at a time per round, median of ${cfg.rounds} rounds; send→push: from writing streams.append to the chats.batch carrying it; answer→push: from the append's answer to that push (negative: the push came first)`,
      ['path', 'send→push p50', 'send→push p99', 'answer→push p50', 'answer→push p99', 'append RTT p50'],
      g.push.map((x) => [x.name, fmt.ms(x.pushP50), fmt.ms(x.pushP99), fmt.ms(x.afterP50), fmt.ms(x.afterP99), fmt.ms(x.rttP50)]),
    ),
  );
  lines.push('');
  return lines;
}

// ---- (d): history pages at growing sizes -------------------------------------------------

/** Append 64-record operations to `co` until it holds `target` messages, `depth` in flight. */
async function fill(co, target, depth, deadline) {
  const inflight = new Set();
  let failure = null;
  while ((co.issuedMsgs < target && nowMs() < deadline && !failure) || inflight.size > 0) {
    while (inflight.size < depth && co.issuedMsgs < target && nowMs() < deadline && !failure) {
      const n = Math.min(64, target - co.issuedMsgs);
      const at = co.issuedNext;
      co.issuedNext += n;
      co.issuedMsgs += n;
      const p = co.conn.request('streams.append', appendParams(co, at, n), 120_000).then(
        (r) => {
          co.next = Math.max(co.next, Number(r.nextPosition));
          co.msgs += n;
        },
        (err) => {
          failure ??= err;
        },
      );
      inflight.add(p);
      p.finally(() => inflight.delete(p));
    }
    if (inflight.size > 0) await Promise.race(inflight);
  }
  if (failure) throw failure;
}

async function connectHistoryClients(daemon, hs) {
  for (const co of hs.writers) {
    co.conn = await openConn(daemon.socketPath, co.token);
  }
  hs.reader = await openConn(daemon.socketPath, hs.writers[0].token);
}

function closeHistoryClients(hs) {
  for (const co of hs.writers) co.conn.close();
  hs.reader.close();
}

async function timedCalls(n, fn) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const t0 = nowMs();
    await fn(i);
    times.push(nowMs() - t0);
  }
  return times;
}

async function benchHistory(daemon, admin) {
  const { agent: b, token: tokenB } = await admin.request('agents.create', { username: 'hist-b', name: 'History B' });
  const a = await setupCoordinator(daemon, admin, 'hist-a', b.id);
  const connB = await openConn(daemon.socketPath, tokenB);
  const claimB = await connB.request('streams.claim', { streamId: `${a.chatId}:${b.id}` });
  const bco = {
    agentId: b.id,
    token: tokenB,
    conn: connB,
    chatId: a.chatId,
    streamId: `${a.chatId}:${b.id}`,
    coordinatorToken: claimB.coordinatorToken,
    generation: claimB.generation,
    next: Number(claimB.nextPosition),
  };
  const hs = { chatId: a.chatId, writers: [a, bco], streamIds: [a.streamId, bco.streamId].sort(), reader: null };
  for (const co of hs.writers) Object.assign(co, { msgs: 0, issuedMsgs: 0, issuedNext: co.next });
  hs.reader = await openConn(daemon.socketPath, a.token);
  const buildDeadline = nowMs() + cfg.buildMaxSeconds * 1000;
  let buildSeconds = 0;

  for (const size of historySizes) {
    // Build: both directions, 64 records per append.
    const before = hs.writers[0].msgs + hs.writers[1].msgs;
    const t0 = nowMs();
    log(`(d) building the chat to ${fmt.int(size)} messages (64 per append, ${cfg.buildDepth} in flight per stream)`);
    await Promise.all(hs.writers.map((co) => fill(co, size / 2, cfg.buildDepth, buildDeadline)));
    const built = hs.writers[0].msgs + hs.writers[1].msgs;
    const buildSecs = (nowMs() - t0) / 1000;
    buildSeconds += buildSecs;
    const buildRate = (built - before) / buildSecs;
    log(`(d) ${fmt.int(built)} messages (${fmt.int(buildRate)} records/s while building)`);
    if (built < size) {
      results.notes.push(
        `(d) the build stopped at ${built} messages (BENCH_BUILD_MAX_SECONDS=${cfg.buildMaxSeconds}); larger sizes skipped`,
      );
    }
    // Let LevelDB's background compaction of the fresh writes settle before timing reads.
    await sleep(cfg.settleSeconds * 1000);
    const reader = hs.reader;
    const history = (params) => reader.request('chats.history', { chatId: hs.chatId, ...params }, 120_000);

    // Backward first page (a fresh snapshot each call).
    await timedCalls(3, () => history({ limit: HISTORY_LIMIT }));
    const backward = await timedCalls(cfg.pages, () => history({ limit: HISTORY_LIMIT }));

    // Forward cursor paging from the start to the middle (limit 500), then limit-50 pages from there.
    const half = Math.floor(built / 2);
    let seen = 0;
    let cursor;
    const scanT0 = nowMs();
    let scanCalls = 0;
    const maxScanCalls = Math.ceil(built / SCAN_LIMIT) + 10;
    let r = await history({ direction: 'forward', limit: Math.min(SCAN_LIMIT, Math.max(1, half)) });
    scanCalls++;
    seen += r.entries.length;
    cursor = r.nextCursor;
    while (seen < half && cursor && scanCalls < maxScanCalls) {
      r = await history({ cursor, limit: Math.min(SCAN_LIMIT, half - seen) });
      scanCalls++;
      seen += r.entries.length;
      cursor = r.nextCursor;
    }
    const scanSecs = (nowMs() - scanT0) / 1000;
    const midCursor = cursor;
    let midFrom = null;
    let forward = [];
    if (midCursor) {
      let c = midCursor;
      forward = await timedCalls(cfg.pages + 3, async () => {
        const page = await history({ cursor: c, limit: HISTORY_LIMIT });
        if (midFrom === null) {
          midFrom = hs.streamIds.map((id) => {
            const ps = page.entries.filter((e) => e.streamId === id).map((e) => Number(e.position));
            return ps.length ? Math.min(...ps) : Number.MAX_SAFE_INTEGER;
          });
        }
        c = page.nextCursor ?? midCursor;
      });
      forward = forward.slice(3);
    } else {
      results.notes.push(`(d) at ${built} messages, forward paging found no middle cursor`);
    }

    // Stop the daemon: the raw LevelDB floor on the same store, then restart (timed).
    closeHistoryClients(hs);
    await daemon.stop();
    const db = new ClassicLevel(path.join(daemon.dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    let rawBackward;
    let rawForward = [];
    try {
      await timedCalls(3, () => rawHistoryPage(db, hs.streamIds, [null, null], HISTORY_LIMIT));
      rawBackward = await timedCalls(cfg.pages, () => rawHistoryPage(db, hs.streamIds, [null, null], HISTORY_LIMIT));
      if (midFrom) {
        await timedCalls(3, () => rawHistoryPage(db, hs.streamIds, midFrom, HISTORY_LIMIT));
        rawForward = await timedCalls(cfg.pages, () => rawHistoryPage(db, hs.streamIds, midFrom, HISTORY_LIMIT));
      }
    } finally {
      await db.close();
    }
    const restartMs = await daemon.start();
    await connectHistoryClients(daemon, hs);
    const row = {
      size,
      built,
      buildRecordsPerSecond: buildRate,
      backwardP50: percentile(backward, 0.5),
      backwardP99: percentile(backward, 0.99),
      forwardMidP50: percentile(forward, 0.5),
      forwardMidP99: percentile(forward, 0.99),
      rawBackwardP50: percentile(rawBackward, 0.5),
      rawForwardP50: percentile(rawForward, 0.5),
      scanRecordsPerSecond: seen / scanSecs,
      scanCalls,
      restartMs,
      pages: backward.length,
    };
    results.d.push(row);
    log(
      `(d) ${fmt.int(built)}: backward p50 ${fmt.ms(row.backwardP50)} ms, forward-mid p50 ${fmt.ms(row.forwardMidP50)} ms, raw ${fmt.ms(row.rawBackwardP50)}/${fmt.ms(row.rawForwardP50)} ms, restart ${fmt.ms(restartMs)} ms`,
    );
    if (built < size) break;
  }
  closeHistoryClients(hs);
  results.dBuildSeconds = buildSeconds;
}

// ---- (e): startup and RSS ----------------------------------------------------------------

function spawnMinimal(socketPath, dbDir) {
  const t0 = nowMs();
  const child = trackChild(
    spawn(process.execPath, [path.join(repoRoot, 'bench', 'minimal-server.mjs'), socketPath, dbDir], {
      stdio: ['ignore', 'ignore', 'pipe'],
    }),
  );
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (c) => (err = (err + c).slice(-4000)));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return (async () => {
    for (const deadline = t0 + 30_000; ;) {
      if (child.exitCode !== null) throw new Error(`minimal server exited: ${err}`);
      if (nowMs() > deadline) throw new Error('minimal server not ready in 30 s');
      if (existsSync(socketPath)) {
        try {
          const conn = await connectConn(socketPath, 2000);
          try {
            await conn.request('session.hello', { token: 'x' }, 5000);
          } finally {
            conn.close();
          }
          return { ms: nowMs() - t0, child, exited };
        } catch {
          /* not yet */
        }
      }
      await sleep(2);
    }
  })();
}

async function benchStartup(daemon) {
  const startup = [];
  const rss = [];
  log(`(e) ${cfg.startupRounds} daemon restarts on the ${fmt.int(results.d.at(-1)?.built ?? 0)}-message data dir`);
  for (let i = 0; i < cfg.startupRounds; i++) {
    await daemon.stop();
    startup.push(await daemon.start());
    await sleep(1000);
    rss.push(daemon.rss());
  }
  await daemon.stop();
  const minStartup = [];
  const minRss = [];
  const sock = path.join(daemon.dir, 'm.sock');
  for (let i = 0; i < cfg.startupRounds; i++) {
    const m = await spawnMinimal(sock, path.join(daemon.dataDir, 'db'));
    minStartup.push(m.ms);
    await sleep(1000);
    minRss.push(rssKiB(m.child.pid));
    m.child.kill('SIGTERM');
    await m.exited;
  }
  await daemon.start();
  results.e = {
    startupMs: median(startup),
    rssKiB: median(rss),
    minimalStartupMs: median(minStartup),
    minimalRssKiB: median(minRss),
    samples: { startup, rss, minStartup, minRss },
  };
}

async function benchFollowers(daemon) {
  const admin = await daemon.admin();
  const nConn = Math.min(cfg.followerConnections, cfg.followers);
  const perConn = Array.from({ length: nConn }, (_, i) => Math.floor(cfg.followers / nConn) + (i < cfg.followers % nConn ? 1 : 0));
  const nPeers = Math.max(...perConn);
  log(`(e) ${cfg.followers} idle followers: ${nConn} follower agents × up to ${nPeers} chats, one connection each`);
  const followers = await Promise.all(
    Array.from({ length: nConn }, (_, i) => admin.request('agents.create', { username: `follower${i}`, name: `Follower ${i}` })),
  );
  const peers = await Promise.all(
    Array.from({ length: nPeers }, (_, j) => admin.request('agents.create', { username: `peer${j}`, name: `Peer ${j}` })),
  );
  admin.close();
  const conns = await Promise.all(followers.map((f) => openConn(daemon.socketPath, f.token)));
  try {
    const chats = await Promise.all(
      conns.map((conn, i) =>
        Promise.all(peers.slice(0, perConn[i]).map((p) => conn.request('chats.open', { peerAgentId: p.agent.id }).then((r) => r.chat.id))),
      ),
    );
    await sleep(1000);
    const before = daemon.rss();
    await Promise.all(conns.map((conn, i) => Promise.all(chats[i].map((chatId) => conn.request('chats.follow', { chatId })))));
    await sleep(2000);
    const after = daemon.rss();
    results.e.followers = {
      count: cfg.followers,
      connections: nConn,
      rssBeforeKiB: before,
      rssAfterKiB: after,
      perFollowerKiB: (after - before) / cfg.followers,
    };
  } finally {
    for (const c of conns) c.close();
  }
}

// ---- (d2): Redis Streams peer -------------------------------------------------------------

function onPath(cmd) {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function benchRedis() {
  if (!onPath('redis-server') || !onPath('redis-benchmark')) {
    results.redis = { skipped: 'redis-server and/or redis-benchmark not on PATH (nothing is installed by the bench)' };
    return;
  }
  const dir = makeTempDir('ybr-');
  const sock = path.join(dir, 'r.sock');
  const server = trackChild(
    spawn(
      'redis-server',
      [
        '--port',
        '0',
        '--unixsocket',
        sock,
        '--unixsocketperm',
        '700',
        '--dir',
        dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--save',
        '',
        '--loglevel',
        'warning',
      ],
      { stdio: 'ignore' },
    ),
  );
  const exited = new Promise((resolve) => server.once('exit', resolve));
  try {
    for (const deadline = nowMs() + 10_000; !existsSync(sock);) {
      if (server.exitCode !== null || nowMs() > deadline) throw new Error('redis-server did not start');
      await sleep(20);
    }
    await sleep(200);
    const rows = [];
    for (const c of cfg.concurrency) {
      const a = results.a.find((x) => x.concurrency === c);
      const n = Math.max(1000, Math.round(a?.daemon.appends ?? 1000));
      const rounds = [];
      for (let r = 0; r < cfg.rounds; r++) {
        const out = execFileSync(
          'redis-benchmark',
          [
            '-s',
            sock,
            '-c',
            String(c),
            '-n',
            String(n),
            '-r',
            String(c),
            '--csv',
            'XADD',
            'bench:__rand_int__',
            '*',
            'content',
            content('redis'),
          ],
          {
            encoding: 'utf8',
            timeout: 600_000,
          },
        );
        const lines = out
          .trim()
          .split('\n')
          .map((l) => l.split(',').map((f) => f.replace(/^"|"$/g, '')));
        const header = lines.find((l) => l[0] === 'test') ?? ['test', 'rps'];
        const data = lines.filter((l) => l[0] !== 'test').at(-1);
        const col = (name) => (header.indexOf(name) >= 0 ? Number(data[header.indexOf(name)]) : NaN);
        rounds.push({ perSecond: col('rps'), p50: col('p50_latency_ms'), p99: col('p99_latency_ms') });
      }
      rows.push({
        concurrency: c,
        perSecond: median(rounds.map((x) => x.perSecond)),
        p50: median(rounds.map((x) => x.p50)),
        p99: median(rounds.map((x) => x.p99)),
        n,
      });
    }
    results.redis = { rows };
  } catch (err) {
    results.redis = { skipped: `redis peer failed: ${err.message}` };
  } finally {
    server.kill('SIGTERM');
    await Promise.race([exited, sleep(5000)]);
    removeTempDir(dir);
  }
}

// ---- report --------------------------------------------------------------------------------

function report() {
  const lines = [];
  const cpu = os.cpus();
  lines.push(
    `yello bench — ${new Date().toISOString()} — node ${process.version}, ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB${cfg.quick ? ' — QUICK MODE' : ''}`,
  );
  lines.push(
    `ratio = daemon / baseline. Throughput: below 1x means slower than the baseline. Latency, time and RSS: above 1x means slower / bigger.`,
  );
  lines.push('');
  const rows = results.a.map((r) => [
    r.concurrency,
    fmt.int(r.daemon.perSecond),
    fmt.ms(r.daemon.p50),
    fmt.ms(r.daemon.p99),
    fmt.int(r.baseline.perSecond),
    fmt.ms(r.baseline.p50),
    fmt.ms(r.baseline.p99),
    fmt.ratio(r.daemon.perSecond / r.baseline.perSecond),
    fmt.ratio(r.daemon.p50 / r.baseline.p50),
    fmt.ratio(r.daemon.p99 / r.baseline.p99),
  ]);
  if (results.redis?.rows) {
    for (const x of results.redis.rows) {
      const base = results.a.find((r) => r.concurrency === x.concurrency)?.baseline;
      rows.push([
        `redis ${x.concurrency}`,
        fmt.int(x.perSecond),
        fmt.ms(x.p50),
        fmt.ms(x.p99),
        fmt.int(base?.perSecond),
        fmt.ms(base?.p50),
        fmt.ms(base?.p99),
        fmt.ratio(x.perSecond / base?.perSecond),
        fmt.ratio(x.p50 / base?.p50),
        fmt.ratio(x.p99 / base?.p99),
      ]);
    }
  }
  if (results.a.length || results.redis) {
    lines.push(
      table(
        `(a) durable appends, 1 chat.message of ${fmt.int(cfg.appendBytes)} B per append — median of ${cfg.rounds} rounds × ${cfg.seconds}s after ${cfg.warmupSeconds}s warm-up; (b) in-process baseline (SHA-256 + ES256 + grouped sync batch ≤${BASELINE_GROUP}), same append count`,
        ['coordinators', 'appends/s', 'p50 ms', 'p99 ms', 'base appends/s', 'base p50', 'base p99', 'ratio/s', 'ratio p50', 'ratio p99'],
        rows,
      ),
    );
    if (results.redis)
      lines.push(
        results.redis.skipped
          ? `(d2) Redis Streams peer: skipped — ${results.redis.skipped}`
          : '(d2) rows "redis N": Redis Streams XADD, appendonly yes, appendfsync always, N clients, same append count',
      );
    lines.push('');
  }
  if (results.a.some((r) => r.pipeline)) {
    const rows = results.a.filter((r) => r.pipeline);
    lines.push(
      table(
        `(a') the same closed loops against the issue's straightforward pipeline (bench/pipeline-server.mjs: json-rpc-2.0 → SHA-256 → ES256 → grouped sync batch → reply), right after the daemon in each round; ratio = daemon ÷ pipeline`,
        ['coordinators', 'daemon/s', 'pipe/s', 'ratio/s', 'daemon p50', 'pipe p50', 'ratio p50', 'daemon p99', 'pipe p99', 'ratio p99'],
        rows.map((r) => [
          r.concurrency,
          fmt.int(r.daemon.perSecond),
          fmt.int(r.pipeline.perSecond),
          fmt.ratio(r.daemon.perSecond / r.pipeline.perSecond),
          fmt.ms(r.daemon.p50),
          fmt.ms(r.pipeline.p50),
          fmt.ratio(r.daemon.p50 / r.pipeline.p50),
          fmt.ms(r.daemon.p99),
          fmt.ms(r.pipeline.p99),
          fmt.ratio(r.daemon.p99 / r.pipeline.p99),
        ]),
      ),
    );
    lines.push('');
    lines.push(cpuTable(rows));
    lines.push('');
  }
  if (results.f.length) {
    lines.push(clientTable());
    lines.push('');
  }
  if (results.c) {
    const base = results.a.find((r) => r.concurrency === 1)?.baseline ?? results.a[0]?.baseline;
    lines.push(
      table(
        `(c) append → follower push (chats.batch on another connection), ${results.c.appends} appends one at a time; baseline: in-process durable append at 1 writer`,
        ['appends', 'push p50 ms', 'push p99 ms', 'append RTT p50', 'append RTT p99', 'base p50', 'base p99', 'ratio p50', 'ratio p99'],
        [
          [
            results.c.appends,
            fmt.ms(results.c.pushP50),
            fmt.ms(results.c.pushP99),
            fmt.ms(results.c.rttP50),
            fmt.ms(results.c.rttP99),
            fmt.ms(base?.p50),
            fmt.ms(base?.p99),
            fmt.ratio(results.c.pushP50 / base?.p50),
            fmt.ratio(results.c.pushP99 / base?.p99),
          ],
        ],
      ),
    );
    lines.push('');
  }
  if (results.d.length) {
    lines.push(
      table(
        `(d) chats.history, limit ${HISTORY_LIMIT}, p50 of ${cfg.pages} calls; baseline: raw LevelDB range reads of the same page on the same store (daemon stopped)`,
        [
          'messages',
          'backward p50 ms',
          'fwd-mid p50 ms',
          'base bwd ms',
          'base fwd ms',
          'ratio bwd',
          'ratio fwd',
          'bwd p99 ms',
          'fwd p99 ms',
          'scan rec/s',
          'build rec/s',
          'restart ms',
        ],
        results.d.map((r) => [
          fmt.int(r.built),
          fmt.ms(r.backwardP50),
          fmt.ms(r.forwardMidP50),
          fmt.ms(r.rawBackwardP50),
          fmt.ms(r.rawForwardP50),
          fmt.ratio(r.backwardP50 / r.rawBackwardP50),
          fmt.ratio(r.forwardMidP50 / r.rawForwardP50),
          fmt.ms(r.backwardP99),
          fmt.ms(r.forwardMidP99),
          fmt.int(r.scanRecordsPerSecond),
          fmt.int(r.buildRecordsPerSecond),
          fmt.ms(r.restartMs),
        ]),
      ),
    );
    const first = results.d[0];
    const last = results.d.at(-1);
    if (results.d.length > 1) {
      lines.push(
        `flatness: backward p50 ${fmt.ratio(last.backwardP50 / first.backwardP50)}, forward-mid p50 ${fmt.ratio(last.forwardMidP50 / first.forwardMidP50)} at ${fmt.int(last.built)} vs ${fmt.int(first.built)} messages (1x = flat)`,
      );
    }
    lines.push(`build: ${fmt.int(last.built)} messages in ${fmt.int(results.dBuildSeconds)} s`);
    lines.push('');
  }
  if (results.e) {
    const e = results.e;
    const size = fmt.int(results.d.at(-1)?.built ?? 0);
    const erows = [
      [
        `startup ms (spawn → hello), ${size} msgs`,
        fmt.ms(e.startupMs),
        fmt.ms(e.minimalStartupMs),
        fmt.ratio(e.startupMs / e.minimalStartupMs),
      ],
      [`RSS MiB idle, ${size} msgs`, fmt.mib(e.rssKiB), fmt.mib(e.minimalRssKiB), fmt.ratio(e.rssKiB / e.minimalRssKiB)],
    ];
    if (e.followers) {
      erows.push([
        `RSS MiB, ${e.followers.count} idle followers / ${e.followers.connections} conns`,
        fmt.mib(e.followers.rssAfterKiB),
        fmt.mib(e.followers.rssBeforeKiB),
        fmt.ratio(e.followers.rssAfterKiB / e.followers.rssBeforeKiB),
      ]);
      erows.push(['  per follower KiB', e.followers.perFollowerKiB.toFixed(1), '', '']);
    }
    lines.push(
      table(
        `(e) startup and RSS, median of ${cfg.startupRounds}; baseline: a bare node process opening the same LevelDB and answering on a Unix socket (followers row: same daemon before the follows)`,
        ['measure', 'daemon', 'baseline', 'ratio'],
        erows,
      ),
    );
    lines.push('');
  }
  lines.push(...postgresTables());
  if (results.h) lines.push(commandStartTable(results.h), '');
  if (results.a.length || results.c || results.d.length || results.e || results.g?.push || results.h) {
    lines.push(targetCheck());
    lines.push('');
  }
  for (const n of results.notes) lines.push(`note: ${n}`);
  return lines.join('\n');
}

/** The thread groups present in some rows, in THREAD_GROUPS order, then any named ones. */
function groupsOf(cpus) {
  const seen = new Set(cpus.filter(Boolean).flatMap((c) => Object.keys(c.us)));
  return [...THREAD_GROUPS.filter((g) => seen.has(g)), ...[...seen].filter((g) => !THREAD_GROUPS.includes(g)).sort()];
}

const threadCounts = (cpu, groups) => groups.map((g) => cpu.threads[g] ?? 0).join('/');

function cpuTable(rows) {
  const cores = os.cpus().length;
  const groups = groupsOf(rows.flatMap((r) => [r.daemon.server, r.pipeline.server]));
  // What the CPU alone allows: every core busy, nothing waiting on fsync or on another thread.
  const ceiling = (total, client) => (cores * 1e6) / (total + client);
  const out = [];
  for (const r of rows) {
    for (const [name, x] of [
      ['daemon', r.daemon],
      ['pipeline', r.pipeline],
    ]) {
      const cpu = x.server;
      if (!cpu) continue;
      out.push([
        name === 'daemon' ? r.concurrency : '',
        name,
        ...groups.map((g) => fmt.int(cpu.us[g] ?? 0)),
        fmt.int(sum(cpu.us)),
        cpu.mainBusy.toFixed(2),
        fmt.int(x.clientCpuUs),
        fmt.int(ceiling(sum(cpu.us), x.clientCpuUs)),
        threadCounts(cpu, groups),
      ]);
    }
  }
  const legend = groups.map((g) => `  ${g}: ${THREAD_GROUP_NOTES[g] ?? 'threads named so by the runtime'}`);
  return [
    table(
      `(a'') CPU µs per append by thread group (user + system, /proc/<pid>/task/<tid>/stat over each round, median of rounds); main busy = main-thread CPU ÷ wall time; bench client = this process; ceiling = ${cores} cores ÷ (server + bench client µs)`,
      ['coordinators', 'server', ...groups.map((g) => `${g} µs`), 'total µs', 'main busy', 'bench client µs', 'ceiling/s', 'threads'],
      out,
    ),
    `threads = count per group (${groups.join('/')}); groups by creation order (Node 20 names no thread):`,
    ...legend,
  ].join('\n');
}

function clientTable() {
  const groups = groupsOf(results.f.map((r) => r.client));
  const rows = results.f.map((r) => [
    r.concurrency,
    r.mode === 'raw' ? 'raw wire client' : 'Coordinator',
    fmt.int(r.perSecond),
    fmt.ms(r.p50),
    fmt.ms(r.p99),
    fmt.int(sum(r.client.us)),
    ...groups.map((g) => fmt.int(r.client.us[g] ?? 0)),
    r.client.mainBusy.toFixed(2),
    fmt.int(sum(r.daemon.us)),
    r.daemon.mainBusy.toFixed(2),
  ]);
  const verdicts = results.f
    .filter((r) => r.mode === 'coordinator')
    .map((r) => {
      const raw = results.f.find((x) => x.mode === 'raw' && x.concurrency === r.concurrency);
      const limit = r.client.mainBusy >= CLIENT_LIMIT_BUSY && r.client.mainBusy >= r.daemon.mainBusy;
      return (
        `at ${r.concurrency}: Coordinator ${fmt.int(sum(r.client.us))} µs/append vs raw ${fmt.int(sum(raw?.client.us))} (${fmt.ratio(sum(r.client.us) / sum(raw?.client.us))}), ` +
        `appends/s ${fmt.ratio(r.perSecond / raw?.perSecond)} of raw; client main busy ${r.client.mainBusy.toFixed(2)}, daemon main busy ${r.daemon.mainBusy.toFixed(2)} → ` +
        (limit ? 'the CLIENT LIBRARY is the limit here' : 'the client library is not the limit')
      );
    });
  return [
    table(
      `(f) load from the client library, in a child process (bench/client-load.mjs): raw wire client = the bare NDJSON client of (a); Coordinator = dist/client Coordinator.send(text), which also follows its chat (the daemon pushes each own append back to it); CPU µs per append from /proc of the client process and the daemon, median of ${cfg.rounds} rounds × ${cfg.seconds}s`,
      [
        'clients',
        'client',
        'appends/s',
        'p50 ms',
        'p99 ms',
        'client µs',
        ...groups.map((g) => `client ${g} µs`),
        'client main busy',
        'daemon µs',
        'daemon main busy',
      ],
      rows,
    ),
    `verdict (client library is the limit when its main thread is ≥ ${CLIENT_LIMIT_BUSY} busy and busier than the daemon's):`,
    ...verdicts.map((v) => `  ${v}`),
  ].join('\n');
}

/** A client's main thread this busy (fraction of one core) cannot produce appends any faster. */
const CLIENT_LIMIT_BUSY = 0.9;
/** "Flat" history pages: p50 at the largest size at most this multiple of the p50 at 1k. */
const FLAT_MAX = 1.5;
/** Issue 54: LevelDB appends/s at 64 clients (1 KiB) at least this multiple of the pipeline's. */
const PIPELINE_RATIO_MIN = 1.0;
/** Issue 54: PostgreSQL appends/s at 64 clients at least this multiple of LevelDB's, in the same run. */
const PG_RATIO_MIN = 0.8;
/** Issue 54: PostgreSQL's single-client p50 at most this multiple of LevelDB's. */
const PG_P50_MAX = 2.0;
/** Issue 24: append through one daemon → push to a follower on another, p50. */
const CROSS_PUSH_MAX_MS = 10;
const ONE_MILLION = 1_000_000;

/** The issue's targets, each with the value measured in this run, its threshold and met / NOT MET. */
function targetCheck() {
  const rows = [];
  const footnotes = [];
  const why = [];
  const status = (ok) => (ok === null ? 'n/a' : ok ? 'met' : 'NOT MET');
  const at = (c) => results.a.find((r) => r.concurrency === c && r.pipeline);
  const mainUs = (x) => x?.server?.us.main;

  const a64 = at(64);
  const tput = a64 ? a64.daemon.perSecond / a64.pipeline.perSecond : NaN;
  const kib = `${fmt.int(cfg.appendBytes)} B`;
  if (a64 && cfg.appendBytes !== 1024)
    footnotes.push(`appends measured with ${kib} messages, not 1 KiB (BENCH_CONTENT_BYTES): indicative only`);
  rows.push([
    `LevelDB appends/s vs pipeline at 64 clients, ${kib}`,
    a64 ? `${fmt.ratio(tput)} (${fmt.int(a64.daemon.perSecond)} / ${fmt.int(a64.pipeline.perSecond)} per s)` : 'not run',
    `≥ ${fmt.ratio(PIPELINE_RATIO_MIN)}`,
    a64 ? status(tput >= PIPELINE_RATIO_MIN) + (cfg.appendBytes === 1024 ? '' : '*') : 'n/a',
  ]);
  if (a64 && tput < PIPELINE_RATIO_MIN) {
    why.push(
      `appends/s at 64: daemon ${fmt.int(sum(a64.daemon.server?.us))} µs CPU per append (main thread ${fmt.int(mainUs(a64.daemon))} µs, busy ${a64.daemon.server?.mainBusy.toFixed(2)}) vs pipeline ${fmt.int(sum(a64.pipeline.server?.us))} µs (main ${fmt.int(mainUs(a64.pipeline))} µs, busy ${a64.pipeline.server?.mainBusy.toFixed(2)}): see (a'') and the profile recipe in bench/README.md`,
    );
  }
  const a1 = at(1);
  rows.push([
    'single-client p50 vs pipeline',
    a1 ? `${fmt.ms(a1.daemon.p50)} ms vs ${fmt.ms(a1.pipeline.p50)} ms (${fmt.ratio(a1.daemon.p50 / a1.pipeline.p50)})` : 'not run',
    "≤ the pipeline's (1.00x)",
    status(a1 ? a1.daemon.p50 <= a1.pipeline.p50 : null),
  ]);
  if (a1 && a1.daemon.p50 > a1.pipeline.p50) {
    why.push(
      `p50 at 1: daemon main thread ${fmt.int(mainUs(a1.daemon))} µs per append vs pipeline ${fmt.int(mainUs(a1.pipeline))} µs, libuv pool ${fmt.int(a1.daemon.server?.us['libuv pool'])} vs ${fmt.int(a1.pipeline.server?.us['libuv pool'])} µs: see (a'') and the profile recipe in bench/README.md`,
    );
  }
  const c = results.c;
  rows.push([
    'append→push p50 vs append p50',
    c ? `${fmt.ms(c.pushP50)} ms vs ${fmt.ms(c.rttP50)} ms (${fmt.ratio(c.pushP50 / c.rttP50)})` : 'not run',
    '≤ 1.20x',
    status(c ? c.pushP50 <= 1.2 * c.rttP50 : null),
  ]);
  if (c && c.pushP50 > 1.2 * c.rttP50) {
    why.push(
      `push: p50 ${fmt.ms(c.pushP50)} ms, p99 ${fmt.ms(c.pushP99)} ms after the append's send, whose own answer took ${fmt.ms(c.rttP50)} ms: the push leaves later than the answer; see (c)`,
    );
  }

  const g64 = results.g?.loops?.find((x) => x.concurrency === 64);
  const pgRatio = g64 ? g64.PostgreSQL.perSecond / g64.LevelDB.perSecond : NaN;
  rows.push([
    `PostgreSQL appends/s vs LevelDB at 64 clients, ${kib}`,
    g64 ? `${fmt.ratio(pgRatio)} (${fmt.int(g64.PostgreSQL.perSecond)} / ${fmt.int(g64.LevelDB.perSecond)} per s)` : 'not run',
    `≥ ${fmt.ratio(PG_RATIO_MIN)}`,
    status(g64 ? pgRatio >= PG_RATIO_MIN : null),
  ]);
  if (g64 && pgRatio < PG_RATIO_MIN) {
    why.push(
      `PostgreSQL at 64: daemon ${fmt.int(g64.PostgreSQL.serverCpuUs)} µs CPU per append and the cluster ${fmt.int(g64.PostgreSQL.postgresCpuUs)} µs, against LevelDB's daemon ${fmt.int(g64.LevelDB.serverCpuUs)} µs, on the same cores: see (g) and npm run bench:profile`,
    );
  }
  const g1 = results.g?.loops?.find((x) => x.concurrency === 1);
  const pgP50 = g1 ? g1.PostgreSQL.p50 / g1.LevelDB.p50 : NaN;
  rows.push([
    'PostgreSQL single-client p50 vs LevelDB',
    g1 ? `${fmt.ms(g1.PostgreSQL.p50)} ms vs ${fmt.ms(g1.LevelDB.p50)} ms (${fmt.ratio(pgP50)})` : 'not run',
    `≤ ${fmt.ratio(PG_P50_MAX)}`,
    status(g1 ? pgP50 <= PG_P50_MAX : null),
  ]);
  if (g1 && pgP50 > PG_P50_MAX) {
    why.push(
      `PostgreSQL p50 at 1: a lone append pays the round trip to the server and its WAL fsync (the statement, then COMMIT's flush) where LevelDB pays one synced batch; daemon ${fmt.int(g1.PostgreSQL.serverCpuUs)} µs and cluster ${fmt.int(g1.PostgreSQL.postgresCpuUs)} µs CPU per append: see (g)`,
    );
  }
  const cross = results.g?.push?.find((x) => x.name === 'PostgreSQL, across daemons (A → B)');
  rows.push([
    'cross-daemon push p50 (PostgreSQL)',
    cross ? `${fmt.ms(cross.pushP50)} ms send→push (append RTT ${fmt.ms(cross.rttP50)} ms)` : 'not run',
    `≤ ${CROSS_PUSH_MAX_MS} ms`,
    status(cross ? cross.pushP50 <= CROSS_PUSH_MAX_MS : null),
  ]);
  if (cross && cross.pushP50 > CROSS_PUSH_MAX_MS) {
    why.push(
      `cross-daemon push: answer→push p50 ${fmt.ms(cross.afterP50)} ms is what daemon B adds after the commit; the rest is the writer's append round trip on A (${fmt.ms(cross.rttP50)} ms: PostgreSQL's commit); see (g)`,
    );
  }

  const d = results.d;
  if (d.length > 1) {
    const first = d[0];
    const last = d.at(-1);
    const bwd = last.backwardP50 / first.backwardP50;
    const fwd = last.forwardMidP50 / first.forwardMidP50;
    const small = last.built < ONE_MILLION;
    if (small)
      footnotes.push(`history measured up to ${fmt.int(last.built)} records, not 1M (BENCH_MAX_RECORDS / quick mode): indicative only`);
    rows.push([
      `history page p50 flat, ${fmt.int(first.built)} → ${fmt.int(last.built)}`,
      `backward ${fmt.ratio(bwd)}, forward-mid ${fmt.ratio(fwd)}`,
      `both ≤ ${fmt.ratio(FLAT_MAX)} at 1M`,
      status(bwd <= FLAT_MAX && fwd <= FLAT_MAX) + (small ? '*' : ''),
    ]);
    if (bwd > FLAT_MAX || fwd > FLAT_MAX) {
      why.push(
        `history: raw LevelDB pages ${fmt.ms(first.rawBackwardP50)} → ${fmt.ms(last.rawBackwardP50)} ms (backward), ${fmt.ms(first.rawForwardP50)} → ${fmt.ms(last.rawForwardP50)} ms (forward) on the same stores: if these grew too, LevelDB did; see (d)`,
      );
    }
  } else {
    rows.push(['history page p50 flat to 1M', d.length ? 'one size only' : 'not run', `both ≤ ${fmt.ratio(FLAT_MAX)} at 1M`, 'n/a']);
  }
  const e = results.e;
  const size = results.d.at(-1)?.built ?? 0;
  const smallE = e && size < ONE_MILLION;
  if (smallE) footnotes.push(`startup and RSS measured on a ${fmt.int(size)}-record data dir, not 1M: indicative only`);
  const mb = (kib) => `${((kib * 1024) / 1e6).toFixed(1)} MB`;
  rows.push([
    `startup at ${e ? fmt.int(size) : '1M'} records`,
    e ? `${fmt.ms(e.startupMs)} ms` : 'not run',
    '≤ 500 ms at 1M',
    e ? status(e.startupMs <= 500) + (smallE ? '*' : '') : 'n/a',
  ]);
  if (e && e.startupMs > 500) {
    why.push(
      `startup: a bare node opening the same LevelDB takes ${fmt.ms(e.minimalStartupMs)} ms here, so the daemon's own share is ${fmt.ms(e.startupMs - e.minimalStartupMs)} ms; see (e), and profile a start with node --cpu-prof`,
    );
  }
  // 80 MB taken as 80 × 10^6 bytes (= 76.3 MiB), the stricter reading.
  rows.push([
    'idle RSS',
    e ? mb(e.rssKiB) : 'not run',
    '≤ 80 MB (10^6 B)',
    e ? status(e.rssKiB * 1024 <= 80e6) + (smallE ? '*' : '') : 'n/a',
  ]);
  if (e && e.rssKiB * 1024 > 80e6) {
    why.push(`RSS: a bare node with the same LevelDB open holds ${mb(e.minimalRssKiB)}; see (e)`);
  }

  if (results.h) {
    for (const [target, measured, threshold, ok] of commandStartTargets(results.h)) rows.push([target, measured, threshold, status(ok)]);
  }

  return [
    table(
      `target check (the performance issue's targets, from this run${cfg.quick ? ', QUICK MODE: not figures' : ''})`,
      ['target', 'measured', 'threshold', 'status'],
      rows,
      4,
    ),
    ...footnotes.map((f) => `* ${f}`),
    ...(why.length ? ['why (not met):', ...why.map((w) => `  ${w}`)] : []),
  ].join('\n');
}

// ---- main ----------------------------------------------------------------------------------

async function main() {
  log(`config ${JSON.stringify({ ...cfg, only: [...cfg.only], historySizes })}`);
  const on = (s) => cfg.only.has(s);
  // (a), (b), (f), (c) on one fresh daemon.
  if (on('a') || on('f') || on('c')) {
    const d1 = new Daemon(makeTempDir('yba-'));
    try {
      await d1.start();
      const admin = await d1.admin();
      if (on('a')) await benchAppends(d1, admin);
      if (on('f')) await benchClientLibrary(d1, admin);
      if (on('c')) await benchPush(d1, admin);
      admin.close();
    } finally {
      await d1.stop();
      removeTempDir(d1.dir);
    }
  }
  if (on('h')) results.h = await benchCommandStart({ runs: cfg.commandRuns, log });
  if (on('d2')) await benchRedis();
  if (on('g')) await benchPostgres();
  // (d), (e) on a second daemon whose chat grows to the largest size.
  if (on('d') || on('e')) {
    const d2 = new Daemon(makeTempDir('ybd-'));
    try {
      await d2.start();
      const admin = await d2.admin();
      if (on('d')) await benchHistory(d2, admin);
      admin.close();
      if (on('e')) {
        await benchStartup(d2);
        await benchFollowers(d2);
      }
    } finally {
      await d2.stop();
      removeTempDir(d2.dir);
    }
  }
  const text = report();
  process.stdout.write(text + '\n');
  results.totalSeconds = (nowMs() - T0) / 1000;
  log(`done in ${results.totalSeconds.toFixed(1)} s`);
  if (cfg.json) writeFileSync(cfg.json, JSON.stringify(results, null, 2));
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${err?.stack ?? err}\n`);
    cleanupAll();
    process.exit(1);
  },
);
