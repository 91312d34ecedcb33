// vitest globalSetup of the runs on PostgreSQL (the postgresql project, vitest.postgres.config.ts): one throwaway
// cluster for the whole run (initdb and a stop cost ~6 s each on the 2-core machine, a database
// ~0.7 s), each daemon then gets a database of its own (test/helpers/test-store.ts).

import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { PgCluster } from './pg-cluster.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Daemons hold a pool of 8 and a LISTEN connection each; two workers run several at once.
  const cluster = await PgCluster.start({ config: ['max_connections = 400'] });
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
  project.provide('yelloTestPg', { url: cluster.url('postgres'), socketDir: cluster.socketDir, port: cluster.port, user: cluster.user });
  return () => cluster.stop();
}
