// Types of pg-cluster.mjs (hand-written: the module is plain ESM for the bench).
import type { ChildProcess } from 'node:child_process';

/** Where Debian puts the server binaries, newest major version first; null when not installed. */
export function pgBinDir(): string | null;

/** Whether the PostgreSQL suites run here (always on CI, where a missing server fails). */
export function pgAvailable(): boolean;

export interface PgClusterOptions {
  /** Extra `postgresql.conf` lines (e.g. replication settings). */
  config?: string[];
}

/** A running throwaway cluster; `stop()` shuts it down and removes its files. */
export class PgCluster {
  private constructor();
  readonly dir: string;
  readonly port: number;
  readonly user: string;
  /** The directory holding the server's Unix socket. */
  readonly socketDir: string;
  /** The server's process, for tests that kill it (SIGKILL of the primary). */
  readonly process: ChildProcess | undefined;
  /** A connection string over the Unix socket, as the daemon would take it in `--store`. */
  url(database?: string): string;
  /** Connection options for drivers that take an object (pg's Client, postgres()). */
  connection(database?: string): { host: string; port: number; user: string; database: string };
  static start(options?: PgClusterOptions): Promise<PgCluster>;
  /** Stops the server (fast shutdown, SIGKILL after 10 s) and removes the cluster's files. */
  stop(): Promise<void>;
}
