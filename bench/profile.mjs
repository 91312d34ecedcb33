// A CPU profile of the daemon's event loop under the bench's closed loop (64 coordinators,
// 1 KiB messages by default), on LevelDB and on a throwaway PostgreSQL cluster, printed as a
// per-append breakdown: µs of main-thread CPU per stage of an append (bench/profile-stages.mjs),
// µs per thread group of the daemon (/proc, as in run.mjs (a'')) and the cluster's CPU, then
// self time per source file and per function. The raw profiles are kept when asked for
// (BENCH_PROFILE_OUT=<dir>) for Chrome DevTools / speedscope.
//
//   npm run bench:profile                                  (both backends; LevelDB only without PostgreSQL binaries)
//   BENCH_PROFILE_STORE=leveldb node bench/profile.mjs     (one backend; or postgresql)
//   BENCH_CONCURRENCY=64 BENCH_SECONDS=8 BENCH_CONTENT_BYTES=1024 BENCH_PROFILE_ROUNDS=1

import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  BENCH_DAEMON_ARGS,
  Daemon,
  THREAD_GROUPS,
  cleanupAll,
  closedLoop,
  connectConn,
  envNumber,
  makeTempDir,
  median,
  repoRoot,
  setupCoordinator,
  table,
  treeCpuMs,
} from './lib.mjs';
import { STAGE_ORDER, stagesOf } from './profile-stages.mjs';
import { pgBinDir } from '../test/helpers/pg-cluster.mjs';

process.env.BENCH_CONTENT_BYTES ??= '1024';
const clients = envNumber('BENCH_CONCURRENCY', 64);
const seconds = envNumber('BENCH_SECONDS', 8);
const rounds = Math.round(envNumber('BENCH_PROFILE_ROUNDS', 1));
const contentBytes = envNumber('BENCH_CONTENT_BYTES', 1024);
const wanted = process.env.BENCH_PROFILE_STORE ?? 'both';
if (!['both', 'leveldb', 'postgresql'].includes(wanted)) {
  process.stderr.write(`bench/profile.mjs: BENCH_PROFILE_STORE must be both, leveldb or postgresql, not ${wanted}\n`);
  process.exit(2);
}
const stores = wanted === 'both' ? ['leveldb', ...(pgBinDir() ? ['postgresql'] : [])] : [wanted];
if (wanted === 'both' && stores.length === 1) process.stderr.write('profile: no PostgreSQL server binaries; LevelDB only\n');
const log = (msg) => process.stderr.write(`[profile] ${msg}\n`);

/** One profiled window per round on a fresh daemon of `store`: the profile, the window's figures, the cluster's CPU. */
async function profileStore(store) {
  const dir = makeTempDir('yl-prof-');
  const profFile = path.join(dir, 'daemon.cpuprofile');
  process.env.YELLO_PROFILE_OUT = profFile;
  // Loaded only when asked for: the LevelDB profile needs no PostgreSQL binaries.
  const cluster = store === 'postgresql' ? await (await import('../test/helpers/pg-cluster.mjs')).PgCluster.start() : null;
  await cluster?.psql('create database profile');
  const daemon = new Daemon(dir, {
    bin: path.join(repoRoot, 'bench', 'profile-entry.mjs'),
    extraArgs: cluster ? [...BENCH_DAEMON_ARGS, '--store', cluster.url('profile')] : BENCH_DAEMON_ARGS,
  });
  await daemon.start();
  const admin = await connectConn(daemon.socketPath);
  await admin.request('session.hello', { token: daemon.adminToken });
  const { agent: sink } = await admin.request('agents.create', { username: 'sink', name: 'sink' });
  const cos = await Promise.all(Array.from({ length: clients }, (_, i) => setupCoordinator(daemon, admin, `w${i}`, sink.id)));
  await closedLoop(cos, 1); // warm-up
  const windows = [];
  for (let round = 1; round <= rounds; round++) {
    rmSync(profFile, { force: true });
    process.kill(daemon.pid, 'SIGUSR2');
    const pg0 = cluster ? treeCpuMs(cluster.process.pid) : 0;
    const r = await closedLoop(cos, seconds, daemon.pid);
    const clusterUs = cluster ? ((treeCpuMs(cluster.process.pid) - pg0) * 1000) / r.appends : null;
    process.kill(daemon.pid, 'SIGUSR2');
    for (let i = 0; i < 100 && !existsSync(profFile); i++) await new Promise((res) => setTimeout(res, 50));
    await new Promise((res) => setTimeout(res, 200)); // the file is written synchronously, once
    const prof = JSON.parse(readFileSync(profFile, 'utf8'));
    if (process.env.BENCH_PROFILE_OUT) {
      mkdirSync(process.env.BENCH_PROFILE_OUT, { recursive: true });
      copyFileSync(profFile, path.join(process.env.BENCH_PROFILE_OUT, `${store}-${round}.cpuprofile`));
    }
    windows.push({ r, clusterUs, prof });
    log(
      `${store} round ${round}/${rounds}: ${Math.round(r.perSecond)} appends/s, ${r.appends} appends, cpu ${Math.round(r.serverCpuUs)} µs/append`,
    );
  }
  for (const c of cos) c.conn.close();
  admin.close();
  await daemon.stop();
  await cluster?.stop();
  return windows;
}

