// A mutation run of chosen test files, for comparing two runs on the same mutants: the tests of
// a module before and after they moved (issue 51), or the same tests on LevelDB and on
// PostgreSQL. Nothing is reused and every mutant runs (the argued equivalents too: one test set
// may kill what another cannot). Run from the repo root, then compare the two JSON reports:
//   MUT_FILES=test/unit/quotas.test.ts MUT_REPORT=/tmp/before \
//     npx stryker run test/mutation/stryker.files.mjs --mutate src/daemon/streams/quotas.ts
//   … the same with the other test set and MUT_REPORT=/tmp/after …
//   node scripts/mutation-compare.mjs /tmp/before.json /tmp/after.json
// MUT_FILES: comma-separated test files (any, not only those of vitest.mutation.config.ts);
// MUT_STORE=postgresql puts every test daemon on PostgreSQL (one throwaway cluster);
// MUT_CONCURRENCY (default 1) and MUT_TIMEOUT_MS (default 60 s: runs beside other work must not
// take a slow test for a hung mutant).
import base from '../../stryker.config.mjs';

const store = process.env.MUT_STORE === 'postgresql' ? 'postgresql' : 'leveldb';
const out = process.env.MUT_REPORT ?? `reports/mutation-files/${store}`;

export default {
  ...base,
  vitest: { ...base.vitest, configFile: 'test/mutation/vitest.files.config.ts' },
  ignorers: base.ignorers.filter((name) => name !== 'argued-equivalents'),
  incremental: false,
  tempDirName: `.stryker-tmp-files-${store}`,
  // Two runs side by side in one checkout: neither copies the other's sandbox.
  ignorePatterns: [...base.ignorePatterns, '.stryker-tmp-*'],
  concurrency: Number(process.env.MUT_CONCURRENCY ?? 1),
  timeoutMS: Number(process.env.MUT_TIMEOUT_MS ?? 60_000),
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: `${out}.json` },
};
