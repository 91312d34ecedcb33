// The 'argued-equivalents' ignorer (test/mutation/ignore-equivalents.mjs) and its checker
// (scripts/mutation-equivalents.mjs). A row that ignored more than its line's mutants of its
// mutators would hide killed mutants from the score; a row that kept ignoring after its line
// changed would hide a mutant of new code. Both are checked here by instrumenting real source
// files as Stryker does (no test run).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without declarations
import * as equivalents from '../../scripts/mutation-equivalents.mjs';

interface Mutant {
  mutatorName: string;
  replacement: string;
  status?: string;
  statusReason?: string;
  location: { start: { line: number; column: number } };
}

interface Checked {
  ignored: number;
  problems: string[];
  toCheckAgain: string[];
  score: { detected: number; valid: number };
}
interface Row {
  line: number;
  mutators: string[];
  code: string;
  reason: string;
}
const { checkList, instrumented, mergeRows, rowsFor } = equivalents as unknown as {
  checkList: (listPath: string, report: unknown) => Promise<Checked>;
  instrumented: (file: string, listPath: string) => Promise<Mutant[]>;
  mergeRows: (listed: Row[], fresh: Row[], lines: string[]) => Row[];
  rowsFor: (file: string, report: unknown) => Row[];
};

const dir = mkdtempSync(path.join(tmpdir(), 'yl-equiv-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const FILE = 'src/daemon/streams/writer-presence.ts';
const source = readFileSync(FILE, 'utf8');
const lineNo = (text: string) => source.split('\n').findIndex((l) => l.trim() === text) + 1;
const GUARD = 'if (!meta.writer.active || meta.writer.tokenHash === null) return false;';

function list(rows: string[]): string {
  const p = path.join(dir, `list-${Math.random().toString(36).slice(2)}.tsv`);
  writeFileSync(p, `# test list\n${rows.join('\n')}\n`);
  return p;
}
const ignoredOf = (mutants: Mutant[]) => mutants.filter((m) => m.status === 'Ignored');

describe('argued-equivalents ignorer', () => {
  it('ignores exactly the mutants of the listed mutators that start on the listed line', async () => {
    const at = lineNo(GUARD);
    expect(at).toBeGreaterThan(0);
    const all = await instrumented(FILE, list([]));
    const expected = all.filter((m) => m.location.start.line + 1 === at && m.mutatorName === 'LogicalOperator');
    expect(expected.length).toBeGreaterThan(0);
    const sameLineOthers = all.filter((m) => m.location.start.line + 1 === at && m.mutatorName !== 'LogicalOperator');
    expect(sameLineOthers.length).toBeGreaterThan(0);

    const mutants = await instrumented(FILE, list([`${FILE}\t${at}\tLogicalOperator\t${GUARD}\tbecause of a reason`]));
    expect(mutants.length).toBe(all.length);
    const ignored = ignoredOf(mutants);
    expect(ignored.map((m) => [m.mutatorName, m.replacement])).toEqual(expected.map((m) => [m.mutatorName, m.replacement]));
    expect(ignored.every((m) => m.statusReason === 'because of a reason')).toBe(true);
  });

  it('follows the code to the one line that has it, and ignores nothing once the code is gone or not unique', async () => {
    const at = lineNo(GUARD);
    const moved = await instrumented(FILE, list([`${FILE}\t${at + 7}\tLogicalOperator\t${GUARD}\tmoved`]));
    expect(ignoredOf(moved).length).toBeGreaterThan(0);
    expect(ignoredOf(moved).every((m) => m.location.start.line + 1 === at)).toBe(true);
    const changed = await instrumented(FILE, list([`${FILE}\t${at}\tLogicalOperator\t${GUARD.replace('||', '&&')}\tgone`]));
    expect(ignoredOf(changed)).toEqual([]);
    // The same code on two lines, neither the row's: which one was argued is not known.
    const twin = path.join(dir, 'twin.ts');
    const code = 'if (a > 1) return true;';
    writeFileSync(twin, `export function f(a: number): boolean {\n  ${code}\n  ${code}\n  return false;\n}\n`);
    const rel = path.relative(process.cwd(), twin);
    const ambiguous = await instrumented(twin, list([`${rel}\t4\tConditionalExpression\t${code}\tambiguous`]));
    expect(ambiguous.length).toBeGreaterThan(0);
    expect(ignoredOf(ambiguous)).toEqual([]);
    const exact = await instrumented(twin, list([`${rel}\t3\tConditionalExpression\t${code}\texact`]));
    expect(ignoredOf(exact).map((m) => m.location.start.line + 1)).toEqual([3, 3]);
  });
});

describe('argued-equivalents ignorer, the committed list', () => {
  it('changes no mutant of a listed file but its status: same mutators, places and replacements', async () => {
    const files = [
      ...new Set(
        readFileSync('test/mutation/equivalents.tsv', 'utf8')
          .split('\n')
          .filter((l) => l.trim() !== '' && !l.startsWith('#'))
          .map((l) => l.split('\t')[0]!),
      ),
    ];
    expect(files.length).toBeGreaterThan(0);
    const identity = (m: Mutant) => `${m.mutatorName} ${m.location.start.line}:${m.location.start.column} ${m.replacement}`;
    let ignored = 0;
    for (const file of files) {
      const without = (await instrumented(file, list([]))).map(identity);
      const mutants = await instrumented(file, 'test/mutation/equivalents.tsv');
      expect(mutants.map(identity), file).toEqual(without);
      ignored += ignoredOf(mutants).length;
    }
    expect(ignored).toBeGreaterThan(0);
  });
});

describe('mutation-equivalents check', () => {
  const at = lineNo(GUARD);
  const row = `${FILE}\t${at}\tLogicalOperator,ConditionalExpression\t${GUARD}\tr`;
  let all: Mutant[] = [];
  beforeAll(async () => {
    all = await instrumented(FILE, list([]));
  });
  /** A report of FILE as it is, every mutant with `status`. */
  const report = (status: string) => {
    const mutants = all.map((m, i) => ({
      id: String(i),
      mutatorName: m.mutatorName,
      replacement: m.replacement,
      location: { start: { line: m.location.start.line + 1, column: m.location.start.column + 1 } },
      status,
    }));
    return { files: { [FILE]: { source, mutants } } };
  };

  it('fails a row that would ignore a mutant the report says was killed, passes it when all survived', async () => {
    const bad = await checkList(list([row]), report('Killed'));
    expect(bad.problems.length).toBeGreaterThan(0);
    expect(bad.problems[0]).toMatch(/ignored, but the report says Killed/);
    const good = await checkList(list([row]), report('Survived'));
    expect(good.problems).toEqual([]);
    expect(good.ignored).toBeGreaterThan(1);
  });

  it('the score without the listed survivors takes out only those the report counts, not the ones it records Ignored', async () => {
    // After a run with the rows in place, the report itself says Ignored for the row's mutants:
    // they are outside its valid mutants already, and taking them out again inflated the score.
    const ofRow = (mutator: string) => ['LogicalOperator', 'ConditionalExpression'].includes(mutator);
    /** A report of FILE where the row's mutants have `status` and every other mutant was killed. */
    const withRow = (status: string) => {
      const r = report('Killed');
      for (const m of r.files[FILE].mutants) if (m.location.start.line === at && ofRow(m.mutatorName)) m.status = status;
      return r;
    };
    const rowMutants = all.filter((m) => m.location.start.line + 1 === at && ofRow(m.mutatorName)).length;
    expect(rowMutants).toBeGreaterThan(1);
    const killed = all.length - rowMutants;
    const a = await checkList(list([row]), withRow('Survived'));
    const b = await checkList(list([row]), withRow('Ignored'));
    expect([a.problems, b.problems]).toEqual([[], []]);
    expect([a.ignored, b.ignored]).toEqual([rowMutants, rowMutants]);
    expect(a.score).toEqual({ detected: killed, valid: killed });
    expect(b.score).toEqual({ detected: killed, valid: killed });
  });

  it('sets aside a file changed since the report instead of checking it against other code', async () => {
    const stale = { files: { [FILE]: { source: `${source}// edited\n`, mutants: [] } } };
    const r = await checkList(list([row]), stale);
    expect(r.problems).toEqual([]);
    expect(r.toCheckAgain).toEqual([FILE]);
  });

  it('add keeps a listed row whose mutants a run recorded Ignored, and adds the survivors of other lines', () => {
    // A run with the row in place reports its mutants Ignored, not Survived: rowsFor alone no
    // longer sees them, and `add` used to drop the row (and with it the argument's effect).
    const optional = 'if (a) for (const h of a.connections) this.#byHolder.get(h)?.delete(streamId);';
    const at29 = lineNo(optional);
    expect(at29).toBeGreaterThan(0);
    const r = report('Killed');
    for (const m of r.files[FILE].mutants) {
      if (m.location.start.line === at && m.mutatorName === 'LogicalOperator') m.status = 'Ignored';
      if (m.location.start.line === at29 && m.mutatorName === 'OptionalChaining') m.status = 'Survived';
    }
    const listed: Row[] = [{ line: at - 3, mutators: ['LogicalOperator'], code: GUARD, reason: 'the argument' }];
    const fresh = rowsFor(FILE, r);
    expect(fresh.map((x) => [x.line, x.mutators])).toEqual([[at29, ['OptionalChaining']]]);
    const merged = mergeRows(listed, fresh, source.split('\n'));
    expect(merged.map((x) => [x.code, x.mutators, x.reason])).toEqual([
      [GUARD, ['LogicalOperator'], 'the argument'],
      [optional, ['OptionalChaining'], fresh[0]!.reason],
    ]);
    // A fresh row on a listed row's line adds its mutators to that row.
    const more = mergeRows(listed, [{ line: at, mutators: ['ConditionalExpression'], code: GUARD, reason: 'x' }], source.split('\n'));
    expect(more).toEqual([{ line: at - 3, mutators: ['ConditionalExpression', 'LogicalOperator'], code: GUARD, reason: 'the argument' }]);
  });

  it('the committed list holds for the sources as they are: every row still ignores a mutant of its line', async () => {
    // Whether each ignored mutant survived is checked against a run's report (`check`, after
    // `npm run test:mutation`); without one, a report that calls every mutant survived leaves
    // only the rows whose line changed or no longer yields a mutant of their mutators.
    const list = 'test/mutation/equivalents.tsv';
    const empty = path.join(dir, 'none.tsv');
    writeFileSync(empty, '');
    const files: Record<string, { source: string; mutants: Mutant[] }> = {};
    for (const line of readFileSync(list, 'utf8').split('\n')) {
      const file = line.split('\t')[0]!;
      if (line === '' || line.startsWith('#') || file in files) continue;
      const mutants = (await instrumented(file, empty)).map((x) => ({
        mutatorName: x.mutatorName,
        replacement: x.replacement,
        status: 'Survived',
        location: { start: { line: x.location.start.line + 1, column: x.location.start.column + 1 } },
      }));
      files[file] = { source: readFileSync(file, 'utf8'), mutants };
    }
    const r = await checkList(list, { files });
    expect(r.toCheckAgain).toEqual([]);
    expect(r.problems).toEqual([]);
  });
});
