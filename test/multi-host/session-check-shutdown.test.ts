// A session check cut off by the daemon's own stop is the daemon stopping, not the database
// lost: the call is answered STORAGE_FAILURE/SHUTTING_DOWN (outcome null), as every read the
// store closes under. Before, the check's query
// ended by the pool's end was answered STORAGE_FAILURE/UNAVAILABLE, which
// test/integration/shutdown-reads.test.ts met now and then on PostgreSQL (CI, 2026-12-07).
// The check is held in the database by a lock on `tokens`, so the stop always comes first.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, resolveStoreUrl } from '../../src/daemon/store/postgres/connection.js';
import { failure, openInProcessDaemon, type InProcessDaemon } from '../helpers/in-process-pg-daemons.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { waitFor } from '../helpers/wait.js';

describe.skipIf(!pgAvailable())('a session check under a stopping PostgreSQL store', () => {
  let dbs: FileDatabases;
  let dir: string;
  let daemon: InProcessDaemon;

  beforeAll(async () => {
    dbs = await FileDatabases.open();
    await dbs.createDatabase('stop');
    dir = mkdtempSync(path.join(tmpdir(), 'yl-check-stop-'));
    // The stop ends the check's connection once its close wait passed: 0.5 s, not a daemon's 5 s.
    daemon = await openInProcessDaemon('a', dbs.url('stop'), dir, { closeWaitMs: 500 });
  }, 60_000);

  afterAll(async () => {
    await daemon.port.close().catch(() => {});
    await dbs.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('is answered SHUTTING_DOWN with outcome null, not UNAVAILABLE, ', async () => {
    const locker = openPool(resolveStoreUrl(dbs.url('stop')), { max: 1 });
    try {
      await locker.begin(async (tx) => {
        await tx`lock table tokens in access exclusive mode`;
        const check = daemon.port.directory.confirmSession('agt_x', 'h'.repeat(43));
        const answer = failure(check);
        // The check's query is in the database, waiting for the lock.
        await waitFor(
          async () => {
            const [row] = await tx<
              { n: number }[]
            >`select count(*)::int as n from pg_locks where relation = 'tokens'::regclass and not granted`;
            return row!.n > 0 ? true : undefined;
          },
          'the session check waiting on the lock',
          10_000,
        );
        const closed = daemon.port.close();
        const error = await answer;
        expect(error).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'SHUTTING_DOWN', outcome: null });
        await closed;
      });
    } finally {
      await locker.end({ timeout: 1 });
    }
  }, 30_000);
});
