// The checkpoint of a mutation run (test/mutation/checkpoint-reporter.mjs) and its merge into the
// incremental file (scripts/mutation-checkpoint.mjs): Stryker writes nothing before a run ends,
// so a stopped run must leave what it tested in a form the next run reuses, and must not pass
// off what it did not reach as tested.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without declarations
import * as reporterModule from '../mutation/checkpoint-reporter.mjs';
// @ts-expect-error: a plain .mjs script without declarations
import * as scriptModule from '../../scripts/mutation-checkpoint.mjs';

interface Place {
  start: { line: number; column: number };
  end?: { line: number; column: number };
}
interface Result {
  status: string;
  location: Place;
  killedBy?: string[];
  coveredBy?: string[];
  statusReason?: string;
}
interface Report {
  files: Record<string, { mutants: Result[] }>;
  testFiles: Record<string, { tests: { id: string; name: string; location?: Place }[] }>;
}
interface Line {
  kind: string;
  tests?: { fileName: string }[];
  run?: { location: Place }[];
  statusReason?: string;
  killedBy?: (number | string)[];
  coveredBy?: (number | string)[];
}
const mutantsOf = (r: Report, file: string) => r.files[file]?.mutants ?? [];
const testsOf = (r: Report, file: string) => r.testFiles[file]?.tests ?? [];
const { CheckpointReporter, projectPath } = reporterModule as unknown as {
  CheckpointReporter: new () => {
    onDryRunCompleted(e: unknown): void;
    onMutationTestingPlanReady(e: unknown): void;
    onMutantTested(r: unknown): void;
  };
  projectPath: (fileName: string, cwd?: string) => string;
};
const { checkpointReport, parseCheckpoint } = scriptModule as unknown as {
  checkpointReport: (
    lines: Line[],
    incremental: unknown,
    readSource?: (file: string) => string,
  ) => { report: Report; counts: { planned: number; notReached: number; results: number } };
  parseCheckpoint: (text: string) => Line[];
};

const dir = mkdtempSync(path.join(tmpdir(), 'yl-checkpoint-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const loc = (line: number, column: number) => ({
  start: { line, column },
  end: { line, column: column + 5 },
});
const SRC = 'src/a.ts';
const TEST = 'test/a.test.ts';

// The committed incremental file: three mutants of src/a.ts, the first killed by test "0"; one
// other file the stopped run never touched.
const incremental = {
  schemaVersion: '1.0',
  thresholds: { high: 80, low: 60 },
  files: {
    [SRC]: {
      language: 'typescript',
      source: 'a\nb\nc\n',
      mutants: [
        { id: '0', mutatorName: 'M', replacement: 'x', location: loc(1, 1), status: 'Killed', killedBy: ['0'], coveredBy: ['0'] },
        { id: '1', mutatorName: 'M', replacement: 'y', location: loc(2, 1), status: 'Survived', coveredBy: ['0'] },
        { id: '2', mutatorName: 'M', replacement: 'z', location: loc(3, 1), status: 'Timeout', coveredBy: ['0'] },
      ],
    },
    'src/other.ts': {
      language: 'typescript',
      source: 'o\n',
      mutants: [{ id: '3', mutatorName: 'M', replacement: 'w', location: loc(1, 1), status: 'Killed', killedBy: ['0'], coveredBy: ['0'] }],
    },
  },
  testFiles: { [TEST]: { source: 't\n', tests: [{ id: '0', name: 'old test', location: { start: { line: 1, column: 1 } } }] } },
};

