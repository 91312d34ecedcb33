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
  /** `127.0.0.1:port`, for multi-host URLs (which cannot name sockets). */
  readonly hostPort: string;
  static start(options?: PgClusterOptions): Promise<PgCluster>;
  /** A handle on a cluster another process started (psql, URLs); its stop() throws: not this handle's to stop. */
  static attach(where: { dir: string; port: number; user: string }): Promise<PgCluster>;
  /** A primary and a synchronous standby streaming from it. */
  static startPair(options?: PgClusterOptions): Promise<PgPair>;
  /** One SQL command through psql over the socket; its bare output, trimmed. */
  psql(command: string, database?: string): Promise<string>;
  /** Promote a standby and wait until it accepts writes. */
  promote(): Promise<void>;
  /** Signal the server's whole process group (default SIGKILL: a crash) and wait until it exits. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** The server's stderr (its log) since start, the last megabyte. */
  readonly serverLog: string;
  /**
   * Replace this (killed or stopped) cluster's data by a base backup of `primary` and start it
   * as `primary`'s standby named `name` (default `yello_standby`); resolves once `primary`
   * reports it sync (or async when `primary` names no synchronous standby). Same port.
   */
  rebuildAsStandbyOf(primary: PgCluster, name?: string): Promise<void>;
  /** Stops the server (fast shutdown, SIGKILL after 10 s) and removes the cluster's files. */
  stop(): Promise<void>;
}

/** A primary with a synchronous standby (`synchronous_standby_names`, `synchronous_commit = on`). */
export class PgPair {
  private constructor();
  readonly primary: PgCluster;
  readonly standby: PgCluster;
  /** A multi-host URL (primary first) with `target_session_attrs=read-write`. */
  url(database?: string): string;
  stop(): Promise<void>;
}
