// A/B of two builds in one run: A = the unchanged code (a git ref, built into a temporary
// worktree), B = this checkout's dist/. Both daemons run side by side on the same machine and
// the same bench clients drive them interleaved, round by round, and within a round measurement
// by measurement (closed-loop appends at 1, then A's and B's, at 8, …, then append → push
// latency), A first in odd rounds and B first in even ones, so that neither always runs second
// and a drift in the machine's load hits both alike. Prints each figure's median for A and B,
// B/A, and the lowest and highest per-round B/A: an optimisation pays when the whole spread is
// on the good side. BENCH_AB_DIR=. runs the same build on both sides: the noise floor (A/A).
//
//   npm run build && BENCH_AB_REF=<ref> node bench/ab.mjs
//
// See bench/README.md ("A/B against the unchanged code") for the knobs.

import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, realpathSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  BENCH_DAEMON_ARGS,
  Daemon,
  PushProbe,
  cleanupAll,
  closedLoop,
  envCounts,
  envNumber,
  fmt,
  makeTempDir,
  median,
  nowMs,
  percentile,
  removeTempDir,
  repoRoot,
  setupCoordinator,
  table,
} from './lib.mjs';
import { toggledCopy } from './toggles.mjs';

const QUICK = process.env.BENCH_QUICK === '1';
const cfg = {
  ref: process.env.BENCH_AB_REF ?? null,
  prebuilt: process.env.BENCH_AB_DIR ?? null,
  rounds: Math.max(1, Math.round(envNumber('BENCH_AB_ROUNDS', QUICK ? 2 : 6))),
  seconds: envNumber('BENCH_SECONDS', QUICK ? 1 : 3),
  warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', QUICK ? 0.3 : 1),
  concurrency: envCounts('BENCH_CONCURRENCY', '1,8,64'),
  pushAppends: Math.round(envNumber('BENCH_PUSH_APPENDS', QUICK ? 50 : 200)),
  json: process.env.BENCH_JSON ?? null,
  // postgresql: both daemons on one throwaway cluster (fsync on), each on a database of its own.
  store: process.env.BENCH_AB_STORE ?? 'leveldb',
  // Extra daemon options per side (space-separated), e.g. BENCH_AB_B_ARGS='--sign-workers 1'.
  args: { A: splitArgs(process.env.BENCH_AB_A_ARGS), B: splitArgs(process.env.BENCH_AB_B_ARGS) },
  // Features switched off in a scratch copy of one side's build (bench/toggles.mjs), e.g. BENCH_AB_B_OFF=metrics.
  off: { A: splitArgs(process.env.BENCH_AB_A_OFF?.replaceAll(',', ' ')), B: splitArgs(process.env.BENCH_AB_B_OFF?.replaceAll(',', ' ')) },
};
function splitArgs(v) {
  return (v ?? '').split(/\s+/).filter(Boolean);
}
if (!['leveldb', 'postgresql'].includes(cfg.store)) {
  process.stderr.write(`bench/ab.mjs: BENCH_AB_STORE must be leveldb or postgresql, not ${cfg.store}\n`);
  process.exit(2);
}
if (!cfg.ref && !cfg.prebuilt) {
  process.stderr.write(
    'bench/ab.mjs: set BENCH_AB_REF=<git ref> (the unchanged code, e.g. the merge base), or BENCH_AB_DIR=<a built checkout>\n',
  );
  process.exit(2);
}

const T0 = nowMs();
const log = (msg) => process.stderr.write(`[ab ${((nowMs() - T0) / 1000).toFixed(1).padStart(6)}s] ${msg}\n`);
const git = (...args) => execFileSync('git', ['-C', repoRoot, ...args], { encoding: 'utf8' }).trim();

// ---- the A build: a temporary worktree of the ref --------------------------------------------

let worktree = null;

/** `git worktree add --detach` the ref under a temp dir, share node_modules, `npm run build`. */
function buildRef(ref) {
  const sha = git('rev-parse', '--verify', `${ref}^{commit}`);
  const parent = mkdtempSync(path.join(os.tmpdir().length > 60 ? '/tmp' : os.tmpdir(), 'ybab-'));
  const tree = path.join(parent, 'tree');
  worktree = { parent, tree };
  log(`A: git worktree add --detach ${tree} ${sha.slice(0, 12)} (${ref})`);
  git('worktree', 'add', '--detach', tree, sha);
  symlinkSync(realpathSync(path.join(repoRoot, 'node_modules')), path.join(tree, 'node_modules'));
  log('A: npm run build');
  execFileSync('npm', ['run', 'build'], { cwd: tree, stdio: ['ignore', 2, 2] });
  return { dir: tree, label: `${ref} (${sha.slice(0, 12)})` };
}

