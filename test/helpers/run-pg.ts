// Databases of the run's PostgreSQL cluster (started once by test/helpers/pg-global-setup.ts)
// for a test file, in place of a cluster of its own. A file names its databases as before
// (`multi`, `so_main`); each name maps to a database of this worker's own (`f<pid>_<n>_multi`),
// so files running at once never meet. stop() drops them.
//
// Without a run cluster (a config whose globalSetup starts none, e.g. vitest.mutation.config.ts),
// open() starts a private cluster for the file, as before, and stop() stops it.
//
// Only for files that use PostgreSQL as a server that is simply there: a file that stops, kills,
// promotes or reconfigures it (pg_reload_conf, roles), or reads its server log, keeps a private
// cluster (PgCluster.start).

import { PgCluster } from './pg-cluster.mjs';
import type { RunPgInfo } from './pg-global-setup.js';

/** The run's cluster, or null when this run has none (no PostgreSQL server binaries here). */
export function runPgInfo(): RunPgInfo | null {
  const raw = process.env.YELLO_TEST_PG;
  return raw ? (JSON.parse(raw) as RunPgInfo) : null;
}

let files = 0;

/** The databases of one test file (or describe block) on the run's cluster: PgCluster's surface, minus what only an owner may do. */
export class FileDatabases {
  readonly #cluster: PgCluster;
  readonly #prefix: string;
  readonly #owned: boolean;
  readonly #made: string[] = [];

  private constructor(cluster: PgCluster, prefix: string, owned: boolean) {
    this.#cluster = cluster;
    this.#prefix = prefix;
    this.#owned = owned;
  }

  /** This file's databases on the run's cluster (or on a private one when the run has none); its `postgres` is created empty. */
  static async open(): Promise<FileDatabases> {
    const info = runPgInfo();
    const dbs = info
      ? new FileDatabases(await PgCluster.attach(info), `f${process.pid}_${++files}`, false)
      : new FileDatabases(await PgCluster.start(), `f${++files}`, true);
    try {
      await dbs.createDatabase('postgres');
    } catch (err) {
      await dbs.stop();
      throw err;
    }
    return dbs;
  }

  get socketDir(): string {
    return this.#cluster.socketDir;
  }
  get port(): number {
    return this.#cluster.port;
  }
  get user(): string {
    return this.#cluster.user;
  }
  get hostPort(): string {
    return this.#cluster.hostPort;
  }

  /** The real name of this file's database `name`. */
  database(name = 'postgres'): string {
    return `${this.#prefix}_${name}`;
  }

  /** Creates this file's database `name`: empty, or a copy of `template` (a real database name, e.g. `yello_template`). */
  async createDatabase(name: string, template?: string): Promise<void> {
    const real = this.database(name);
    await this.#cluster.psql(`create database ${real}${template ? ` template ${template}` : ''}`);
    this.#made.push(real);
  }

  url(name = 'postgres'): string {
    return this.#cluster.url(this.database(name));
  }

  connection(name = 'postgres'): { host: string; port: number; user: string; database: string } {
    return this.#cluster.connection(this.database(name));
  }

  /** One SQL command in this file's database `name` (default: its `postgres`). */
  psql(command: string, name = 'postgres'): Promise<string> {
    return this.#cluster.psql(command, this.database(name));
  }

  /** Drops this file's databases (closing what is still connected to them), or stops the private cluster. */
  async stop(): Promise<void> {
    if (this.#owned) return this.#cluster.stop();
    for (const real of this.#made.splice(0).reverse()) await this.#cluster.psql(`drop database if exists ${real} with (force)`);
  }
}
