import { defineConfig } from 'vitest/config';
import mutation from './vitest.mutation.config.js';
import { POSTGRES_SUITES } from './test/postgres-suites.js';

// The test set of `npm run test:mutation:postgres` (stryker.postgres.config.mjs): the files of
// vitest.mutation.config.ts that also run on PostgreSQL (test/postgres-suites.ts), with every
// test daemon on PostgreSQL as in the postgresql project of vitest.config.ts. What it answers
// (issue 26): do the suites that run on both backends kill the same mutants of the modules
// above the storage port on PostgreSQL as on LevelDB?
const onBoth = (mutation.test?.include ?? []).filter((f) => (POSTGRES_SUITES as readonly string[]).includes(f));

export default defineConfig({
  test: {
    ...mutation.test,
    include: onBoth,
    globalSetup: ['test/helpers/pg-global-setup.ts'],
    env: { YELLO_TEST_STORE: 'postgresql' },
    hookTimeout: 60_000,
  },
});
