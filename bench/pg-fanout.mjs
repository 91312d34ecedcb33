// What every other daemon of a PostgreSQL store pays for one daemon's appends: each build gets a
// database of its own on one throwaway cluster and two daemons on it, A under the closed loop of
// 64 coordinators (1 KiB messages) and B idle, with no follower; B still LISTENs and takes every
// notice A's commits send. Per round: A's appends/s and CPU per append, and B's CPU per append
// of A. With BENCH_FANOUT_REF_DIR (another built checkout: its bin/yello and dist/) both builds
// run, alternating first place each round.
//
//   npm run build && node bench/pg-fanout.mjs
//   BENCH_FANOUT_REF_DIR=/tmp/before node bench/pg-fanout.mjs   (BENCH_ROUNDS, default 6)

import path from 'node:path';
import { PgCluster } from '../test/helpers/pg-cluster.mjs';
import {
  BENCH_DAEMON_ARGS,
  Daemon,
  cleanupAll,
  closedLoop,
  cpuMs,
  envNumber,
  fmt,
  makeTempDir,
  median,
  repoRoot,
  setupCoordinator,
  table,
} from './lib.mjs';

const rounds = Math.round(envNumber('BENCH_ROUNDS', 6));
const builds = { this: repoRoot, ...(process.env.BENCH_FANOUT_REF_DIR ? { ref: process.env.BENCH_FANOUT_REF_DIR } : {}) };
process.on('exit', cleanupAll);

const cluster = await PgCluster.start();
const sides = [];
try {
  for (const [name, dir] of Object.entries(builds)) {
    await cluster.psql(`create database fanout_${name}`);
    const extraArgs = [...BENCH_DAEMON_ARGS, '--store', cluster.url(`fanout_${name}`)];
    const daemon = () => new Daemon(makeTempDir(`ybfo${name}-`), { bin: path.join(dir, 'bin', 'yello'), cwd: dir, extraArgs });
    const a = daemon();
    const b = daemon();
    await a.start();
    await b.start();
    const admin = await a.admin();
    const { agent: sink } = await admin.request('agents.create', { username: 'sink', name: 'Sink' });
    const cos = await Promise.all(Array.from({ length: 64 }, (_, i) => setupCoordinator(a, admin, `w${i}`, sink.id)));
    await closedLoop(cos, 1, null, 1024);
    sides.push({ name, dir, a, b, admin, cos, runs: [] });
  }
  for (let r = 0; r < rounds; r++) {
    for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
      const idle0 = cpuMs(s.b.pid);
      const res = await closedLoop(s.cos, 3, s.a.pid, 1024);
      const idleUs = ((cpuMs(s.b.pid) - idle0) * 1000) / res.appends;
      s.runs.push({ perSecond: res.perSecond, loadedUs: res.serverCpuUs, idleUs });
      process.stderr.write(
        `[fanout] ${s.name} round ${r + 1}: ${fmt.int(res.perSecond)}/s, A ${fmt.int(res.serverCpuUs)} µs, B ${idleUs.toFixed(1)} µs\n`,
      );
    }
  }
  const rows = sides.map((s) => {
    const m = (k) => median(s.runs.map((x) => x[k]));
    const idle = s.runs.map((x) => x.idleUs);
    return [
      `${s.name} (${s.dir})`,
      fmt.int(m('perSecond')),
      fmt.int(m('loadedUs')),
      m('idleUs').toFixed(1),
      `${Math.min(...idle).toFixed(1)}–${Math.max(...idle).toFixed(1)}`,
    ];
  });
  process.stdout.write(
    table(
      `one loaded daemon (A, 64 clients, 1 KiB) and one idle daemon (B) per build on one database, median of ${rounds} rounds × 3s`,
      ['build', 'A appends/s', 'A µs/append', 'B µs/append', 'B min–max'],
      rows,
    ) + '\n',
  );
} finally {
  for (const s of sides) {
    for (const co of s.cos) co.conn.close();
    s.admin.close();
    await s.a.stop();
    await s.b.stop();
  }
  await cluster.stop();
}
process.exit(0);
