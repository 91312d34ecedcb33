// The streams half of the storage port on PostgreSQL (issue 24 item 2). Several daemons write
// the same tables, so the heads in memory are a cache: a change is admitted against the cached
// head (two changes decided on one head are never both admitted here), and its commit carries
// the head it was decided on as a precondition, checked inside the transaction by a conditional
// UPDATE of the head row (which also row-locks it until COMMIT). One group's transaction is out
// at a time; the changes admitted meanwhile commit together in the next one, as one statement
// (group-statement.ts), so a change whose head
// moved (another daemon) is refused alone while the rest of the group commits, paying one fsync
// (and one round trip to the synchronous standby) for all of them; a change whose operation id
// or clientMessageId another daemon took first aborts that statement, and the group is redone
// with a savepoint per change, to refuse only that one.
//
// A transaction that fails without a verdict (the connection lost, COMMIT unanswered) is an
// unknown outcome for every change in it: the store turns read-only (writes refused, nothing
// retried silently) until `recover()` reloaded the heads after the reconnect; `operationStatus`
// answers `pending` for those operations while the old session may still be committing, and the
// truth from the tables once it is gone.

import type { Logger } from 'pino';
import postgres from 'postgres';
import { chainSettled, commitUnanswered, retryUntilDone, withinDeadline } from './retry.js';
import { StoreGate, writeFailed } from '../port/gate.js';
import { GroupCommit } from '../port/group-commit.js';
import { StreamKernel, type Enqueued } from '../port/stream-kernel.js';
import { expandOperation, type CompactOperation } from '../record-layout.js';
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
import { AdmissionLookups } from './admission-lookups.js';
import type { Sql } from './connection.js';
import { decodeRow, encodeRow, RowKey } from './row-codec.js';
import { StreamReads } from './stream-reads.js';
import { groupStatement, type Layered } from './group-statement.js';
import { headDigest, noticePayload, STREAMS_CHANNEL, type HeadNotice } from './notices.js';

export { headDigest, STREAMS_CHANNEL, type HeadNotice };

/** Streams whose latest notified records are kept for the followers' next read (8 KB each at most). */
const NOTICED_STREAMS = 256;

type TxSql = Parameters<Parameters<Sql['begin']>[1]>[0];

/** A change of a group commit and what became of it (`onGroupCommit`). */
export interface SettledChange {
  change: StreamChange;
  outcome: CommitOutcome;
}

/**
 * The server session a commit ran in: its pid, and when that server started (after a failover
 * the same pid on the promoted server is another session, never the one that was committing).
 */
interface Session {
  pid: number;
  serverStarted: string;
}

interface Admitted {
  change: StreamChange;
  resolve: (o: CommitOutcome) => void;
  done: Promise<CommitOutcome>;
  /**
   * The exact head the change was decided on, which the commit requires besides the numbers of
   * its precondition: the change admitted before it on this stream (its body, once built), or
   * the committed head's stored body ('' when not known: the numbers alone decide).
   */
  after: Admitted | string;
  /** The body of the head this change writes (built once, when its group is). */
  body?: string;
}

/** The stored body of the head a change writes. */
function bodyOf(g: Admitted): string {
  return (g.body ??= encodeRow(RowKey.head(g.change.next.streamId), g.change.next));
}

/** The body of the head a change was decided on ('' when not known). */
function afterOf(g: Admitted): string {
  return typeof g.after === 'string' ? g.after : bodyOf(g.after);
}

/** A change refused inside its savepoint; the savepoint is rolled back and the others go on. */
class Refusal extends Error {
  constructor(readonly outcome: CommitOutcome) {
    super('refused');
  }
}

const PAGE = 256;

// A failure of a statement of a transaction fails the transaction too: it is reported there.
const noop = (): void => {};

/**
 * Whether an error means the session is gone (no verdict on what it was doing), as opposed to
 * an error the server answered with (SQLSTATE other than connection or operator classes).
 */
function connectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57') || code.startsWith('58') || code.startsWith('XX');
}

/** Whether an error ended the session it came from (a driver error: the socket is gone; or FATAL). */
function sessionEnded(err: unknown): boolean {
  if (!(err instanceof postgres.PostgresError)) return true;
  return err.severity === 'FATAL' || err.severity === 'PANIC' || err.code.startsWith('08');
}

function decodeHead(streamId: string, body: string): StreamMeta {
  return decodeRow<StreamMeta>(RowKey.head(streamId), body, { streamId });
}

/**
 * What a stream's committed appends leave known, at most (the newest): a replay soon after its
 * commit (a client that resends after a lost answer) is answered from memory. Appends decide
 * without `prepare` first (appender.ts), so nothing else would ever empty it; what it forgot,
 * the lookup or the commit's unique keys find.
 */
const KNOWN_PER_STREAM = 256;

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > KNOWN_PER_STREAM) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
}

export interface PostgresStreamsOptions {
  log?: Logger;
  /** The store's gate, shared with its directory (default: one of its own). */
  gate?: StoreGate;
}

