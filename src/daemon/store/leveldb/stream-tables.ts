import { errors } from '../../../shared/errors.js';
import type { StoredRecord } from '../../../shared/types.js';
import { K } from './key-layout.js';
import {
  compactOperation,
  compactRecord,
  expandOperation,
  expandRecord,
  type CompactOperation,
  type CompactRecord,
  type RecordPlace,
  type StoredOperation,
  type StreamTail,
} from '../record-layout.js';
import type { Storage, WriteOp } from './storage.js';
import type { Range } from './verified-reads.js';
import type { StreamMeta } from '../stream-meta.js';

/** The place of a record of `meta`'s stream (chat, author and peer come from the head). */
export function placeOf(
  meta: Pick<StreamMeta, 'streamId' | 'chatId' | 'authorAgentId' | 'peerAgentId'>,
  generation: number,
  position: number,
): RecordPlace {
  return {
    streamId: meta.streamId,
    generation,
    position,
    chatId: meta.chatId,
    authorAgentId: meta.authorAgentId,
    peerAgentId: meta.peerAgentId,
  };
}

/** What stays the same for every record of a stream. */
export type StreamIdentity = Pick<StreamMeta, 'streamId' | 'chatId' | 'authorAgentId' | 'peerAgentId'>;

/**
 * The one place that knows how a stream is laid out in LevelDB: the full head (`s/`), the tail
 * every append updates (`h/`), records (`r/`, compact), operations (`o/`, compact). Everything
 * else asks it for plain values.
 */
export class StreamTables {
  readonly #storage: Storage;

  constructor(storage: Storage) {
    this.#storage = storage;
  }

  // ---- heads ----------------------------------------------------------------------------

  /** A committed head with its tail applied, or undefined. Throws CORRUPT on a bad value. */
  head(streamId: string): StreamMeta | undefined {
    const storage = this.#storage;
    const meta = storage.get<StreamMeta>(K.stream(streamId));
    if (meta === undefined) return undefined;
    const tail = storage.get<StreamTail>(K.tail(streamId));
    if (tail && tail[0] > meta.generation) {
      throw errors.corrupt({
        key: K.tail(streamId),
        streamId,
        generation: null,
        fromPosition: null,
        detail: `the head's tail is at generation ${tail[0]}, the head at ${meta.generation}`,
      });
    }
    return tail ? withTail(meta, tail) : meta;
  }

  /**
   * The puts that persist `next`: the small tail always; the full head only when something
   * besides the tail changed since `previous` (writer, trim point, generation, sealed list).
   */
  headOps(next: StreamMeta, previous: StreamMeta | undefined): WriteOp[] {
    const ops: WriteOp[] = [{ type: 'put', key: K.tail(next.streamId), value: tailOf(next) }];
    if (!previous || coldChanged(previous, next)) ops.push({ type: 'put', key: K.stream(next.streamId), value: next });
    return ops;
  }

  // ---- records --------------------------------------------------------------------------

  /**
   * The put of a record, compacted when its group is written: its signature may still be on its
   * way (Storage waits for the write's `ready` first).
   */
  recordOp(stream: StreamIdentity, record: StoredRecord, generation: number, position: number): WriteOp {
    const place = placeOf(stream, generation, position);
    return { type: 'put', key: K.record(stream.streamId, generation, position), value: () => compactRecord(record, place) };
  }

  /** One committed record, or undefined. Throws CORRUPT on a bad value. */
  record(stream: StreamIdentity, generation: number, position: number): StoredRecord | undefined {
    const stored = this.#storage.get<CompactRecord | StoredRecord>(K.record(stream.streamId, generation, position));
    return stored === undefined ? undefined : expandRecord(stored, placeOf(stream, generation, position));
  }

  /** Committed records of a key range of one generation, expanded, in key order; `bytes` is the stored size. */
  async *records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    reverse = false,
  ): AsyncGenerator<{ record: StoredRecord; bytes: number; position: number }> {
    const range: Range = { gte: K.record(stream.streamId, generation, from), lt: K.record(stream.streamId, generation, end), reverse };
    for await (const { key, value, bytes } of this.#storage.entries<CompactRecord | StoredRecord>(range)) {
      const position = Number(key.slice(key.lastIndexOf('/') + 1));
      yield { record: expandRecord(value, placeOf(stream, generation, position)), bytes, position };
    }
  }

  // ---- operations -----------------------------------------------------------------------

  operationOp(streamId: string, op: StoredOperation): WriteOp {
    return { type: 'put', key: K.operation(streamId, op.operationId), value: compactOperation(op) };
  }

  /** A committed operation, or undefined. */
  operation(streamId: string, operationId: string): StoredOperation | undefined {
    const stored = this.#storage.get<CompactOperation | StoredOperation>(K.operation(streamId, operationId));
    return stored === undefined ? undefined : expandOperation(operationId, stored);
  }
}

/** The put of a whole head (a new stream: both heads are written with their chat). */
export function streamMetaOp(meta: StreamMeta): WriteOp {
  return { type: 'put', key: K.stream(meta.streamId), value: meta };
}

export function tailOf(meta: StreamMeta): StreamTail {
  return [meta.generation, meta.nextPosition, meta.lastCreatedAt, meta.receipt?.peerGeneration ?? null, meta.receipt?.nextPosition ?? null];
}

/** The head with its tail's newer fields (a tail of another generation is older: ignored). */
export function withTail(meta: StreamMeta, tail: StreamTail): StreamMeta {
  const [generation, nextPosition, lastCreatedAt, receiptGeneration, receiptNext] = tail;
  if (generation !== meta.generation) return meta;
  return {
    ...meta,
    nextPosition,
    lastCreatedAt,
    receipt: receiptGeneration === null || receiptNext === null ? null : { peerGeneration: receiptGeneration, nextPosition: receiptNext },
  };
}

function coldChanged(a: StreamMeta, b: StreamMeta): boolean {
  return (
    a.generation !== b.generation ||
    a.firstPosition !== b.firstPosition ||
    a.sealed.length !== b.sealed.length ||
    a.writer.epoch !== b.writer.epoch ||
    a.writer.active !== b.writer.active ||
    a.writer.tokenHash !== b.writer.tokenHash ||
    a.writer.claimedAt !== b.writer.claimedAt
  );
}
