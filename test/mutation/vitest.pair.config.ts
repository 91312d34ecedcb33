import { defineConfig } from 'vitest/config';
import mutation from '../../vitest.mutation.config.js';

// The test set of one side of a pair of runs (test/mutation/stryker.pair.mjs): the files in
// $MUT_PAIR_FILES (comma-separated, any test file, not only those of the mutation set), every
// test daemon on $MUT_PAIR_STORE ('leveldb', the default, or 'postgresql': one throwaway cluster,
// as in vitest.mutation-pg.config.ts).
const include = (process.env.MUT_PAIR_FILES ?? '').split(',').filter((f) => f !== '');
if (include.length === 0) throw new Error('MUT_PAIR_FILES is empty: name the test files of the pair');
const postgres = process.env.MUT_PAIR_STORE === 'postgresql';

export default defineConfig({
  test: {
    ...mutation.test,
    include,
    ...(postgres ? { globalSetup: ['test/helpers/pg-global-setup.ts'], env: { YELLO_TEST_STORE: 'postgresql' }, hookTimeout: 60_000 } : {}),
  },
});
