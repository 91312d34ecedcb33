// Mutation testing with every test daemon on PostgreSQL: `npm run test:mutation:postgres`
// (README "Testing"). The same modules and mutants as stryker.config.mjs, the tests that run on
// both backends (vitest.mutation-pg.config.ts); its own incremental file and reports, so that
// its killed set can be compared with the LevelDB run's (test/MUTATION.md).
import base from './stryker.config.mjs';

// the 'checkpoint' reporter's file (test/mutation/checkpoint-reporter.mjs), beside this run's reports
process.env.MUT_CHECKPOINT_FILE ||= 'reports/mutation-postgres/checkpoint.jsonl';

export default {
  ...base,
  vitest: { ...base.vitest, configFile: 'vitest.mutation-pg.config.ts' },
  // Every mutant, the argued equivalents too: some equivalent on LevelDB are killed here.
  ignorers: base.ignorers.filter((name) => name !== 'argued-equivalents'),
  tempDirName: '.stryker-tmp-pg',
  incrementalFile: 'test/mutation/stryker-incremental-postgres.json',
  htmlReporter: { fileName: 'reports/mutation-postgres/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation-postgres/mutation.json' },
};