const results = new Map();
for (const store of stores) results.set(store, await profileStore(store));

// ---- per-append figures, median over rounds --------------------------------------------------

const summary = new Map();
for (const [store, windows] of results) {
  const per = windows.map(({ r, clusterUs, prof }) => {
    const { stages, idle, total } = stagesOf(prof);
    // The profiler samples wall time: on a shared machine a descheduled event loop would count
    // as busy. So a stage gets its share of the busy samples times the main thread's CPU per
    // append as /proc counts it (that includes the profiler's own ~2-4 %).
    const mainUs = r.server?.us.main ?? NaN;
    const us = (n) => (n / (total - idle)) * mainUs;
    const byStage = new Map([...stages].map(([s, n]) => [s, us(n)]));
    const selfFn = new Map();
    const selfFile = new Map();
    const byId = new Map(prof.nodes.map((n) => [n.id, n]));
    const where = (cf) => {
      const url = cf.url.replace(`file://${repoRoot}/`, '');
      if (url === '') return '(native / V8)';
      if (url.startsWith('node:')) return 'node:* (core)';
      if (url.includes('node_modules/')) return url.replace(/^.*node_modules\/((@[^/]+\/)?[^/]+).*$/, '$1');
      return url;
    };
    for (const id of prof.samples) {
      const cf = byId.get(id).callFrame;
      if (cf.functionName === '(idle)' || cf.functionName === '(program)') continue;
      const fn = `${cf.functionName || '(anonymous)'} ${where(cf)}:${cf.lineNumber + 1}`;
      selfFn.set(fn, (selfFn.get(fn) ?? 0) + us(1));
      selfFile.set(where(cf), (selfFile.get(where(cf)) ?? 0) + us(1));
    }
    return {
      perSecond: r.perSecond,
      p50: r.p50,
      appends: r.appends,
      idleShare: idle / total,
      busyUs: us(total - idle),
      byStage,
      threads: r.server?.us ?? {},
      totalUs: r.serverCpuUs,
      clusterUs,
      selfFn,
      selfFile,
    };
  });
  const med = (f) => median(per.map(f));
  const keys = (f) => [...new Set(per.flatMap((p) => [...f(p).keys()]))];
  summary.set(store, {
    perSecond: med((p) => p.perSecond),
    p50: med((p) => p.p50),
    appends: per.reduce((a, p) => a + p.appends, 0),
    idleShare: med((p) => p.idleShare),
    busyUs: med((p) => p.busyUs),
    byStage: new Map(keys((p) => p.byStage).map((s) => [s, med((p) => p.byStage.get(s) ?? 0)])),
    threads: Object.fromEntries(keys((p) => new Map(Object.entries(p.threads))).map((g) => [g, med((p) => p.threads[g] ?? 0)])),
    totalUs: med((p) => p.totalUs),
    clusterUs: store === 'postgresql' ? med((p) => p.clusterUs) : null,
    selfFn: new Map(keys((p) => p.selfFn).map((s) => [s, med((p) => p.selfFn.get(s) ?? 0)])),
    selfFile: new Map(keys((p) => p.selfFile).map((s) => [s, med((p) => p.selfFile.get(s) ?? 0)])),
  });
}

