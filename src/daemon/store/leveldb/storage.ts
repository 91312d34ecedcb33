import type { Logger } from 'pino';
import { errors, type YelloError } from '../../../shared/errors.js';
import { errorCode, errorMessage } from '../../runtime/error-fields.js';
import { encodeValue } from './value-codec.js';
import { VerifiedReads, type Db, type Range } from './verified-reads.js';
import type { Touch, WalGuard } from './wal-guard.js';
import { coalesce, type EncodedOp, type PendingWrite, type WriteOp } from './write-ops.js';

export { put, type WriteOp } from './write-ops.js';

/** A snapshot read of the whole store: entries as `[key, stored value]`, a page at a time. */
export interface SnapshotIterator {
  nextv(size: number): Promise<Array<[string, string]>>;
  close(): Promise<void>;
}

/** Most writes grouped into one synced LevelDB batch. */
const MAX_GROUP_WRITES = 256;
/** A key past every table (`~` sorts after the letters): compacting it only flushes the memtable. */
const CHECKPOINT_KEY = '~checkpoint';

/**
 * LevelDB with checksummed values, group commit and an overlay of admitted-but-unsynced writes.
 *
 * Every value is stored with a checksum bound to its key (`value-codec.ts`) and every read
 * verifies it: a mismatch, or an error LevelDB raises while reading, is a STORAGE_FAILURE with
 * reason CORRUPT naming the key, never a silently different value. Callers put and get plain
 * JSON values; nobody else touches the LevelDB handle.
 *
 * Admission (checks + position assignment) is synchronous and reads through the overlay, so
 * two appends can never both pass a compare-and-append check. Writes are committed strictly in
 * admission order. Writes that arrive while a synced batch is in flight join the next batch;
 * an idle daemon flushes at once, with no timer. A write is acknowledged only after its batch
 * returned from `sync: true`. A failed write makes the store read-only until restart: nothing
 * is retried silently, and every write of the failed group is answered with outcome unknown.
 */
export class Storage {
  readonly #db: Db;
  readonly #reads: VerifiedReads;
  readonly #log: Logger;
  readonly #guard: WalGuard | null;
  #overlay = new Map<string, { json: string | undefined; lazy?: (() => unknown) | undefined; owner: PendingWrite }>();
  #queue: PendingWrite[] = [];
  #flushing = false;
  #readOnly = false;
  #closing = false;
  #failureListeners: Array<() => void> = [];
  #commitListener: ((writes: number, seconds: number) => void) | null = null;
  #checkpoint: Promise<void> | null = null;
  /** Keys of writes whose synced batch failed: on disk or not, nobody can tell until a restart. */
  readonly #inDoubt = new Set<string>();
  /** Synced batches written and writes in them, for `daemon.status` and benchmarks. */
  readonly stats = { batches: 0, writes: 0, checkpoints: 0 };

  /** Fault injection (tests only): when this returns true, the next synced batch fails. */
  readonly #injectFailure: (() => boolean) | null;

  constructor(db: Db, log: Logger, options: { guard?: WalGuard | null; injectFailure?: (() => boolean) | null } = {}) {
    this.#db = db;
    this.#reads = new VerifiedReads(db);
    this.#log = log;
    this.#guard = options.guard ?? null;
    this.#injectFailure = options.injectFailure ?? null;
  }

  // ---- reads ----------------------------------------------------------------------------

  // The typed boundary of the store: `T` is what the caller stored under the key. Every value is
  // JSON this daemon wrote and is verified against its checksum on the way back, so reading it
  // as `T` is the store's contract rather than a guess; a typo'd `T` is not caught here (a key
  // layout whose keys carry their value type would catch it: see the lint report).
  /* eslint-disable @typescript-eslint/no-unnecessary-type-parameters -- the caller names the type it stored; see above */

  /** A committed value, verified, or undefined when absent (read paths). */
  get<T>(key: string): T | undefined {
    this.#assertOpen();
    return this.#reads.get(key) as T | undefined;
  }

  /** A value as admitted: pending writes first, then committed state (write path only). */
  getAdmitted<T>(key: string): T | undefined {
    const o = this.#overlay.get(key);
    if (o?.lazy) return structuredClone(o.lazy()) as T;
    if (o) return o.json === undefined ? undefined : (JSON.parse(o.json) as T);
    return this.get<T>(key);
  }

  /** Whether an admitted write of `key` is still waiting for its fsync. */
  hasPending(key: string): boolean {
    return this.#overlay.has(key);
  }

  /**
   * Whether a write of `key` failed its fsync in this run: LevelDB may still have it in its log,
   * so after a restart it may be there. Until then its fate is not known.
   */
  inDoubt(key: string): boolean {
    return this.#inDoubt.has(key);
  }

