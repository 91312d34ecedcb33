import type { ClassicLevel } from 'classic-level';
import { errors, YelloError } from '../../../shared/errors.js';
import { locateKey } from './key-layout.js';
import { decodeValue } from './value-codec.js';

/** The LevelDB handle the store wraps. */
export type Db = ClassicLevel;

/** A key range of a scan. */
export interface Range {
  gte?: string;
  gt?: string;
  lt: string;
  reverse?: boolean;
  limit?: number;
}

/**
 * What abstract-level raises for a read on a store (or iterator) that is closing or closed: the
 * daemon is stopping, and nothing is known about the data. Never corruption.
 */
const CLOSED_CODES = new Set(['LEVEL_DATABASE_NOT_OPEN', 'LEVEL_ITERATOR_NOT_OPEN', 'LEVEL_SNAPSHOT_NOT_OPEN', 'LEVEL_ABORTED']);

/**
 * Reads of committed values, each verified against the checksum bound to its key
 * (`value-codec.ts`): a mismatch, or an error LevelDB raises while reading, is a STORAGE_FAILURE
 * with reason CORRUPT naming the key, never a silently different value. A read the store was
 * closed under (shutdown) is STORAGE_FAILURE/SHUTTING_DOWN instead: it says nothing about the data.
 */
export class VerifiedReads {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /** A committed value, verified, or undefined when absent. Typed by `Storage`, which callers use. */
  get(key: string): unknown {
    let raw: string | undefined;
    try {
      raw = this.#db.getSync(key);
    } catch (err) {
      throw this.#failure(key, err);
    }
    return raw === undefined ? undefined : decode(key, raw);
  }

  /** Committed entries of a range, each verified; `bytes` is the stored size of the value. */
  async *entries(range: Range): AsyncGenerator<{ key: string; value: unknown; bytes: number }> {
    for await (const [key, raw] of this.#iterate(() => this.#db.iterator(range), range)) {
      yield { key, value: decode(key, raw), bytes: raw.length };
    }
  }

  /**
   * Committed entries of a range for scans that must go on past damage (the doctor, head
   * rebuilds): a value that fails its check comes back as `error` instead of ending the scan.
   * An error LevelDB raises while iterating still ends it.
   */
  async *entriesChecked(range: Range): AsyncGenerator<{ key: string; value: unknown; error: YelloError | null; bytes: number }> {
    for await (const [key, raw] of this.#iterate(() => this.#db.iterator(range), range)) {
      let value: unknown;
      let error: YelloError | null = null;
      try {
        value = decode(key, raw);
      } catch (err) {
        if (!(err instanceof YelloError)) throw err;
        error = err;
      }
      yield { key, value, error, bytes: raw.length };
    }
  }

  /**
   * Committed keys of a range, without their values (so without checksums: for indexes that
   * only ever speed up a lookup the real read confirms).
   */
  keys(range: Range): AsyncGenerator<string> {
    return this.#iterate(() => this.#db.keys(range), range);
  }

  /** The last committed key of a range (one seek), or undefined. */
  async lastKey(range: { gte: string; lt: string }): Promise<string | undefined> {
    try {
      const keys = await this.#db.keys({ ...range, reverse: true, limit: 1 }).all();
      return keys[0];
    } catch (err) {
      throw this.#failure(range.gte, err);
    }
  }

  /**
   * The items of a LevelDB iterator; a read error is corruption at the range (or shutdown), and
   * the iterator is always closed.
   */
  async *#iterate<V>(open: () => { next(): Promise<V | undefined>; close(): Promise<void> }, range: Range): AsyncGenerator<V> {
    const at = range.gte ?? range.gt ?? range.lt;
    let it: { next(): Promise<V | undefined>; close(): Promise<void> };
    try {
      it = open();
    } catch (err) {
      throw this.#failure(at, err);
    }
    try {
      for (;;) {
        let item: V | undefined;
        try {
          item = await it.next();
        } catch (err) {
          throw this.#failure(at, err);
        }
        if (item === undefined) return;
        yield item;
      }
    } finally {
      // Closing an iterator of a store that closed under it fails too; the read's answer stands.
      await it.close().catch((err: unknown) => {
        if (!this.#closedUnder(err)) throw err;
      });
    }
  }

  /** Whether `err` comes from the store closing (shutdown), not from the data. */
  #closedUnder(err: unknown): boolean {
    return CLOSED_CODES.has(String((err as { code?: unknown } | null)?.code)) || this.#db.status !== 'open';
  }

  /** A read error from LevelDB: the store closed under the read (shutdown), or corrupt data at `key`. */
  #failure(key: string, err: unknown): YelloError {
    if (err instanceof YelloError) return err;
    if (this.#closedUnder(err)) return errors.shuttingDown(null, null);
    return readFailure(key, err);
  }
}

function decode(key: string, raw: string): unknown {
  const json = decodeValue(key, raw);
  if (json !== null) {
    try {
      return JSON.parse(json);
    } catch {
      /* a checksum collision over garbage: report it as corrupt below */
    }
  }
  throw corruptKey(key, 'checksum mismatch');
}

/** A read error from LevelDB itself (a damaged table block): corrupt data at `key`. */
function readFailure(key: string, err: unknown): YelloError {
  if (err instanceof YelloError) return err;
  const e = err as { code?: string; message?: string };
  return corruptKey(key, `LevelDB could not read it (${e.code ?? 'error'}: ${e.message ?? String(err)})`);
}

function corruptKey(key: string, detail: string): YelloError {
  const where = locateKey(key);
  return errors.corrupt({ key, streamId: where.streamId, generation: where.generation, fromPosition: where.position, detail });
}