// ---- report ----------------------------------------------------------------------------------

const names = { leveldb: 'LevelDB', postgresql: 'PostgreSQL' };
const cols = [...summary.keys()];
const f1 = (v) => (Number.isFinite(v) ? v.toFixed(1) : 'n/a');
const cpu = os.cpus();
const lines = [
  `yello append profile — ${new Date().toISOString()} — node ${process.version}, ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
  `${clients} coordinators, 1 chat.message of ${contentBytes} B per streams.append, ${rounds} × ${seconds} s profiled (medians over rounds), after 1 s warm-up; µs per append = CPU ÷ appends answered in the window`,
  ...cols.map((s) => {
    const x = summary.get(s);
    return `${names[s]}: ${Math.round(x.perSecond)} appends/s, p50 ${x.p50.toFixed(2)} ms, event loop idle ${(x.idleShare * 100).toFixed(0)} %`;
  }),
  '',
];
const stageRows = STAGE_ORDER.filter((s) => cols.some((c) => (summary.get(c).byStage.get(s) ?? 0) >= 0.05)).map((s) => [
  s,
  ...cols.flatMap((c) => {
    const x = summary.get(c);
    const v = x.byStage.get(s) ?? 0;
    return [f1(v), `${((v / x.busyUs) * 100).toFixed(0)} %`];
  }),
]);
stageRows.push(['main thread busy, total', ...cols.flatMap((c) => [f1(summary.get(c).busyUs), '100 %'])]);
lines.push(
  table(
    "main-thread CPU per append by stage (µs: the stage's share of the profile's busy samples × the main thread's CPU per append from /proc; a sample is charged to the innermost frame a stage names, bench/profile-stages.mjs)",
    ['stage', ...cols.flatMap((c) => [`${names[c]} µs`, '%'])],
    stageRows,
  ),
  '',
);
// With the inspector's thread Node's threads have distinct names, so lib.mjs groups them by name.
const groups = [...new Set(cols.flatMap((c) => Object.keys(summary.get(c).threads)))].sort(
  (a, b) => (THREAD_GROUPS.indexOf(a) + 1 || 99) - (THREAD_GROUPS.indexOf(b) + 1 || 99) || a.localeCompare(b),
);
const threadRows = groups.map((g) => [`daemon: ${g}`, ...cols.map((c) => f1(summary.get(c).threads[g] ?? 0))]);
threadRows.push(['daemon: all threads', ...cols.map((c) => f1(summary.get(c).totalUs))]);
if (cols.includes('postgresql'))
  threadRows.push([
    'PostgreSQL cluster (postmaster + backends)',
    ...cols.map((c) => (c === 'postgresql' ? f1(summary.get(c).clusterUs) : '')),
  ]);
lines.push(
  table(
    "CPU per append by thread (µs, /proc over the same windows, by thread name or creation order as in run.mjs (a''); the profiler adds a few % to main)",
    ['threads', ...cols.map((c) => `${names[c]} µs`)],
    threadRows,
  ),
);
const top = (m, k) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k);
for (const c of cols) {
  const x = summary.get(c);
  lines.push(
    '',
    table(
      `${names[c]}: self time by source (µs/append)`,
      ['source', 'µs/append'],
      top(x.selfFile, 20).map(([f, v]) => [f, f1(v)]),
    ),
    '',
    table(
      `${names[c]}: self time by function (µs/append)`,
      ['function', 'µs/append'],
      top(x.selfFn, 25).map(([f, v]) => [f, f1(v)]),
    ),
  );
}
process.stdout.write(lines.join('\n') + '\n');
cleanupAll();
