// The streams half of the port's kernel (the abstract-level manner: `put()` checks, `_put()`
// writes). What every backend must do alike is done here, once: the gate on every read and write,
// the head precondition match, the uniqueness order (operation id before client message ids), the
// pending overlay of admitted heads, operations and message ids, and the durable promises. An
// adapter implements only its committed reads (`_head`, `_operation`, …) and `_enqueue`, which
// hands an admitted change to its group commit (port/group-commit.ts).

import type {
  Admission,
  CommitOutcome,
  HeadPrecondition,
  OperationStatus,
  OpLogEntry,
  StoredRecordAt,
  StreamChange,
  StreamIdentity,
  StreamPort,
  SweepResult,
} from './stream-port.js';
import { rejected, type StoreGate } from './gate.js';
import { Pending } from './pending.js';
import type { StoredOperation, StoredRecord, StreamMeta } from './values.js';

/** A trim's commit deletes at most this many records of the trimmed prefix; the sweep deletes the rest, in batches as large. */
export const TRIM_DELETE_BATCH = 10_000;

/** Whether `head` is the one a change was decided on. */
export function matches(head: StreamMeta | undefined, expect: HeadPrecondition): head is StreamMeta {
  return (
    head !== undefined &&
    head.generation === expect.generation &&
    head.nextPosition === expect.nextPosition &&
    head.writer.epoch === expect.writerEpoch
  );
}

/** An iterable whose iteration passes the gate first (no cost per item). */
function gated<T>(gate: StoreGate, make: () => AsyncIterable<T>): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]: () => {
      gate.assertOpen();
      return make()[Symbol.asyncIterator]();
    },
  };
}

const opKey = (streamId: string, operationId: string) => `${streamId}\n${operationId}`;
const msgKey = (streamId: string, generation: number, clientMessageId: string) => `${streamId}\n${generation}\n${clientMessageId}`;

/** What the adapter's group commit gives back for an admitted change. */
export interface Enqueued<Entry> {
  /** The adapter's own note of the change, handed back as `prior` to the next change of the stream admitted before it settled. */
  entry: Entry;
  /** Settles once the change's group commit did; rejects only for a programming error. */
  outcome: Promise<CommitOutcome>;
}

export abstract class StreamKernel<Entry = undefined> implements StreamPort {
  protected readonly gate: StoreGate;
  readonly #heads = new Pending<{ meta: StreamMeta; last: Entry }>();
  readonly #ops = new Pending<StoredOperation>();
  readonly #msgs = new Pending<number>();

  protected constructor(gate: StoreGate) {
    this.gate = gate;
  }

  // ---- what an adapter implements ------------------------------------------------------------

