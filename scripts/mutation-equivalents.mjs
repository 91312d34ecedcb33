// The list of mutants argued equivalent (test/mutation/equivalents.tsv), which the
// 'argued-equivalents' ignorer (test/mutation/ignore-equivalents.mjs) reports Ignored instead
// of running them again.
//   node scripts/mutation-equivalents.mjs check [--report R] [--list L]
//     Instruments every listed file as Stryker does (no test run, a few seconds) and, against the
//     report (default: the last run's, reports/mutation/mutation.json), says per row how many mutants it
//     ignores. Fails when a row ignores a mutant that the report does not say survived (a
//     killed one would vanish from the score), or when a row ignores nothing in a file whose
//     source is the report's. Rows of files changed since the report are listed as "to check
//     again": their mutants run again until the row is checked.
//   node scripts/mutation-equivalents.mjs add --file F [--report R] [--list L]
//     Adds rows for F's survivors in the report, whole groups only (every mutant of that mutator
//     starting on that line survived), with a reason that points at test/MUTATION.md. Only for
//     a file whose survivors are all argued there. F's rows already listed stay with their
//     reasons (a run with a row in place records its mutants Ignored, not Survived).
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Instrumenter } from '@stryker-mutator/instrumenter';
import { mutantKey, scoreOf } from './mutation-report.mjs';
import { lineOf, parseEquivalents, strykerPlugins } from '../test/mutation/ignore-equivalents.mjs';

const HEADER =
  '# Mutants argued equivalent in test/MUTATION.md, reported Ignored by test/mutation/ignore-equivalents.mjs.\n' +
  '# file\tline\tmutators\tcode of the line (trimmed)\treason. Edit with scripts/mutation-equivalents.mjs.\n';

const quiet = {
  debug() {},
  info() {},
  trace() {},
  warn: (...a) => console.warn(...a),
  error: (...a) => console.error(...a),
  isDebugEnabled: () => false,
  isTraceEnabled: () => false,
  isInfoEnabled: () => false,
};

/** The mutants Stryker makes of `file` with the ignorer on (its config's other ignorers off). */
export async function instrumented(file, listPath) {
  const previous = process.env.MUT_EQUIVALENTS;
  process.env.MUT_EQUIVALENTS = listPath;
  try {
    const ignorer = strykerPlugins[0].value;
    const result = await new Instrumenter(quiet).instrument(
      [{ name: path.resolve(file), content: readFileSync(file, 'utf8'), mutate: true }],
      { plugins: null, excludedMutations: [], ignorers: [ignorer], noHeader: false },
    );
    return result.mutants;
  } finally {
    if (previous === undefined) delete process.env.MUT_EQUIVALENTS;
    else process.env.MUT_EQUIVALENTS = previous;
  }
}

/** Checks a list against a report: per row, what it ignores; problems that make it wrong. */
export async function checkList(listPath, report) {
  const rows = parseEquivalents(readFileSync(listPath, 'utf8'));
  const problems = [];
  const toCheckAgain = [];
  let ignored = 0;
  // Of those, the ones the report counts (Survived): a run with the rows in place already
  // recorded the others Ignored, outside the report's valid mutants.
  let ignoredCounted = 0;
  for (const [file, fileRows] of rows) {
    const entry = report.files?.[file];
    if (!existsSync(file)) {
      problems.push(`${file}: listed, but there is no such file`);
      continue;
    }
    const source = readFileSync(file, 'utf8');
    if (!entry || entry.source !== source) {
      toCheckAgain.push(file);
      continue;
    }
    const statusByKey = new Map(entry.mutants.map((m) => [mutantKey(m, m.location.start.line, m.location.start.column), m.status]));
    const mutants = await instrumented(file, listPath);
    const lines = source.split('\n');
    for (const row of fileRows) {
      const at = lineOf(row, lines);
      const mine = mutants.filter(
        (m) => m.status === 'Ignored' && m.location.start.line + 1 === at && row.mutators.includes(m.mutatorName),
      );
      if (mine.length === 0) problems.push(`${file}:${row.line} ${row.mutators.join(',')}: ignores no mutant`);
      for (const m of mine) {
        const status = statusByKey.get(mutantKey(m, m.location.start.line + 1, m.location.start.column + 1));
        if (status === 'Survived') ignoredCounted++;
        else if (status !== 'Ignored') {
          problems.push(
            `${file}:${at}:${m.location.start.column + 1} ${m.mutatorName} -> ${m.replacement}: ignored, but the report says ${status ?? 'nothing'}`,
          );
        }
      }
      ignored += mine.length;
    }
  }
  // The report's score with the listed survivors taken out (what a run with the ignorer reports).
  const { detected, valid } = scoreOf(Object.values(report.files ?? {}).flatMap((entry) => entry.mutants));
  return { ignored, problems, toCheckAgain, score: { detected, valid: valid - ignoredCounted } };
}

