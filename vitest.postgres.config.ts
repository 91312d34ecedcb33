import { defineConfig } from 'vitest/config';
import { POSTGRES_SUITES } from './test/postgres-suites.js';

// The storage-facing integration suites on PostgreSQL (issue 24): `npm run test:postgres`. One
// throwaway cluster for the run, a fresh database per daemon (test/helpers/test-store.ts). The
// same suites run as the `postgresql` project of vitest.config.ts in `npm test`.
process.env.YELLO_TEST_STORE = 'postgresql';

export default defineConfig({
  test: {
    include: [...POSTGRES_SUITES],
    globalSetup: ['test/helpers/dist-global-setup.ts', 'test/helpers/pg-global-setup.ts'],
    env: { YELLO_TEST_STORE: 'postgresql' },
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
