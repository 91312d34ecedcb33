import { defineConfig } from 'vitest/config';
import mutation from '../../vitest.mutation.config.js';

// The test set of test/mutation/stryker.files.mjs: the files in $MUT_FILES (comma-separated),
// every test daemon on $MUT_STORE ('leveldb', the default, or 'postgresql': one throwaway
// cluster, as in the postgresql project of vitest.config.ts).
const include = (process.env.MUT_FILES ?? '').split(',').filter((f) => f !== '');
if (include.length === 0) throw new Error('MUT_FILES is empty: name the test files of the run');
const postgres = process.env.MUT_STORE === 'postgresql';

export default defineConfig({
  test: {
    ...mutation.test,
    include,
    ...(postgres ? { globalSetup: ['test/helpers/pg-global-setup.ts'], env: { YELLO_TEST_STORE: 'postgresql' }, hookTimeout: 60_000 } : {}),
  },
});
