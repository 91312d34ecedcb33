// The mutation tooling's bookkeeping (README "Testing"): scripts/mutation-plan.mjs says why a
// planned mutant has no reusable result, and scripts/mutation-survivors.mjs marks a file whose
// results were measured on other code. Both read the committed incremental report; a wrong
// reason or a missing STALE mark would make a score look current when it is not.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without declarations
import * as planScript from '../../scripts/mutation-plan.mjs';

type Row = Record<string, number>;
const { classifyPlan, REASONS } = planScript as unknown as {
  classifyPlan: (run: object[], report: object, readCurrent: (f: string) => string | null) => Map<string, Row>;
  REASONS: string[];
};

const dir = mkdtempSync(path.join(tmpdir(), 'yl-plan-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const at = (line: number, column: number) => ({ start: { line, column }, end: { line, column: column + 1 } });
const old = (status: string, line: number) => ({
  id: String(line),
  status,
  mutatorName: 'ConditionalExpression',
  replacement: 'false',
  location: at(line, 5),
});
const planned = (file: string, line: number, netTime = 1000) => ({
  file,
  line,
  column: 5,
  mutatorName: 'ConditionalExpression',
  replacement: 'false',
  tests: 3,
  netTime,
});

const report = {
  files: {
    'src/same.ts': { source: 'same', mutants: [old('Killed', 1), old('Survived', 2), old('Timeout', 3)] },
    'src/edited.ts': { source: 'before', mutants: [old('Killed', 1)] },
  },
};
const sources: Record<string, string> = { 'src/same.ts': 'same', 'src/edited.ts': 'after' };

describe('classifyPlan', () => {
  it('names why each planned mutant is run again, per file, with the summed worst case', () => {
    const byFile = classifyPlan(
      [
        planned('src/same.ts', 1),
        planned('src/same.ts', 2),
        planned('src/same.ts', 3),
        planned('src/same.ts', 4, 500),
        planned('src/edited.ts', 1),
        planned('src/new.ts', 1),
      ],
      report,
      (f: string) => sources[f] ?? null,
    );
    expect(REASONS).toEqual(['file changed', 'new', 'killer changed', 'new tests']);
    expect(byFile.get('src/same.ts')).toEqual({ n: 4, ms: 3500, 'file changed': 0, new: 1, 'killer changed': 1, 'new tests': 2 });
    expect(byFile.get('src/edited.ts')).toMatchObject({ n: 1, 'file changed': 1 });
    expect(byFile.get('src/new.ts')).toMatchObject({ n: 1, new: 1 });
  });

  it('a mutant moved to another column or another replacement is new, not a reused identity', () => {
    const byFile = classifyPlan(
      [
        { ...planned('src/same.ts', 1), column: 6 },
        { ...planned('src/same.ts', 2), replacement: 'true' },
      ],
      report,
      (f: string) => sources[f] ?? null,
    );
    expect(byFile.get('src/same.ts')).toMatchObject({ n: 2, new: 2 });
  });
});

describe('mutation-survivors.mjs', () => {
  it('marks a file whose report source is not the working tree file STALE, and counts them', () => {
    const file = path.join(dir, 'report.json');
    const source = 'export const x = 1;\n';
    writeFileSync(
      file,
      JSON.stringify({
        files: {
          'package.json': { source: 'not the package file', mutants: [{ ...old('Killed', 1), location: at(1, 1) }] },
          'src/gone-away.ts': { source, mutants: [{ ...old('Survived', 1), location: at(1, 1) }] },
        },
      }),
    );
    const run = spawnSync(process.execPath, ['scripts/mutation-survivors.mjs', file], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain('package.json: 100.0 % (1/1) STALE (source changed since this result)');
    expect(run.stdout).toContain('src/gone-away.ts: 0.0 % (0/1) STALE (file removed)');
    expect(run.stdout).toContain('total: 50.0 % (1/2)');
    expect(run.stdout).toContain('2 STALE file(s)');
  });
});
