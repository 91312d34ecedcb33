// What would `npm run test:mutation` test, and why? Runs Stryker up to its plan (the initial
// test run with coverage and the incremental diff, about 5 minutes on 2 cores), then stops it
// and prints, per file, the mutants it would run, why their committed results cannot be
// reused, and Stryker's worst-case estimate of their time:
//   node scripts/mutation-plan.mjs [--postgres] [--json out.json] [stryker options, e.g. --mutate …]
// Reasons, from the committed incremental report:
//   file changed   the file's source differs from the report's (its mutants were tested on older code)
//   new            no result for this mutant in the report
//   killer changed the report says killed, but the killing test changed or no longer covers it
//   new tests      the report says survived/timed out/no coverage, and a test not run against
//                  it then covers it now (Stryker reruns it against all its tests)
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { currentSource, mutantKey } from './mutation-report.mjs';

export const REASONS = ['file changed', 'new', 'killer changed', 'new tests'];

/**
 * Why each planned mutant (`run`: the plan reporter's entries) has no reusable result in
 * `report` (the incremental file), counted per file with Stryker's worst-case time.
 * `readCurrent(file)` is the file's source now, or null when it is gone.
 */
export function classifyPlan(run, report, readCurrent) {
  const oldStatus = new Map();
  const changed = new Set();
  for (const [file, entry] of Object.entries(report.files ?? {})) {
    if (readCurrent(file) !== entry.source) changed.add(file);
    for (const m of entry.mutants) {
      oldStatus.set(`${file}\n${mutantKey(m, m.location.start.line, m.location.start.column)}`, m.status);
    }
  }
  const reasonOf = (m) => {
    if (changed.has(m.file)) return 'file changed';
    const s = oldStatus.get(`${m.file}\n${mutantKey(m, m.line, m.column)}`);
    if (s === undefined) return 'new';
    return s === 'Killed' ? 'killer changed' : 'new tests';
  };
  const byFile = new Map();
  for (const m of run) {
    const reason = reasonOf(m);
    const row = byFile.get(m.file) ?? { n: 0, ms: 0, ...Object.fromEntries(REASONS.map((r) => [r, 0])) };
    row.n++;
    row.ms += m.netTime;
    row[reason]++;
    byFile.set(m.file, row);
  }
  return byFile;
}

async function main() {
  const args = process.argv.slice(2);
  const postgres = args.includes('--postgres');
  let jsonOut = null;
  const strykerArgs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--postgres') continue;
    if (args[i] === '--json') jsonOut = args[++i];
    else strykerArgs.push(args[i]);
  }
  const incrementalArg = strykerArgs.indexOf('--incrementalFile');
  const base = (await import(path.resolve(postgres ? 'stryker.postgres.config.mjs' : 'stryker.config.mjs'))).default;
  const reportPath = incrementalArg >= 0 ? strykerArgs[incrementalArg + 1] : base.incrementalFile;
  const tempDir = base.tempDirName;

  const work = mkdtempSync(path.join(tmpdir(), 'mutation-plan-'));
  const planFile = path.join(work, 'plan.json');
  const sandboxesBefore = new Set(existsSync(tempDir) ? readdirSync(tempDir) : []);
  const child = spawn('npx', ['stryker', 'run', 'test/mutation/stryker.plan.mjs', ...strykerArgs], {
    detached: true,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, MUT_PLAN_FILE: planFile, MUT_PLAN_BASE: postgres ? 'postgres' : 'leveldb' },
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));

  // The plan is written before the first mutant runs; stop Stryker and its workers then.
  while (!existsSync(planFile)) {
    const done = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 1000))]);
    if (done && !existsSync(planFile)) {
      console.error('Stryker stopped before its plan was ready (see its output above).');
      process.exit(1);
    }
  }
  await new Promise((r) => setTimeout(r, 500));
  const stop = (sig) => {
    try {
      process.kill(-child.pid, sig);
    } catch {
      // already gone
    }
  };
  stop('SIGTERM');
  const gone = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
  if (!gone) stop('SIGKILL');
  // Stryker removes its sandbox on a normal exit only: remove the one this run made.
  if (existsSync(tempDir)) {
    for (const d of readdirSync(tempDir)) if (!sandboxesBefore.has(d)) rmSync(path.join(tempDir, d), { recursive: true, force: true });
  }

  const plan = JSON.parse(readFileSync(planFile, 'utf8'));
  rmSync(work, { recursive: true, force: true });
  const report = existsSync(reportPath) ? JSON.parse(readFileSync(reportPath, 'utf8')) : { files: {} };

  const byFile = classifyPlan(plan.run, report, currentSource);
  const reasons = REASONS;
  const minutes = (ms) => (ms / 60_000).toFixed(1);
  const rows = [...byFile].sort((a, b) => b[1].ms - a[1].ms);
  const total = { n: 0, ms: 0, ...Object.fromEntries(reasons.map((r) => [r, 0])) };
  console.log(`\n| file | to run | ${reasons.join(' | ')} | worst case, min |`);
  console.log(`| --- | ---: | ${reasons.map(() => '---:').join(' | ')} | ---: |`);
  for (const [file, row] of rows) {
    console.log(`| ${file} | ${row.n} | ${reasons.map((r) => row[r]).join(' | ')} | ${minutes(row.ms)} |`);
    for (const k of Object.keys(total)) total[k] += row[k];
  }
  console.log(`| **total** | ${total.n} | ${reasons.map((r) => total[r]).join(' | ')} | ${minutes(total.ms)} |`);
  const early = Object.entries(plan.early)
    .map(([s, n]) => `${n} ${s}`)
    .join(', ');
  console.log(`\nNot run: ${early || 'none'} (reused results and ignored mutants).`);
  console.log(
    `Worst case is Stryker's netTime (every covering test, as if each survived), summed; divide by the concurrency (${base.concurrency}).`,
  );
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify(plan.run, null, 1));
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (isMain) await main();
