// Vitest setup file used only by vitest.mutation.config.ts (the Stryker run). The integration
// tests talk to real daemons that they spawn from dist/ (test/helpers/daemon-process.ts); the
// mutation build (scripts/mutation-build.mjs) compiled dist/ from Stryker's instrumented sources,
// so a child runs a mutant when process.env.__STRYKER_ACTIVE_MUTANT__ names it (the
// instrumenter's header reads that variable when its global is unset). This file:
//   - mutant runs: copies the active mutant that Stryker's own setup file put on
//     globalThis.__stryker__ into that variable before the test file's hooks start a daemon;
//   - dry run: preloads child-coverage.mjs into the children and, after the file, adds the
//     mutants the children passed to the coverage of every test of the file (per-file
//     attribution: a daemon serves all tests of a file), so Stryker's perTest coverage analysis
//     runs only the test files whose daemons reached a mutant.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach } from 'vitest';

interface StrykerCoverage {
  static: Record<string, number>;
  perTest: Record<string, Record<string, number>>;
}
interface StrykerNamespace {
  activeMutant?: string | number;
  mutantCoverage?: StrykerCoverage;
}

const ENV_MUTANT = '__STRYKER_ACTIVE_MUTANT__';
const ENV_COVERAGE = 'STRYKER_YELLO_COVERAGE_DIR';
const preload = fileURLToPath(new URL('./child-coverage.mjs', import.meta.url));
const g = globalThis as { __stryker__?: StrykerNamespace };
const ns = (g.__stryker__ ??= {});
const testIds = new Set<string>();
let coverageDir: string | undefined;

beforeAll(() => {
  // Stryker's setup file ran first (it is prepended) and set ns.activeMutant for a mutant run.
  if (ns.activeMutant !== undefined) {
    process.env[ENV_MUTANT] = String(ns.activeMutant);
    Reflect.deleteProperty(process.env, ENV_COVERAGE);
  } else {
    Reflect.deleteProperty(process.env, ENV_MUTANT);
    coverageDir = mkdtempSync(path.join(os.tmpdir(), 'yl-cov-'));
    process.env[ENV_COVERAGE] = coverageDir;
    const opts = (process.env.NODE_OPTIONS ?? '').replace(/--import=\S*child-coverage\.mjs/g, '').trim();
    process.env.NODE_OPTIONS = `${opts} --import=${preload}`.trim();
  }
});

beforeEach(({ task }) => {
  testIds.add(rawTestId(task));
});

afterAll(() => {
  // Hooks run as a stack: this runs before Stryker's afterAll, which reports ns.mutantCoverage.
  if (coverageDir === undefined) return;
  const hits: Record<string, number> = {};
  for (const name of readdirSync(coverageDir)) {
    try {
      const child = JSON.parse(readFileSync(path.join(coverageDir, name), 'utf8')) as Record<string, number>;
      for (const [id, n] of Object.entries(child)) hits[id] = (hits[id] ?? 0) + n;
    } catch {
      // A dump cut short by SIGKILL: the interval dump before it counted the same mutants.
    }
  }
  rmSync(coverageDir, { recursive: true, force: true });
  if (Object.keys(hits).length === 0) return;
  const coverage = (ns.mutantCoverage ??= { static: {}, perTest: {} });
  for (const id of testIds) {
    const perTest = (coverage.perTest[id] ??= {});
    for (const [mutant, n] of Object.entries(hits)) perTest[mutant] = (perTest[mutant] ?? 0) + n;
  }
});

interface TaskLike {
  name: string;
  suite?: TaskLike;
  file?: { filepath: string };
}

/** The test id Stryker's vitest runner uses (its stryker-setup.js: file path # full name). */
function rawTestId(task: TaskLike): string {
  const parts = [task.name];
  for (let s = task.suite; s; s = s.suite) parts.unshift(s.name);
  return `${task.file?.filepath ?? 'unknown.js'}#${parts.join(' ').trim()}`;
}
