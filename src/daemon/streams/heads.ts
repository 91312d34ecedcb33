import { errors } from '../../shared/errors.js';
import { formatDecimal, splitStreamId } from '../../shared/ids.js';
import type { StoredRecord, StreamState } from '../../shared/types.js';
import type { Directory } from '../directory/directory.js';
import { isCorrupt, type Integrity } from '../store/integrity.js';
import { K, prefixEnd } from '../store/leveldb/key-layout.js';
import type { Storage, WriteOp } from '../store/leveldb/storage.js';
import { cloneMeta, peerStreamIdOf, publicStreamState, type StreamMeta } from '../store/stream-meta.js';
import type { StreamIdentity, StreamTables } from '../store/leveldb/stream-tables.js';
import type { Touch } from '../store/leveldb/wal-guard.js';
import type { WriterPresence } from './writer-presence.js';

/** A committed range of one stream, handed to subscribers in commit order. */
export interface CommittedRange {
  streamId: string;
  chatId: string;
  generation: number;
  fromPosition: number;
  nextPosition: number;
  records: StoredRecord[];
}

/** Listener for changes subscribers must hear about. */
export interface StreamEvents {
  committed(range: CommittedRange): void;
  /** A reset or trim: exact continuity may be impossible for readers of `streamId`. */
  discontinuity(streamId: string): void;
}

/** The records a head change writes, in one generation. */
export type RecordRange = Omit<CommittedRange, 'streamId' | 'chatId'>;

/**
 * The stream heads every part of the stream store shares, and the one way to change them.
 *
 * Two views of each head are cached: `admitted` (what the next write is checked against,
 * including writes not yet durable) and `committed` (what readers see). Admission is
 * synchronous from the first check to the queued write (`commit` sets the admitted head before
 * it awaits anything), so concurrent appends cannot both pass the same position check.
 *
 * The first load of a head in this process checks it against its records (`reconcile`): a
 * disagreement marks the stream corrupt, so nothing is written over a position that may hold an
 * acknowledged record.
 */
export class StreamHeads {
  readonly #storage: Storage;
  readonly #directory: Directory;
  readonly #integrity: Integrity;
  readonly #tables: StreamTables;
  readonly #presence: WriterPresence;
  readonly #admitted = new Map<string, StreamMeta>();
  readonly #committed = new Map<string, StreamMeta>();
  readonly #listeners: StreamEvents[] = [];
  /** Streams whose head was checked against its records in this process. */
  readonly #reconciled = new Set<string>();

  constructor(storage: Storage, directory: Directory, integrity: Integrity, tables: StreamTables, presence: WriterPresence) {
    this.#storage = storage;
    this.#presence = presence;
    this.#directory = directory;
    this.#integrity = integrity;
    this.#tables = tables;
    storage.onFailure(() => {
      this.#admitted.clear();
      this.#committed.clear();
    });
  }

  listen(listener: StreamEvents): void {
    this.#listeners.push(listener);
  }