  /** The committed head (from the adapter's cache, or a synchronous read), or undefined. */
  protected abstract _head(streamId: string): StreamMeta | undefined;
  /** The committed head as cached, without reading (a reset of a head rebuilt because the stored one failed its check). */
  protected _cachedHead(streamId: string): StreamMeta | undefined {
    return this._head(streamId);
  }
  /** A committed operation as known synchronously (exact after `prepare` where lookups need it). */
  protected abstract _operation(streamId: string, operationId: string): StoredOperation | undefined;
  protected abstract _messagePosition(streamId: string, generation: number, clientMessageId: string): number | undefined;
  /**
   * Queue an admitted change for the group commit, synchronously (it throws only what the gate
   * would). `previous` is the admitted head it was decided on (for a reset without precondition:
   * the head cached, if any); `prior` the entry of the stream's change admitted before it and not
   * settled yet. The adapter updates its committed state before the outcome settles.
   */
  protected abstract _enqueue(change: StreamChange, previous: StreamMeta | undefined, prior: Entry | undefined): Enqueued<Entry>;
  /** `operations.get` of an id not pending here: an outcome still unknown is `pending`, else what the tables say. */
  protected abstract _operationStatus(streamId: string, operationId: string): Promise<OperationStatus>;
  protected abstract _streamIds(): AsyncIterable<string>;
  protected abstract _records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    options: { reverse?: boolean; limit?: number },
  ): AsyncIterable<StoredRecordAt>;
  protected abstract _record(stream: StreamIdentity, generation: number, position: number): Promise<StoredRecord | undefined>;
  protected abstract _allRecords(
    stream: StreamIdentity,
  ): AsyncIterable<{ generation: number; position: number; record: StoredRecord | undefined }>;
  protected abstract _findOperation(streamId: string, operationId: string): Promise<StoredOperation | undefined>;
  protected abstract _opLog(
    streamId: string,
    range: { after?: { generation: number; position: number }; before?: { generation: number; position: number }; limit?: number },
  ): AsyncIterable<OpLogEntry>;
  protected abstract _operationIds(streamId: string): AsyncIterable<string>;
  protected abstract _messageIds(streamId: string, generation: number): AsyncIterable<string>;
  protected abstract _sweepTrimmed(streamId: string, generation: number, firstPosition: number): Promise<SweepResult>;
  protected abstract _approximateBytes(streamId: string): Promise<number>;

  abstract verifyHead(meta: StreamMeta): { fromPosition: number; detail: string } | null;
  abstract readonly lookupsNeedPrepare: boolean;
  abstract prepare(streamId: string, operationId: string, clientMessageIds: readonly string[]): Promise<void> | null;

  // ---- heads ------------------------------------------------------------------------------------

  head(streamId: string, view: 'admitted' | 'committed'): StreamMeta | undefined {
    this.gate.assertOpen();
    if (view === 'admitted') {
      const p = this.#heads.get(streamId);
      if (p) return p.value.meta;
    }
    return this._head(streamId);
  }

  headPending(streamId: string): boolean {
    return this.#heads.has(streamId);
  }

  streamIds(): AsyncIterable<string> {
    return gated(this.gate, () => this._streamIds());
  }

  // ---- admission ------------------------------------------------------------------------------

  operation(streamId: string, operationId: string): StoredOperation | undefined {
    return this.#ops.get(opKey(streamId, operationId))?.value ?? this._operation(streamId, operationId);
  }

  messagePosition(streamId: string, generation: number, clientMessageId: string): number | undefined {
    return (
      this.#msgs.get(msgKey(streamId, generation, clientMessageId))?.value ?? this._messagePosition(streamId, generation, clientMessageId)
    );
  }

  // Synchronous: no await may come between a check here and the admission below (stream-port.ts).
  admit(change: StreamChange): Admission {
    this.gate.assertWritable(change.kind === 'append' ? change.operation.operationId : null);
    const streamId = change.next.streamId;
    const pending = this.#heads.get(streamId)?.value;
    let previous: StreamMeta | undefined;
    if (change.expect === null) previous = pending ? pending.meta : this._cachedHead(streamId);
    else {
      previous = pending ? pending.meta : this._head(streamId);
      if (!matches(previous, change.expect) || (change.kind === 'trim' && previous.firstPosition !== change.fromPosition))
        return { status: 'stale', head: previous };
    }
    if (change.kind === 'append') {
      const known = this.operation(streamId, change.operation.operationId);
      if (known !== undefined) return { status: 'duplicate', what: 'operation', operation: known };
      for (const [id] of change.messageIds) {
        const at = this.messagePosition(streamId, change.operation.generation, id);
        if (at !== undefined) return { status: 'duplicate', what: 'messageId', clientMessageId: id, position: at };
      }
    }
    const { entry, outcome } = this._enqueue(change, previous, pending?.last);
    const durable = outcome.then(
      (o) => {
        this.#settle(change);
        return o;
      },
      (err: unknown) => {
        this.#settle(change);
        throw err;
      },
    );
    this.#heads.add(streamId, { meta: change.next, last: entry }, durable);
    if (change.kind === 'append') {
      this.#ops.add(opKey(streamId, change.operation.operationId), change.operation, durable);
      for (const [id, position] of change.messageIds) this.#msgs.add(msgKey(streamId, change.operation.generation, id), position, durable);
    }
    return { status: 'admitted', durable };
  }

  #settle(change: StreamChange): void {
    const streamId = change.next.streamId;
    this.#heads.done(streamId);
    if (change.kind === 'append') {
      this.#ops.done(opKey(streamId, change.operation.operationId));
      for (const [id] of change.messageIds) this.#msgs.done(msgKey(streamId, change.operation.generation, id));
    }
  }

  headDurable(streamId: string): Promise<void> {
    return this.#heads.durable(streamId);
  }

  operationDurable(streamId: string, operationId: string): Promise<void> {
    return this.#ops.durable(opKey(streamId, operationId));
  }

  // ---- reads: gated, then the adapter's ---------------------------------------------------------

  records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    options: { reverse?: boolean; limit?: number } = {},
  ): AsyncIterable<StoredRecordAt> {
    return gated(this.gate, () => this._records(stream, generation, from, end, options));
  }

  record(stream: StreamIdentity, generation: number, position: number): Promise<StoredRecord | undefined> {
    return this.#read(() => this._record(stream, generation, position));
  }

  allRecords(stream: StreamIdentity): AsyncIterable<{ generation: number; position: number; record: StoredRecord | undefined }> {
    return gated(this.gate, () => this._allRecords(stream));
  }

  operationStatus(streamId: string, operationId: string): Promise<OperationStatus> {
    // Pending first: admitted and waiting for its commit. (LevelDB shows a batch to point reads a
    // moment before the outcome is published; "committed" from that would disagree with the head.)
    return this.#read(() =>
      this.#ops.has(opKey(streamId, operationId)) ? Promise.resolve({ state: 'pending' }) : this._operationStatus(streamId, operationId),
    );
  }

  findOperation(streamId: string, operationId: string): Promise<StoredOperation | undefined> {
    return this.#read(() => this._findOperation(streamId, operationId));
  }

  opLog(
    streamId: string,
    range: { after?: { generation: number; position: number }; before?: { generation: number; position: number }; limit?: number } = {},
  ): AsyncIterable<OpLogEntry> {
    return gated(this.gate, () => this._opLog(streamId, range));
  }

  operationIds(streamId: string): AsyncIterable<string> {
    return gated(this.gate, () => this._operationIds(streamId));
  }

  messageIds(streamId: string, generation: number): AsyncIterable<string> {
    return gated(this.gate, () => this._messageIds(streamId, generation));
  }

  sweepTrimmed(streamId: string, generation: number, firstPosition: number): Promise<SweepResult> {
    try {
      this.gate.assertWritable();
    } catch (err) {
      return rejected(err);
    }
    return this._sweepTrimmed(streamId, generation, firstPosition);
  }

  approximateBytes(streamId: string): Promise<number> {
    return this.#read(() => this._approximateBytes(streamId));
  }

  /** A read through the gate: its refusal as a rejection. */
  #read<T>(read: () => Promise<T>): Promise<T> {
    try {
      this.gate.assertOpen();
      return read();
    } catch (err) {
      return rejected(err);
    }
  }
}
