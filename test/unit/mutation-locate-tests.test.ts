// Where each test starts, for Stryker's incremental mode (README "Testing"): the 'located-vitest'
// runner gives each test of a run its start position, and scripts/mutation-locate-tests.mjs gives
// the tests of a report written before it the same place. The two must agree exactly: Stryker
// matches a killed result's killer by file, name and start, so a place off by one would make
// every killed result of the committed report run again, and a place given to a test of a file
// that changed would let Stryker trust a killer whose code it never compared.

import { describe, expect, it } from 'vitest';
// @ts-expect-error: plain .mjs modules without declarations
import * as runner from '../mutation/located-vitest-runner.mjs';
// @ts-expect-error: plain .mjs modules without declarations
import * as locate from '../../scripts/mutation-locate-tests.mjs';

interface Place {
  line: number;
  column: number;
}
interface Task {
  type: 'suite' | 'test';
  name: string;
  suite?: Task;
  file?: { filepath: string };
  tasks?: Task[];
  location?: Place;
}
interface ReportTest {
  id: string;
  name: string;
  location?: { start: Place };
}
interface Report {
  testFiles: Record<string, { source?: string; tests: ReportTest[] }>;
}
const { testIdOf, startPositions, withStartPositions } = runner as unknown as {
  testIdOf: (task: Task, cwd?: string) => string;
  startPositions: (files: Task[], cwd?: string) => Map<string, Place>;
  withStartPositions: (
    result: { status: string; tests?: { id: string; startPosition?: Place }[] },
    positions: Map<string, Place>,
  ) => { status: string; tests?: { id: string; startPosition?: Place }[] };
};
const { locationsByFile, locateTests } = locate as unknown as {
  locationsByFile: (entries: { name: string; file: string; location?: Place }[], cwd?: string) => Map<string, Map<string, Place | null>>;
  locateTests: (
    report: Report,
    byFile: Map<string, Map<string, Place | null>>,
    readCurrent: (f: string) => string | null,
  ) => { located: number; placeless: number; unknown: string[]; changedFiles: string[] };
};

const cwd = '/repo';
/** A vitest file task with a describe block holding two tests, the second without a place. */
function fileTask(): Task {
  const file: Task = { type: 'suite', name: 'test/a.test.ts', file: { filepath: '/repo/test/a.test.ts' }, tasks: [] };
  // Vitest hangs a file's top-level blocks under its default suite, named ''.
  const top: Task = { type: 'suite', name: '' };
  const block: Task = { type: 'suite', name: 'streams.append', suite: top, file: file.file, tasks: [] };
  const first: Task = { type: 'test', name: 'refuses a stale position', suite: block, file: file.file, location: { line: 12, column: 3 } };
  const second: Task = { type: 'test', name: 'defined by a helper', suite: block, file: file.file };
  block.tasks = [first, second];
  file.tasks = [block];
  return file;
}

describe('located-vitest runner', () => {
  it('names a test as Stryker does: relative file, then suites and test joined with spaces', () => {
    const first = fileTask().tasks?.[0]?.tasks?.[0] as Task;
    expect(testIdOf(first, cwd)).toBe('test/a.test.ts#streams.append refuses a stale position');
  });

  it('gives the 0-based start of each test that has a place, and none to one without', () => {
    const positions = startPositions([fileTask()], cwd);
    expect([...positions]).toEqual([['test/a.test.ts#streams.append refuses a stale position', { line: 11, column: 2 }]]);
  });

  it('adds the start to the dry run’s tests by id, and leaves a run that did not complete alone', () => {
    const positions = new Map([['x#a', { line: 4, column: 0 }]]);
    const done = withStartPositions({ status: 'complete', tests: [{ id: 'x#a' }, { id: 'x#b' }] }, positions);
    expect(done.tests).toEqual([{ id: 'x#a', startPosition: { line: 4, column: 0 } }, { id: 'x#b' }]);
    const failed = { status: 'error' };
    expect(withStartPositions(failed, positions)).toBe(failed);
  });
});

describe('scripts/mutation-locate-tests.mjs', () => {
  const list = [
    { name: 'streams.append > refuses a stale position', file: '/repo/test/a.test.ts', location: { line: 12, column: 3 } },
    { name: 'streams.append > defined by a helper', file: '/repo/test/a.test.ts' },
    { name: 'other > one', file: '/repo/test/b.test.ts', location: { line: 5, column: 1 } },
  ];

  it('places the tests of an unchanged file where the runner will: 1-based, one more than its start', () => {
    const report: Report = {
      testFiles: {
        'test/a.test.ts': {
          source: 'A',
          tests: [
            { id: '0', name: 'streams.append refuses a stale position' },
            { id: '1', name: 'streams.append defined by a helper' },
            { id: '2', name: 'streams.append gone since' },
          ],
        },
      },
    };
    const done = locateTests(report, locationsByFile(list, cwd), () => 'A');
    expect(done).toEqual({ located: 1, placeless: 1, unknown: ['test/a.test.ts#streams.append gone since'], changedFiles: [] });
    const tests = report.testFiles['test/a.test.ts']?.tests ?? [];
    expect(tests[0]?.location).toEqual({ start: { line: 12, column: 3 } });
    expect(tests[1]?.location).toBeUndefined();
    expect(tests[2]?.location).toBeUndefined();
    // The runner reports the same test 0-based; Stryker writes it +1 and reads a report -1.
    const runnerStart = { line: 11, column: 2 };
    expect(tests[0]?.location?.start).toEqual({ line: runnerStart.line + 1, column: runnerStart.column + 1 });
  });

  it('leaves a test file that changed since the report as it was', () => {
    const report: Report = { testFiles: { 'test/b.test.ts': { source: 'old', tests: [{ id: '0', name: 'other one' }] } } };
    const done = locateTests(report, locationsByFile(list, cwd), () => 'new');
    expect(done.changedFiles).toEqual(['test/b.test.ts']);
    expect(done.located).toBe(0);
    expect(report.testFiles['test/b.test.ts']?.tests[0]?.location).toBeUndefined();
  });

  it('keeps a place the report already has', () => {
    const report: Report = {
      testFiles: {
        'test/b.test.ts': { source: 'B', tests: [{ id: '0', name: 'other one', location: { start: { line: 9, column: 9 } } }] },
      },
    };
    locateTests(report, locationsByFile(list, cwd), () => 'B');
    expect(report.testFiles['test/b.test.ts']?.tests[0]?.location).toEqual({ start: { line: 9, column: 9 } });
  });
});
