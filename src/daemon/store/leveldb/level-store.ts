import type { BackupManifest } from '../../../shared/results.js';
import type { MarkStore } from '../integrity.js';
import type { IntegrityPort, KeyPort, StorePort } from '../port/store-port.js';
import type { CommitStats, CorruptMark, PublicKeyRow, StoreCounts } from '../port/values.js';
import { writeBackup } from './backup.js';
import type { Counters } from './counters.js';
import { K, prefixEnd } from './key-layout.js';
import { LevelDirectory } from './level-directory.js';
import { LevelStreams } from './level-streams.js';
import type { Storage } from './storage.js';
import { StreamTables } from './stream-tables.js';

/** The key of a mark's generation: 0 stands for the whole stream (generation unknown). */
const UNKNOWN_GENERATION = 0;

/** Stored corruption marks under `k/<streamId>/<generation>`. */
export class LevelIntegrity implements IntegrityPort {
  readonly #storage: Storage;

  constructor(storage: Storage) {
    this.#storage = storage;
  }

  async *marks(): AsyncGenerator<CorruptMark> {
    for await (const { value } of this.#storage.entries<CorruptMark>({ gte: K.corruptMarksPrefix, lt: prefixEnd(K.corruptMarksPrefix) })) {
      yield value;
    }
  }

  putMarks(marks: readonly CorruptMark[]): Promise<void> {
    const ops = marks.map((m) => ({ type: 'put' as const, key: K.corruptMark(m.streamId, m.generation ?? UNKNOWN_GENERATION), value: m }));
    return ops.length === 0 ? Promise.resolve() : this.#storage.write(ops);
  }

  narrowMark(streamId: string, narrowed: CorruptMark): Promise<void> {
    return this.#storage.write([
      { type: 'del', key: K.corruptMark(streamId, UNKNOWN_GENERATION) },
      { type: 'put', key: K.corruptMark(streamId, narrowed.generation ?? UNKNOWN_GENERATION), value: narrowed },
    ]);
  }
}

/**
 * Public keys on LevelDB: one daemon owns the store and its key files (crypto/signer.ts) are
 * the truth, so the rows it publishes are kept in memory for this process.
 */
export class LevelKeys implements KeyPort {
  readonly #rows = new Map<string, PublicKeyRow>();

  publish(rows: readonly PublicKeyRow[]): Promise<void> {
    for (const r of rows) this.#rows.set(r.kid, { ...r });
    return Promise.resolve();
  }

  all(): Promise<PublicKeyRow[]> {
    return Promise.resolve([...this.#rows.values()].sort((a, b) => (a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0)));
  }
}

/**
 * The storage port over one opened LevelDB (`Storage` with its group commit, admitted overlay
 * and WAL guard). Counts are kept by `Counters` and written with every batch that changes them.
 * LevelDB's own tools stay here: format and migrations (store-format.ts), the recovery check,
 * doctor and restore work on the `Storage` directly; `backup` is the one the daemon reaches
 * through the port.
 */
export class LevelStore implements StorePort {
  readonly streams: LevelStreams;
  readonly directory: LevelDirectory;
  readonly integrity: LevelIntegrity;
  readonly keys = new LevelKeys();
  readonly #storage: Storage;
  readonly #counters: Counters;

  constructor(storage: Storage, counters: Counters) {
    this.#storage = storage;
    this.#counters = counters;
    this.streams = new LevelStreams(storage, new StreamTables(storage), counters);
    this.directory = new LevelDirectory(storage, counters);
    this.integrity = new LevelIntegrity(storage);
  }

  /** The LevelDB store underneath, for what stays LevelDB-specific (doctor, recovery check). */
  get storage(): Storage {
    return this.#storage;
  }

  counts(): StoreCounts {
    return this.#counters.snapshot();
  }

  get stats(): CommitStats {
    return this.#storage.stats;
  }

  get readOnly(): boolean {
    return this.#storage.readOnly;
  }

  get stopping(): boolean {
    return this.#storage.stopping;
  }

  assertWritable(operationId: string | null = null): void {
    this.#storage.assertWritable(operationId);
  }

  onFailure(listener: () => void): void {
    this.#storage.onFailure(listener);
  }

  onCommit(listener: (writes: number, seconds: number) => void): void {
    this.#storage.onCommit(listener);
  }

  backup(target: string, context: { dataDir: string; daemonVersion: string }): Promise<BackupManifest> {
    return writeBackup(this.#storage, context.dataDir, target, context.daemonVersion);
  }

  close(): Promise<void> {
    return this.#storage.close();
  }
}

/** Where store/integrity.ts keeps its marks on a LevelDB store (before the whole port is built, and offline). */
export function levelMarkStore(storage: Storage): MarkStore {
  const integrity = new LevelIntegrity(storage);
  return {
    integrity,
    get readOnly() {
      return storage.readOnly;
    },
  };
}
