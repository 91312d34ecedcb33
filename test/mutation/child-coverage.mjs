// Preloaded (node --import, through NODE_OPTIONS) into every daemon child that a test spawns
// during a Stryker run. Instrumented code counts the mutants it passes in
// globalThis.__stryker__.mutantCoverage; in a child that count never reaches Stryker, so this
// writes it to <STRYKER_YELLO_COVERAGE_DIR>/<pid>.json, where the vitest setup file
// (child-mutants.ts) merges it into the test file's coverage. Only the dry run sets the directory:
// mutant runs need no coverage.
import { writeFileSync } from 'node:fs';
import path from 'node:path';

const dir = process.env.STRYKER_YELLO_COVERAGE_DIR;
if (dir) {
  const file = path.join(dir, `${process.pid}.json`);
  const dump = () => {
    const coverage = globalThis.__stryker__?.mutantCoverage;
    if (!coverage) return;
    // A child has no current test: everything it passed is in `static`, but it may also have
    // perTest entries if a test id leaked through; fold both into one map.
    const hits = { ...coverage.static };
    for (const perTest of Object.values(coverage.perTest ?? {})) {
      for (const [id, n] of Object.entries(perTest)) hits[id] = (hits[id] ?? 0) + n;
    }
    try {
      writeFileSync(file, JSON.stringify(hits));
    } catch {
      // The test's temp dir may be gone already; coverage is best effort.
    }
  };
  process.on('exit', dump);
  // SIGKILLed children never reach 'exit': dump now and then as well.
  setInterval(dump, 250).unref();
}
