// Where each test starts, for Stryker's incremental mode (test/MUTATION.md): the 'located-vitest'
// runner gives each test of a run its start position. Stryker matches a killed result's killer
// by file, name and start, so a place off by one would make every killed result of the last run
// run again, and a test without a place is taken to span its whole file (one edit anywhere in it
// would invalidate every result it killed).

import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs module without declarations
import * as runner from '../mutation/located-vitest-runner.mjs';

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
const { testIdOf, startPositions, withStartPositions } = runner as unknown as {
  testIdOf: (task: Task, cwd?: string) => string;
  startPositions: (files: Task[], cwd?: string) => Map<string, Place>;
  withStartPositions: (
    result: { status: string; tests?: { id: string; startPosition?: Place }[] },
    positions: Map<string, Place>,
  ) => { status: string; tests?: { id: string; startPosition?: Place }[] };
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
