// Stryker reporter plugin 'plan' (used by scripts/mutation-plan.mjs): when Stryker has matched
// every mutant with its tests, after the initial run and the incremental diff, it writes what
// the run would test to $MUT_PLAN_FILE as JSON — each mutant to run with its file, place,
// mutator, the number of tests it would run and Stryker's worst-case estimate (`netTime`, the
// time of those tests if it survives), and a count of the results that are reused. Nothing is
// tested by this plugin; the script stops Stryker once the file is written.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { PluginKind, declareClassPlugin } from '@stryker-mutator/api/plugin';

class PlanReporter {
  onMutationTestingPlanReady({ mutantPlans }) {
    const out = process.env.MUT_PLAN_FILE;
    if (!out) return;
    const run = [];
    const early = {};
    for (const p of mutantPlans) {
      const m = p.mutant;
      if (p.plan === 'Run') {
        run.push({
          file: path.relative(process.cwd(), m.fileName),
          line: m.location.start.line + 1,
          column: m.location.start.column + 1,
          mutatorName: m.mutatorName,
          replacement: m.replacement,
          tests: p.runOptions.testFilter?.length ?? null,
          netTime: p.netTime,
        });
      } else {
        early[m.status] = (early[m.status] ?? 0) + 1;
      }
    }
    writeFileSync(out, JSON.stringify({ run, early }));
  }
}

export const strykerPlugins = [declareClassPlugin(PluginKind.Reporter, 'plan', PlanReporter)];
