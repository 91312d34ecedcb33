// How far from the pipeline an append can be and still do what docs/protocol.md asks:
// the pipeline (bench/pipeline-server.mjs), the same server in its 'contract' mode (the
// pipeline plus the least the contract asks of an append, with every shortcut a real daemon
// could not take) and the real daemon, in the same closed loops, rotating which goes first.
//
//   npm run build && node bench/floor.mjs
//   BENCH_CONCURRENCY=1,64 BENCH_ROUNDS=6 BENCH_CONTENT_BYTES=1024 (the defaults here)
//
// Prints one table: appends/s, p50, server CPU per append and the bench client's, each as a
// median over rounds, and the ratio of appends/s to the pipeline's.

import {
  BENCH_DAEMON_ARGS,
  Daemon,
  PipelineServer,
  cleanupAll,
  closedLoop,
  envCounts,
  envNumber,
  fmt,
  makeTempDir,
  median,
  setupCoordinator,
  table,
} from './lib.mjs';

const cfg = {
  concurrency: envCounts('BENCH_CONCURRENCY', '1,64'),
  rounds: Math.round(envNumber('BENCH_ROUNDS', 6)),
  seconds: envNumber('BENCH_SECONDS', 3),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 1),
  bytes: Math.round(envNumber('BENCH_CONTENT_BYTES', 1024)),
};
process.on('exit', cleanupAll);
const log = (m) => process.stderr.write(`[floor] ${m}\n`);

const maxC = Math.max(...cfg.concurrency);
const daemon = new Daemon(makeTempDir('ybf-d-'), { extraArgs: BENCH_DAEMON_ARGS });
await daemon.start();
const admin = await daemon.admin();
const { agent: sink } = await admin.request('agents.create', { username: 'sink', name: 'Sink' });
const sides = {
  pipeline: new PipelineServer(makeTempDir('ybf-p-'), 'pipeline'),
  contract: new PipelineServer(makeTempDir('ybf-c-'), 'contract'),
};
const cos = { daemon: await Promise.all(Array.from({ length: maxC }, (_, i) => setupCoordinator(daemon, admin, `w${i}`, sink.id))) };
for (const [name, server] of Object.entries(sides)) {
  await server.start();
  cos[name] = await server.coordinators(maxC);
}
const pids = { pipeline: sides.pipeline.pid, contract: sides.contract.pid, daemon: daemon.pid };
const names = ['pipeline', 'contract', 'daemon'];
const runs = new Map();
for (const c of cfg.concurrency) {
  for (const n of names) await closedLoop(cos[n].slice(0, c), cfg.warmupSeconds, null, cfg.bytes);
  for (let r = 0; r < cfg.rounds; r++) {
    const order = names.slice(r % 3).concat(names.slice(0, r % 3));
    for (const n of order) {
      const res = await closedLoop(cos[n].slice(0, c), cfg.seconds, pids[n], cfg.bytes);
      const key = `${n}@${c}`;
      runs.set(key, [...(runs.get(key) ?? []), res]);
      log(`c=${c} round ${r + 1} ${n}: ${fmt.int(res.perSecond)}/s, ${fmt.int(res.serverCpuUs)} µs`);
    }
  }
}
const rows = [];
for (const c of cfg.concurrency) {
  const pipe = median(runs.get(`pipeline@${c}`).map((x) => x.perSecond));
  for (const n of names) {
    const xs = runs.get(`${n}@${c}`);
    const m = (k) => median(xs.map((x) => x[k]));
    rows.push([
      String(c),
      n,
      fmt.int(m('perSecond')),
      fmt.ms(m('p50')),
      fmt.int(m('serverCpuUs')),
      fmt.int(m('clientCpuUs')),
      fmt.ratio(m('perSecond') / pipe),
    ]);
  }
}
process.stdout.write(
  table(
    `pipeline, contract floor and daemon — ${cfg.bytes} B per message, median of ${cfg.rounds} rounds × ${cfg.seconds}s, order rotated per round`,
    ['clients', 'server', 'appends/s', 'p50 ms', 'server µs', 'client µs', 'vs pipeline'],
    rows,
    2,
  ) + '\n',
);
for (const all of Object.values(cos)) for (const co of all) co.conn.close();
for (const s of Object.values(sides)) await s.stop();
await daemon.stop();
process.exit(0);
