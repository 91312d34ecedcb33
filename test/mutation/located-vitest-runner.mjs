// Stryker test runner 'located-vitest': Stryker's vitest runner, with each test's place in its file.
//
// Why: Stryker's incremental mode keeps a killed result only while the test that killed it is
// unchanged, and it decides "unchanged" from the test's location. The vitest runner reports no
// location, so Stryker takes every test as spanning its whole file: one edit anywhere in a test
// file (a new test at its end) dropped the killers of every test in it, and each of their killed
// mutants was run again (once 1,568 killed results at one edit).
// With a start position, Stryker closes each test's range at the next test's start, so an edit
// invalidates only the tests whose range it touches.
//
// Vitest records `task.location` (1-based line and column) when `includeTaskLocation` is set,
// as vitest.mutation.config.ts does; Stryker's own positions are 0-based.
import path from 'node:path';
import { commonTokens, declareFactoryPlugin, PluginKind, tokens } from '@stryker-mutator/api/plugin';
import { strykerPlugins as vitestPlugins, strykerValidationSchema } from '@stryker-mutator/vitest-runner';

const createVitestRunner = vitestPlugins[0].factory;

/** Stryker's id of a vitest test task: relative file path '#' the names of its suites and itself. */
export function testIdOf(task, cwd = process.cwd()) {
  const names = [task.name];
  for (let s = task.suite; s; s = s.suite) names.unshift(s.name);
  const file = task.file?.filepath ?? 'unknown.js';
  return `${path.relative(cwd, file).replace(/\\/g, '/')}#${names.join(' ').trim()}`;
}

/** Test id → Stryker (0-based) start position, for every test task of `files` that has a location. */
export function startPositions(files, cwd = process.cwd()) {
  const byId = new Map();
  const walk = (task) => {
    if (task.type === 'suite' || task.tasks) for (const t of task.tasks ?? []) walk(t);
    if (task.type === 'test' && task.location) {
      byId.set(testIdOf(task, cwd), { line: task.location.line - 1, column: task.location.column - 1 });
    }
  };
  for (const f of files) walk(f);
  return byId;
}

/** A dry-run result with `startPosition` added to the tests whose place is known. */
export function withStartPositions(result, positions) {
  if (result.status !== 'complete') return result;
  return {
    ...result,
    tests: result.tests.map((t) => {
      const startPosition = positions.get(t.id);
      return startPosition ? { ...t, startPosition } : t;
    }),
  };
}

class LocatedVitestRunner {
  constructor(inner) {
    this.inner = inner;
  }
  capabilities() {
    return this.inner.capabilities();
  }
  init() {
    return this.inner.init();
  }
  async dryRun(options) {
    const result = await this.inner.dryRun(options);
    // The vitest runner keeps its Vitest instance as `ctx`; its state holds the tasks just run.
    return withStartPositions(result, startPositions(this.inner.ctx.state.getFiles()));
  }
  mutantRun(options) {
    return this.inner.mutantRun(options);
  }
  dispose() {
    return this.inner.dispose();
  }
}

function createLocatedVitestRunner(injector) {
  return new LocatedVitestRunner(createVitestRunner(injector));
}
createLocatedVitestRunner.inject = tokens(commonTokens.injector);

export const strykerPlugins = [declareFactoryPlugin(PluginKind.TestRunner, 'located-vitest', createLocatedVitestRunner)];
// The 'vitest' options (configFile, related, dir) keep their schema and defaults.
export { strykerValidationSchema };
