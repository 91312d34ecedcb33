// A CPU profile of the daemon's event loop under the bench's closed loop (64 coordinators by
// default), summarised by self time per function and per source file. The raw profile is kept
// for Chrome DevTools / speedscope.
//
//   npm run build && node bench/profile.mjs        (BENCH_CONCURRENCY=64 BENCH_SECONDS=8)
//   BENCH_PROFILE_STORE=postgresql node bench/profile.mjs   # the daemon on a throwaway PostgreSQL cluster

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  BENCH_DAEMON_ARGS,
  Daemon,
  cleanupAll,
  closedLoop,
  connectConn,
  envNumber,
  makeTempDir,
  repoRoot,
  setupCoordinator,
  table,
} from './lib.mjs';

const clients = envNumber('BENCH_CONCURRENCY', 64);
const seconds = envNumber('BENCH_SECONDS', 8);
const dir = makeTempDir('yl-prof-');
const profFile = path.join(dir, 'daemon.cpuprofile');
process.env.YELLO_PROFILE_OUT = profFile;
const onPostgres = process.env.BENCH_PROFILE_STORE === 'postgresql';
// Loaded only when asked for: the LevelDB profile needs no PostgreSQL binaries.
const cluster = onPostgres ? await (await import('../test/helpers/pg-cluster.mjs')).PgCluster.start() : null;
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
process.kill(daemon.pid, 'SIGUSR2');
const r = await closedLoop(cos, seconds, daemon.pid);
process.kill(daemon.pid, 'SIGUSR2');
for (let i = 0; i < 100 && !existsSync(profFile); i++) await new Promise((res) => setTimeout(res, 50));
for (const c of cos) c.conn.close();
admin.close();
await daemon.stop();
await cluster?.stop();

const prof = JSON.parse(readFileSync(profFile, 'utf8'));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const selfSamples = new Map();
for (const id of prof.samples) selfSamples.set(id, (selfSamples.get(id) ?? 0) + 1);
const total = prof.samples.length;
const wallUs = prof.endTime - prof.startTime;
const usPerSample = wallUs / total;
const fnTotals = new Map();
const fileTotals = new Map();
const where = (cf) => {
  const url = cf.url.replace(`file://${repoRoot}/`, '');
  if (url === '') return '(native / V8)';
  if (url.startsWith('node:')) return 'node:* (core)';
  if (url.includes('node_modules/')) return url.replace(/^.*node_modules\/((@[^/]+\/)?[^/]+).*$/, '$1');
  return url;
};
for (const [id, n] of selfSamples) {
  const cf = byId.get(id).callFrame;
  if (cf.functionName === '(idle)' || cf.functionName === '(program)') continue;
  const fn = `${cf.functionName || '(anonymous)'} ${where(cf)}:${cf.lineNumber + 1}`;
  fnTotals.set(fn, (fnTotals.get(fn) ?? 0) + n);
  fileTotals.set(where(cf), (fileTotals.get(where(cf)) ?? 0) + n);
}
const idle = [...selfSamples].filter(([id]) => byId.get(id).callFrame.functionName === '(idle)').reduce((a, [, n]) => a + n, 0);
// The profile covers the measured window (give or take the signal's delivery).
const appends = r.appends;
const perAppend = (n) => ((n * usPerSample) / appends).toFixed(1);
console.log(
  `daemon event-loop CPU profile: ${clients} coordinators, ${seconds} s measured (${Math.round(r.perSecond)} appends/s), ${appends} appends profiled, ${(wallUs / 1e6).toFixed(1)} s, ${total} samples, idle ${((idle / total) * 100).toFixed(0)} %; µs/append = self time ÷ appends`,
);
const top = (m, k) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k);
console.log(
  table(
    'self time by source',
    ['source', 'µs/append', '%'],
    top(fileTotals, 25).map(([f, n]) => [f, perAppend(n), ((n / total) * 100).toFixed(1)]),
  ),
);
console.log(
  table(
    'self time by function',
    ['function', 'µs/append', '%'],
    top(fnTotals, 30).map(([f, n]) => [f, perAppend(n), ((n / total) * 100).toFixed(1)]),
  ),
);
if (process.env.BENCH_PROFILE_OUT) (await import('node:fs')).copyFileSync(profFile, process.env.BENCH_PROFILE_OUT);
cleanupAll();
