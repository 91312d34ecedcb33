// vitest globalSetup of the runs on PostgreSQL (YELLO_TEST_STORE=postgresql): one throwaway
// cluster for the whole run (initdb and a stop cost ~6 s each on the 2-core machine, a database
// ~0.7 s), each daemon then gets a database of its own (test/helpers/test-store.ts).

import type { TestProject } from 'vitest/node';
import { PgCluster } from './pg-cluster.mjs';

export async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  if (process.env.YELLO_TEST_STORE !== 'postgresql') {
    project.provide('yelloTestPg', null);
    return undefined;
  }
  // Daemons hold a pool of 8 and a LISTEN connection each; two workers run several at once.
  const cluster = await PgCluster.start({ config: ['max_connections = 400'] });
  project.provide('yelloTestPg', { url: cluster.url('postgres'), socketDir: cluster.socketDir, port: cluster.port, user: cluster.user });
  return () => cluster.stop();
}