/** What the reporter writes for a run that reused mutant 0, planned 1 and 2, and stopped after 1. */
function stoppedRun(file: string) {
  process.env.MUT_CHECKPOINT_FILE = file;
  try {
    const r = new CheckpointReporter();
    r.onDryRunCompleted({
      result: {
        tests: [
          { id: `${TEST}#old test`, name: 'old test', fileName: path.join(process.cwd(), TEST), startPosition: { line: 0, column: 0 } },
          {
            id: `${TEST}#new test`,
            name: 'new test',
            // the vitest runner may name the sandbox's copy
            fileName: path.join(process.cwd(), '.stryker-tmp', 'sandbox-AbC123', TEST),
            startPosition: { line: 4, column: 2 },
          },
        ],
      },
    });
    const planned = (line: number, replacement: string) => ({
      plan: 'Run',
      mutant: {
        fileName: path.join(process.cwd(), SRC),
        mutatorName: 'M',
        replacement,
        location: { start: { line: line - 1, column: 0 }, end: { line: line - 1, column: 5 } },
      },
    });
    r.onMutationTestingPlanReady({ mutantPlans: [{ plan: 'EarlyResult', mutant: {} }, planned(2, 'y'), planned(3, 'z')] });
    const result = (line: number, replacement: string, status: string, extra: object) => ({
      fileName: path.join(process.cwd(), SRC),
      mutatorName: 'M',
      replacement,
      location: loc(line, 1),
      status,
      ...extra,
    });
    r.onMutantTested(result(1, 'x', 'Killed', { killedBy: [`${TEST}#old test`], coveredBy: [`${TEST}#old test`] }));
    r.onMutantTested(
      result(2, 'y', 'Killed', {
        killedBy: [`${TEST}#new test`],
        coveredBy: [`${TEST}#old test`, `${TEST}#new test`],
        statusReason: 'x'.repeat(5000),
      }),
    );
  } finally {
    delete process.env.MUT_CHECKPOINT_FILE;
  }
}

