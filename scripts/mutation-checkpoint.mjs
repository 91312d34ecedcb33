// Keeps what a stopped mutation run tested. Stryker writes its report only at the end of a run;
// the 'checkpoint' reporter (test/mutation/checkpoint-reporter.mjs) writes each result as it
// comes. After a run that did not finish:
//   node scripts/mutation-checkpoint.mjs [--checkpoint reports/mutation/checkpoint.jsonl]
//        [--incremental test/mutation/stryker-incremental.json] [--out <same as --incremental>]
// builds a report of the run so far and merges it into the incremental file (as
// merge-mutation-reports.mjs merges two runs), so the next `npm run test:mutation` reuses every
// result the stopped run reached and tests only the rest. Then run
// `node scripts/mutation-locate-tests.mjs <out>` as after any merge.
//
// A mutant the run had planned to test but did not reach keeps the status the incremental file
// gave it, without the tests that were said to cover or kill it: the next run tests it again
// (as the merge does with a result whose test is gone), and scores count it as before.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { mergeReports } from './merge-mutation-reports.mjs';
import { currentSource, placedMutantKey as keyOf } from './mutation-report.mjs';

/** The checkpoint's lines, in order; a line cut off by the stop (the last one) is left out. */
export function parseCheckpoint(text) {
  const lines = [];
  for (const raw of text.split('\n')) {
    if (!raw.trim()) continue;
    try {
      lines.push(JSON.parse(raw));
    } catch {
      // only the last line can be partial: the reporter appends whole lines
    }
  }
  return lines;
}

/**
 * A Stryker report (mutation-testing-report-schema) of the run the checkpoint `lines` describe:
 * the files that run had mutants in, each with every result it reported, plus the results the
 * run had planned and not reached, taken from `incremental` without their tests.
 * `readSource(file)` is a file's source now (the run was made on it).
 */
export function checkpointReport(lines, incremental, readSource = currentSource) {
  const testsLine = lines.find((l) => l.kind === 'tests');
  if (!testsLine) throw new Error('the checkpoint has no tests line: the run stopped before its initial test run ended');
  const planned = lines.filter((l) => l.kind === 'plan').flatMap((l) => l.run);

  const reportId = new Map();
  const testFiles = {};
  testsLine.tests.forEach((t, i) => {
    reportId.set(t.id, String(i));
    const entry = (testFiles[t.fileName] ??= { tests: [], source: readSource(t.fileName) ?? undefined });
    entry.tests.push({
      id: String(i),
      name: t.name,
      location: t.startPosition ? { start: { line: t.startPosition.line + 1, column: t.startPosition.column + 1 } } : undefined,
    });
  });
  // a test is named by its place in the tests line (or, in a checkpoint written before that, by its id)
  const ids = (list) =>
    list
      ?.map((t) => (typeof t === 'number' ? (t < testsLine.tests.length ? String(t) : undefined) : reportId.get(t)))
      .filter((id) => id !== undefined);

  const byFile = new Map();
  const put = (file, m) => {
    if (!byFile.has(file)) byFile.set(file, new Map());
    byFile.get(file).set(keyOf(m), m);
  };
  for (const l of lines) {
    if (l.kind !== 'mutant') continue;
    put(l.file, {
      mutatorName: l.mutatorName,
      replacement: l.replacement,
      location: l.location,
      status: l.status,
      statusReason: l.statusReason,
      killedBy: ids(l.killedBy),
      coveredBy: ids(l.coveredBy),
      testsCompleted: l.testsCompleted,
      static: l.static,
    });
  }
  let notReached = 0;
  for (const p of planned) {
    if (byFile.get(p.file)?.has(keyOf(p))) continue;
    notReached++;
    const old = incremental.files?.[p.file]?.mutants.find((m) => keyOf(m) === keyOf(p));
    if (!old) continue; // new: nothing to keep; the next run tests it
    const { killedBy: _k, coveredBy: _c, testsCompleted: _t, ...rest } = old;
    put(p.file, { ...rest, statusReason: 'not tested again: the run stopped before it (checkpoint)' });
  }

  const files = {};
  for (const [file, mutants] of byFile) {
    files[file] = {
      language: 'typescript',
      source: readSource(file) ?? '',
      mutants: [...mutants.values()].map((m, i) => ({ id: String(i), ...m })),
    };
  }
  const tested = lines.filter((l) => l.kind === 'mutant').length;
  return {
    report: { schemaVersion: '1.0', thresholds: incremental.thresholds, files, testFiles },
    counts: { planned: planned.length, notReached, results: tested },
  };
}

function parseArgs(argv) {
  const opts = {
    checkpoint: 'reports/mutation/checkpoint.jsonl',
    incremental: 'test/mutation/stryker-incremental.json',
    out: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].replace(/^--/, '');
    if (!(name in opts)) {
      console.error(`unknown option ${argv[i]}\nusage: node scripts/mutation-checkpoint.mjs [--checkpoint F] [--incremental F] [--out F]`);
      process.exit(2);
    }
    opts[name] = argv[++i];
  }
  opts.out ??= opts.incremental;
  return opts;
}

if (import.meta.url === pathToFileURL(path.resolve(process.argv[1] ?? '')).href) {
  const opts = parseArgs(process.argv.slice(2));
  const incremental = JSON.parse(readFileSync(opts.incremental, 'utf8'));
  const { report, counts } = checkpointReport(parseCheckpoint(readFileSync(opts.checkpoint, 'utf8')), incremental);
  writeFileSync(opts.out, JSON.stringify(mergeReports([incremental, report])));
  console.log(
    `${opts.out}: ${Object.keys(report.files).length} files from the checkpoint; of ${counts.planned} mutants planned, ` +
      `${counts.planned - counts.notReached} tested, ${counts.notReached} not reached (kept as before, to be tested again)`,
  );
}
