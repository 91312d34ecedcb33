/**
 * The whole storage port: what the daemon needs from a store, whatever the engine
 * (docs/design/storage-port.md). `store/leveldb/` implements it over one local LevelDB;
 * `store/postgres/` over a PostgreSQL database shared by several daemons.
 */
import type { BackupManifest } from '../../../shared/results.js';
import type { DirectoryPort } from './directory-port.js';
import type { StreamPort } from './stream-port.js';
import type { CommitStats, CorruptMark, PublicKeyRow, StoreCounts } from './values.js';

/**
 * Stored corruption marks (the decisions are store/integrity.ts's, in memory). One mark per
 * (stream, generation), generation null standing for the whole stream.
 */
export interface IntegrityPort {
  /** Every stored mark (startup). */
  marks(): AsyncIterable<CorruptMark>;

  /** Store marks, replacing those of the same (stream, generation); durable when it resolves. */
  putMarks(marks: readonly CorruptMark[]): Promise<void>;

  /** Replace a stream's whole-stream mark (generation null) by `narrowed`, in one commit (head rebuilds). */
  narrowMark(streamId: string, narrowed: CorruptMark): Promise<void>;
}

/** Public signing keys of every daemon of the deployment, retired ones included (`keys.list`). */
export interface KeyPort {
  /** Store or update this daemon's key rows (idempotent by kid). */
  publish(rows: readonly PublicKeyRow[]): Promise<void>;

  /** Every key row, in kid order. */
  all(): Promise<PublicKeyRow[]>;
}

/** A store the daemon opened. */
export interface StorePort {
  readonly streams: StreamPort;
  readonly directory: DirectoryPort;
  readonly integrity: IntegrityPort;
  readonly keys: KeyPort;

  /**
   * The key material every daemon of this store's deployment shares for sealing cursors and
   * batch ids (docs/design/deployment-secret.md), or undefined when the store belongs to one
   * daemon only (LevelDB: the daemon's own `secret.key` seals them).
   */
  readonly deploymentSecret?: Buffer;

  /** The counts of `daemon.status`, as admitted; maintained by the backend from the changes it commits. */
  counts(): StoreCounts;

  readonly stats: CommitStats;

  /** True once a commit failed (outcome unknown): every later write is refused with READ_ONLY. */
  readonly readOnly: boolean;

  /** True once `close()` began: reads and writes answer SHUTTING_DOWN. */
  readonly stopping: boolean;

  /** Throw STORAGE_FAILURE (READ_ONLY or SHUTTING_DOWN, nothing written) when writes are refused. */
  assertWritable(operationId?: string | null): void;

  /** Called once when the store turns read-only, so caches of admitted state can be dropped. */
  onFailure(listener: () => void): void;

  /** Called after each group commit with its number of changes and the seconds its durable write took. */
  onCommit(listener: (writes: number, seconds: number) => void): void;

  /**
   * Write a consistent copy of the whole store, with the data-dir files of `context.dataDir`,
   * to `target` (`daemon.backup`, docs/protocol.md): every change
   * acknowledged before the call is in it, later ones are not. Backends without a file copy of
   * their own (PostgreSQL: pg_dump, point-in-time recovery) throw UNSUPPORTED-style errors that
   * say what to use instead. LevelDB's format, restore and doctor stay inside store/leveldb/.
   */
  backup(target: string, context: { dataDir: string; daemonVersion: string }): Promise<BackupManifest>;

  /**
   * Wait for admitted changes to finish (each settles ok or unknown), then release the engine.
   * Reads and writes started after it answer SHUTTING_DOWN.
   */
  close(): Promise<void>;
}
