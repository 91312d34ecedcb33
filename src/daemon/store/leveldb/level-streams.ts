import { YelloError } from '../../../shared/errors.js';
import { formatDecimal } from '../../../shared/ids.js';
import { rejected } from '../port/gate.js';
import { StreamKernel, TRIM_DELETE_BATCH, type Enqueued } from '../port/stream-kernel.js';
import type { StoredRecord } from '../../../shared/types.js';
import { isCorrupt } from '../integrity.js';
import type {
  CommitOutcome,
  OpLogEntry,
  OperationStatus,
  StoredRecordAt,
  StreamChange,
  StreamIdentity,
  SweepResult,
} from '../port/stream-port.js';
import { expandRecord, type CompactRecord, type StoredOperation } from '../record-layout.js';
import { cloneMeta, type StreamMeta } from '../stream-meta.js';
import type { Counters } from './counters.js';
import { K, prefixEnd } from './key-layout.js';
import { sweepTrimmed } from './level-sweep.js';
import { NegativeIndexes } from './negative-index.js';
import type { Storage, WriteOp } from './storage.js';
import { placeOf, type StreamTables } from './stream-tables.js';
import type { Touch } from './wal-guard.js';

/** Records deleted per batch when trimming, so a huge trim never builds one giant batch. */
const TRIM_CHUNK = TRIM_DELETE_BATCH;
/** Trims at least this large are followed by a LevelDB compaction of the stream's records. */
const COMPACT_AFTER = 10_000;

/**
 * The stream port on one local LevelDB (store/port/stream-port.ts): the committed reads and the
 * write batch of each admitted change; the admission is the port kernel's (stream-kernel.ts).
 *
 * One daemon owns the store, so the kernel's pending overlay over the committed tables is the
 * exact truth, and a change of the same turn as others joins their synced batch (Storage's group
 * commit). Committed heads are cached in memory, and dropped when a synced write fails (the store
 * is then read-only until restart). Lookups of operation ids and message ids skip the LevelDB
 * point read that almost always misses through a per-stream negative index.
 */
export class LevelStreams extends StreamKernel {
  readonly #storage: Storage;
  readonly #tables: StreamTables;
  readonly #counters: Counters;
  readonly #negative: NegativeIndexes;
  readonly #committed = new Map<string, StreamMeta>();
  /** Streams whose last trim was large enough to compact their records after the sweep. */
  readonly #compactAfterSweep = new Set<string>();

  constructor(storage: Storage, tables: StreamTables, counters: Counters) {
    super(storage.gate);
    this.#storage = storage;
    this.#tables = tables;
    this.#counters = counters;
    this.#negative = new NegativeIndexes(storage);
    storage.onFailure(() => {
      this.#committed.clear();
    });
  }

  /** Whether the stream's negative index is built (tests observe it instead of sleeping). */
  negativeIndexReady(streamId: string): boolean {
    return this.#negative.ready(streamId);
  }

  // ---- heads ----------------------------------------------------------------------------------

  protected _head(streamId: string): StreamMeta | undefined {
    let meta = this.#committed.get(streamId);
    if (!meta) {
      meta = this.#tables.head(streamId);
      if (!meta) return undefined;
      this.#committed.set(streamId, meta);
    }
    return meta;
  }

  /** Without reading: the stored head of a reset without precondition failed its check. */
  protected override _cachedHead(streamId: string): StreamMeta | undefined {
    return this.#committed.get(streamId);
  }

