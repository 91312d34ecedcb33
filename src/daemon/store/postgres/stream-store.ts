// The streams half of the storage port on PostgreSQL (issue 24 item 2), the façade of its parts:
// the kernel (port/stream-kernel.ts) admits; the heads in memory are a cache (head-cache.ts) kept
// current by the notice feed (stream-notices.ts); the group commit (pg-group-commit.ts) runs one
// transaction at a time (stream-transaction.ts), each change carrying the head it was decided on
// as a precondition. A transaction without a verdict makes the store read-only until `recover()`
// reloaded the heads; its operations are `pending` while its session may still commit.

import type { Logger } from 'pino';
import { PG_WAITS, type PgWaits } from './retry.js';
import { StoreGate } from '../port/gate.js';
import { StreamKernel, type Enqueued } from '../port/stream-kernel.js';
import type {
  ChangeAdmission,
  CommitOutcome,
  OperationStatus,
  OpLogEntry,
  StoredRecordAt,
  StreamChange,
  StreamIdentity,
  SweepResult,
} from '../port/stream-port.js';
import type { StoredOperation, StoredRecord, StreamMeta } from '../port/values.js';
import type { Sql } from './connection.js';
import { HeadCache } from './head-cache.js';
import { KnownIds } from './known-ids.js';
import { headDigest, STREAMS_CHANNEL, type HeadNotice } from './notices.js';
import { PgGroupCommit } from './pg-group-commit.js';
import { NoticeFeed } from './stream-notices.js';
import { StreamReads } from './stream-reads.js';
import { insertHead, selectStreamIds, STREAM_IDS_PAGE, SWEEP_BATCH, sweepBelow } from './stream-statements.js';
import { bodyOf, StreamTransactions, type Admitted } from './stream-transaction.js';
import { UnknownOutcomes } from './unknown-outcomes.js';

export { headDigest, STREAMS_CHANNEL, type HeadNotice };

/** A change of a group commit and what became of it (`onGroupCommit`). */
export interface SettledChange {
  change: StreamChange;
  outcome: CommitOutcome;
}

export interface PostgresStreamsOptions {
  log?: Logger;
  /** The store's gate, shared with its directory (default: one of its own). */
  gate?: StoreGate;
  /** How long it waits on PostgreSQL (default PG_WAITS). */
  waits?: PgWaits;
}

const noop = (): void => {};

export class PostgresStreams extends StreamKernel<Admitted> {
  readonly #sql: Sql;
  readonly #reads: StreamReads;
  readonly #heads: HeadCache;
  readonly #feed: NoticeFeed;
  readonly #known: KnownIds;
  readonly #commits: PgGroupCommit<Admitted, CommitOutcome>;
  readonly #transactions: StreamTransactions;
  readonly #unknown: UnknownOutcomes;
  /** Opened alone (a tool, a test's writer), not by a store: recover() lets writes in again itself. */
  #ownsGate = false;
  readonly #deniedListeners: Array<(admission: ChangeAdmission, peerAgentId: string) => void> = [];
  readonly #groupListeners: Array<(settled: ReadonlyArray<SettledChange>, seconds: number) => void> = [];

