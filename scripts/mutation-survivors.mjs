// Lists the mutants of the last `npm run test:mutation` that no test killed (survived, no
// coverage), one line each, from reports/mutation/mutation.json, with a score per file:
//   node scripts/mutation-survivors.mjs [reports/mutation/mutation.json]
// A file whose source in the report is not the file in the working tree is marked STALE: its
// results were measured on other code (a merged report keeps a file's last run), so its score
// says nothing about the code as it is until the file is run again. The last line counts them.
import { readFileSync } from 'node:fs';
import { currentSource, scoreOf } from './mutation-report.mjs';

const report = JSON.parse(readFileSync(process.argv[2] ?? 'reports/mutation/mutation.json', 'utf8'));
const stale = [];
let allDetected = 0;
let allValid = 0;
for (const [file, { mutants, source }] of Object.entries(report.files)) {
  const lines = source.split('\n');
  const { detected, valid } = scoreOf(mutants);
  const score = valid ? ((100 * detected) / valid).toFixed(1) : 'n/a';
  const current = currentSource(file);
  if (current !== source) stale.push(file);
  allDetected += detected;
  allValid += valid;
  const mark = current === source ? '' : current === null ? ' STALE (file removed)' : ' STALE (source changed since this result)';
  console.log(`${file}: ${score} % (${detected}/${valid})${mark}`);
  for (const m of mutants
    .filter((x) => x.status === 'Survived' || x.status === 'NoCoverage')
    .sort((a, b) => a.location.start.line - b.location.start.line)) {
    const { start, end } = m.location;
    const original =
      start.line === end.line
        ? lines[start.line - 1].slice(start.column - 1, end.column - 1)
        : `${lines[start.line - 1].slice(start.column - 1)}…`;
    const squash = (s) => s.replace(/\s+/g, ' ').slice(0, 90);
    console.log(
      `  ${m.status === 'Survived' ? 'S' : 'N'} ${start.line}:${start.column} #${m.id} ${m.mutatorName}: ${squash(original)} -> ${squash(m.replacement ?? '')}`,
    );
  }
}
console.log(`total: ${allValid ? ((100 * allDetected) / allValid).toFixed(1) : 'n/a'} % (${allDetected}/${allValid})`);
console.log(
  stale.length === 0
    ? 'every file: results for the source in the working tree'
    : `${stale.length} STALE file(s), results for other code: ${stale.join(', ')}`,
);
