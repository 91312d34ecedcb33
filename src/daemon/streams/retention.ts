import { errors } from '../../shared/errors.js';
import { formatDecimal, splitStreamId } from '../../shared/ids.js';
import type { StoredRecord, StreamState } from '../../shared/types.js';
import { peerOf } from '../directory/chats.js';
import type { Directory } from '../directory/directory.js';
import type { Counters } from '../store/leveldb/counters.js';
import { isCorrupt, type Integrity } from '../store/integrity.js';
import { K, prefixEnd } from '../store/leveldb/key-layout.js';
import { expandRecord, type CompactRecord } from '../store/record-layout.js';
import type { Storage, WriteOp } from '../store/leveldb/storage.js';
import { cloneMeta, newStreamMeta, peerStreamIdOf, type StreamMeta } from '../store/stream-meta.js';
import { placeOf, type StreamTables } from '../store/leveldb/stream-tables.js';
import type { StreamContext } from './context.js';
import type { StreamHeads } from './heads.js';

/** Records deleted per batch when trimming, so a huge trim never builds one giant batch. */
const TRIM_CHUNK = 10_000;
/** Trims at least this large are followed by a LevelDB compaction of the stream's records. */
const COMPACT_AFTER = 10_000;

/**
 * Retention and generations: `streams.trim` drops a prefix of the current generation,
 * `streams.reset` seals it and starts the next. Both tell subscribers (a discontinuity), whose
 * cursors may no longer continue exactly.
 */
export class Retention {
  readonly #storage: Storage;
  readonly #heads: StreamHeads;
  readonly #integrity: Integrity;
  readonly #directory: Directory;
  readonly #counters: Counters;
  readonly #tables: StreamTables;

  constructor({ storage, heads, integrity, directory, counters, tables }: StreamContext) {
    this.#tables = tables;
    this.#storage = storage;
    this.#heads = heads;
    this.#integrity = integrity;
    this.#directory = directory;
    this.#counters = counters;
  }