  /** Tell subscribers that exact continuity may be gone for readers of `streamId`. */
  discontinuity(streamId: string): void {
    for (const l of this.#listeners) l.discontinuity(streamId);
  }

  /** Admitted head of a stream (what the next write is checked against), or undefined. */
  admitted(streamId: string): StreamMeta | undefined {
    let meta = this.#admitted.get(streamId);
    if (!meta) {
      meta = this.#load(streamId, true);
      if (!meta) return undefined;
      this.#admitted.set(streamId, meta);
    }
    return meta;
  }

  /** Committed head of a stream (what readers may see), or undefined. */
  committed(streamId: string): StreamMeta | undefined {
    let meta = this.#committed.get(streamId);
    if (!meta) {
      meta = this.#load(streamId, false);
      if (!meta) return undefined;
      this.#committed.set(streamId, meta);
    }
    return meta;
  }

  /** The admitted head, or NOT_FOUND. */
  requireAdmitted(streamId: string): StreamMeta {
    const meta = this.admitted(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    return meta;
  }

  /** The head to write to: it exists and no corruption mark covers it. */
  writable(streamId: string, operationId: string | null = null): StreamMeta {
    const meta = this.requireAdmitted(streamId);
    this.#integrity.assertWritable(streamId, meta.generation, operationId);
    return meta;
  }

  /** Chat, author and peer of a stream, which its stored records do not repeat. */
  identity(streamId: string): StreamIdentity {
    const meta = this.#committed.get(streamId) ?? this.#admitted.get(streamId) ?? this.committed(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    return meta;
  }

  /** Public state, with the peer's receipt as `acknowledged` and a mark of the current generation as `corruptFrom`. */
  state(meta: StreamMeta): StreamState {
    const state = publicStreamState(meta, this.committed(peerStreamIdOf(meta)), this.#presence.connected(meta));
    const limit = this.#integrity.readLimit(meta.streamId, meta.generation);
    return Number.isFinite(limit) ? { ...state, corruptFrom: formatDecimal(limit) } : state;
  }

  /** Take a head rebuilt from its records as the admitted one (retention.ts). */
  setAdmitted(meta: StreamMeta): void {
    this.#admitted.set(meta.streamId, meta);
  }

  /** Publish a head as committed whatever the committed view holds (a reset moves it past every mark). */
  setCommitted(meta: StreamMeta): void {
    this.#committed.set(meta.streamId, cloneMeta(meta));
  }

  /**
   * Admit a new head: cache it as admitted, persist it with its records, publish it as
   * committed once durable, then tell subscribers. Everything before the first `await` runs in
   * the caller's turn, so the caller's checks and this admission are one synchronous step.
   */
  async commit(next: StreamMeta, ops: WriteOp[], range?: RecordRange, ready: Promise<void> | null = null): Promise<void> {
    const previous = this.#admitted.get(next.streamId);
    // Where the stream stood before this write, for the log guard: anything lost lies past it.
    const touch: Touch = {
      streamId: next.streamId,
      generation: next.generation,
      position: previous && previous.generation === next.generation ? previous.nextPosition : next.firstPosition,
    };
    this.#admitted.set(next.streamId, next);
    ops.push(...this.#tables.headOps(next, previous));
    const snapshot = cloneMeta(next);
    if (range) for (const r of range.records) ops.push(this.#tables.recordOp(next, r, range.generation, Number(r.position)));
    await this.#storage.write(ops, [touch], ready);
    const current = this.#committed.get(next.streamId);
    // Commits of one stream complete in admission order; never move the committed view back.
    if (!current || current.generation < snapshot.generation || current.nextPosition <= snapshot.nextPosition) {
      this.#committed.set(next.streamId, snapshot);
    }
    if (range && range.records.length > 0) {
      const full: CommittedRange = { ...range, streamId: next.streamId, chatId: next.chatId };
      for (const l of this.#listeners) l.committed(full);
    }
  }

  /**
   * Check every stored head against its records in the background (startup), so corruption is
   * listed before traffic finds it. Heads are not cached by this: idle memory stays small.
   */
  async reconcileAll(): Promise<void> {
    let n = 0;
    for await (const { key } of this.#storage.entriesChecked<unknown>({ gte: K.streamsPrefix, lt: prefixEnd(K.streamsPrefix) })) {
      const streamId = key.slice(K.streamsPrefix.length);
      if (!this.#reconciled.has(streamId)) {
        try {
          this.#load(streamId, false);
        } catch (err) {
          if (!isCorrupt(err)) throw err;
        }
      }
      // Yield now and then: the sweep must not hold the event loop.
      if (++n % 64 === 0) await new Promise<void>((r) => setImmediate(r));
    }
  }

  /** Read a head; an unreadable one marks the whole stream corrupt. The first load checks it. */
  #load(streamId: string, admitted: boolean): StreamMeta | undefined {
    const key = K.stream(streamId);
    let meta: StreamMeta | undefined;
    try {
      meta = this.#tables.head(streamId, admitted);
    } catch (err) {
      if (!isCorrupt(err)) throw err;
      const detail = `the stream head fails its check (${String(err.details.detail)})`;
      throw this.#integrity.mark({ streamId, generation: null, fromPosition: 0, detail });
    }
    if (meta && !this.#tables.headPending(streamId)) this.#reconcile(meta);
    if (!meta && this.#headBelongsToChat(streamId)) {
      // Both heads are written with the chat, in one batch: a chat without one lost it.
      const detail = `the stream head (${key}) is missing, though its chat exists`;
      throw this.#integrity.mark({ streamId, generation: null, fromPosition: 0, detail });
    }
    // A stream the log guard says was written, whose head (and chat) a log loss took: corrupt,
    // not missing — its acknowledged records may exist, or may be what was lost.
    if (!meta) this.#integrity.assertIntact(streamId);
    return meta;
  }

  /** Whether the stream's chat exists and the author is one of its two agents. */
  #headBelongsToChat(streamId: string): boolean {
    const parts = splitStreamId(streamId);
    if (!parts) return false;
    const chat = this.#directory.chatRow(parts.chatId);
    return chat !== undefined && (chat.agentAId === parts.authorAgentId || chat.agentBId === parts.authorAgentId);
  }

  /**
   * Check a committed head against its records, once per process and with point reads only:
   * the last record the head claims exists, names its position and an operation that covers
   * it; nothing lies at or past the head, nor in a later generation. A disagreement marks the
   * stream corrupt, so no append is ever written over a position that may hold an
   * acknowledged record.
   */
  #reconcile(meta: StreamMeta): void {
    const { streamId, generation, firstPosition, nextPosition } = meta;
    if (this.#reconciled.has(streamId)) return;
    this.#reconciled.add(streamId);
    const mark = (fromPosition: number, detail: string) => this.#integrity.mark({ streamId, generation, fromPosition, detail });
    const read = <T>(get: () => T | undefined): T | undefined | 'corrupt' => {
      try {
        return get();
      } catch (err) {
        if (isCorrupt(err)) return 'corrupt';
        throw err;
      }
    };
    if (nextPosition > firstPosition) {
      const at = nextPosition - 1;
      const last = read(() => this.#tables.record(meta, generation, at));
      if (last === 'corrupt') return void mark(at, `the head's last record (position ${at}) fails its checksum`);
      if (last === undefined) return void mark(at, `the head says records end at ${nextPosition}, but position ${at} is missing`);
      if (last.position !== formatDecimal(at) || last.streamId !== streamId || last.generation !== formatDecimal(generation)) {
        return void mark(at, `the record stored at position ${at} names another place`);
      }
      if (last.wrapper.type !== 'chat.writer-fence') {
        const op = read(() => this.#tables.operation(streamId, last.wrapper.operationId));
        if (op === 'corrupt' || op === undefined || op.generation !== generation || op.firstPosition > at || op.nextPosition <= at) {
          return void mark(
            at,
            `the operation of the last record (${last.wrapper.operationId}) is missing or does not cover position ${at}`,
          );
        }
      }
    }
    const past = read(() => this.#tables.record(meta, generation, nextPosition));
    if (past !== undefined)
      return void mark(nextPosition, `a record lies at position ${nextPosition}, past the head: the head is behind its records`);
    const later = read(() => this.#tables.record(meta, generation + 1, 0));
    if (later !== undefined)
      return void mark(nextPosition, `records of generation ${generation + 1} exist, but the head is at generation ${generation}`);
  }
}