/** Remove the temp worktree; synchronous, so it also runs from the exit handler. */
function removeWorktree() {
  if (!worktree) return;
  const { parent, tree } = worktree;
  worktree = null;
  // Unlink the shared node_modules first: nothing below may ever recurse into it.
  const nm = path.join(tree, 'node_modules');
  try {
    if (lstatSync(nm).isSymbolicLink()) unlinkSync(nm);
  } catch {
    /* not there */
  }
  try {
    git('worktree', 'remove', '--force', tree);
  } catch (err) {
    process.stderr.write(`ab: git worktree remove failed (${err.message.split('\n')[0]}); removing the directory and pruning\n`);
    rmSync(tree, { recursive: true, force: true });
    try {
      git('worktree', 'prune');
    } catch {
      /* leave it to a later prune */
    }
  }
  rmSync(parent, { recursive: true, force: true });
}

process.on('exit', () => {
  cleanupAll();
  removeWorktree();
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    process.stderr.write(`ab: ${sig}, cleaning up\n`);
    process.exit(130);
  });
}

function describeB() {
  const head = git('rev-parse', '--short=12', 'HEAD');
  const dirty = git('status', '--porcelain', '--untracked-files=no', '--', 'src', 'bin', 'package.json', 'tsconfig.json') !== '';
  return `this checkout, ${head}${dirty ? ' + uncommitted changes' : ''}`;
}

// ---- one side: a daemon with its coordinators and push probe ----------------------------------

async function startSide(name, built, builtLabel, cluster) {
  const off = cfg.off[name];
  const checkout = off.length > 0 ? toggledCopy(built, off, makeTempDir(`yabt${name}-`)) : built;
  const args = cfg.args[name];
  const label = `${builtLabel}${off.length > 0 ? `, without ${off.join(', ')} (bench/toggles.mjs)` : ''}${args.length > 0 ? `, daemon options ${args.join(' ')}` : ''}`;
  const bin = path.join(checkout, 'bin', 'yello');
  if (!existsSync(path.join(checkout, 'dist', 'cli', 'main.js'))) throw new Error(`${name}: ${checkout}/dist is not built (npm run build)`);
  // A build from before the per-agent quotas has none of their options.
  const hasQuotas = existsSync(path.join(checkout, 'dist', 'daemon', 'streams', 'quotas.js'));
  const store = [];
  if (cluster) {
    const db = `ab${name.toLowerCase()}`;
    await cluster.psql(`create database ${db}`);
    store.push('--store', cluster.url(db));
  }
  const daemon = new Daemon(makeTempDir(`yab${name}-`), {
    bin,
    cwd: checkout,
    extraArgs: [...(hasQuotas ? BENCH_DAEMON_ARGS : []), ...store, ...cfg.args[name]],
  });
  await daemon.start();
  const admin = await daemon.admin();
  const { agent: sink } = await admin.request('agents.create', { username: 'sink', name: 'Sink' });
  const maxC = Math.max(...cfg.concurrency);
  const cos = await Promise.all(Array.from({ length: maxC }, (_, i) => setupCoordinator(daemon, admin, `w${i}`, sink.id)));
  const probe = await PushProbe.setup(daemon, admin);
  log(`${name}: daemon pid ${daemon.pid} ready (${label}), ${maxC} coordinators + push probe`);
  return { name, label, daemon, admin, cos, probe, rounds: [] };
}

async function stopSide(side) {
  side.probe.close();
  for (const co of side.cos) co.conn.close();
  side.admin.close();
  await side.daemon.stop();
  removeTempDir(side.daemon.dir);
}

const sumUs = (x) => Object.values(x.server?.us ?? {}).reduce((a, b) => a + b, 0);

/** One closed-loop window at `c` coordinators on one side, into `round`. */
async function measureLoad(side, c, round) {
  const x = await closedLoop(side.cos.slice(0, c), cfg.seconds, side.daemon.pid);
  round[`appends/s @${c}`] = x.perSecond;
  round[`p50 ms @${c}`] = x.p50;
  round[`p99 ms @${c}`] = x.p99;
  round[`cpu µs/append @${c}`] = sumUs(x);
  round[`main µs/append @${c}`] = x.server?.us.main ?? NaN;
}

/** The push probe on one side, into `round`. */
async function measurePush(side, round) {
  const { push, rtt } = await side.probe.run(cfg.pushAppends);
  round['push p50 ms'] = percentile(push, 0.5);
  round['push p99 ms'] = percentile(push, 0.99);
  round['append RTT p50 ms'] = percentile(rtt, 0.5);
}

// ---- report ----------------------------------------------------------------------------------

const higherIsBetter = (metric) => metric.startsWith('appends/s');