export class PostgresStreams extends StreamKernel<Admitted> {
  readonly #sql: Sql;
  readonly #lookups: AdmissionLookups;
  readonly #log: Logger | undefined;
  readonly #reads: StreamReads;
  readonly #committed = new Map<string, StreamMeta>();
  /** The stored body of each committed head (what a change decided on it requires). */
  readonly #bodies = new Map<string, string>();
  /**
   * Bumped by every settle of a stream and every head taken from a notice: a refresh read
   * before one is older than what it cached.
   */
  readonly #settles = new Map<string, number>();
  /** The stored body of the head a stale change found (read in its transaction), until it settles. */
  readonly #staleBodies = new Map<string, string>();
  /** What `prepare` fetched (and this process committed since), per stream. */
  readonly #known = new Map<string, { ops: Map<string, StoredOperation>; msgs: Map<string, number> }>();
  /** Per stream, its admission lookups in flight together, and whether one has answered. */
  readonly #lookupWaves = new Map<string, { outstanding: number; fresh: boolean }>();
  /** Operations whose commit's outcome is unknown, with the backend pid of that session. */
  readonly #unknownOps = new Map<string, Session | null>();
  readonly #groups = new GroupCommit<Admitted>((group) => this.#commitGroup(group));
  readonly #listeners = new Set<{ push: (n: HeadNotice) => void; end: () => void }>();
  /**
   * The record rows another daemon's latest notice of a stream carried, when that notice's head
   * was taken: what the followers of this daemon read next, answered without a round trip.
   * Oldest first (a Map keeps insertion order), at most NOTICED_STREAMS.
   */
  readonly #noticed = new Map<string, { generation: number; from: number; rows: Array<[number, string]> }>();
  #unlisten: (() => Promise<void>) | undefined;
  /** Group commits and the changes in them, since open. */
  readonly stats = { batches: 0, writes: 0 };

  private constructor(sql: Sql, gate: StoreGate, options: PostgresStreamsOptions) {
    super(gate);
    this.#sql = sql;
    this.#lookups = new AdmissionLookups(sql);
    this.#log = options.log;
    this.#reads = new StreamReads(sql);
  }

