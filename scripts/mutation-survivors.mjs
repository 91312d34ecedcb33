// Lists the mutants of the last `npm run test:mutation` that no test killed (survived, no
// coverage), one line each, from reports/mutation/mutation.json, with a score per file:
//   node scripts/mutation-survivors.mjs [reports/mutation/mutation.json]
import { readFileSync } from 'node:fs';

const report = JSON.parse(readFileSync(process.argv[2] ?? 'reports/mutation/mutation.json', 'utf8'));
const DETECTED = new Set(['Killed', 'Timeout']);
const VALID = new Set(['Killed', 'Timeout', 'Survived', 'NoCoverage']);
for (const [file, { mutants, source }] of Object.entries(report.files)) {
  const lines = source.split('\n');
  const valid = mutants.filter((m) => VALID.has(m.status));
  const detected = valid.filter((m) => DETECTED.has(m.status)).length;
  const score = valid.length ? ((100 * detected) / valid.length).toFixed(1) : 'n/a';
  console.log(`${file}: ${score} % (${detected}/${valid.length})`);
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