function report(a, b) {
  const metrics = Object.keys(a.rounds[0]);
  const rows = metrics.map((metric) => {
    const as = a.rounds.map((r) => r[metric]);
    const bs = b.rounds.map((r) => r[metric]);
    const perRound = as.map((x, i) => bs[i] / x);
    const better = perRound.filter((q) => (higherIsBetter(metric) ? q > 1 : q < 1)).length;
    const show = metric.startsWith('appends/s') || metric.includes('µs') ? fmt.int : fmt.ms;
    return [
      metric,
      show(median(as)),
      show(median(bs)),
      fmt.ratio(median(bs) / median(as)),
      fmt.ratio(Math.min(...perRound)),
      fmt.ratio(Math.max(...perRound)),
      `${better}/${perRound.length}`,
    ];
  });
  const cpu = os.cpus();
  return [
    `yello A/B — ${new Date().toISOString()} — node ${process.version}, ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}${QUICK ? ' — QUICK MODE' : ''}`,
    `A = ${a.label}`,
    `B = ${b.label}`,
    `store: ${cfg.store === 'postgresql' ? 'PostgreSQL (one throwaway cluster, a database per side)' : 'LevelDB'}`,
    `${cfg.rounds} rounds; per round and side: ${cfg.seconds}s closed loop at each of ${cfg.concurrency.join('/')} coordinators (1 chat.message per append), then ${cfg.pushAppends} appends one at a time for push latency; A and B alternate at each measurement (A first in odd rounds, B first in even rounds)`,
    '',
    table(
      'medians over rounds; B/A = median B ÷ median A; min/max = lowest/highest per-round B/A; B better = rounds where B beat A (appends/s higher; ms and µs lower)',
      ['metric', 'A median', 'B median', 'B/A', 'B/A min', 'B/A max', 'B better'],
      rows,
    ),
  ].join('\n');
}

// ---- main ------------------------------------------------------------------------------------

async function main() {
  log(`config ${JSON.stringify(cfg)}`);
  const aBuild = cfg.prebuilt
    ? { dir: path.resolve(cfg.prebuilt), label: `prebuilt checkout ${path.resolve(cfg.prebuilt)}` }
    : buildRef(cfg.ref);
  const sides = [];
  // Loaded only when asked for: the LevelDB A/B needs no PostgreSQL binaries.
  const cluster = cfg.store === 'postgresql' ? await (await import('../test/helpers/pg-cluster.mjs')).PgCluster.start() : null;
  try {
    sides.push(await startSide('A', aBuild.dir, aBuild.label, cluster));
    // BENCH_AB_B_DIR: B is another built checkout (a snapshot of this one, say, so this one can be rebuilt meanwhile).
    const bDir = process.env.BENCH_AB_B_DIR ? path.resolve(process.env.BENCH_AB_B_DIR) : repoRoot;
    sides.push(await startSide('B', bDir, bDir === repoRoot ? describeB() : `prebuilt checkout ${bDir}`, cluster));
    const [a, b] = sides;
    log(`warm-up ${cfg.warmupSeconds}s per concurrency, both sides`);
    for (const side of sides) {
      for (const c of cfg.concurrency) await closedLoop(side.cos.slice(0, c), cfg.warmupSeconds);
      await side.probe.run(Math.min(20, cfg.pushAppends));
    }
    const top = Math.max(...cfg.concurrency);
    for (let r = 1; r <= cfg.rounds; r++) {
      const order = r % 2 === 1 ? [a, b] : [b, a];
      const rounds = new Map(sides.map((side) => [side, {}]));
      for (const c of cfg.concurrency) for (const side of order) await measureLoad(side, c, rounds.get(side));
      for (const side of order) await measurePush(side, rounds.get(side));
      for (const side of sides) {
        const x = rounds.get(side);
        side.rounds.push(x);
        log(
          `round ${r}/${cfg.rounds} ${side.name}: ${cfg.concurrency.map((c) => `${fmt.int(x[`appends/s @${c}`])}/s @${c}`).join(', ')}; cpu ${fmt.int(x[`cpu µs/append @${top}`])} µs/append @${top}; push p50 ${fmt.ms(x['push p50 ms'])} ms`,
        );
      }
    }
    process.stdout.write(report(a, b) + '\n');
    if (cfg.json)
      writeFileSync(
        cfg.json,
        JSON.stringify({ config: cfg, A: { label: a.label, rounds: a.rounds }, B: { label: b.label, rounds: b.rounds } }, null, 2),
      );
  } finally {
    for (const side of sides) await stopSide(side);
    await cluster?.stop();
    removeWorktree();
  }
  log(`done in ${((nowMs() - T0) / 1000).toFixed(1)} s`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`ab failed: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