  /** Load every head (the cache the daemon decides on) and listen for other daemons' commits. */
  static async open(sql: Sql, options: PostgresStreamsOptions = {}): Promise<PostgresStreams> {
    const s = new PostgresStreams(sql, options.gate ?? new StoreGate('reconnect'), options);
    await s.#loadHeads();
    const listening = await sql.listen(
      STREAMS_CHANNEL,
      (payload) => {
        s.#onNotify(payload);
      },
      // Called again after every reconnect of the LISTEN connection (the driver re-listens by
      // itself): notifications sent while it was down are lost, so every head is read again and
      // each one that moved is told as its notice would have been (test/multi-host/listen-reconnect.test.ts).
      () => {
        if (s.#unlisten) s.#catchUp();
      },
    );
    s.#unlisten = () => listening.unlisten();
    return s;
  }

  /**
   * After a LISTEN reconnect: read every head, cache each that differs from the cached one, and
   * hand it to `changes()` like a notice, so followers and long polls read what they were not
   * told of and the store counts it. A head a commit of ours settled meanwhile is left alone (it
   * is at least as new). Retried with backoff while the database does not answer: until it is
   * done, this daemon may serve heads older than the database's.
   */
  #catchUp(): void {
    // A function: close() may begin during any await below.
    const closing = () => this.gate.closing;
    // Records kept from notices may have a gap after the lost ones: the next reads go to the table.
    this.#noticed.clear();
    const run = async (): Promise<void> => {
      const settles = new Map(this.#settles);
      const rows = await this.#sql<{ stream_id: string; meta: string }[]>`select stream_id, meta from heads`;
      for (const r of rows) {
        if (closing()) return;
        if ((this.#settles.get(r.stream_id) ?? 0) !== (settles.get(r.stream_id) ?? 0)) continue;
        if (this.#bodies.get(r.stream_id) === r.meta) continue;
        const meta = decodeHead(r.stream_id, r.meta);
        // A notice on the new session may have refreshed it to a later head while this read ran.
        const cached = this.#committed.get(r.stream_id);
        if (
          cached &&
          (cached.generation > meta.generation || (cached.generation === meta.generation && cached.nextPosition > meta.nextPosition))
        )
          continue;
        this.#setCommitted(r.stream_id, meta, r.meta);
        const n: HeadNotice = {
          streamId: r.stream_id,
          generation: meta.generation,
          nextPosition: meta.nextPosition,
          digest: headDigest(r.meta),
        };
        for (const l of this.#listeners) l.push(n);
      }
    };
    // The first read at once; then the store's one retry loop (retry.ts).
    void retryUntilDone({
      stopped: closing,
      attempt: run,
      failed: (err, attempt) =>
        // The code only: a server's message may quote data.
        this.#log?.warn(
          { err: { code: (err as { code?: string }).code }, attempt },
          'reading the heads again after a LISTEN reconnect failed; retrying',
        ),
    });
  }

  async #loadHeads(): Promise<void> {
    // Reloaded after notices may have been lost: only the tables say what is current.
    this.#noticed.clear();
    const rows = await this.#sql<{ stream_id: string; meta: string }[]>`select stream_id, meta from heads`;
    for (const r of rows) this.#setCommitted(r.stream_id, decodeHead(r.stream_id, r.meta), r.meta);
  }

  /** Cache a committed head with its stored body (encoded when not read from the table). */
  #setCommitted(streamId: string, meta: StreamMeta | undefined, body?: string): void {
    if (meta) {
      this.#committed.set(streamId, meta);
      this.#bodies.set(streamId, body ?? encodeRow(RowKey.head(streamId), meta));
    } else {
      this.#committed.delete(streamId);
      this.#bodies.delete(streamId);
    }
  }

  #onNotify(payload: string): void {
    let n: HeadNotice;
    try {
      n = JSON.parse(payload) as HeadNotice;
    } catch {
      return;
    }
    const cached = this.#committed.get(n.streamId);
    const body = this.#bodies.get(n.streamId);
    const known = body === undefined ? undefined : headDigest(body);
    const stale =
      n.digest !== undefined
        ? known === undefined || known !== n.digest
        : !cached || cached.generation < n.generation || (cached.generation === n.generation && cached.nextPosition < n.nextPosition);
    const { meta, records, ...notice } = n;
    this.#noticed.delete(n.streamId);
    if (stale && this.#takeHead(notice, meta, known)) {
      // Records of our own commits (their notice can come before their answer) are read from
      // the table: what is kept here is for the followers of other daemons' appends.
      if (!this.headPending(n.streamId)) this.#keepNoticed(notice, records);
      for (const l of this.#listeners) l.push(notice);
      return;
    }
    const refresh = stale ? this.#refreshHead(n.streamId) : Promise.resolve();
    void refresh.then(
      () => {
        for (const l of this.#listeners) l.push(notice);
      },
      (err: unknown) =>
        // The code only: a server's message may quote data.
        this.#log?.warn(
          { err: { code: (err as { code?: string }).code }, streamId: n.streamId },
          'refreshing a head after a notice failed',
        ),
    );
  }

  /**
   * Cache the head a notice carries, when it is the very next change of the cached one (its
   * `prev` is the cached body's digest) and its body checks out: no read then. Notices arrive
   * in commit order, so a notice whose `prev` is not the cached head (one of ours settled
   * before an earlier notice arrived, notices lost with a LISTEN connection) is read instead,
   * as is one without its body (too long for a notice). Returns whether it took the head.
   */
  #takeHead(n: HeadNotice, meta: string | undefined, known: string | undefined): boolean {
    if (meta === undefined || n.prev === undefined || n.prev !== known || typeof meta !== 'string') return false;
    if (n.digest !== undefined && headDigest(meta) !== n.digest) return false;
    let head: StreamMeta;
    try {
      head = decodeHead(n.streamId, meta);
    } catch {
      return false;
    }
    if (head.streamId !== n.streamId || head.generation !== n.generation || head.nextPosition !== n.nextPosition) return false;
    // A refresh read before this is older than this head: it must not overwrite it.
    this.#settles.set(n.streamId, (this.#settles.get(n.streamId) ?? 0) + 1);
    this.#setCommitted(n.streamId, head, meta);
    return true;
  }

  /**
   * Keep the record rows of a notice whose head was taken when they are exactly the records
   * that head added to its generation ([from, nextPosition), in order). Their bodies are the
   * rows the notifying commit inserted; they are checked when read, like rows of the table.
   */
  #keepNoticed(n: HeadNotice, rows: unknown): void {
    if (!Array.isArray(rows) || rows.length === 0) return;
    const from = n.nextPosition - rows.length;
    const ok = rows.every((r: unknown, i) => Array.isArray(r) && r.length === 2 && r[0] === from + i && typeof r[1] === 'string');
    if (!ok) return;
    if (this.#noticed.size >= NOTICED_STREAMS) {
      const oldest = this.#noticed.keys().next().value;
      if (oldest !== undefined) this.#noticed.delete(oldest);
    }
    this.#noticed.set(n.streamId, { generation: n.generation, from, rows: rows as Array<[number, string]> });
  }

