import { defineConfig } from 'vitest/config';

// The test set of `npm run test:mutation` (stryker.config.mjs): the tests that guard the mutated
// modules. Add a file here when it guards one of them; keep out tests whose subject is the
// process (signals, exit codes, stdout) or time, which are slow and kill few mutants.
export default defineConfig({
  test: {
    include: ['test/integration/streams.test.ts', 'test/integration/receipts.test.ts'],
    // Passes the active mutant (and, in the dry run, coverage) between Stryker and the daemon
    // children; see the file.
    setupFiles: ['test/mutation/child-mutants.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
