import { ClassicLevel } from 'classic-level';
import type { Logger } from 'pino';
import { errors } from '../shared/errors.js';

/** One put or delete of a write batch. */
export type WriteOp = { type: 'put'; key: string; value: string } | { type: 'del'; key: string };

interface PendingWrite {
  /** The write's ops, visible through the overlay from admission on. */
  ops: WriteOp[];
  done: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The ops of a group, with repeated puts of one key (stream heads, counters) reduced to the
 * last: writes commit in order, so only the final value of a key in the group matters.
 */
function coalesce(group: PendingWrite[]): WriteOp[] {
  const byKey = new Map<string, WriteOp>();
  for (const g of group) {
    for (const op of g.ops) {
      byKey.delete(op.key);
      byKey.set(op.key, op);
    }
  }
  return [...byKey.values()];
}

/** Most writes grouped into one synced LevelDB batch. */
const MAX_GROUP_WRITES = 256;

/**
 * LevelDB with group commit and an overlay of admitted-but-unsynced writes.
 *
 * Admission (checks + position assignment) is synchronous and reads through the overlay, so
 * two appends can never both pass a compare-and-append check. Writes are committed strictly in
 * admission order. Writes that arrive while a synced batch is in flight join the next batch;
 * an idle daemon flushes at once, with no timer. A write is acknowledged only after its batch
 * returned from `sync: true`. A failed write makes the store read-only until restart: nothing
 * is retried silently.
 */
export class Storage {
  readonly db: ClassicLevel<string, string>;
  readonly #log: Logger;
  #overlay = new Map<string, { value: string | undefined; owner: PendingWrite }>();
  #queue: PendingWrite[] = [];
  #flushing = false;
  #readOnly = false;
  #closing = false;
  #failureListeners: Array<() => void> = [];
  /** Synced batches written and writes in them, for `daemon.status` and benchmarks. */
  readonly stats = { batches: 0, writes: 0 };

  /** Fault injection (tests only): when this returns true, the next synced batch fails. */
  readonly #injectFailure: (() => boolean) | null;

  private constructor(db: ClassicLevel<string, string>, log: Logger, injectFailure: (() => boolean) | null) {
    this.db = db;
    this.#log = log;
    this.#injectFailure = injectFailure;
  }

  /** Open (and lock) the store; throws the LevelDB error, e.g. `LEVEL_LOCKED` or `LEVEL_CORRUPTION`. */
  static async open(location: string, log: Logger, options: { injectFailure?: (() => boolean) | null } = {}): Promise<Storage> {
    const db = new ClassicLevel<string, string>(location, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    // A larger memtable means fewer level-0 flushes and compactions competing with the event
    // loop for the two cores; a larger block cache keeps hot heads and indexes in memory.
    await db.open({ writeBufferSize: 16 << 20, cacheSize: 32 << 20 });
    return new Storage(db, log, options.injectFailure ?? null);
  }

  /** The synced write; the injected failure stands in for an EIO from fsync. */
  #syncedBatch(ops: WriteOp[]): Promise<void> {
    if (this.#injectFailure?.()) {
      return Promise.reject(Object.assign(new Error('injected synced-write failure'), { code: 'LEVEL_IO_ERROR' }));
    }
    // The chained form: abstract-level's array form clones and re-validates every op, which
    // measured ~3x slower per op here (bench/README.md, "profile notes").
    const batch = this.db.batch();
    for (const op of ops) {
      if (op.type === 'put') batch.put(op.key, op.value);
      else batch.del(op.key);
    }
    return batch.write({ sync: true });
  }

  get readOnly(): boolean {
    return this.#readOnly;
  }

  /** Called once when the store turns read-only, so caches of admitted state can be dropped. */
  onFailure(listener: () => void): void {
    this.#failureListeners.push(listener);
  }

  /** Read through admitted writes (write path only). */
  getAdmitted(key: string): string | undefined {
    const o = this.#overlay.get(key);
    if (o) return o.value;
    return this.getCommitted(key);
  }

  /** Whether an admitted write of `key` is still waiting for its fsync. */
  hasPending(key: string): boolean {
    return this.#overlay.has(key);
  }

  /** Read committed state only (read paths). */
  getCommitted(key: string): string | undefined {
    return this.db.getSync(key);
  }

  /** Throw STORAGE_FAILURE when the store no longer accepts writes. */
  assertWritable(operationId: string | null = null): void {
    if (this.#readOnly) throw errors.storageFailure(operationId, 'the daemon is read-only after a failed write; restart it');
    if (this.#closing) throw errors.storageFailure(operationId, 'the daemon is shutting down; nothing was written');
  }

  /**
   * Admit a write: visible to `getAdmitted` at once, durable when the promise resolves.
   * Must be called synchronously after the checks that depend on `getAdmitted`.
   */
  write(ops: WriteOp[]): Promise<void> {
    this.assertWritable();
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const pending: PendingWrite = { ops, done, resolve, reject };
    for (const op of ops) this.#overlay.set(op.key, { value: op.type === 'put' ? op.value : undefined, owner: pending });
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

  async #flush(): Promise<void> {
    this.#flushing = true;
    while (this.#queue.length > 0 && !this.#readOnly) {
      // One turn of the event loop before cutting a group: requests already sitting in socket
      // buffers get admitted and join this fsync instead of waiting for the next one. This is
      // not a timer: an idle daemon pays a few microseconds, a busy one writes fuller batches.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const group = this.#queue.splice(0, MAX_GROUP_WRITES);
      const ops = group.length === 1 ? group[0]!.ops : coalesce(group);
      try {
        await this.#syncedBatch(ops);
      } catch (err) {
        this.#fail(err, group);
        break;
      }
      this.stats.batches++;
      this.stats.writes += group.length;
      for (const g of group) {
        for (const op of g.ops) if (this.#overlay.get(op.key)?.owner === g) this.#overlay.delete(op.key);
        g.resolve();
      }
    }
    this.#flushing = false;
  }

  #fail(err: unknown, group: PendingWrite[]): void {
    if (this.#readOnly) return;
    this.#readOnly = true;
    this.#log.fatal({ err: { message: (err as Error)?.message, code: (err as { code?: string })?.code } }, 'synced write failed; daemon is read-only until restart');
    const failed = [...group, ...this.#queue.splice(0)];
    this.#overlay.clear();
    for (const listener of this.#failureListeners) listener();
    for (const g of failed) g.reject(errors.storageFailure(null));
  }

  /** Wait for queued writes, then close LevelDB. */
  async close(): Promise<void> {
    this.#closing = true;
    while (this.#flushing || this.#queue.length > 0) await new Promise((r) => setTimeout(r, 5));
    await this.db.close();
  }
}
