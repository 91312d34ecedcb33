import type { Logger } from 'pino';
import type { YelloError } from '../../../shared/errors.js';
import { StoreGate, writeFailed } from '../port/gate.js';
import { GroupCommit } from '../port/group-commit.js';
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
 * LevelDB with checksummed values and group commit.
 *
 * Every value is stored with a checksum bound to its key (`value-codec.ts`) and every read
 * verifies it: a mismatch, or an error LevelDB raises while reading, is a STORAGE_FAILURE with
 * reason CORRUPT naming the key, never a silently different value. Callers put and get plain
 * JSON values; nobody else touches the LevelDB handle.
 *
 * What was admitted and is not durable yet is the port kernel's (port/stream-kernel.ts,
 * directory-kernel.ts: the pending overlay); reads here are of committed state. Writes are
 * committed strictly in the order `write` was called, grouped by the port's one policy
 * (port/group-commit.ts) into synced batches of at most MAX_GROUP_WRITES; an idle daemon flushes
 * at once, with no timer. A write is acknowledged only after its batch returned from
 * `sync: true`. A failed write makes the store read-only until restart (the gate's latch):
 * nothing is retried silently, and every write of the failed group, and every one queued behind
 * it, is answered with outcome unknown.
 */
export class Storage {
  readonly #db: Db;
  readonly #reads: VerifiedReads;
  readonly #log: Logger;
  readonly #guard: WalGuard | null;
  readonly #groups: GroupCommit<PendingWrite>;
  /** The store's gate: SHUTTING_DOWN while closing, READ_ONLY after a failed synced write. */
  readonly gate = new StoreGate('restart');
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
    this.#groups = new GroupCommit((group) => this.#commitGroup(group), { maxGroup: MAX_GROUP_WRITES });
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
    return this.gate.closing;
  }

  /**
   * Reads are refused once the store starts closing (SIGTERM): transient SHUTTING_DOWN, never
   * CORRUPT. A read already under way when LevelDB closes gets the same (verified-reads.ts).
   */
  #assertOpen(): void {
    this.gate.assertOpen();
  }

  // ---- writes ---------------------------------------------------------------------------

  get readOnly(): boolean {
    return this.gate.readOnly;
  }

  /** Called once when the store turns read-only, so caches of admitted state can be dropped. */
  onFailure(listener: () => void): void {
    this.gate.onFailure(listener);
  }

  /** Called after each synced batch with its writes and how long the synced write took (metrics). */
  onCommit(listener: (writes: number, seconds: number) => void): void {
    this.#commitListener = listener;
  }

  /** Throw STORAGE_FAILURE (nothing written) when the store no longer accepts writes. */
  assertWritable(operationId: string | null = null): void {
    this.gate.assertWritable(operationId);
  }

  /**
   * Queue a write for the next synced batch: durable when the promise resolves. The caller
   * checked what it relies on synchronously before (the port kernel's admission). `touches`
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
    this.#groups.push({ ops: encoded, ready, touches, done, resolve, reject });
    return done;
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

  /** One group: its lazy values, the guard's record, the synced batch; then each write settles. */
  async #commitGroup(group: PendingWrite[]): Promise<void> {
    // A group cut before the store failed is failed with it (its writes were queued behind the failed one).
    if (this.gate.readOnly) {
      this.#failAll(group);
      return;
    }
    try {
      const waiting = group.flatMap((g) => (g.ready === null ? [] : [g.ready]));
      if (waiting.length > 0) await Promise.all(waiting);
      for (const g of group) for (const op of g.ops) if (op.lazy) op.json = JSON.stringify(op.lazy());
    } catch (err) {
      this.#fail(err, group);
      return;
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
      return;
    }
    this.stats.batches++;
    this.stats.writes += group.length;
    this.#commitListener?.(group.length, synced);
    for (const g of group) g.resolve();
    if (this.#guard?.wantsCheckpoint && !this.#checkpoint) this.#startCheckpoint(this.#guard);
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
    if (!this.gate.readOnly)
      this.#log.fatal(
        { err: { message: errorMessage(err), code: errorCode(err) } },
        'synced write failed; daemon is read-only until restart',
      );
    this.gate.fail();
    this.#failAll(group);
  }

  /**
   * The failed group may be on disk or not (an fsync error says nothing about what reached the
   * disk); the writes queued behind it were never handed to LevelDB, but callers cannot tell the
   * two apart, so both are answered "outcome unknown": never resend blindly.
   */
  #failAll(group: PendingWrite[]): void {
    const failed = [...group, ...this.#groups.drain()];
    for (const g of failed) for (const op of g.ops) this.#inDoubt.add(op.key);
    // An error each: the appender adds its operation id to the one it is given.
    for (const g of failed) g.reject(writeFailed('the synced LevelDB write failed; after a restart operations.get tells'));
  }

  /** Wait for queued writes and a running checkpoint, then close LevelDB. */
  async close(): Promise<void> {
    this.gate.close();
    await this.#groups.drained();
    await this.#checkpoint;
    await this.#guard?.close();
    await this.#db.close();
  }
}
