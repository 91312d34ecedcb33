// Compares two mutation runs on the same mutants (test/mutation/stryker.files.mjs): the tests of
// a module before and after they moved, or the same tests on LevelDB and on PostgreSQL.
//   node scripts/mutation-compare.mjs <a report.json> <b report.json> [label-a label-b]
// Prints, per module, the counts of each side and every mutant detected on one side only
// (killed or timed out there; survived or not covered on the other), by its key: file, start,
// end, mutator, replacement. A mutant reported Survived after no test completed was not measured:
// its tests never ran (a beforeAll that failed, a daemon that did not start on a loaded machine),
// and Stryker counts that as survived. Such a difference is listed apart, to be run again.
// Exit code 1 when a mutant detected by a is not detected by b (a test lost in a move) or a
// difference is unmeasured; a mutant only b detects is reported, not a failure.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { DETECTED, placedMutantKey } from './mutation-report.mjs';

const place = (m) => `${m.location.start.line}:${m.location.start.column}-${m.location.end.line}:${m.location.end.column}`;
const keyOf = (file, m) => `${file}\n${placedMutantKey(m)}`;

/** Survived without one test completed: no test ran against it. */
const unmeasured = (m) => m.status === 'Survived' && m.testsCompleted === 0;

function counts(mutants) {
  const c = { killed: 0, timeout: 0, survived: 0, noCoverage: 0, unmeasured: 0, other: 0 };
  for (const m of mutants) {
    if (unmeasured(m)) c.unmeasured++;
    else if (m.status === 'Killed') c.killed++;
    else if (m.status === 'Timeout') c.timeout++;
    else if (m.status === 'Survived') c.survived++;
    else if (m.status === 'NoCoverage') c.noCoverage++;
    else c.other++;
  }
  return c;
}

/**
 * The comparison of two reports: per file the counts of each side, and the mutants whose
 * detection differs (`only`: the side that detected it, or 'unmeasured' when the other side ran
 * no test against it). A mutant present on one side only (the sources differ) is listed with
 * `only: 'missing'`.
 */
export function comparePair(a, b) {
  const files = [...new Set([...Object.keys(a.files), ...Object.keys(b.files)])].sort();
  const modules = [];
  for (const file of files) {
    const left = a.files[file]?.mutants ?? [];
    const right = new Map((b.files[file]?.mutants ?? []).map((m) => [keyOf(file, m), m]));
    const differences = [];
    for (const m of left) {
      const other = right.get(keyOf(file, m));
      right.delete(keyOf(file, m));
      if (!other) {
        differences.push({ mutant: m, only: 'missing', a: m.status, b: undefined });
        continue;
      }
      const da = DETECTED.has(m.status);
      const db = DETECTED.has(other.status);
      if (da === db) continue;
      const notRun = unmeasured(da ? other : m);
      differences.push({ mutant: m, only: notRun ? 'unmeasured' : da ? 'a' : 'b', a: m.status, b: other.status });
    }
    for (const m of right.values()) differences.push({ mutant: m, only: 'missing', a: undefined, b: m.status });
    modules.push({ file, a: counts(left), b: counts(b.files[file]?.mutants ?? []), differences });
  }
  return modules;
}

const show = (c) =>
  `${c.killed} killed, ${c.timeout} timeout, ${c.survived} survived, ${c.noCoverage} no coverage` +
  (c.unmeasured ? `, ${c.unmeasured} survived with no test run` : '');

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [left, right, labelA = 'a', labelB = 'b'] = process.argv.slice(2);
  if (!left || !right) {
    console.error('usage: node scripts/mutation-compare.mjs <a report.json> <b report.json> [label-a label-b]');
    process.exit(2);
  }
  const modules = comparePair(JSON.parse(readFileSync(left, 'utf8')), JSON.parse(readFileSync(right, 'utf8')));
  const width = Math.max(labelA.length, labelB.length) + 1;
  const total = { a: 0, b: 0, onlyA: 0, onlyB: 0, unmeasured: 0, missing: 0 };
  for (const { file, a, b, differences } of modules) {
    console.log(`${file}\n  ${`${labelA}:`.padEnd(width)} ${show(a)}\n  ${`${labelB}:`.padEnd(width)} ${show(b)}`);
    total.a += a.killed + a.timeout;
    total.b += b.killed + b.timeout;
    if (differences.length === 0) console.log('  every mutant: the same outcome on both');
    for (const d of differences) {
      const m = d.mutant;
      const side = {
        a: `${labelA} only`,
        b: `${labelB} only`,
        unmeasured: 'on one side, no test ran on the other: run it again',
        missing: 'on one side only (sources differ?)',
      }[d.only];
      if (d.only === 'a') total.onlyA++;
      else if (d.only === 'b') total.onlyB++;
      else if (d.only === 'unmeasured') total.unmeasured++;
      else total.missing++;
      console.log(`  ${place(m)} ${m.mutatorName} → ${JSON.stringify(m.replacement)}: detected ${side} (${d.a ?? '-'} / ${d.b ?? '-'})`);
    }
  }
  console.log(
    `detected: ${labelA} ${total.a}, ${labelB} ${total.b}; ${labelA} only ${total.onlyA}, ${labelB} only ${total.onlyB}; ` +
      `unmeasured ${total.unmeasured}; on one side only ${total.missing}`,
  );
  process.exitCode = total.onlyA > 0 || total.unmeasured > 0 || total.missing > 0 ? 1 : 0;
}