  /** Committed entries of a range, each verified (verified-reads.ts). */
  entries<T>(range: Range): AsyncGenerator<{ key: string; value: T; bytes: number }> {
    this.#assertOpen();
    return this.#reads.entries(range) as AsyncGenerator<{ key: string; value: T; bytes: number }>;
  }

  /** Committed entries of a range; a value that fails its check comes back as `error` (verified-reads.ts). */
  entriesChecked<T>(range: Range): AsyncGenerator<{ key: string; value: T | undefined; error: YelloError | null; bytes: number }> {
    this.#assertOpen();
    return this.#reads.entriesChecked(range) as AsyncGenerator<{
      key: string;
      value: T | undefined;
      error: YelloError | null;
      bytes: number;
    }>;
  }

  /* eslint-enable @typescript-eslint/no-unnecessary-type-parameters */

  /**
   * Every committed entry as stored (the value with its checksum), read from the one LevelDB
   * snapshot taken synchronously by this call: writes committed later are not seen, writes
   * acknowledged before it all are (backup.ts). The caller closes the iterator.
   */
  snapshot(): SnapshotIterator {
    this.#assertOpen();
    return this.#db.iterator({ keyEncoding: 'utf8', valueEncoding: 'utf8' });
  }

  /**
   * Let LevelDB rewrite the tables of a key range now (after a large trim: the deleted records'
   * space comes back and later scans skip no tombstones).
   */
  compactRange(gte: string, lt: string): Promise<void> {
    this.#assertOpen();
    return this.#db.compactRange(gte, lt);
  }

  /** Committed keys of a range, without their values (verified-reads.ts). */
  keys(range: Range): AsyncGenerator<string> {
    this.#assertOpen();
    return this.#reads.keys(range);
  }

  /**
   * LevelDB's estimate of the bytes a key range takes on disk (compressed tables; what is still
   * in the memtable counts nothing). For quotas, never for anything exact.
   */
  approximateSize(gte: string, lt: string): Promise<number> {
    return this.#db.approximateSize(gte, lt);
  }

  /** The last committed key of a range (one seek), or undefined. */
  lastKey(range: { gte: string; lt: string }): Promise<string | undefined> {
    this.#assertOpen();
    return this.#reads.lastKey(range);
  }

  /** Whether the daemon is stopping: the store is closing or closed (reads and writes refused). */
  get stopping(): boolean {
    return this.#closing;
  }

  /**
   * Reads are refused once the store starts closing (SIGTERM): transient SHUTTING_DOWN, never
   * CORRUPT. A read already under way when LevelDB closes gets the same (verified-reads.ts).
   */
  #assertOpen(): void {
    if (this.#closing) throw errors.shuttingDown(null, null);
  }

  // ---- writes ---------------------------------------------------------------------------

  get readOnly(): boolean {
    return this.#readOnly;
  }

  /** Called once when the store turns read-only, so caches of admitted state can be dropped. */
  onFailure(listener: () => void): void {
    this.#failureListeners.push(listener);
  }

  /** Called after each synced batch with its writes and how long the synced write took (metrics). */
  onCommit(listener: (writes: number, seconds: number) => void): void {
    this.#commitListener = listener;
  }

  /** Throw STORAGE_FAILURE (nothing written) when the store no longer accepts writes. */
  assertWritable(operationId: string | null = null): void {
    if (this.#readOnly)
      throw errors.storageFailure(
        operationId,
        'READ_ONLY',
        'the daemon is read-only after a failed write; nothing was written; restart it',
      );
    if (this.#closing) throw errors.storageFailure(operationId, 'SHUTTING_DOWN', 'the daemon is shutting down; nothing was written');
  }

  /**
   * Admit a write: visible to `getAdmitted` at once, durable when the promise resolves.
   * Must be called synchronously after the checks that depend on `getAdmitted`. `touches`
   * name the stream generations it writes, for the write-ahead-log guard.
   */
  write(ops: WriteOp[], touches: readonly Touch[] = [], ready: Promise<void> | null = null): Promise<void> {
    this.assertWritable();
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const encoded = ops.map((op): EncodedOp => {
      if (op.type === 'del') return { key: op.key, json: undefined };
      if (typeof op.value === 'function') return { key: op.key, json: undefined, lazy: op.value as () => unknown };
      return { key: op.key, json: JSON.stringify(op.value) };
    });
    const pending: PendingWrite = { ops: encoded, ready, touches, done, resolve, reject };
    for (const op of encoded) this.#overlay.set(op.key, { json: op.json, lazy: op.lazy, owner: pending });
    this.#queue.push(pending);
    if (!this.#flushing) void this.#flush();
    return done;
  }

  /**
   * When `key` was read from an admitted write, the promise of that write's durability;
   * a caller must await it before answering with what it read, so nothing is acknowledged
   * that a crash could still undo.
   */
  durable(key: string): Promise<void> {
    return this.#overlay.get(key)?.owner.done ?? Promise.resolve();
  }

  /** The synced write; the injected failure stands in for an EIO from fsync. */
  #syncedBatch(ops: EncodedOp[]): Promise<void> {
    if (this.#injectFailure?.()) {
      return Promise.reject(Object.assign(new Error('injected synced-write failure'), { code: 'LEVEL_IO_ERROR' }));
    }
    // The chained form: abstract-level's array form clones and re-validates every op, which
    // measured ~3x slower per op here (bench/README.md, "profile notes").
    const batch = this.#db.batch();
    for (const op of ops) {
      if (op.json === undefined) batch.del(op.key);
      else batch.put(op.key, encodeValue(op.key, op.json));
    }
    return batch.write({ sync: true });
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    while (this.#queue.length > 0 && !this.#readOnly) {
      // One turn of the event loop before cutting a group: requests already sitting in socket
      // buffers get admitted and join this fsync instead of waiting for the next one. This is
      // not a timer. (Skipping it while writes came one at a time was measured and removed: it
      // did not make a lone writer faster and cost 0.86-0.94x the appends/s at 8 and 64.)
      await new Promise<void>((resolve) => setImmediate(resolve));
      const group = this.#queue.splice(0, MAX_GROUP_WRITES);
      try {
        const waiting = group.flatMap((g) => (g.ready === null ? [] : [g.ready]));
        if (waiting.length > 0) await Promise.all(waiting);
        for (const g of group) for (const op of g.ops) if (op.lazy) op.json = JSON.stringify(op.lazy());
      } catch (err) {
        this.#fail(err, group);
        break;
      }
      const only = group.length === 1 ? group[0] : undefined;
      const ops = only ? only.ops : coalesce(group);
      let synced: number;
      try {
        if (this.#guard) {
          const fresh = this.#guard.fresh(group.flatMap((g) => g.touches));
          // The streams this group writes are on record before LevelDB's log holds their data.
          if (fresh.length > 0) await this.#guard.record(fresh);
        }
        const started = performance.now();
        await this.#syncedBatch(ops);
        synced = (performance.now() - started) / 1000;
      } catch (err) {
        this.#fail(err, group);
        break;
      }
      this.stats.batches++;
      this.stats.writes += group.length;
      this.#commitListener?.(group.length, synced);
      for (const g of group) {
        for (const op of g.ops) if (this.#overlay.get(op.key)?.owner === g) this.#overlay.delete(op.key);
        g.resolve();
      }
      if (this.#guard?.wantsCheckpoint && !this.#checkpoint) this.#startCheckpoint(this.#guard);
    }
    this.#flushing = false;
  }

  /**
   * Between two groups: force LevelDB to move its memtable (everything committed so far) into
   * a table file, so the guard only has to remember streams written after this point.
   */
  #startCheckpoint(guard: WalGuard): void {
    const cp = guard.beginCheckpoint();
    this.#checkpoint = this.#db
      .compactRange(CHECKPOINT_KEY, `${CHECKPOINT_KEY}~`)
      .then(() => cp.end())
      .then(
        () => {
          this.stats.checkpoints++;
        },
        (err: unknown) => {
          cp.abort();
          this.#log.warn({ err: { message: errorMessage(err) } }, 'log checkpoint failed; the guard keeps every stream of this era');
        },
      )
      .finally(() => {
        this.#checkpoint = null;
      });
  }

  #fail(err: unknown, group: PendingWrite[]): void {
    if (this.#readOnly) return;
    this.#readOnly = true;
    this.#log.fatal(
      { err: { message: errorMessage(err), code: errorCode(err) } },
      'synced write failed; daemon is read-only until restart',
    );
    const failed = [...group, ...this.#queue.splice(0)];
    for (const g of failed) for (const op of g.ops) this.#inDoubt.add(op.key);
    this.#overlay.clear();
    for (const listener of this.#failureListeners) listener();
    // The failed group may be on disk or not (an fsync error says nothing about what reached
    // the disk); the writes queued behind it were never handed to LevelDB, but callers cannot
    // tell the two apart, so both are answered "outcome unknown": never resend blindly.
    for (const g of failed) {
      g.reject(
        errors.storageFailure(
          null,
          'WRITE_FAILED',
          'a synced write failed: this write may or may not be on disk (outcome unknown; after a restart operations.get tells); the daemon is read-only until restart',
        ),
      );
    }
  }

  /** Wait for queued writes and a running checkpoint, then close LevelDB. */
  async close(): Promise<void> {
    this.#closing = true;
    while (this.#flushing || this.#queue.length > 0) await new Promise((r) => setTimeout(r, 5));
    await this.#checkpoint;
    await this.#guard?.close();
    await this.#db.close();
  }
}