  /** `streams.trim`: below what the peer acknowledged, or anything up to the head with `force`. */
  async trim(streamId: string, beforePosition: number, force: boolean): Promise<{ firstPosition: string }> {
    this.#storage.assertWritable();
    const meta = this.#heads.writable(streamId);
    if (beforePosition > meta.nextPosition) {
      throw errors.invalidParams('beforePosition', `beforePosition is beyond nextPosition ${meta.nextPosition}`);
    }
    if (beforePosition <= meta.firstPosition) return { firstPosition: formatDecimal(meta.firstPosition) };
    if (!force) {
      const peer = this.#heads.admitted(peerStreamIdOf(meta));
      const acked = peer?.receipt && peer.receipt.peerGeneration === meta.generation ? peer.receipt.nextPosition : 0;
      if (beforePosition > acked) {
        throw errors.permissionDenied(
          'UNACKNOWLEDGED',
          `the peer acknowledged up to ${acked}; trimming to ${beforePosition} needs force: true`,
        );
      }
    }
    const from = meta.firstPosition;
    const next = cloneMeta(meta);
    next.firstPosition = beforePosition;
    const generation = meta.generation;
    const deletes = (start: number, end: number): WriteOp[] => {
      const ops: WriteOp[] = [];
      for (let p = start; p < end; p++) ops.push({ type: 'del', key: K.record(streamId, generation, p) });
      return ops;
    };
    const firstChunkEnd = Math.min(beforePosition, from + TRIM_CHUNK);
    const dels = deletes(from, firstChunkEnd);
    this.#counters.records -= beforePosition - from;
    dels.push(this.#counters.op());
    // The new firstPosition commits with the first chunk: from then on readers fail closed below
    // it, so the remaining deletes only reclaim space.
    await this.#heads.commit(next, dels);
    this.#heads.discontinuity(streamId);
    for (let start = firstChunkEnd; start < beforePosition; start += TRIM_CHUNK) {
      await this.#storage.write(deletes(start, Math.min(beforePosition, start + TRIM_CHUNK)));
    }
    await this.compact(streamId);
    if (beforePosition - from >= COMPACT_AFTER) {
      // Tombstones of a large trim would be skipped by every later scan until LevelDB gets to
      // them on its own; rewriting the stream's tables now gives the space back.
      const records = K.recordsOfStream(streamId);
      await this.#storage.compactRange(records, prefixEnd(records));
    }
    return { firstPosition: formatDecimal(beforePosition) };
  }

  /**
   * Forget what the trimmed prefix of the current generation left behind: records a trim
   * interrupted by a crash had not deleted yet, the entries and operation-log entries of
   * operations whose records all lie below the retained start, and the message-id index
   * entries of trimmed messages. An operation whose records were cut in two keeps its entry.
   * Each batch deletes an operation's entry and its log entry together, so a crash never
   * leaves a log entry without its operation (which `operations.get` would report as damage).
   * Idempotent: it only removes what lies below the committed `firstPosition`.
   */
  async compact(streamId: string): Promise<{ records: number; operations: number; messageIds: number }> {
    const meta = this.#heads.writable(streamId);
    const { generation, firstPosition } = meta;
    const done = { records: 0, operations: 0, messageIds: 0 };
    if (firstPosition === 0) return done;
    let batch: WriteOp[] = [];
    const flush = async () => {
      if (batch.length > 0) await this.#storage.write(batch);
      batch = [];
    };
    const recordsPrefix = K.recordsPrefix(streamId, generation);
    let leftovers = 0;
    for await (const key of this.#storage.keys({ gte: recordsPrefix, lt: K.record(streamId, generation, firstPosition) })) {
      batch.push({ type: 'del', key });
      leftovers++;
      if (batch.length >= TRIM_CHUNK) await flush();
    }
    // (The record counter already went down with the trim that committed this firstPosition.)
    done.records = leftovers;
    await flush();
    for await (const { key, value: operationId } of this.#storage.entries<string>({
      gte: K.opLog(streamId, generation, 0),
      lt: K.opLog(streamId, generation, firstPosition),
    })) {
      const op = this.#tables.operation(streamId, operationId);
      // Cut in two by the trim: it stays, and so does every later one.
      if (op && op.nextPosition > firstPosition) break;
      batch.push({ type: 'del', key }, { type: 'del', key: K.operation(streamId, operationId) });
      done.operations++;
      if (batch.length >= TRIM_CHUNK) await flush();
    }
    await flush();
    const idsPrefix = K.messageIdsPrefix(streamId, generation);
    for await (const { key, value: position } of this.#storage.entries<string>({ gte: idsPrefix, lt: prefixEnd(idsPrefix) })) {
      if (Number(position) >= firstPosition) continue;
      batch.push({ type: 'del', key });
      done.messageIds++;
      if (batch.length >= TRIM_CHUNK) await flush();
    }
    await flush();
    return done;
  }

  /**
   * `streams.reset`: seal the current generation and start the next at position 0. This is also
   * the way out of corruption: the new generation lies past every marked one, so readers get
   * GENERATION_CHANGED and writers start clean, and nothing is written over a position that
   * may have held an acknowledged record. A head that fails its checksum is rebuilt from the
   * stream's records first.
   */
  async reset(streamId: string, reason: string): Promise<StreamState> {
    this.#storage.assertWritable();
    let meta: StreamMeta;
    try {
      meta = this.#heads.requireAdmitted(streamId);
    } catch (err) {
      if (!isCorrupt(err) || err.details.generation !== null) throw err;
      meta = await this.#rebuildHead(streamId);
    }
    const next = cloneMeta(meta);
    const sealedAt = new Date().toISOString();
    if (!next.sealed.some((g) => g.generation === meta.generation)) {
      next.sealed.push({
        generation: meta.generation,
        firstPosition: meta.firstPosition,
        nextPosition: meta.nextPosition,
        sealedAt,
        reason,
      });
    }
    next.generation = Math.max(meta.generation, this.#integrity.highestMarkedGeneration(streamId)) + 1;
    next.firstPosition = 0;
    next.nextPosition = 0;
    next.writer = { epoch: meta.writer.epoch + 1, claimedAt: meta.writer.claimedAt, active: false, tokenHash: null };
    await this.#heads.commit(next, []);
    this.#heads.setCommitted(next);
    this.#heads.discontinuity(streamId);
    return this.#heads.state(next);
  }

  /**
   * A head rebuilt from what the records say, after the stored head failed its checksum: every
   * generation found becomes a sealed one with the bounds its records show, the writer epoch
   * moves past every fence (so no old coordinator token works), and the whole-stream mark
   * narrows to the last generation from where its records end.
   */
  async #rebuildHead(streamId: string): Promise<StreamMeta> {
    const parts = splitStreamId(streamId);
    if (!parts) throw errors.notFound('stream', streamId);
    const chat = this.#directory.chat(parts.chatId);
    const peer = peerOf(chat, parts.authorAgentId);
    const meta = newStreamMeta(chat.id, parts.authorAgentId, peer, chat.createdAt);
    const gens = new Map<number, { first: number; next: number }>();
    let epoch = 0;
    const prefix = K.recordsOfStream(streamId);
    for await (const { key, value: stored } of this.#storage.entriesChecked<CompactRecord | StoredRecord>({
      gte: prefix,
      lt: prefixEnd(prefix),
    })) {
      const [, , g, pos] = key.split('/');
      const generation = Number(g);
      const position = Number(pos);
      let value: StoredRecord | undefined;
      try {
        value = stored === undefined ? undefined : expandRecord(stored, placeOf(meta, generation, position));
      } catch {
        value = undefined;
      }
      const bounds = gens.get(generation) ?? { first: position, next: position + 1 };
      bounds.first = Math.min(bounds.first, position);
      bounds.next = Math.max(bounds.next, position + 1);
      gens.set(generation, bounds);
      if (value?.wrapper.type === 'chat.writer-fence') epoch = Math.max(epoch, Number(value.wrapper.fence.epoch));
      if (value?.wrapper.type === 'chat.message') meta.lastCreatedAt = value.wrapper.message.signature.createdAt;
    }
    const sealedAt = new Date().toISOString();
    const ordered = [...gens.entries()].sort((a, b) => a[0] - b[0]);
    const reason = 'rebuilt from records after the head failed its checksum';
    for (const [generation, b] of ordered) {
      meta.sealed.push({ generation, firstPosition: b.first, nextPosition: b.next, sealedAt, reason });
    }
    const last = ordered.at(-1);
    meta.generation = last ? last[0] : 1;
    meta.firstPosition = last ? last[1].first : 0;
    meta.nextPosition = last ? last[1].next : 0;
    meta.writer = { epoch: epoch + 1, claimedAt: null, active: false, tokenHash: null };
    this.#integrity.narrowHeadMark(streamId, meta.generation, meta.nextPosition);
    this.#heads.setAdmitted(meta);
    return meta;
  }
}