  private constructor(sql: Sql, gate: StoreGate, options: PostgresStreamsOptions) {
    super(gate);
    this.#sql = sql;
    this.#reads = new StreamReads(sql);
    this.#heads = new HeadCache(sql);
    this.#known = new KnownIds(sql);
    this.#unknown = new UnknownOutcomes(sql);
    this.#feed = new NoticeFeed(sql, this.#heads, {
      log: options.log,
      closing: () => this.gate.closing,
    });
    const transactions = (this.#transactions = new StreamTransactions(sql, {
      denied: (c, reason) => this.#denied(c, reason),
      noteStale: this.#heads.noteStale.bind(this.#heads),
    }));
    this.#commits = new PgGroupCommit<Admitted, CommitOutcome>({
      half: 'stream',
      gate,
      log: options.log,
      deadline: true,
      waits: options.waits ?? PG_WAITS,
      // The signatures of the group's records; a failed one fails the transaction (unknown).
      before: async (group) => {
        for (const g of group) if (g.change.kind === 'append' && g.change.ready) await g.change.ready.catch(noop);
      },
      transact: (group, onSession) => transactions.transact(group, onSession),
      unknown: (error) => ({ status: 'unknown', error }),
      noVerdict: (group, what) => {
        const ops = group.flatMap((g) =>
          g.change.kind === 'append' ? [{ streamId: g.change.next.streamId, operationId: g.change.operation.operationId }] : [],
        );
        this.#unknown.add(ops, what.error, what.session, what.stillOut);
      },
      settle: (g, outcome) => {
        this.#settle(g, outcome);
      },
    });
    this.#commits.onCommit((group, outcomes, seconds) => {
      const settled = group.map((g, i): SettledChange => ({
        change: g.change,
        outcome: outcomes[i] ?? { status: 'unknown', error: new Error('no outcome') },
      }));
      for (const l of this.#groupListeners) l(settled, seconds);
    });
  }

  /** Load every head (the cache the daemon decides on) and listen for other daemons' commits. */
  static async open(sql: Sql, options: PostgresStreamsOptions = {}): Promise<PostgresStreams> {
    const s = new PostgresStreams(sql, options.gate ?? new StoreGate('reconnect'), options);
    s.#ownsGate = options.gate === undefined;
    await s.#heads.load();
    await s.#feed.listen();
    return s;
  }

  /** Group commits and the changes in them, since open. */
  get stats(): { batches: number; writes: number } {
    return this.#commits.stats;
  }

  /**
   * Heads moved by commits (this daemon's and the others'), after the cached head was
   * refreshed: what wakes live followers on every daemon. Ends with `close()`.
   */
  changes(): AsyncIterable<HeadNotice> {
    return this.#feed.changes();
  }

  // ---- heads ----------------------------------------------------------------------------------

  protected _head(streamId: string): StreamMeta | undefined {
    return this.#heads.get(streamId);
  }

  /** The head as the database has it now (another daemon's commit whose notice has not come yet). */
  async reloadHead(streamId: string): Promise<void> {
    this.gate.assertOpen();
    await this.#heads.refresh(streamId);
  }

  /** Head and records are written in one transaction: there is no head to vouch for. */
  verifyHead(): null {
    return null;
  }

  protected async *_streamIds(): AsyncIterable<string> {
    let after = '';
    for (;;) {
      const ids = await selectStreamIds(this.#sql, after);
      yield* ids;
      const last = ids.at(-1);
      if (last === undefined || ids.length < STREAM_IDS_PAGE) return;
      after = last;
    }
  }

  /**
   * New streams (a chat's two heads, generation 1, empty), or nothing when any exists. Used by
   * the directory's createChat in its own transaction; here for the streams' tests and tools.
   */
  async createStreams(heads: readonly StreamMeta[]): Promise<'ok' | 'exists'> {
    this.gate.assertWritable();
    const created = await this.#sql
      .begin(async (tx) => {
        for (const h of heads) await insertHead(tx, h);
        return true;
      })
      .catch((err: unknown) => {
        // A head of them is stored already (unique violation): nothing of this was written.
        if ((err as { code?: string }).code === '23505') return false;
        throw err;
      });
    if (!created) return 'exists';
    for (const h of heads) this.#heads.set(h.streamId, h);
    return 'ok';
  }

  /**
   * Heads committed outside this class (the directory's createChat writes a chat's two heads in
   * its own transaction, or another daemon's chat was loaded): cache them unless a newer one is known.
   */
  learnHeads(heads: readonly StreamMeta[]): void {
    this.#heads.learn(heads);
  }

  // ---- admission lookups ----------------------------------------------------------------------

  readonly lookupsNeedPrepare = true;

  prepare(streamId: string, operationId: string, clientMessageIds: readonly string[]): Promise<void> {
    const generation = this.head(streamId, 'admitted')?.generation ?? 1;
    return this.#known.prepare(streamId, generation, operationId, clientMessageIds);
  }

  protected _operation(streamId: string, operationId: string): StoredOperation | undefined {
    return this.#known.operation(streamId, operationId);
  }

  protected _messagePosition(streamId: string, generation: number, clientMessageId: string): number | undefined {
    return this.#known.messagePosition(streamId, generation, clientMessageId);
  }

  // ---- commits ---------------------------------------------------------------------------------

  /** Queue an admitted change for the group commit; it requires the exact head it was decided on. */
  protected _enqueue(change: StreamChange, _previous: StreamMeta | undefined, prior: Admitted | undefined): Enqueued<Admitted> {
    let resolve!: (o: CommitOutcome) => void;
    const done = new Promise<CommitOutcome>((r) => (resolve = r));
    const admitted: Admitted = { change, resolve, done, after: prior ?? this.#heads.body(change.next.streamId) ?? '' };
    this.#commits.push(admitted);
    return { entry: admitted, outcome: done };
  }

  #settle(g: Admitted, outcome: CommitOutcome): void {
    const c = g.change;
    const streamId = c.next.streamId;
    this.#heads.bump(streamId);
    const staleBody = this.#heads.takeStale(streamId);
    if (outcome.status === 'ok') {
      this.#heads.set(streamId, c.next, bodyOf(g));
      if (c.kind === 'append') this.#known.committed(c);
    } else if (outcome.status === 'stale') this.#heads.set(streamId, outcome.head, outcome.head ? staleBody : undefined);
    g.resolve(outcome);
  }

  /**
   * A change the directory denied in its transaction: told to the directory (`onDenied`), whose
   * rows of that session and grant are older than the database's (a revocation through another
   * daemon not heard yet), so that it reads them again.
   */
  #denied(c: StreamChange, reason: 'session' | 'grant'): CommitOutcome {
    const admission = c.kind === 'append' || c.kind === 'claim' || c.kind === 'release' ? c.admission : undefined;
    if (admission) for (const l of this.#deniedListeners) l(admission, c.next.peerAgentId);
    return { status: 'denied', reason };
  }

  /** Called with the admission of each change the database denied (the store reloads the directory's rows of it). */
  onDenied(listener: (admission: ChangeAdmission, peerAgentId: string) => void): void {
    this.#deniedListeners.push(listener);
  }

  /**
   * Called after each group commit with every change of the group and its outcome, and the
   * seconds the transaction took: the store keeps its counts, stats and failure listeners from it.
   */
  onGroupCommit(listener: (settled: ReadonlyArray<SettledChange>, seconds: number) => void): void {
    this.#groupListeners.push(listener);
  }

  /**
   * After an unknown outcome, once the database answers again: reload every head and accept
   * writes again. Throws while the database is unreachable (the store stays read-only).
   */
  async recover(): Promise<void> {
    await this.#commits.settledForRecovery();
    // Reloaded after notices may have been lost: only the tables say what is current.
    await this.#heads.load();
    this.#known.clear();
    // A store lets writes in once both its halves reloaded (store.ts); alone, this is the whole store.
    if (this.#ownsGate) this.gate.recovered();
  }

  // ---- reads ------------------------------------------------------------------------------------

  protected async *_records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    options: { reverse?: boolean; limit?: number },
  ): AsyncIterable<StoredRecordAt> {
    yield* this.#reads.records(stream, generation, from, end, options);
  }

  protected _record(stream: StreamIdentity, generation: number, position: number): Promise<StoredRecord | undefined> {
    return this.#reads.record(stream, generation, position);
  }

  protected _allRecords(stream: StreamIdentity): AsyncIterable<{ generation: number; position: number; record: StoredRecord | undefined }> {
    return this.#reads.allRecords(stream);
  }

  protected async _operationStatus(streamId: string, operationId: string): Promise<OperationStatus> {
    if (await this.#unknown.pending(streamId, operationId)) return { state: 'pending' };
    const op = await this._findOperation(streamId, operationId);
    return op ? { state: 'committed', operation: op } : { state: 'absent' };
  }

  protected _findOperation(streamId: string, operationId: string): Promise<StoredOperation | undefined> {
    return this.#reads.findOperation(streamId, operationId);
  }

  protected _opLog(
    streamId: string,
    range: { after?: { generation: number; position: number }; before?: { generation: number; position: number }; limit?: number },
  ): AsyncIterable<OpLogEntry> {
    return this.#reads.opLog(streamId, range);
  }

  protected _operationIds(streamId: string): AsyncIterable<string> {
    return this.#reads.operationIds(streamId);
  }

  protected _messageIds(streamId: string, generation: number): AsyncIterable<string> {
    return this.#reads.messageIds(streamId, generation);
  }

  // ---- housekeeping -----------------------------------------------------------------------------

  /** What a trim left behind, in bounded steps (SWEEP_BATCH rows of each table a transaction), as LevelDB sweeps. */
  protected async _sweepTrimmed(streamId: string, generation: number, firstPosition: number): Promise<SweepResult> {
    const swept: SweepResult = { records: 0, operations: 0, messageIds: 0 };
    for (;;) {
      const step = await this.#sql.begin((tx) => sweepBelow(tx, streamId, generation, firstPosition));
      swept.records += step.records;
      swept.operations += step.operations;
      swept.messageIds += step.messageIds;
      if (step.records < SWEEP_BATCH && step.operations < SWEEP_BATCH && step.messageIds < SWEEP_BATCH) break;
    }
    // What prepare() fetched may name what was just deleted; the next prepare() fetches again.
    this.#known.forget(streamId);
    return swept;
  }

  protected _approximateBytes(streamId: string): Promise<number> {
    return this.#reads.approximateBytes(streamId);
  }

  /** Wait for admitted changes to settle, stop listening; the pool is the caller's to end. */
  async close(): Promise<void> {
    this.gate.close();
    await this.#commits.drained();
    this.#transactions.close();
    await this.#feed.end();
  }
}
