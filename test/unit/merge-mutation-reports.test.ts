// scripts/merge-mutation-reports.mjs (README "Testing"): merges Stryker JSON reports into one
// incremental file. Test and mutant ids are per report ("0", "1", … in each), so the merge must
// renumber them and carry each mutant's covering and killing tests over by test identity.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(path.join(tmpdir(), 'yl-merge-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

interface Mutant {
  id: string;
  status: string;
  coveredBy?: string[];
  killedBy?: string[];
  [k: string]: unknown;
}
interface Report {
  schemaVersion: string;
  thresholds: { high: number; low: number };
  projectRoot: string;
  files: Record<string, { language: string; source: string; mutants: Mutant[] }>;
  testFiles: Record<string, { source: string; tests: { id: string; name: string }[] }>;
}

const mutant = (id: string, status: string, coveredBy: string[], killedBy: string[] = []): Mutant => ({
  id,
  status,
  mutatorName: 'ConditionalExpression',
  replacement: 'false',
  location: { start: { line: 1, column: 1 }, end: { line: 1, column: 2 } },
  coveredBy,
  killedBy,
});

function merge(...reports: Report[]): Report {
  const inputs = reports.map((r, i) => {
    const p = path.join(dir, `in-${i}-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(p, JSON.stringify(r));
    return p;
  });
  const out = path.join(dir, `out-${Math.random().toString(36).slice(2)}.json`);
  const run = spawnSync(process.execPath, ['scripts/merge-mutation-reports.mjs', '--out', out, ...inputs], { encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(readFileSync(out, 'utf8')) as Report;
}

/** Each mutant of `file` as status and the names of its covering and killing tests. */
function byName(r: Report, file: string) {
  const names = new Map<string, string>();
  for (const [f, tf] of Object.entries(r.testFiles)) for (const t of tf.tests) names.set(t.id, `${f} ${t.name}`);
  return r.files[file]!.mutants.map((m) => ({
    status: m.status,
    coveredBy: (m.coveredBy ?? []).map((id) => names.get(id)),
    killedBy: (m.killedBy ?? []).map((id) => names.get(id)),
  }));
}

const base = { schemaVersion: '1.0', thresholds: { high: 80, low: 60 } };

const a: Report = {
  ...base,
  projectRoot: '/a',
  files: {
    'src/x.ts': {
      language: 'typescript',
      source: 'x',
      mutants: [mutant('0', 'Killed', ['0', '1'], ['1']), mutant('1', 'Survived', ['0'])],
    },
    'src/y.ts': { language: 'typescript', source: 'y old', mutants: [mutant('2', 'Survived', ['1'])] },
  },
  testFiles: {
    'test/x.test.ts': {
      source: 'tx',
      tests: [
        { id: '0', name: 'x one' },
        { id: '1', name: 'x two' },
      ],
    },
  },
};
const b: Report = {
  ...base,
  projectRoot: '/b',
  files: { 'src/y.ts': { language: 'typescript', source: 'y new', mutants: [mutant('0', 'Killed', ['0'], ['0'])] } },
  testFiles: { 'test/y.test.ts': { source: 'ty', tests: [{ id: '0', name: 'y one' }] } },
};

describe('merge-mutation-reports', () => {
  it('unions files and test files; a later report replaces an earlier one’s entry for a file', () => {
    const m = merge(a, b);
    expect(Object.keys(m.files).sort()).toEqual(['src/x.ts', 'src/y.ts']);
    expect(m.files['src/y.ts']!.source).toBe('y new');
    expect(Object.keys(m.testFiles).sort()).toEqual(['test/x.test.ts', 'test/y.test.ts']);
    expect(m.projectRoot).toBe('/b');
    expect(m.schemaVersion).toBe('1.0');
  });

  it('renumbers colliding test and mutant ids and keeps every reference to the same test', () => {
    const m = merge(a, b);
    const testIds = Object.values(m.testFiles).flatMap((f) => f.tests.map((t) => t.id));
    expect(new Set(testIds).size).toBe(3);
    const mutantIds = Object.values(m.files).flatMap((f) => f.mutants.map((x) => x.id));
    expect(new Set(mutantIds).size).toBe(3);
    expect(byName(m, 'src/x.ts')).toEqual([
      { status: 'Killed', coveredBy: ['test/x.test.ts x one', 'test/x.test.ts x two'], killedBy: ['test/x.test.ts x two'] },
      { status: 'Survived', coveredBy: ['test/x.test.ts x one'], killedBy: [] },
    ]);
    expect(byName(m, 'src/y.ts')).toEqual([{ status: 'Killed', coveredBy: ['test/y.test.ts y one'], killedBy: ['test/y.test.ts y one'] }]);
  });

  it('drops a reference to a test that the later version of its file no longer has', () => {
    const later: Report = {
      ...base,
      projectRoot: '/c',
      files: {},
      testFiles: { 'test/x.test.ts': { source: 'tx2', tests: [{ id: '0', name: 'x two' }] } },
    };
    const m = merge(a, later);
    expect(m.testFiles['test/x.test.ts']!.source).toBe('tx2');
    expect(byName(m, 'src/x.ts')).toEqual([
      { status: 'Killed', coveredBy: ['test/x.test.ts x two'], killedBy: ['test/x.test.ts x two'] },
      { status: 'Survived', coveredBy: [], killedBy: [] },
    ]);
  });

  it('refuses to run without --out or without a report', () => {
    const run = spawnSync(process.execPath, ['scripts/merge-mutation-reports.mjs', 'a.json'], { encoding: 'utf8' });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/usage: node scripts\/merge-mutation-reports\.mjs --out/);
  });
});