  async #refreshHead(streamId: string): Promise<StreamMeta | undefined> {
    const settles = this.#settles.get(streamId) ?? 0;
    const [row] = await this.#sql<{ meta: string }[]>`select meta from heads where stream_id = ${streamId}`;
    const meta = row ? decodeHead(streamId, row.meta) : undefined;
    // A commit of ours settled meanwhile knows a head at least as new; a change after it from
    // another daemon sends its own notice (and makes our next change stale, which reloads it).
    if ((this.#settles.get(streamId) ?? 0) === settles) this.#setCommitted(streamId, meta, row?.meta);
    return meta;
  }

  /**
   * Heads moved by commits (this daemon's and the others'), after the cached head was
   * refreshed: what wakes live followers on every daemon. Ends with `close()`.
   */
  changes(): AsyncIterable<HeadNotice> {
    const queue: HeadNotice[] = [];
    let wake: (() => void) | undefined;
    let ended = this.gate.closing;
    const listener = {
      push: (n: HeadNotice) => {
        queue.push(n);
        wake?.();
      },
      end: () => {
        ended = true;
        wake?.();
      },
    };
    this.#listeners.add(listener);
    const listeners = this.#listeners;
    return {
      async *[Symbol.asyncIterator]() {
        try {
          for (;;) {
            const n = queue.shift();
            if (n) yield n;
            else if (ended) return;
            else await new Promise<void>((r) => (wake = r));
          }
        } finally {
          listeners.delete(listener);
        }
      },
    };
  }

  // ---- heads ----------------------------------------------------------------------------------

  protected _head(streamId: string): StreamMeta | undefined {
    return this.#committed.get(streamId);
  }

  /** The head as the database has it now (another daemon's commit whose notice has not come yet). */
  async reloadHead(streamId: string): Promise<void> {
    this.gate.assertOpen();
    await this.#refreshHead(streamId);
  }

  /** Head and records are written in one transaction: there is no head to vouch for. */
  verifyHead(): null {
    return null;
  }

  protected async *_streamIds(): AsyncIterable<string> {
    let after = '';
    for (;;) {
      const rows = await this.#sql<{ stream_id: string }[]>`
        select stream_id from heads where stream_id > ${after} order by stream_id limit ${PAGE}`;
      for (const r of rows) yield r.stream_id;
      const last = rows.at(-1);
      if (!last || rows.length < PAGE) return;
      after = last.stream_id;
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
        for (const h of heads) {
          const rows = await tx`
          insert into heads (stream_id, chat_id, author, peer, generation, first_position, next_position, writer_epoch, meta)
          values (${h.streamId}, ${h.chatId}, ${h.authorAgentId}, ${h.peerAgentId}, ${h.generation}, ${h.firstPosition},
                  ${h.nextPosition}, ${h.writer.epoch}, ${encodeRow(RowKey.head(h.streamId), h)})
          on conflict (stream_id) do nothing`;
          if (rows.count === 0) throw new Refusal({ status: 'ok' });
        }
        return true;
      })
      .catch((err: unknown) => {
        if (err instanceof Refusal) return false;
        throw err;
      });
    if (!created) return 'exists';
    for (const h of heads) this.#setCommitted(h.streamId, h);
    return 'ok';
  }

  // ---- admission lookups ----------------------------------------------------------------------

  readonly lookupsNeedPrepare = true;

  prepare(streamId: string, operationId: string, clientMessageIds: readonly string[]): Promise<void> {
    const generation = this.head(streamId, 'admitted')?.generation ?? 1;
    let wave = this.#lookupWaves.get(streamId);
    if (!wave) {
      wave = { outstanding: 0, fresh: true };
      this.#lookupWaves.set(streamId, wave);
    }
    wave.outstanding++;
    const mine = wave;
    const settled = (): void => {
      if (--mine.outstanding === 0 && this.#lookupWaves.get(streamId) === mine) this.#lookupWaves.delete(streamId);
    };
    return this.#lookups.fetch({ streamId, operationId, generation, clientMessageIds }).then(
      (rows) => {
        settled();
        // The first answer of a wave (lookups of one stream in flight together) replaces what
        // is known of the stream, so it stays small and fresh; the others add to it: appends
        // whose answers come in one turn are admitted after all of them, and each must find
        // what it asked for.
        let known = this.#known.get(streamId);
        if (!known || mine.fresh) {
          known = { ops: new Map(), msgs: new Map() };
          this.#known.set(streamId, known);
          mine.fresh = false;
        }
        if (rows.op !== undefined)
          known.ops.set(
            operationId,
            expandOperation(operationId, decodeRow<CompactOperation>(RowKey.operation(streamId, operationId), rows.op, { streamId })),
          );
        for (const m of rows.msgs)
          known.msgs.set(
            `${generation}/${m.clientMessageId}`,
            decodeRow<number>(RowKey.messageId(streamId, generation, m.clientMessageId), m.body, { streamId, generation }),
          );
      },
      (err: unknown) => {
        settled();
        throw err;
      },
    );
  }

  protected _operation(streamId: string, operationId: string): StoredOperation | undefined {
    return this.#known.get(streamId)?.ops.get(operationId);
  }

  protected _messagePosition(streamId: string, generation: number, clientMessageId: string): number | undefined {
    return this.#known.get(streamId)?.msgs.get(`${generation}/${clientMessageId}`);
  }

  // ---- commits ---------------------------------------------------------------------------------

  /** Queue an admitted change for the group commit; it requires the exact head it was decided on. */
  protected _enqueue(change: StreamChange, _previous: StreamMeta | undefined, prior: Admitted | undefined): Enqueued<Admitted> {
    let resolve!: (o: CommitOutcome) => void;
    const done = new Promise<CommitOutcome>((r) => (resolve = r));
    const admitted: Admitted = { change, resolve, done, after: prior ?? this.#bodies.get(change.next.streamId) ?? '' };
    this.#groups.push(admitted);
    return { entry: admitted, outcome: done };
  }

  async #commitGroup(group: Admitted[]): Promise<void> {
    let outcomes: CommitOutcome[];
    let session: Session | null = null;
    const started = performance.now();
    for (const g of group) if (g.change.kind === 'append' && g.change.ready) await g.change.ready.catch(noop);
    const work = this.#transact(group, (s) => {
      session = s;
    });
    try {
      outcomes = await withinDeadline(work, 'a group commit');
    } catch (err) {
      // No verdict from the database: the transaction may or may not have committed (or commit
      // still, once a link cut without a word heals: its changes are checked then, in its statement).
      const error = writeFailed(`the commit to PostgreSQL failed: ${(err as Error).message}`);
      this.gate.fail();
      this.#log?.error(
        { err: { message: (err as Error).message, code: (err as { code?: string }).code } },
        'a PostgreSQL commit failed; its outcome is unknown; the store is read-only',
      );
      outcomes = group.map(() => ({ status: 'unknown', error }));
      // Only a lost session can still be committing: an error the server answered with means
      // the transaction was rolled back, and the tables already tell. A commit past its deadline
      // is still out: its operations are pending until it settles, whatever its session.
      const lost = connectionLost(err);
      const out = (err as { code?: string }).code === 'DEADLINE';
      const keys: string[] = [];
      for (const g of group)
        if (g.change.kind === 'append') {
          const key = `${g.change.next.streamId}/${g.change.operation.operationId}`;
          this.#unknownOps.set(key, lost ? session : null);
          if (out) keys.push(key);
        }
      if (out) {
        // Still out: recover() reloads the heads only after it settled; the callers do not wait.
        for (const key of keys) this.#stillOut.add(key);
        const settling: Promise<void> = work.then(noop, noop).finally(() => {
          // Settled: the tables tell now (its session, alive in the pool, says nothing more).
          for (const key of keys) {
            this.#stillOut.delete(key);
            this.#unknownOps.delete(key);
          }
          this.#outstanding.delete(settling);
        });
        this.#outstanding.add(settling);
      }
    }
    this.stats.batches++;
    this.stats.writes += group.length;
    const settled = group.map((g, i): SettledChange => {
      const outcome = outcomes[i] ?? { status: 'unknown', error: new Error('no outcome') };
      this.#settle(g, outcome);
      return { change: g.change, outcome };
    });
    this.#notifyGroup(settled, (performance.now() - started) / 1000);
  }

  /** Operations of a commit answered past its deadline whose transaction has not settled yet (`pending`). */
  readonly #stillOut = new Set<string>();
  /** Those transactions, settling. */
  readonly #outstanding = new Set<Promise<void>>();

  /** Settles once the commit chain and every transaction answered past its deadline settled (one may join while it waits). */
  async #allSettled(): Promise<void> {
    await this.#groups.settled;
    while (this.#outstanding.size > 0) await Promise.all([...this.#outstanding]);
  }

  /** The group's transaction: the pipelined statement, or one savepoint a change; throws without a verdict. */
  async #transact(group: Admitted[], onSession: (s: Session | null) => void): Promise<CommitOutcome[]> {
    let outcomes: CommitOutcome[];
    {
      for (const g of group) if (g.change.kind === 'append' && g.change.ready) await g.change.ready;
      const fast = group.every((g) => g.change.expect !== null);
      const slow = async () =>
        this.#sql.begin(async (tx) => {
          // Not awaited: sent ahead of the group's statements on the same connection.
          const asked = tx<Session[]>`select pg_backend_pid() as pid, pg_postmaster_start_time()::text as "serverStarted"`.then(([p]) => {
            onSession(p ?? null);
          }, noop);
          // Each change notifies inside its savepoint: a refused one's notice is rolled back with it.
          const result = await this.#oneByOne(tx, group);
          await asked;
          return result;
        });
      if (!fast) outcomes = await slow();
      else
        try {
          outcomes = await this.#pipelined(group, onSession);
        } catch (err) {
          // A unique key another daemon took first aborted the pipelined transaction (the server
          // said so: nothing of it was written). Again, a savepoint each, to refuse only that change.
          if ((err as { code?: string }).code !== '23505') throw err;
          outcomes = await slow();
        }
    }
    return outcomes;
  }

  #settle(g: Admitted, outcome: CommitOutcome): void {
    const c = g.change;
    const streamId = c.next.streamId;
    this.#settles.set(streamId, (this.#settles.get(streamId) ?? 0) + 1);
    if (outcome.status === 'ok') {
      this.#setCommitted(streamId, c.next, bodyOf(g));
      if (c.kind === 'append') {
        const known = this.#known.get(streamId) ?? { ops: new Map<string, StoredOperation>(), msgs: new Map<string, number>() };
        remember(known.ops, c.operation.operationId, c.operation);
        for (const [id, pos] of c.messageIds) remember(known.msgs, `${c.next.generation}/${id}`, pos);
        this.#known.set(streamId, known);
      }
    } else if (outcome.status === 'stale') {
      this.#setCommitted(streamId, outcome.head, outcome.head ? this.#staleBodies.get(streamId) : undefined);
    }
    this.#staleBodies.delete(streamId);
    g.resolve(outcome);
  }

  /**
   * The fast path: the whole group as one statement per layer (a layer holds at most one change
   * of each stream; a second change of a stream in the same turn, decided on the first one's
   * head, goes in the next layer, which sees the first one's update), in one round trip: the
   * session's pid and the statement (one layer: its own transaction, autocommit), or the pid,
   * BEGIN, the layers and COMMIT, are written together on a connection reserved for the group
   * (postgres.js pipelines them), so a group of 64 appends costs one round trip and one fsync.
   * (sql.begin waits for BEGIN's answer, and for the statements' before COMMIT: three round
   * trips, each a wake-up of both processes on a loaded host.) A stale head matches no row and
   * writes nothing of its change (no error, no savepoint needed); a unique violation aborts the
   * transaction (a COMMIT then answers ROLLBACK), its error is thrown and the group is redone
   * one by one. Any other error is thrown as it is: the caller treats it as an unknown outcome,
   * as it did with sql.begin.
   */
  async #pipelined(group: Admitted[], onSession: (s: Session | null) => void): Promise<CommitOutcome[]> {
    const layers: Array<{ changes: Layered[]; at: number[] }> = [];
    const last = new Map<string, { depth: number; meta: string }>();
    for (const [i, g] of group.entries()) {
      const streamId = g.change.next.streamId;
      const before = last.get(streamId);
      const meta = bodyOf(g);
      const d = before ? before.depth + 1 : 0;
      last.set(streamId, { depth: d, meta });
      const layer = (layers[d] ??= { changes: [], at: [] });
      layer.changes.push({ change: g.change, meta, after: before?.meta ?? afterOf(g) });
      layer.at.push(i);
    }
    const w = await this.#sql.reserve();
    type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };
    // A query postgres.js holds back (the connection was busy: a statement described first, or
    // a socket write that filled the buffer) is never sent nor rejected once the session is
    // gone: the first error that ends the session settles whatever is still waiting.
    let ended!: (error: unknown) => void;
    const end = new Promise<Settled<never>>((r) => {
      ended = (error) => {
        r({ ok: false, error });
      };
    });
    const settle = <T>(p: PromiseLike<T>): Promise<Settled<T>> =>
      Promise.race([
        Promise.resolve(p).then(
          (value): Settled<T> => ({ ok: true, value }),
          (error: unknown): Settled<T> => {
            if (sessionEnded(error)) ended(error);
            return { ok: false, error };
          },
        ),
        end,
      ]);
    // Each query is executed as it is made (groupStatement does so too), so they go out in this
    // order. One layer (the usual group) is one statement, its own transaction (autocommit:
    // the whole statement commits, or none of it); more layers need BEGIN … COMMIT around them.
    const one = layers.length === 1;
    const asked = settle(w<Session[]>`select pg_backend_pid() as pid, pg_postmaster_start_time()::text as "serverStarted"`.execute());
    const begun = one ? null : settle(w`begin`.execute());
    const statements = layers.map((l) => settle(groupStatement(w, l.changes)));
    const committed = one ? null : settle(w`commit`.execute());
    const a = await asked;
    onSession(a.ok ? (a.value[0] ?? null) : null);
    const moved = await Promise.all(statements);
    const all: Settled<unknown>[] = [a, ...(begun ? [await begun] : []), ...moved, ...(committed ? [await committed] : [])];
    // A session that ended is among postgres.js's closed connections (or about to be):
    // releasing it would hand it to the pool as an open one.
    if (!all.some((x) => !x.ok && sessionEnded(x.error))) w.release();
    // The first error is the cause (those after it are 25P02, "transaction is aborted").
    for (const x of all) if (!x.ok) throw x.error;
    const c = committed ? await committed : null;
    if (c?.ok && (c.value as { command?: string }).command !== 'COMMIT')
      throw new Error(`COMMIT of a group answered ${(c.value as { command?: string }).command ?? 'nothing'}`);
    const ok = new Set<number>();
    const denied = new Map<number, 'session' | 'grant'>();
    layers.forEach((l, k) => {
      const m = moved[k];
      l.changes.forEach((ch, j) => {
        const at = l.at[j] ?? -1;
        const streamId = ch.change.next.streamId;
        if (m?.ok && m.value.moved.has(streamId)) ok.add(at);
        const reason = m?.ok ? m.value.denied.get(streamId) : undefined;
        if (reason) denied.set(at, reason);
      });
    });
    const stale = group.filter((_, i) => !ok.has(i) && !denied.has(i)).map((g) => g.change.next.streamId);
    const heads = new Map<string, string>();
    if (stale.length > 0) {
      // Read after the commit: the head now, which is at least as new as the one that refused it.
      const rows = await this.#sql<{ stream_id: string; meta: string }[]>`
        select stream_id, meta from heads where stream_id = any(${[...new Set(stale)]}::text[])`;
      for (const r of rows) heads.set(r.stream_id, r.meta);
    }
    return group.map((g, i): CommitOutcome => {
      if (ok.has(i)) return { status: 'ok' };
      const reason = denied.get(i);
      if (reason) return this.#denied(g.change, reason);
      const streamId = g.change.next.streamId;
      const body = heads.get(streamId);
      if (body !== undefined) this.#staleBodies.set(streamId, body);
      return { status: 'stale', head: body === undefined ? undefined : decodeHead(streamId, body) };
    });
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

  readonly #deniedListeners: Array<(admission: ChangeAdmission, peerAgentId: string) => void> = [];

  /** Called with the admission of each change the database denied (the store reloads the directory's rows of it). */
  onDenied(listener: (admission: ChangeAdmission, peerAgentId: string) => void): void {
    this.#deniedListeners.push(listener);
  }

  /** The slow path: each change under its own savepoint. */
  async #oneByOne(tx: TxSql, group: Admitted[]): Promise<CommitOutcome[]> {
    const result: CommitOutcome[] = [];
    // A change decided on the head of one refused before it in this group is refused too.
    const refused = new Set<string>();
    for (const g of group) {
      const streamId = g.change.next.streamId;
      if (refused.has(streamId)) {
        result.push(await this.#refusal(tx, g.change, new Refusal({ status: 'stale', head: undefined })));
        continue;
      }
      try {
        await tx.savepoint((sp) => this.#apply(sp, g));
        result.push({ status: 'ok' });
      } catch (err) {
        refused.add(streamId);
        result.push(await this.#refusal(tx, g.change, err));
      }
    }
    return result;
  }

  /**
   * One change inside its savepoint, as the fast path's statement for a group of one (so both
   * paths write and notify alike); throws a {@link Refusal} (or the database's error, a unique
   * key taken) to roll it back.
   */
  async #apply(sp: TxSql, g: Admitted): Promise<void> {
    const c = g.change;
    const n = c.next;
    const body = bodyOf(g);
    if (c.expect !== null) {
      const done = await groupStatement(sp, [{ change: c, meta: body, after: afterOf(g) }]);
      const reason = done.denied.get(n.streamId);
      if (reason) throw new Refusal(this.#denied(c, reason));
      if (!done.moved.has(n.streamId)) throw new Refusal({ status: 'stale', head: undefined });
      return;
    }
    // Only a reset of a head rebuilt from its records has no precondition: it writes the head,
    // whatever the stored one is, and nothing else.
    await sp`
      insert into heads (stream_id, chat_id, author, peer, generation, first_position, next_position, writer_epoch, meta)
      values (${n.streamId}, ${n.chatId}, ${n.authorAgentId}, ${n.peerAgentId}, ${n.generation}, ${n.firstPosition}, ${n.nextPosition}, ${n.writer.epoch}, ${body})
      on conflict (stream_id) do update set generation = excluded.generation, first_position = excluded.first_position,
        next_position = excluded.next_position, writer_epoch = excluded.writer_epoch, meta = excluded.meta`;
    const notice: HeadNotice = {
      streamId: n.streamId,
      generation: n.generation,
      nextPosition: n.nextPosition,
      digest: headDigest(body),
      meta: body,
    };
    await sp`select pg_notify(${STREAMS_CHANNEL}, ${noticePayload(notice)})`;
  }

  /** What a change refused inside its savepoint becomes; an error that is not a refusal fails the group. */
  async #refusal(tx: TxSql, c: StreamChange, err: unknown): Promise<CommitOutcome> {
    const streamId = c.next.streamId;
    if (err instanceof Refusal && err.outcome.status === 'denied') return err.outcome;
    if (err instanceof Refusal && err.outcome.status === 'stale') {
      const [row] = await tx<{ meta: string }[]>`select meta from heads where stream_id = ${streamId}`;
      if (row) this.#staleBodies.set(streamId, row.meta);
      return { status: 'stale', head: row ? decodeHead(streamId, row.meta) : undefined };
    }
    const pg = err as { code?: string; constraint_name?: string };
    if (pg.code === '23505' && c.kind === 'append') {
      // Whichever key the statement hit first, a taken operation id answers before a taken
      // message id (a replay wins, docs/protocol.md §6): both are looked up, in that order.
      const opId = c.operation.operationId;
      const [op] = await tx<{ body: string }[]>`select body from operations where stream_id = ${streamId} and operation_id = ${opId}`;
      if (op)
        return {
          status: 'duplicate',
          what: 'operation',
          operation: expandOperation(opId, decodeRow<CompactOperation>(RowKey.operation(streamId, opId), op.body, { streamId })),
        };
      if (pg.constraint_name === 'message_ids_pkey') {
        const ids = c.messageIds.map(([id]) => id);
        const rows = await tx<{ client_message_id: string; position: string }[]>`
          select client_message_id, position from message_ids
          where stream_id = ${streamId} and generation = ${c.next.generation} and client_message_id = any(${ids}::text[])`;
        const first = c.messageIds.find(([id]) => rows.some((r) => r.client_message_id === id));
        const row = rows.find((r) => r.client_message_id === first?.[0]);
        if (first && row) return { status: 'duplicate', what: 'messageId', clientMessageId: first[0], position: Number(row.position) };
      }
    }
    throw err;
  }

  /**
   * After an unknown outcome, once the database answers again: reload every head and accept
   * writes again. Throws while the database is unreachable (the store stays read-only).
   */
  async recover(): Promise<void> {
    // A commit of ours still in flight decides heads we would reload: wait for it, but not
    // forever (retry.ts): the caller retries with backoff, and a recovery that never returned
    // left the daemon read-only with nothing said.
    if (!(await chainSettled(this.#allSettled()))) throw commitUnanswered('stream');
    await this.#loadHeads();
    this.#known.clear();
  }

  // ---- hooks for the whole store (store.ts): additive, used by PostgresStore ------------------

  readonly #groupListeners: Array<(settled: ReadonlyArray<SettledChange>, seconds: number) => void> = [];

  /**
   * Called after each group commit with every change of the group and its outcome, and the
   * seconds the transaction took: the store keeps its counts, stats and failure listeners from it.
   */
  onGroupCommit(listener: (settled: ReadonlyArray<SettledChange>, seconds: number) => void): void {
    this.#groupListeners.push(listener);
  }

  #notifyGroup(settled: ReadonlyArray<SettledChange>, seconds: number): void {
    for (const l of this.#groupListeners) l(settled, seconds);
  }

  /**
   * Heads committed outside this class (the directory's createChat writes a chat's two heads in
   * its own transaction, or another daemon's chat was loaded): cache them unless a newer one is known.
   */
  learnHeads(heads: readonly StreamMeta[]): void {
    for (const h of heads) if (!this.#committed.has(h.streamId)) this.#setCommitted(h.streamId, h);
  }

  // ---- reads ------------------------------------------------------------------------------------

  protected async *_records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    options: { reverse?: boolean; limit?: number },
  ): AsyncIterable<StoredRecordAt> {
    const noticed = options.reverse ? undefined : this.#noticedRows(stream.streamId, generation, from, end);
    if (noticed) {
      for (const [position, body] of noticed.slice(0, options.limit ?? Infinity))
        yield { position, record: this.#reads.expand(stream, generation, position, body), bytes: body.length };
      return;
    }
    yield* this.#reads.records(stream, generation, from, end, options);
  }

  /**
   * The rows of [from, end) from the latest notice of the stream, when it holds all of them and
   * none is below the committed head's first position (a trim since); else undefined (read).
   */
  #noticedRows(streamId: string, generation: number, from: number, end: number): Array<[number, string]> | undefined {
    const n = this.#noticed.get(streamId);
    const head = this.#committed.get(streamId);
    if (!n || !head || n.generation !== generation || from < n.from || from < head.firstPosition) return undefined;
    if (end > n.from + n.rows.length || from >= end) return undefined;
    return n.rows.slice(from - n.from, end - n.from);
  }

  protected _record(stream: StreamIdentity, generation: number, position: number): Promise<StoredRecord | undefined> {
    return this.#reads.record(stream, generation, position);
  }

  protected _allRecords(stream: StreamIdentity): AsyncIterable<{ generation: number; position: number; record: StoredRecord | undefined }> {
    return this.#reads.allRecords(stream);
  }

  protected async _operationStatus(streamId: string, operationId: string): Promise<OperationStatus> {
    const key = `${streamId}/${operationId}`;
    if (this.#stillOut.has(key)) return { state: 'pending' };
    if (this.#unknownOps.has(key)) {
      // The session of the unknown commit may still be finishing it (waiting for the standby):
      // until it is gone, neither "committed" nor "absent" is final.
      const s = this.#unknownOps.get(key);
      const alive =
        s == null
          ? []
          : await this.#sql`select 1 from pg_stat_activity where pid = ${s.pid} and pg_postmaster_start_time()::text = ${s.serverStarted}`;
      if (alive.length > 0) return { state: 'pending' };
      this.#unknownOps.delete(key);
    }
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

  protected async _sweepTrimmed(streamId: string, generation: number, firstPosition: number): Promise<SweepResult> {
    const swept = await this.#sql.begin(async (tx) => {
      const records =
        await tx`delete from records where stream_id = ${streamId} and generation = ${generation} and position < ${firstPosition}`;
      // An operation cut in two by the trim stays (and so does its entry of the operation log,
      // which is the operations_log index of this table since schema 2).
      const ops = await tx`
        delete from operations where stream_id = ${streamId} and generation = ${generation} and next_position <= ${firstPosition}`;
      const msgs =
        await tx`delete from message_ids where stream_id = ${streamId} and generation = ${generation} and position < ${firstPosition}`;
      return { records: records.count, operations: ops.count, messageIds: msgs.count };
    });
    // What prepare() fetched may name what was just deleted; the next prepare() fetches again.
    this.#known.delete(streamId);
    return swept;
  }

  protected _approximateBytes(streamId: string): Promise<number> {
    return this.#reads.approximateBytes(streamId);
  }

  /** Wait for admitted changes to settle, stop listening; the pool is the caller's to end. */
  async close(): Promise<void> {
    this.gate.close();
    await this.#groups.drained();
    const unlisten = this.#unlisten;
    this.#unlisten = undefined;
    await unlisten?.().catch(() => {});
    for (const l of this.#listeners) l.end();
  }
}
