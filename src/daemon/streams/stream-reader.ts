import { errors, YelloError } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import type { ReadBatch, StoredRecord, StreamState } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import { sealBatchId } from '../crypto/batch-codec.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import { PAGE_BYTES } from '../limits.js';
import type { ReadRequest } from '../requests.js';
import { isCorrupt, type Integrity } from '../store/integrity.js';
import type { StreamMeta } from '../store/stream-meta.js';
import type { StreamPort } from '../store/port/stream-port.js';
import { assertReader } from './access.js';
import type { StreamContext } from './context.js';
import type { StreamHeads } from './heads.js';

/** Bounds of one readable generation of a stream. */
export interface GenerationBounds {
  firstPosition: number;
  nextPosition: number;
  sealed: boolean;
}

/** A committed record with its stored size. */
export interface SizedRecord {
  record: StoredRecord;
  bytes: number;
}

/**
 * Reads of one stream's committed records with exact continuity: every path fails closed. A
 * missing stream, another generation or a trimmed range is a CONTINUITY_BREAK, a position at or
 * past a corruption mark is STORAGE_FAILURE/CORRUPT, and a record is never skipped.
 */
export class StreamReader {
  readonly #heads: StreamHeads;
  readonly #streams: StreamPort;
  readonly #integrity: Integrity;
  readonly #codec: TokenCodec;

  constructor({ heads, streams, integrity, codec }: StreamContext) {
    this.#heads = heads;
    this.#streams = streams;
    this.#integrity = integrity;
    this.#codec = codec;
  }

  /** `streams.get`: participants and admin. */
  get(caller: Caller, streamId: string): StreamState {
    const meta = this.#heads.committed(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    assertReader(caller, meta);
    return this.#heads.state(meta);
  }

  /** Bounds of a readable generation: the current one, or a sealed earlier one. */
  bounds(meta: StreamMeta, generation: number): GenerationBounds | null {
    if (generation === meta.generation) return { firstPosition: meta.firstPosition, nextPosition: meta.nextPosition, sealed: false };
    const s = meta.sealed.find((g) => g.generation === generation);
    return s ? { firstPosition: s.firstPosition, nextPosition: s.nextPosition, sealed: true } : null;
  }

  /** Committed meta of a stream a reader expects to exist, or CONTINUITY_BREAK/STREAM_MISSING. */
  continuingMeta(streamId: string): StreamMeta {
    const meta = this.#heads.committed(streamId);
    if (!meta) throw errors.continuityBreak('STREAM_MISSING', streamId, streamId, null);
    return meta;
  }

  /** `continuingMeta`, for a participant or admin. */
  readableMeta(caller: Caller, streamId: string): StreamMeta {
    const meta = this.continuingMeta(streamId);
    assertReader(caller, meta);
    return meta;
  }

  /** Check a cursor position against the current stream: exact continuity or CONTINUITY_BREAK. */
  checkContinuity(streamId: string, generation: number, position: number): StreamMeta {
    const meta = this.continuingMeta(streamId);
    if (meta.generation !== generation) {
      throw errors.continuityBreak('GENERATION_CHANGED', streamId, formatDecimal(generation), formatDecimal(meta.generation));
    }
    if (position < meta.firstPosition) {
      throw errors.continuityBreak('PREFIX_UNAVAILABLE', streamId, formatDecimal(position), formatDecimal(meta.firstPosition));
    }
    this.#integrity.assertReadable(streamId, generation, position);
    if (position > meta.nextPosition) throw errors.invalidParams('cursor', `the cursor is beyond the end of ${streamId}`);
    return meta;
  }

