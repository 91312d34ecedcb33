// The comparison of two mutation runs on the same mutants (scripts/mutation-compare.mjs): before
// and after tests move, or LevelDB against PostgreSQL. "No killed mutant lost" is read from here,
// so a mutant it pairs wrongly or a difference it hides is a wrong claim.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without declarations
import * as compareRuns from '../../scripts/mutation-compare.mjs';

interface Mutant {
  mutatorName: string;
  replacement: string;
  status: string;
  testsCompleted?: number;
  location: { start: { line: number; column: number }; end: { line: number; column: number } };
}
const m = (status: string, line: number, column: number, end = column + 5, replacement = 'true'): Mutant => ({
  mutatorName: 'ConditionalExpression',
  replacement,
  status,
  location: { start: { line, column }, end: { line, column: end } },
});
const report = (mutants: Mutant[]) => ({ files: { 'src/a.ts': { mutants } } });
interface Module {
  file: string;
  a: Record<string, number>;
  b: Record<string, number>;
  differences: { only: string; a?: string; b?: string; mutant: Mutant }[];
}
const { comparePair } = compareRuns as unknown as { comparePair: (a: unknown, b: unknown) => Module[] };
const compare = (a: Mutant[], b: Mutant[]) => comparePair(report(a), report(b))[0]!;

describe('mutation-compare', () => {
  it('counts each side and reports no difference when both detect (killed and timed out alike)', () => {
    const r = compare([m('Killed', 1, 1), m('Survived', 2, 1)], [m('Timeout', 1, 1), m('NoCoverage', 2, 1)]);
    expect(r.a).toMatchObject({ killed: 1, timeout: 0, survived: 1, noCoverage: 0 });
    expect(r.b).toMatchObject({ killed: 0, timeout: 1, survived: 0, noCoverage: 1 });
    expect(r.differences).toEqual([]);
  });

  it('names the side that detected a mutant the other let through', () => {
    const r = compare([m('Killed', 1, 1), m('Survived', 2, 1)], [m('Survived', 1, 1), m('Killed', 2, 1)]);
    expect(r.differences.map((d) => [d.mutant.location.start.line, d.only, d.a, d.b])).toEqual([
      [1, 'a', 'Killed', 'Survived'],
      [2, 'b', 'Survived', 'Killed'],
    ]);
  });

  it('pairs mutants by mutator, replacement, start and end: two sharing a start are two', () => {
    const r = compare(
      [m('Killed', 3, 9, 20), m('Survived', 3, 9, 12), m('Killed', 4, 1, 6, 'false')],
      [m('Survived', 3, 9, 12), m('Killed', 3, 9, 20), m('Survived', 4, 1, 6, 'true')],
    );
    expect(r.differences.map((d) => [d.only, d.mutant.replacement])).toEqual([
      ['missing', 'false'],
      ['missing', 'true'],
    ]);
  });

  it('as a command, fails when a mutant detected before is not detected after, and counts both sides', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mutation-compare-'));
    try {
      const write = (name: string, mutants: Mutant[]) => {
        const file = path.join(dir, name);
        writeFileSync(file, JSON.stringify(report(mutants)));
        return file;
      };
      const before = write('before.json', [m('Killed', 1, 1), m('Timeout', 2, 1), m('Survived', 3, 1)]);
      const kept = write('kept.json', [m('Killed', 1, 1), m('Killed', 2, 1), m('Killed', 3, 1)]);
      const lost = write('lost.json', [m('Killed', 1, 1), m('Survived', 2, 1), m('Survived', 3, 1)]);
      const run = (a: string, b: string) =>
        spawnSync(process.execPath, ['scripts/mutation-compare.mjs', a, b, 'before', 'after'], { encoding: 'utf8' });
      const ok = run(before, kept);
      expect(ok.status).toBe(0);
      expect(ok.stdout).toContain('detected: before 2, after 3; before only 0, after only 1; unmeasured 0; on one side only 0');
      const bad = run(before, lost);
      expect(bad.status).toBe(1);
      expect(bad.stdout).toContain('2:1-2:6 ConditionalExpression → "true": detected before only (Timeout / Survived)');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('tells a survivor against which no test ran (a failed hook) from one the tests let through', () => {
    const notRun = { ...m('Survived', 1, 1), testsCompleted: 0 };
    const ran = { ...m('Survived', 2, 1), testsCompleted: 4 };
    const r = compare(
      [m('Killed', 1, 1), m('Killed', 2, 1), { ...m('Survived', 3, 1), testsCompleted: 0 }],
      [notRun, ran, m('Killed', 3, 1)],
    );
    expect(r.differences.map((d) => [d.mutant.location.start.line, d.only])).toEqual([
      [1, 'unmeasured'],
      [2, 'a'],
      [3, 'unmeasured'],
    ]);
    expect(r.b).toMatchObject({ killed: 1, survived: 1, unmeasured: 1 });
  });
});
