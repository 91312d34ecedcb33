// A known defect of the chosen driver, kept visible: postgres.js 3.4.9 may end the process
// with an uncaught TypeError (connection.js nextWrite, socket null) after a session dies inside
// a transaction (porsager/postgres#1208, #1154; fixes proposed in #1168 and #1209, not released).
// For yellod that turns "a connection lost during COMMIT is an unknown outcome" into a crash
// (exit 70, restarted by systemd): outcomes are then settled by operations.get after the
// restart, as on LevelDB, but the daemon is down meanwhile. Marked `fails`: when a fixed
// driver is installed this test starts failing, and `fails` is to be removed.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgCluster, pgAvailable } from '../helpers/pg-cluster.mjs';

const run = promisify(execFile);
const child = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/connection-loss-child.mjs');

describe.runIf(pgAvailable())('postgres.js and a session killed inside a transaction', () => {
  let cluster: PgCluster | undefined;
  beforeAll(async () => {
    cluster = await PgCluster.start();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it.fails(
    'rejects the transaction with CONNECTION_CLOSED and the process survives',
    async () => {
      const { stdout } = await run(process.execPath, [child, cluster!.socketDir, String(cluster!.port), cluster!.user], {
        timeout: 30_000,
      });
      expect(stdout.trim()).toBe('rejected CONNECTION_CLOSED');
    },
    60_000,
  );

  it('the crash is the known one (so that `fails` above is not hiding another failure)', async () => {
    const err = (await run(process.execPath, [child, cluster!.socketDir, String(cluster!.port), cluster!.user], { timeout: 30_000 }).catch(
      (e: unknown) => e,
    )) as { code?: number; stderr?: string; stdout?: string };
    if (err.code === undefined) return; // a fixed driver: the first test now fails and says so
    expect(err.stderr).toMatch(/Cannot read properties of null \(reading 'write'\)/);
  }, 60_000);
});
