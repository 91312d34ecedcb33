// Mutation testing: `npm run test:mutation` (test/MUTATION.md, README "Testing"). Not part of
// `npm test`: a tool run now and then to find weak tests in the modules that hold the promises.
//
// How mutants reach the daemon. Most suites of the test set still start the built daemon
// (dist/) in child processes, where a mutant switched on inside the vitest worker never
// arrives. So:
//   - buildCommand compiles Stryker's instrumented sandbox sources (all mutants, behind
//     switches) to the sandbox's dist/ (scripts/mutation-build.mjs);
//   - the setup file of vitest.mutation.config.ts (test/mutation/child-mutants.ts) copies the
//     active mutant into process.env.__STRYKER_ACTIVE_MUTANT__ before a test file's daemon is
//     spawned; the instrumenter's header in the child reads it;
//   - coverage: children preload test/mutation/child-coverage.mjs, which dumps the mutants they
//     passed; the setup file adds them to the coverage of the test file's tests (per test file
//     for daemon code, per test for code the tests import themselves).
// All of this goes once the daemons of the test set run in the vitest worker from src/ (issue 51):
// then Stryker's own instrumentation reaches them, per test, with no build (test/MUTATION.md,
// "What goes when the daemons run in process").
//
// To mutate more modules, add globs to `mutate` (or pass `--mutate <glob>` on the command line)
// and the tests that guard them to vitest.mutation.config.ts.
export default {
  packageManager: 'npm',
  testRunner: 'located-vitest',
  plugins: [
    // Stryker's vitest runner, reporting where each test starts (see the file)
    './test/mutation/located-vitest-runner.mjs',
    './test/mutation/ignore-logging.mjs',
    './test/mutation/ignore-error-messages.mjs',
    './test/mutation/ignore-equivalents.mjs',
  ],
  vitest: {
    configFile: 'vitest.mutation.config.ts',
    // The integration tests import no daemon module: "related" files would find none of them.
    related: false,
  },
  buildCommand: 'node scripts/mutation-build.mjs',
  coverageAnalysis: 'perTest',
  mutate: [
    'src/daemon/streams/*.ts',
    'src/daemon/store/value-codec.ts',
    'src/daemon/store/integrity.ts',
    'src/daemon/store/leveldb/verified-reads.ts',
    'src/daemon/store/leveldb/doctor-checks.ts',
    // the storage port's LevelDB implementation: the preconditions of every commit (issue 24)
    'src/daemon/store/leveldb/level-*.ts',
    // the port's admission kernel, written once for every backend (issue 53)
    'src/daemon/store/port/{stream-kernel,directory-kernel,gate,pending,group-commit}.ts',
    'src/daemon/store/leveldb/negative-index.ts',
    'src/daemon/crypto/*.ts',
    'src/shared/message-signing.ts',
    'src/client/verify*.ts',
    // the one reader and writer of the client library (issue 20) and what they build on
    'src/client/conversation.ts',
    'src/client/chat-writer.ts',
    'src/client/message-batch.ts',
    'src/client/inbox.ts',
    'src/mcp/chat-session.ts',
  ],
  // 'logging': no mutants inside pino log calls; 'error-messages': none in the human message text
  // given to an error constructor (its type, reason and data are still mutated);
  // 'argued-equivalents': the survivors test/MUTATION.md argues equivalent, listed in
  // test/mutation/equivalents.tsv, reported Ignored instead of run again. See the files.
  ignorers: ['logging', 'error-messages', 'argued-equivalents'],
  // Mutants in top-level code (constants, regexes built at import) take effect only when a module
  // is loaded, and the vitest runner keeps modules loaded between mutants: they were reported
  // survived without ever being switched on. Testing them needs a reload and every test per
  // mutant (Stryker's docs): left out of the score, not counted as killed.
  ignoreStatic: true,
  ignorePatterns: ['dist', 'reports', '.stryker-tmp', '.tmp', 'bench', 'examples'],
  tempDirName: '.stryker-tmp',
  concurrency: 2,
  // A mutant that hangs a daemon shows as a test timing out; keep that bounded.
  timeoutMS: 15_000,
  // The initial run is every file of vitest.mutation.config.ts with coverage: on 2 shared cores
  // it took longer than Stryker's default of 5 minutes, and a fresh clone's
  // `npm run test:mutation` then stopped with "Initial test run timed out!".
  dryRunTimeoutMinutes: 60,
  // The results of the last run, reused for what has not changed since: a local file, never
  // committed (reports/ is ignored). Delete it to run everything again.
  incremental: true,
  incrementalFile: 'reports/mutation/stryker-incremental.json',
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  clearTextReporter: { allowColor: false, logTests: false, reportMutants: false },
};