/** Rows for `file`'s whole groups of survivors in the report. */
export function rowsFor(file, report) {
  const entry = report.files?.[file];
  if (!entry) throw new Error(`${file}: not in the report`);
  if (!existsSync(file) || readFileSync(file, 'utf8') !== entry.source)
    throw new Error(`${file}: changed since the report; run it again first`);
  const groups = new Map();
  for (const m of entry.mutants) {
    const k = `${m.location.start.line}\n${m.mutatorName}`;
    const g = groups.get(k) ?? { line: m.location.start.line, mutator: m.mutatorName, statuses: [] };
    g.statuses.push(m.status);
    groups.set(k, g);
  }
  const byLine = new Map();
  for (const g of groups.values()) {
    if (!g.statuses.includes('Survived') || g.statuses.some((s) => s !== 'Survived' && s !== 'Ignored')) continue;
    const mutators = byLine.get(g.line) ?? [];
    mutators.push(g.mutator);
    byLine.set(g.line, mutators);
  }
  const lines = entry.source.split('\n');
  return [...byLine]
    .sort((a, b) => a[0] - b[0])
    .map(([line, mutators]) => ({
      line,
      mutators: mutators.sort(),
      code: lines[line - 1].trim(),
      reason: `argued equivalent in test/MUTATION.md (${path.basename(file)})`,
    }));
}

/**
 * A file's listed rows with `fresh` ones added: a fresh row on the line of a listed one (the
 * line its code is on now) adds its mutators to it and keeps the listed reason; the others are
 * new rows. Nothing listed is dropped: `check` says when a row is wrong.
 */
export function mergeRows(listed, fresh, lines) {
  const out = listed.map((r) => ({ ...r, mutators: [...r.mutators] }));
  for (const f of fresh) {
    const same = out.find((r) => lineOf(r, lines) === f.line);
    if (same) same.mutators = [...new Set([...same.mutators, ...f.mutators])].sort();
    else out.push(f);
  }
  return out;
}

function format(rowsByFile) {
  let out = HEADER;
  for (const file of [...rowsByFile.keys()].sort()) {
    for (const r of rowsByFile.get(file).sort((a, b) => a.line - b.line)) {
      out += `${file}\t${r.line}\t${r.mutators.join(',')}\t${r.code}\t${r.reason}\n`;
    }
  }
  return out;
}

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  const opt = (name, fallback) => {
    const i = rest.indexOf(name);
    return i >= 0 ? rest[i + 1] : fallback;
  };
  const reportPath = opt('--report', 'reports/mutation/mutation.json');
  const listPath = opt('--list', 'test/mutation/equivalents.tsv');
  const report = JSON.parse(readFileSync(reportPath, 'utf8'));
  if (command === 'add') {
    const file = opt('--file');
    if (!file) throw new Error('add needs --file');
    const rows = existsSync(listPath) ? parseEquivalents(readFileSync(listPath, 'utf8')) : new Map();
    const listed = rows.get(file) ?? [];
    const merged = mergeRows(listed, rowsFor(file, report), report.files[file].source.split('\n'));
    rows.set(file, merged);
    writeFileSync(listPath, format(rows));
    console.log(`${file}: ${merged.length} row(s), ${merged.length - listed.length} new`);
    return;
  }
  if (command === 'check') {
    const { ignored, problems, toCheckAgain, score } = await checkList(listPath, report);
    console.log(`${ignored} mutant(s) ignored as argued equivalents`);
    console.log(
      `the report's score without them: ${((100 * score.detected) / score.valid).toFixed(1)} % (${score.detected}/${score.valid})`,
    );
    if (toCheckAgain.length) console.log(`to check again (changed since the report, their mutants run): ${toCheckAgain.join(', ')}`);
    for (const p of problems) console.log(`PROBLEM ${p}`);
    process.exitCode = problems.length ? 1 : 0;
    return;
  }
  console.error('usage: node scripts/mutation-equivalents.mjs check|add --file F [--report R] [--list L]');
  process.exitCode = 2;
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (isMain) await main();
