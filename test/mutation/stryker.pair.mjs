// One side of a pair of runs that compares the backends (issue 26: the suites that run on both
// must kill the same mutants on PostgreSQL as on LevelDB; test/MUTATION.md, "PostgreSQL against
// LevelDB"). The same mutants and test files twice, nothing reused, every mutant run (the
// argued equivalents too: some equivalent on one backend are killed on the other):
//   for store in leveldb postgresql; do
//     MUT_PAIR_STORE=$store MUT_PAIR_FILES=test/integration/quotas.test.ts MUT_REPORT=/tmp/pair-$store \
//       npx stryker run test/mutation/stryker.pair.mjs --mutate src/daemon/streams/quotas.ts
//   done
//   node scripts/mutation-pair-diff.mjs /tmp/pair-leveldb.json /tmp/pair-postgresql.json
// Unlike `--testFiles` with the repo's configs, the files need not be in the mutation set.
import base from '../../stryker.config.mjs';

const store = process.env.MUT_PAIR_STORE === 'postgresql' ? 'postgresql' : 'leveldb';
const out = process.env.MUT_REPORT ?? `reports/mutation-pair/${store}`;
process.env.MUT_CHECKPOINT_FILE ||= `${out}.checkpoint.jsonl`;

export default {
  ...base,
  vitest: { ...base.vitest, configFile: 'test/mutation/vitest.pair.config.ts' },
  ignorers: base.ignorers.filter((name) => name !== 'argued-equivalents'),
  incremental: false,
  tempDirName: `.stryker-tmp-pair-${store}`,
  // The two sides of a pair run side by side in one checkout: neither copies the other's sandbox.
  ignorePatterns: [...base.ignorePatterns, '.stryker-tmp-*'],
  concurrency: Number(process.env.MUT_PAIR_CONCURRENCY ?? 1),
  // Pairs run beside other work (niced, under a whole run): a test slowed by the load must not
  // pass for a mutant that hangs it. A Timeout on one side and Survived on the other is then
  // still to be run again alone before it is called a difference.
  timeoutMS: Number(process.env.MUT_PAIR_TIMEOUT_MS ?? 60_000),
  reporters: ['clear-text', 'progress', 'json', 'checkpoint'],
  jsonReporter: { fileName: `${out}.json` },
};