  /** `streams.read` without waiting: one page from `fromPosition`. */
  async read(caller: Caller, p: ReadRequest): Promise<ReadBatch> {
    const meta = this.readableMeta(caller, p.streamId);
    const generation = p.generation;
    const from = p.fromPosition;
    const b = this.bounds(meta, generation);
    if (!b) throw errors.continuityBreak('GENERATION_CHANGED', p.streamId, formatDecimal(generation), formatDecimal(meta.generation));
    if (from < b.firstPosition)
      throw errors.continuityBreak('PREFIX_UNAVAILABLE', p.streamId, formatDecimal(from), formatDecimal(b.firstPosition));
    // Past a corruption mark nothing can be vouched for, not even "no more records".
    this.#integrity.assertReadable(p.streamId, generation, from);
    if (from > b.nextPosition) throw errors.invalidParams('fromPosition', `fromPosition is beyond nextPosition ${b.nextPosition}`);
    const end = Math.min(b.nextPosition, this.#integrity.readLimit(p.streamId, generation));
    // Never more than a page, whatever the caller asks (docs/protocol.md §3.2 page budget).
    const records = await this.range(p.streamId, generation, from, end, p.limit, Math.min(p.maxBytes, PAGE_BYTES));
    const nextPosition = from + records.length;
    return {
      batchId: this.batchId(caller, p.streamId, generation, from, nextPosition),
      streamId: p.streamId,
      generation: formatDecimal(generation),
      fromPosition: formatDecimal(from),
      nextPosition: formatDecimal(nextPosition),
      records,
      sealed: b.sealed,
    };
  }

  /** The first position of a generation readers may not pass (Infinity when unmarked). */
  readLimit(streamId: string, generation: number): number {
    return this.#integrity.readLimit(streamId, generation);
  }

  /** Throw STORAGE_FAILURE/CORRUPT when `position` is at or past a corruption mark. */
  assertReadable(streamId: string, generation: number, position: number): void {
    this.#integrity.assertReadable(streamId, generation, position);
  }

  /** Mint the batchId of a presented range. */
  batchId(caller: Caller, streamId: string, generation: number, from: number, next: number): string {
    const reader = caller.role === 'agent' ? caller.agentId : 'admin';
    return sealBatchId(this.#codec, { reader, streamId, generation, fromPosition: from, nextPosition: next });
  }

  /**
   * Committed records of [from, end) of one generation, in position order (or reverse), each
   * checksum-verified and at exactly the next expected position. A missing position is never
   * skipped: below the recorded trim point it was trimmed while we read (PREFIX_UNAVAILABLE);
   * at or above it, an acknowledged record is gone, which is corruption. Whether ending
   * before the range's far end is a break is the caller's call. Breaking out closes the iterator.
   */
  async *scan(streamId: string, generation: number, from: number, end: number, reverse = false): AsyncGenerator<SizedRecord> {
    if (from >= end) return;
    let expect = reverse ? end - 1 : from;
    const stream = this.#heads.identity(streamId);
    const entries = this.#streams.records(stream, generation, from, end, { reverse })[Symbol.asyncIterator]();
    for (;;) {
      let next: IteratorResult<SizedRecord>;
      try {
        next = await entries.next();
      } catch (err) {
        // A record that fails its check is an acknowledged record lost: mark the stream there.
        if (isCorrupt(err) && err.details.streamId === streamId) {
          const at = err.details.fromPosition === null ? expect : Number(err.details.fromPosition);
          throw this.#integrity.mark({ streamId, generation, fromPosition: at, detail: `record ${at} fails its checksum` });
        }
        throw err;
      }
      if (next.done) return;
      const { record, bytes } = next.value;
      if (record.position !== formatDecimal(expect)) throw this.missing(streamId, generation, expect);
      yield { record, bytes };
      expect += reverse ? -1 : 1;
    }
  }

  /**
   * The error for a record that is not where the head says it is: PREFIX_UNAVAILABLE when a
   * trim took it, else a corruption mark from `position` on.
   */
  missing(streamId: string, generation: number, position: number): YelloError {
    const meta = this.#heads.committed(streamId);
    const b = meta ? this.bounds(meta, generation) : null;
    if (b && position < b.firstPosition) {
      return errors.continuityBreak('PREFIX_UNAVAILABLE', streamId, formatDecimal(position), formatDecimal(b.firstPosition));
    }
    const detail = `record ${position} is missing above the trim point`;
    return this.#integrity.mark({ streamId, generation, fromPosition: position, detail });
  }

  /**
   * Committed records [from, end), at most `limit`, stopping once `maxBytes` is reached (always
   * at least one). Damage after the first record ends the page early, serving the intact records
   * before it; the next read starts at the damage and fails there.
   */
  async range(
    streamId: string,
    generation: number,
    from: number,
    end: number,
    limit: number,
    maxBytes = Infinity,
  ): Promise<StoredRecord[]> {
    const out: StoredRecord[] = [];
    let bytes = 0;
    try {
      for await (const r of this.scan(streamId, generation, from, end)) {
        out.push(r.record);
        bytes += r.bytes;
        if (out.length >= limit || bytes >= maxBytes) break;
      }
    } catch (err) {
      if (out.length === 0 || !isCorrupt(err)) throw err;
    }
    if (out.length === 0 && from < end) throw this.missing(streamId, generation, from);
    return out;
  }
}
