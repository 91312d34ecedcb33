// The throwaway cluster of test/helpers/pg-cluster.ts: it starts, answers over its Unix socket
// with fsync on, and stop() removes every file it made.
import { existsSync } from 'node:fs';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgCluster, pgAvailable } from '../helpers/pg-cluster.mjs';

describe.runIf(pgAvailable())('throwaway PostgreSQL cluster', () => {
  let cluster: PgCluster | undefined;
  beforeAll(async () => {
    cluster = await PgCluster.start();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('answers over its Unix socket with durable settings', async () => {
    const sql = postgres({ ...cluster!.connection(), max: 1 });
    try {
      const rows = await sql<{ fsync: string; sync: string }[]>`
        select current_setting('fsync') as fsync, current_setting('synchronous_commit') as sync`;
      expect(rows[0]).toEqual({ fsync: 'on', sync: 'on' });
    } finally {
      await sql.end();
    }
  });

  it('stop() removes the cluster dir', async () => {
    const other = await PgCluster.start();
    expect(existsSync(other.dir)).toBe(true);
    await other.stop();
    expect(existsSync(other.dir)).toBe(false);
  }, 60_000);
});