  verifyHead(meta: StreamMeta): { fromPosition: number; detail: string } | null {
    const { streamId, generation, firstPosition, nextPosition } = meta;
    const read = <T>(get: () => T | undefined): T | undefined | 'corrupt' => {
      try {
        return get();
      } catch (err) {
        if (isCorrupt(err)) return 'corrupt';
        throw err;
      }
    };
    const problem = (fromPosition: number, detail: string) => ({ fromPosition, detail });
    if (nextPosition > firstPosition) {
      const at = nextPosition - 1;
      const last = read(() => this.#tables.record(meta, generation, at));
      if (last === 'corrupt') return problem(at, `the head's last record (position ${at}) fails its checksum`);
      if (last === undefined) return problem(at, `the head says records end at ${nextPosition}, but position ${at} is missing`);
      if (last.position !== formatDecimal(at) || last.streamId !== streamId || last.generation !== formatDecimal(generation)) {
        return problem(at, `the record stored at position ${at} names another place`);
      }
      if (last.wrapper.type !== 'chat.writer-fence') {
        const op = read(() => this.#tables.operation(streamId, last.wrapper.operationId));
        if (op === 'corrupt' || op === undefined || op.generation !== generation || op.firstPosition > at || op.nextPosition <= at) {
          return problem(at, `the operation of the last record (${last.wrapper.operationId}) is missing or does not cover position ${at}`);
        }
      }
    }
    const past = read(() => this.#tables.record(meta, generation, nextPosition));
    if (past !== undefined)
      return problem(nextPosition, `a record lies at position ${nextPosition}, past the head: the head is behind its records`);
    const later = read(() => this.#tables.record(meta, generation + 1, 0));
    if (later !== undefined)
      return problem(nextPosition, `records of generation ${generation + 1} exist, but the head is at generation ${generation}`);
    return null;
  }

  protected async *_streamIds(): AsyncGenerator<string> {
    for await (const key of this.#storage.keys({ gte: K.streamsPrefix, lt: prefixEnd(K.streamsPrefix) })) {
      yield key.slice(K.streamsPrefix.length);
    }
  }

  // ---- admission lookups ----------------------------------------------------------------------

  readonly lookupsNeedPrepare = false;

  prepare(): null {
    return null;
  }

  protected _operation(streamId: string, operationId: string): StoredOperation | undefined {
    const meta = this._head(streamId);
    if (meta && !this.#negative.of(meta).mayHaveOperation(operationId)) return undefined;
    return this.#tables.operation(streamId, operationId);
  }

  protected _messagePosition(streamId: string, generation: number, clientMessageId: string): number | undefined {
    const meta = this._head(streamId);
    if (meta && !this.#negative.of(meta).mayHaveMessage(generation, clientMessageId)) return undefined;
    const stored = this.#storage.get<string>(K.messageId(streamId, generation, clientMessageId));
    return stored === undefined ? undefined : Number(stored);
  }

  // ---- commits --------------------------------------------------------------------------------

  /** The write batch of an admitted change, queued for the next synced batch. */
  protected _enqueue(change: StreamChange, previous: StreamMeta | undefined): Enqueued<undefined> {
    const { next } = change;
    const streamId = next.streamId;
    const ops: WriteOp[] = [];
    let records: StoredRecord[] = [];
    let ready: Promise<void> | null = null;
    switch (change.kind) {
      case 'append': {
        const { operation } = change;
        for (const [id, position] of change.messageIds) {
          ops.push({ type: 'put', key: K.messageId(streamId, operation.generation, id), value: formatDecimal(position) });
        }
        ops.push(this.#tables.operationOp(streamId, operation));
        ops.push({ type: 'put', key: K.opLog(streamId, operation.generation, operation.firstPosition), value: operation.operationId });
        // previous is defined: a matching precondition needs a head.
        const negative = this.#negative.of(previous ?? next);
        negative.operations.add(operation.operationId);
        for (const [id] of change.messageIds) negative.messages(operation.generation).add(id);
        records = change.records;
        ready = change.ready;
        this.#counters.records += records.length;
        ops.push(this.#counters.op());
        break;
      }
      case 'claim':
        records = [change.fence];
        this.#counters.records++;
        ops.push(this.#counters.op());
        break;
      case 'release':
      case 'reset':
        break;
      case 'trim': {
        const before = next.firstPosition;
        const end = Math.min(before, change.fromPosition + TRIM_CHUNK);
        for (let p = change.fromPosition; p < end; p++) ops.push({ type: 'del', key: K.record(streamId, next.generation, p) });
        this.#counters.records -= before - change.fromPosition;
        ops.push(this.#counters.op());
        if (before - change.fromPosition >= COMPACT_AFTER) this.#compactAfterSweep.add(streamId);
        break;
      }
    }
    // Where the stream stood before this write, for the log guard: anything lost lies past it.
    const touch: Touch = {
      streamId,
      generation: next.generation,
      position: previous && previous.generation === next.generation ? previous.nextPosition : next.firstPosition,
    };
    ops.push(...this.#tables.headOps(next, previous));
    const snapshot = cloneMeta(next);
    const from = change.expect?.nextPosition ?? next.firstPosition;
    records.forEach((r, i) => ops.push(this.#tables.recordOp(next, r, next.generation, from + i)));
    const outcome = this.#storage.write(ops, [touch], ready).then(
      (): CommitOutcome => {
        const current = this.#committed.get(streamId);
        // Commits of one stream complete in admission order; never move the committed view back
        // (a reset moves it past every mark, whatever it holds).
        if (
          change.kind === 'reset' ||
          !current ||
          current.generation < snapshot.generation ||
          current.nextPosition <= snapshot.nextPosition
        ) {
          this.#committed.set(streamId, snapshot);
        }
        return { status: 'ok' };
      },
      (err: unknown): CommitOutcome => {
        if (err instanceof YelloError && err.type === 'STORAGE_FAILURE') return { status: 'unknown', error: err };
        throw err;
      },
    );
    return { entry: undefined, outcome };
  }

  // ---- reads ----------------------------------------------------------------------------------

  protected async *_records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    options: { reverse?: boolean; limit?: number },
  ): AsyncGenerator<StoredRecordAt> {
    let left = options.limit ?? Infinity;
    if (left <= 0) return;
    for await (const r of this.#tables.records(stream, generation, from, end, options.reverse ?? false)) {
      yield r;
      if (--left <= 0) return;
    }
  }

  protected _record(stream: StreamIdentity, generation: number, position: number): Promise<StoredRecord | undefined> {
    try {
      return Promise.resolve(this.#tables.record(stream, generation, position));
    } catch (err) {
      return rejected(err);
    }
  }

  protected async *_allRecords(
    stream: StreamIdentity,
  ): AsyncGenerator<{ generation: number; position: number; record: StoredRecord | undefined }> {
    const prefix = K.recordsOfStream(stream.streamId);
    for await (const { key, value: stored } of this.#storage.entriesChecked<CompactRecord | StoredRecord>({
      gte: prefix,
      lt: prefixEnd(prefix),
    })) {
      const [, , g, pos] = key.split('/');
      const generation = Number(g);
      const position = Number(pos);
      let record: StoredRecord | undefined;
      try {
        record = stored === undefined ? undefined : expandRecord(stored, placeOf(stream, generation, position));
      } catch {
        record = undefined;
      }
      yield { generation, position, record };
    }
  }

  protected _operationStatus(streamId: string, operationId: string): Promise<OperationStatus> {
    // Its fsync failed: only a restart tells.
    if (this.#storage.inDoubt(K.operation(streamId, operationId))) return Promise.resolve({ state: 'pending' });
    return this._findOperation(streamId, operationId).then((operation) =>
      operation === undefined ? { state: 'absent' } : { state: 'committed', operation },
    );
  }

  protected _findOperation(streamId: string, operationId: string): Promise<StoredOperation | undefined> {
    try {
      return Promise.resolve(this.#tables.operation(streamId, operationId));
    } catch (err) {
      return rejected(err);
    }
  }

  protected async *_opLog(
    streamId: string,
    range: { after?: { generation: number; position: number }; before?: { generation: number; position: number }; limit?: number },
  ): AsyncGenerator<OpLogEntry> {
    const prefix = K.opLogPrefix(streamId);
    const start = range.after ? { gt: K.opLog(streamId, range.after.generation, range.after.position) } : { gte: prefix };
    const lt = range.before ? K.opLog(streamId, range.before.generation, range.before.position) : prefixEnd(prefix);
    const limit = range.limit;
    for await (const { key, value } of this.#storage.entries<string>({ ...start, lt, ...(limit !== undefined ? { limit } : {}) })) {
      const parts = key.split('/');
      yield { generation: Number(parts[parts.length - 2]), position: Number(parts[parts.length - 1]), operationId: value };
    }
  }

  protected async *_operationIds(streamId: string): AsyncGenerator<string> {
    const prefix = K.operationsPrefix(streamId);
    for await (const key of this.#storage.keys({ gte: prefix, lt: prefixEnd(prefix) })) yield key.slice(prefix.length);
  }

  protected async *_messageIds(streamId: string, generation: number): AsyncGenerator<string> {
    const prefix = K.messageIdsPrefix(streamId, generation);
    for await (const key of this.#storage.keys({ gte: prefix, lt: prefixEnd(prefix) })) yield key.slice(prefix.length);
  }

  // ---- housekeeping ---------------------------------------------------------------------------

  protected async _sweepTrimmed(streamId: string, generation: number, firstPosition: number): Promise<SweepResult> {
    const done = await sweepTrimmed(this.#storage, this.#tables, streamId, generation, firstPosition);
    if (this.#compactAfterSweep.delete(streamId)) {
      // Tombstones of a large trim would be skipped by every later scan until LevelDB gets to
      // them on its own; rewriting the stream's tables now gives the space back.
      const records = K.recordsOfStream(streamId);
      await this.#storage.compactRange(records, prefixEnd(records));
    }
    return done;
  }

  protected _approximateBytes(streamId: string): Promise<number> {
    const records = K.recordsOfStream(streamId);
    return this.#storage.approximateSize(records, prefixEnd(records));
  }
}
