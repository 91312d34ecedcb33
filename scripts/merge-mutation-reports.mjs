// Merges Stryker JSON reports (mutation-testing-report-schema) into one, usable as Stryker's
// `incrementalFile` (and by scripts/mutation-survivors.mjs):
//   node scripts/merge-mutation-reports.mjs --out test/mutation/stryker-incremental.json a.json b.json …
// `files` and `testFiles` are the union of the reports'; for a file in several reports the later
// report's entry replaces the earlier one (give the reports oldest first).
//
// Test and mutant ids are unique only within one report ("0", "1", … in each), and a mutant
// names its tests by id (`coveredBy`, `killedBy`), so the merge renumbers them: a test is known by
// its file, name and occurrence (the nth test of that name in the file), as Stryker's
// incremental differ identifies tests by file, name and location. A mutant whose covering or
// killing test is not in the merged entry of its test file (the later report's version of the
// file dropped or renamed it) loses that reference, so Stryker reruns it rather than trust it.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

function parseArgs(argv) {
  const inputs = [];
  let out = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--out') out = argv[++i];
    else if (argv[i].startsWith('--out=')) out = argv[i].slice('--out='.length);
    else inputs.push(argv[i]);
  }
  if (!out || inputs.length === 0) {
    console.error('usage: node scripts/merge-mutation-reports.mjs --out <merged.json> <report.json>…');
    process.exit(2);
  }
  return { inputs, out };
}

/** Keys of a test file's tests, in order: `name` plus its occurrence among tests of that name. */
function testKeys(fileName, tests) {
  const seen = new Map();
  return tests.map((t) => {
    const n = seen.get(t.name) ?? 0;
    seen.set(t.name, n + 1);
    return `${fileName}\n${t.name}\n${n}`;
  });
}

export function mergeReports(reports) {
  if (reports.length === 0) throw new Error('no report to merge');
  // Which report supplies each file and each test file: the last one that has it.
  const fileOwner = new Map();
  const testFileOwner = new Map();
  reports.forEach((r, i) => {
    for (const f of Object.keys(r.files ?? {})) fileOwner.set(f, i);
    for (const f of Object.keys(r.testFiles ?? {})) testFileOwner.set(f, i);
  });

  // The merged test files with new ids, and the key of each new id.
  let nextTestId = 0;
  const idByKey = new Map();
  const testFiles = {};
  for (const [fileName, i] of testFileOwner) {
    const entry = reports[i].testFiles[fileName];
    const keys = testKeys(fileName, entry.tests);
    testFiles[fileName] = {
      ...entry,
      tests: entry.tests.map((t, j) => {
        const id = String(nextTestId++);
        idByKey.set(keys[j], id);
        return { ...t, id };
      }),
    };
  }

  // Each report's old test id → key, to carry its mutants' references over.
  const keyByOldId = reports.map((r) => {
    const m = new Map();
    for (const [fileName, entry] of Object.entries(r.testFiles ?? {})) {
      const keys = testKeys(fileName, entry.tests);
      entry.tests.forEach((t, j) => m.set(t.id, keys[j]));
    }
    return m;
  });
  const remap = (ids, i) =>
    ids === undefined ? undefined : [...new Set(ids.map((id) => idByKey.get(keyByOldId[i].get(id))).filter((id) => id !== undefined))];

  let nextMutantId = 0;
  const files = {};
  for (const [fileName, i] of fileOwner) {
    const entry = reports[i].files[fileName];
    files[fileName] = {
      ...entry,
      mutants: entry.mutants.map((m) => {
        const out = { ...m, id: String(nextMutantId++) };
        if (m.coveredBy !== undefined) out.coveredBy = remap(m.coveredBy, i);
        if (m.killedBy !== undefined) out.killedBy = remap(m.killedBy, i);
        return out;
      }),
    };
  }

  const last = reports[reports.length - 1];
  const { files: _f, testFiles: _t, ...rest } = last;
  return { ...rest, files, testFiles };
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (isMain) {
  const { inputs, out } = parseArgs(process.argv.slice(2));
  const reports = inputs.map((p) => JSON.parse(readFileSync(p, 'utf8')));
  const merged = mergeReports(reports);
  writeFileSync(out, JSON.stringify(merged));
  const mutants = Object.values(merged.files).reduce((n, f) => n + f.mutants.length, 0);
  const tests = Object.values(merged.testFiles).reduce((n, f) => n + f.tests.length, 0);
  console.log(
    `merged ${inputs.length} report(s) into ${out}: ${Object.keys(merged.files).length} file(s), ${mutants} mutant(s), ${Object.keys(merged.testFiles).length} test file(s), ${tests} test(s)`,
  );
}
