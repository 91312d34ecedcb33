// The store the test daemons run on (issue 24): LevelDB in their data dir by default, or, with
// `YELLO_TEST_STORE=postgresql` (vitest.postgres.config.ts, the `postgresql` project of
// vitest.config.ts), a fresh database of the run's throwaway cluster for each data dir, so every
// daemon a test starts sees an empty store and a daemon restarted on its data dir finds its data
// again. The cluster is started once per run by test/helpers/pg-global-setup.ts.

import postgres from 'postgres';
import { runPgInfo } from './run-pg.js';

/** Whether the daemons of this run store in PostgreSQL. */
export function testStoreIsPostgres(): boolean {
  return process.env.YELLO_TEST_STORE === 'postgresql';
}

const byDataDir = new Map<string, Promise<string>>();
let admin: postgres.Sql | null = null;
let created = 0;

/** The store URL of the daemon on `dataDir` (the same one for every start on it). */
export function testStoreUrl(dataDir: string): Promise<string> {
  let url = byDataDir.get(dataDir);
  if (!url) {
    url = createDatabase();
    byDataDir.set(dataDir, url);
  }
  return url;
}

async function createDatabase(): Promise<string> {
  const pg = runPgInfo();
  if (!pg)
    throw new Error(
      'YELLO_TEST_STORE=postgresql, but no cluster was started: run through vitest.config.ts or vitest.postgres.config.ts (their globalSetup starts one)',
    );
  admin ??= postgres({
    host: pg.socketDir,
    port: pg.port,
    username: pg.user,
    database: 'postgres',
    max: 1,
    idle_timeout: 5,
    onnotice: () => {},
  });
  const name = `yt_${process.pid}_${++created}_${Date.now().toString(36)}`;
  await admin.unsafe(`create database ${name} template yello_template`);
  return pg.url.replace(/\/postgres\?/, `/${name}?`);
}

/** Daemon options with the run's store: unchanged on LevelDB, or when the test chose a store itself. */
export async function withTestStore<O extends { extraArgs?: string[]; env?: NodeJS.ProcessEnv }>(options: O, dataDir: string): Promise<O> {
  if (!testStoreIsPostgres()) return options;
  if (options.extraArgs?.includes('--store') || (options.env && 'YELLO_STORE' in options.env)) return options;
  return { ...options, env: { ...options.env, YELLO_STORE: await testStoreUrl(dataDir) } };
}
