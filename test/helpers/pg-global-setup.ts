// vitest globalSetup (vitest.config.ts): one throwaway PostgreSQL cluster for the whole run, on
// which every test that needs PostgreSQL gets databases of its own: the daemons of the
// postgresql project (a database each, test/helpers/test-store.ts) and the files that used to
// start a cluster each (test/helpers/run-pg.ts). initdb, a start and a stop cost ~6 s each time
// on the 2-core machine, a database from the template ~0.3 s. Files that stop, kill, promote or
// reconfigure PostgreSQL still start a private cluster (PgCluster.start).
//
// fsync is off on this cluster only: nothing here crashes the machine under it, and a crash of
// the server (which nothing here causes either) loses nothing that fsync would have saved, since
// the data stays in the page cache; synchronous_commit stays on, so a COMMIT still waits for the
// WAL write. The private clusters keep fsync on (durability under SIGKILL is their subject).
//
// The workers learn where the cluster is from $YELLO_TEST_PG (inherited when vitest forks them).

import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import postgres from 'postgres';
import { PgCluster, pgAvailable } from './pg-cluster.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** What a worker needs to reach the run's cluster ($YELLO_TEST_PG, JSON). */
export interface RunPgInfo {
  dir: string;
  socketDir: string;
  port: number;
  user: string;
  /** The `postgres` database's URL. */
  url: string;
}

export async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (!pgAvailable() || process.env.YELLO_TEST_PG) return undefined;
  // Daemons hold a pool of 8 and a LISTEN connection each; two workers run several at once.
  const cluster = await PgCluster.start({ config: ['max_connections = 400', 'fsync = off', 'full_page_writes = off'] });
  try {
    // A migrated template: each daemon's database is a copy, so no daemon pays for the migration.
    await cluster.psql('create database yello_template');
    const { migrate } = (await import(pathToFileURL(path.join(repoRoot, 'dist/daemon/store/postgres/migrate.js')).href)) as {
      migrate: (sql: postgres.Sql) => Promise<unknown>;
    };
    const sql = postgres({
      host: cluster.socketDir,
      port: cluster.port,
      username: cluster.user,
      database: 'yello_template',
      max: 1,
      onnotice: () => {},
    });
    try {
      await migrate(sql);
    } finally {
      await sql.end();
    }
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  const info: RunPgInfo = {
    dir: cluster.dir,
    socketDir: cluster.socketDir,
    port: cluster.port,
    user: cluster.user,
    url: cluster.url('postgres'),
  };
  process.env.YELLO_TEST_PG = JSON.stringify(info);
  return async () => {
    delete process.env.YELLO_TEST_PG;
    await cluster.stop();
  };
}
