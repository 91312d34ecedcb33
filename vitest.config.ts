import { defineConfig } from 'vitest/config';
import { POSTGRES_SUITES } from './test/postgres-suites.js';

// Two projects: every suite on LevelDB, and every storage-facing one (test/postgres-suites.ts)
// again with every test daemon on PostgreSQL (issue 24: `npm test` runs the integration suite on
// both backends; `npm run test:postgres` is the second project alone). One cluster
// for the postgresql project's run, a database per daemon (test/helpers/test-store.ts).
// YELLO_TEST_BACKENDS=leveldb leaves the second project out (a machine without PostgreSQL, a
// quick local run); `npm run test:postgres` runs only the second.
const common = { testTimeout: 30_000, hookTimeout: 30_000 };

export default defineConfig({
  test: {
    // Integration tests spawn real daemons; two cores, so keep parallelism modest.
    maxWorkers: 2,
    projects: [
      // test/agent-clis runs against the real agent CLIs: npm run test:agent-clis.
      { test: { name: 'leveldb', include: ['test/**/*.test.ts'], exclude: ['**/node_modules/**', 'test/agent-clis/**'], ...common } },
      ...(process.env.YELLO_TEST_BACKENDS === 'leveldb'
        ? []
        : [
            {
              test: {
                name: 'postgresql',
                include: [...POSTGRES_SUITES],
                globalSetup: ['test/helpers/pg-global-setup.ts'],
                env: { YELLO_TEST_STORE: 'postgresql' },
                ...common,
                hookTimeout: 60_000,
              },
            },
          ]),
    ],
  },
});
