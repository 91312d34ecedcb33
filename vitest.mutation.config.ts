import { defineConfig } from 'vitest/config';

// The test set of `npm run test:mutation` (stryker.config.mjs): the tests that guard the mutated
// modules. Add a file here when it guards one of them; keep out tests whose subject is the
// process (signals, exit codes, systemd), long randomized runs (crash cycles, bit flips, fuzz)
// and time, which are slow and would run for every mutant their daemon passed.
// `npx stryker run --mutate <file> --testFiles <test files>` narrows a run further.
export default defineConfig({
  test: {
    include: [
      // streams: append checks, fencing, appender, readers, retention, operations
      'test/integration/streams.test.ts',
      'test/integration/receipts.test.ts',
      'test/integration/retention.test.ts',
      'test/integration/follow.test.ts',
      'test/integration/follow-from.test.ts',
      'test/integration/history.test.ts',
      'test/integration/chats.test.ts',
      'test/integration/null-fields.test.ts',
      // a read cut off by the store closing is SHUTTING_DOWN, never a CORRUPT mark or a short page (stream-reader.ts)
      'test/integration/shutdown-reads.test.ts',
      // a stream's stamps never go back when the wall clock does (fencing.ts nextTimestamp)
      'test/integration/clock-step.test.ts',
      'test/unit/negative-index.test.ts',
      'test/unit/decide-again.test.ts',
      'test/unit/lookup-penalty.test.ts',
      'test/unit/writer-presence.test.ts',
      // the appender's optimistic admission on PostgreSQL (two daemons on one database)
      'test/multi-host/replay-across-daemons.test.ts',
      // the storage port: its conformance suite on LevelDB (store/leveldb/level-*.ts)
      'test/store/port-leveldb.test.ts',
      // crypto and signing
      'test/integration/keys.test.ts',
      'test/integration/signing-vectors.test.ts',
      'test/unit/signing.test.ts',
      'test/unit/sign-batcher.test.ts',
      'test/unit/token-codec-deployment.test.ts',
      // value codec and integrity checks
      'test/unit/storage-faults.test.ts',
      'test/faults/storage-faults.test.ts',
      'test/faults/doctor.test.ts',
      // client: verification, outbox, reader; MCP session
      'test/client/verify.test.ts',
      'test/client/coordinator.test.ts',
      'test/client/coordinator-recovery.test.ts',
      'test/client/yello-client.test.ts',
      'test/client/conversation.test.ts',
      'test/client/chat-writer.test.ts',
      'test/client/inbox.test.ts',
      'test/client/coordinator-issue20.test.ts',
      'test/integration/claims-liveness.test.ts',
      'test/integration/resume-policy.test.ts',
      'test/integration/mark-at-head.test.ts',
      'test/mcp/waiting.test.ts',
      'test/mcp/conversation.test.ts',
      'test/mcp/tools.test.ts',
      // the module tests that pin what the rest reach only end to end
      'test/unit/crypto.test.ts',
      'test/unit/appender.test.ts',
      'test/unit/chat-cursors-access.test.ts',
      'test/unit/chat-reader.test.ts',
      'test/unit/checkpoints.test.ts',
      'test/unit/heads.test.ts',
      'test/unit/operations.test.ts',
      'test/unit/quotas.test.ts',
      'test/unit/receiving-appends.test.ts',
      'test/unit/retention.test.ts',
      'test/unit/stream-store.test.ts',
      'test/unit/subscriptions.test.ts',
      'test/store/doctor-checks.test.ts',
      'test/store/integrity.test.ts',
      'test/store/level-directory.test.ts',
      'test/store/level-streams.test.ts',
      'test/store/verified-reads.test.ts',
      'test/integration/append.test.ts',
      'test/integration/chat-reader.test.ts',
      'test/integration/fencing.test.ts',
      'test/integration/heads.test.ts',
      'test/integration/operations.test.ts',
      'test/integration/stream-reader.test.ts',
      'test/client/message-batch.test.ts',
      'test/client/verify-export.test.ts',
      'test/client/chat-writer-failures.test.ts',
      'test/client/chat-writer-postgres.test.ts',
      'test/client/conversation-reconnect.test.ts',
      'test/client/inbox-failures.test.ts',
      'test/mcp/chat-session.test.ts',
      'test/multi-host/appender-shared-store.test.ts',
      'test/multi-host/heads-moved-since.test.ts',
      'test/multi-host/key-rows.test.ts',
      'test/multi-host/retention-shared-store.test.ts',
    ],
    // Passes the active mutant (and, in the dry run, coverage) between Stryker and the daemon
    // children; see the file.
    setupFiles: ['test/mutation/child-mutants.ts'],
    // Each test's line and column, which the 'located-vitest' runner hands to Stryker so that an
    // edit to a test file invalidates the killed results of the tests it touches, not of all
    // (test/mutation/located-vitest-runner.mjs).
    includeTaskLocation: true,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
