// Stryker reporter plugin 'checkpoint': Stryker writes its JSON report (and the incremental file)
// only when the whole run ends, so a run stopped before that — the end of a working session, a
// reboot, Ctrl-C two hours into a run on two cores — kept nothing of what it had tested. This
// reporter appends to $MUT_CHECKPOINT_FILE (default reports/mutation/checkpoint.jsonl), one JSON
// line each, as Stryker hands them out:
//   {"kind":"tests", …}    the tests of the initial run (ids as the runs' results name them)
//   {"kind":"plan", …}     the mutants Stryker is about to test (not reused from the incremental file)
//   {"kind":"mutant", …}   every result, the reused ones first, then each as it is tested; its
//                          tests (`killedBy`, `coveredBy`) by their place in the tests line: a
//                          daemon-covering mutant is covered by hundreds of tests, and their
//                          ids (file and name) made the file of a whole run about 150 MB
// `node scripts/mutation-checkpoint.mjs` turns the file of a stopped run into the incremental
// file, so the next run tests only what this one had not reached.
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PluginKind, declareClassPlugin } from '@stryker-mutator/api/plugin';

export const DEFAULT_CHECKPOINT_FILE = 'reports/mutation/checkpoint.jsonl';

/** A file name relative to the project, also when it names the copy in a Stryker sandbox. */
export function projectPath(fileName, cwd = process.cwd()) {
  if (!fileName) return '';
  const outOfSandbox = fileName.replace(/[\\/]\.stryker-tmp[^\\/]*[\\/]sandbox-[^\\/]+(?=[\\/])/, '');
  return path.relative(cwd, path.resolve(cwd, outOfSandbox)).replace(/\\/g, '/');
}

/**
 * The line a tested (or reused) mutant result is kept as; `location` is already 1-based, and
 * `testIndex` (test id → place in the tests line) shortens the tests it names.
 */
export function mutantLine(r, testIndex = new Map(), cwd = process.cwd()) {
  const tests = (ids) => ids?.map((id) => testIndex.get(id) ?? id);
  return {
    kind: 'mutant',
    file: projectPath(r.fileName, cwd),
    mutatorName: r.mutatorName,
    replacement: r.replacement,
    location: r.location,
    status: r.status,
    // the first lines are enough to tell why; a killed daemon test's reason can be kilobytes of log
    statusReason: r.statusReason?.slice(0, 2000),
    killedBy: tests(r.killedBy),
    coveredBy: tests(r.coveredBy),
    testsCompleted: r.testsCompleted,
    static: r.static,
  };
}

export class CheckpointReporter {
  #file = process.env.MUT_CHECKPOINT_FILE || DEFAULT_CHECKPOINT_FILE;
  #testIndex = new Map();

  #write(line, { truncate = false } = {}) {
    mkdirSync(path.dirname(this.#file), { recursive: true });
    (truncate ? writeFileSync : appendFileSync)(this.#file, `${JSON.stringify(line)}\n`);
  }

  onDryRunCompleted({ result }) {
    const tests = result.tests.map((t) => ({
      id: t.id,
      name: t.name,
      fileName: projectPath(t.fileName),
      startPosition: t.startPosition,
    }));
    this.#testIndex = new Map(tests.map((t, i) => [t.id, i]));
    // a new run starts a new checkpoint: the ids below are this run's
    this.#write({ kind: 'tests', at: new Date().toISOString(), tests }, { truncate: true });
  }

  onMutationTestingPlanReady({ mutantPlans }) {
    const run = mutantPlans
      .filter((p) => p.plan === 'Run')
      .map(({ mutant: m }) => ({
        file: projectPath(m.fileName),
        mutatorName: m.mutatorName,
        replacement: m.replacement,
        location: {
          start: { line: m.location.start.line + 1, column: m.location.start.column + 1 },
          end: { line: m.location.end.line + 1, column: m.location.end.column + 1 },
        },
      }));
    this.#write({ kind: 'plan', run });
  }

  onMutantTested(result) {
    this.#write(mutantLine(result, this.#testIndex));
  }
}

export const strykerPlugins = [declareClassPlugin(PluginKind.Reporter, 'checkpoint', CheckpointReporter)];