describe('the checkpoint of a mutation run', () => {
  it('names files relative to the project, also the copies in a Stryker sandbox', () => {
    expect(projectPath('/p/.stryker-tmp/sandbox-Xy1/test/a.test.ts', '/p')).toBe('test/a.test.ts');
    expect(projectPath('/p/.stryker-tmp-pg/sandbox-Xy1/src/b.ts', '/p')).toBe('src/b.ts');
    expect(projectPath('/p/src/b.ts', '/p')).toBe('src/b.ts');
  });

  it('writes one line per event, a new run starting a new file', () => {
    const file = path.join(dir, 'cp1.jsonl');
    writeFileSync(file, '{"kind":"mutant","from":"an older run"}\n');
    stoppedRun(file);
    const lines = parseCheckpoint(readFileSync(file, 'utf8'));
    expect(lines.map((l) => l.kind)).toEqual(['tests', 'plan', 'mutant', 'mutant']);
    expect(lines[0]?.tests?.[1]?.fileName).toBe(TEST);
    expect(lines[1]?.run).toHaveLength(2);
    expect(lines[1]?.run?.[0]?.location.start).toEqual({ line: 2, column: 1 });
    expect(lines[3]?.statusReason).toHaveLength(2000);
    // tests by their place in the tests line, not by their (long) ids
    expect(lines[3]?.killedBy).toEqual([1]);
    expect(lines[3]?.coveredBy).toEqual([0, 1]);
  });

  it('keeps what the run tested, with its tests, and what it did not reach as before but to be tested again', () => {
    const file = path.join(dir, 'cp2.jsonl');
    stoppedRun(file);
    // a stop in the middle of a write leaves half a line
    writeFileSync(file, `${readFileSync(file, 'utf8')}{"kind":"mutant","file":"src/a.`);
    const { report, counts } = checkpointReport(parseCheckpoint(readFileSync(file, 'utf8')), incremental, (f) =>
      f === SRC ? 'a\nb\nc\n' : 't\n',
    );
    expect(counts).toEqual({ planned: 2, notReached: 1, results: 2 });
    expect(Object.keys(report.files)).toEqual([SRC]);
    const byLine = (line: number) => mutantsOf(report, SRC).find((m) => m.location.start.line === line);
    const testId = (name: string) => testsOf(report, TEST).find((t) => t.name === name)?.id;

    expect(byLine(1)).toMatchObject({ status: 'Killed', killedBy: [testId('old test')] });
    expect(byLine(2)).toMatchObject({
      status: 'Killed',
      killedBy: [testId('new test')],
      coveredBy: [testId('old test'), testId('new test')],
    });
    const notReached = byLine(3);
    expect(notReached?.status).toBe('Timeout');
    expect(notReached?.coveredBy).toBeUndefined();
    expect(notReached?.killedBy).toBeUndefined();
    expect(notReached?.statusReason).toMatch(/stopped before it/);
    expect(testsOf(report, TEST)[1]?.location).toEqual({ start: { line: 5, column: 3 } });
  });

  it('reads the tests of a checkpoint written before they were numbered, by their ids', () => {
    const file = path.join(dir, 'cp-ids.jsonl');
    stoppedRun(file);
    const lines = parseCheckpoint(readFileSync(file, 'utf8')).map((l) =>
      l.kind === 'mutant' && l.killedBy?.[0] === 1 ? { ...l, killedBy: [`${TEST}#new test`], coveredBy: [`${TEST}#old test`] } : l,
    );
    const { report } = checkpointReport(lines, incremental, () => '');
    const line2 = mutantsOf(report, SRC).find((m) => m.location.start.line === 2);
    expect(line2?.killedBy).toEqual(['1']);
    expect(line2?.coveredBy).toEqual(['0']);
  });

  it('tells apart mutants that share mutator, replacement and start by their end', () => {
    // `true` for a whole `a || b` and for its `a`: one start, two mutants
    const at = (endColumn: number) => ({ start: { line: 2, column: 1 }, end: { line: 2, column: endColumn } });
    const m = (endColumn: number, status: string) => ({
      kind: 'mutant',
      file: SRC,
      mutatorName: 'M',
      replacement: 'y',
      location: at(endColumn),
      status,
    });
    const old = {
      ...incremental,
      files: {
        [SRC]: {
          language: 'typescript',
          source: '',
          mutants: [{ id: '0', mutatorName: 'M', replacement: 'y', location: at(9), status: 'Survived' }],
        },
      },
    };
    const lines = [
      { kind: 'tests', tests: [] },
      {
        kind: 'plan',
        run: [
          { file: SRC, mutatorName: 'M', replacement: 'y', location: at(6) },
          { file: SRC, mutatorName: 'M', replacement: 'y', location: at(9) },
        ],
      },
      m(3, 'Killed'),
      m(6, 'Killed'),
    ];
    const { report, counts } = checkpointReport(lines, old, () => '');
    expect(counts).toEqual({ planned: 2, notReached: 1, results: 2 });
    expect(mutantsOf(report, SRC).map((x) => `${x.status} ${x.location.end?.column}`)).toEqual(['Killed 3', 'Killed 6', 'Survived 9']);
  });

  it('refuses a checkpoint of a run that stopped before its initial test run ended', () => {
    expect(() => checkpointReport([], incremental)).toThrow(/initial test run/);
  });

  it('merges into the incremental file through the script, keeping the files the run did not reach', () => {
    const file = path.join(dir, 'cp3.jsonl');
    stoppedRun(file);
    const inc = path.join(dir, 'incremental.json');
    const out = path.join(dir, 'merged.json');
    writeFileSync(inc, JSON.stringify(incremental));
    const run = spawnSync(process.execPath, ['scripts/mutation-checkpoint.mjs', '--checkpoint', file, '--incremental', inc, '--out', out], {
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/of 2 mutants planned, 1 tested, 1 not reached/);
    const merged = JSON.parse(readFileSync(out, 'utf8')) as Report;
    expect(Object.keys(merged.files).sort()).toEqual(['src/a.ts', 'src/other.ts']);
    expect(mutantsOf(merged, 'src/a.ts').map((m) => m.status)).toEqual(['Killed', 'Killed', 'Timeout']);
    const nameOf = (id: string | undefined) => testsOf(merged, TEST).find((t) => t.id === id)?.name;
    expect(nameOf(mutantsOf(merged, 'src/a.ts')[1]?.killedBy?.[0])).toBe('new test');
    // the untouched file's killer is still the test of that name
    expect(nameOf(mutantsOf(merged, 'src/other.ts')[0]?.killedBy?.[0])).toBe('old test');
  });
});
