// Adds each test's place (line, column) to a Stryker report's test files, for the runs of the
// 'located-vitest' runner (test/mutation/located-vitest-runner.mjs):
//   node scripts/mutation-locate-tests.mjs [--config vitest.mutation.config.ts] <report.json>…
// Stryker's incremental differ knows a test by file, name and start position. A report written
// before the runner gave positions has none, so its tests would match none of a located run's
// and every killed result would be run again. This gives the tests of each test file whose
// source in the report is the file in the working tree the position vitest reports for it now
// (`vitest list --json` with `includeTaskLocation`); a file that changed since is left as it is
// (Stryker could not match its tests either way). Each report is rewritten in place.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { currentSource } from './mutation-report.mjs';

/**
 * Test file (relative to `cwd`) → Stryker test name → 1-based location, from `vitest list --json`
 * entries ({name: 'suite > test', file, location}). Stryker names a test by its suites' names and
 * its own joined with spaces; a name given twice keeps its last place, as the runner does.
 */
export function locationsByFile(entries, cwd = process.cwd()) {
  const byFile = new Map();
  for (const e of entries) {
    const file = path.relative(cwd, e.file).replace(/\\/g, '/');
    const names = byFile.get(file) ?? new Map();
    // null: listed without a place (vitest locates a test only in its own file, not one a helper
    // module defines, such as the storage port's conformance suite); the runner gives none either.
    const place = e.location ? { line: e.location.line, column: e.location.column } : null;
    names.set(e.name.split(' > ').join(' ').trim(), place);
    byFile.set(file, names);
  }
  return byFile;
}

/**
 * Gives the tests of `report`'s unchanged test files (`readCurrent(file)` equals the report's
 * source) a `location` from `byFile`, in the report's format ({start: {line, column}}, 1-based).
 * Returns what it did: tests located, tests vitest lists without a place (left without one, as
 * the runner reports them), tests not in the list, files left as they were.
 */
export function locateTests(report, byFile, readCurrent) {
  const done = { located: 0, placeless: 0, unknown: [], changedFiles: [] };
  for (const [file, entry] of Object.entries(report.testFiles ?? {})) {
    if (entry.source === undefined || readCurrent(file) !== entry.source) {
      done.changedFiles.push(file);
      continue;
    }
    const names = byFile.get(file) ?? new Map();
    entry.tests = entry.tests.map((t) => {
      if (t.location) return t;
      const start = names.get(t.name);
      if (start === undefined) {
        done.unknown.push(`${file}#${t.name}`);
        return t;
      }
      if (start === null) {
        done.placeless++;
        return t;
      }
      done.located++;
      return { ...t, location: { start } };
    });
  }
  return done;
}

function listTests(config) {
  const dir = mkdtempSync(path.join(tmpdir(), 'mutation-locate-'));
  const out = path.join(dir, 'list.json');
  try {
    const r = spawnSync('npx', ['vitest', 'list', `--json=${out}`, '-c', config], { stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`vitest list exited with ${r.status ?? r.signal}`);
    return JSON.parse(readFileSync(out, 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (isMain) {
  const args = process.argv.slice(2);
  let config = 'vitest.mutation.config.ts';
  const reports = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--config') config = args[++i];
    else reports.push(args[i]);
  }
  if (reports.length === 0) {
    console.error('usage: node scripts/mutation-locate-tests.mjs [--config <vitest config>] <report.json>…');
    process.exit(2);
  }
  const byFile = locationsByFile(listTests(config));
  for (const file of reports) {
    const report = JSON.parse(readFileSync(file, 'utf8'));
    const done = locateTests(report, byFile, currentSource);
    writeFileSync(file, JSON.stringify(report));
    console.log(
      `${file}: ${done.located} test(s) located, ${done.placeless} listed without a place; ${done.unknown.length} not found in vitest's list; ${done.changedFiles.length} test file(s) changed since the report, left as they were`,
    );
    for (const t of done.unknown) console.log(`  not found: ${t}`);
    for (const f of done.changedFiles) console.log(`  changed: ${f}`);
  }
}
