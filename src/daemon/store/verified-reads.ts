import type { ClassicLevel } from 'classic-level';
import { errors, YelloError } from '../../shared/errors.js';
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
 * Reads of committed values, each verified against the checksum bound to its key
 * (`value-codec.ts`): a mismatch, or an error LevelDB raises while reading, is a STORAGE_FAILURE
 * with reason CORRUPT naming the key, never a silently different value.
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
      throw readFailure(key, err);
    }
    return raw === undefined ? undefined : decode(key, raw);
  }

  /** Committed entries of a range, each verified; `bytes` is the stored size of the value. */
  async *entries(range: Range): AsyncGenerator<{ key: string; value: unknown; bytes: number }> {
    for await (const [key, raw] of iterate(this.#db.iterator(range), range)) {
      yield { key, value: decode(key, raw), bytes: raw.length };
    }
  }

  /**
   * Committed entries of a range for scans that must go on past damage (the doctor, head
   * rebuilds): a value that fails its check comes back as `error` instead of ending the scan.
   * An error LevelDB raises while iterating still ends it.
   */
  async *entriesChecked(range: Range): AsyncGenerator<{ key: string; value: unknown; error: YelloError | null; bytes: number }> {
    for await (const [key, raw] of iterate(this.#db.iterator(range), range)) {
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
    return iterate(this.#db.keys(range), range);
  }

  /** The last committed key of a range (one seek), or undefined. */
  async lastKey(range: { gte: string; lt: string }): Promise<string | undefined> {
    try {
      const keys = await this.#db.keys({ ...range, reverse: true, limit: 1 }).all();
      return keys[0];
    } catch (err) {
      throw readFailure(range.gte, err);
    }
  }
}

/** The items of a LevelDB iterator; a read error is corruption at the range, and the iterator is always closed. */
async function* iterate<V>(it: { next(): Promise<V | undefined>; close(): Promise<void> }, range: Range): AsyncGenerator<V> {
  try {
    for (;;) {
      let item: V | undefined;
      try {
        item = await it.next();
      } catch (err) {
        throw readFailure(range.gte ?? range.gt ?? range.lt, err);
      }
      if (item === undefined) return;
      yield item;
    }
  } finally {
    await it.close();
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
