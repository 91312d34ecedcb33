// The streams half of the storage port on PostgreSQL (issue 24 item 2). Several daemons write
// the same tables, so the heads in memory are a cache: a change is admitted against the cached
// head (two changes decided on one head are never both admitted here), and its commit carries
// the head it was decided on as a precondition, checked inside the transaction by a conditional
// UPDATE of the head row (which also row-locks it until COMMIT). The changes admitted in one
// turn commit in one transaction, each under its own savepoint, so a change whose head moved
// (another daemon), or whose operation id or clientMessageId another daemon took first, is
// refused alone while the rest of the group commits, paying one fsync (and one round trip to
// the synchronous standby) for all of them.
//
// A transaction that fails without a verdict (the connection lost, COMMIT unanswered) is an
// unknown outcome for every change in it: the store turns read-only (writes refused, nothing
// retried silently) until `recover()` reloaded the heads after the reconnect; `operationStatus`
// answers `pending` for those operations while the old session may still be committing, and the
// truth from the tables once it is gone.

import type { Logger } from 'pino';
import { errors } from '../../../shared/errors.js';
import {
  compactOperation,
  compactRecord,
  expandOperation,
  expandRecord,
  type CompactOperation,
  type CompactRecord,
} from '../record-layout.js';
import type {
  CommitOutcome,
  OperationStatus,
  OpLogEntry,
  StoredRecordAt,
  StreamChange,
  StreamIdentity,
  StreamPort,
  SweepResult,
} from '../port/stream-port.js';
import type { StoredOperation, StoredRecord, StreamMeta } from '../port/values.js';
import type { Sql } from './connection.js';
import { decodeRow, encodeRow, RowKey, tryDecodeRow } from './row-codec.js';

/** The channel of `pg_notify` at the end of every commit that moved a head. */
export const STREAMS_CHANNEL = 'yello_streams';

/** What another daemon (or this one) committed: a wake-up, the data is read from the tables. */
export interface HeadNotice {
  streamId: string;
  generation: number;
  nextPosition: number;
}

type TxSql = Parameters<Parameters<Sql['begin']>[1]>[0];

/** A change of a group commit and what became of it (`onGroupCommit`). */
export interface SettledChange {
  change: StreamChange;
  outcome: CommitOutcome;
}

interface Admitted {
  change: StreamChange;
  resolve: (o: CommitOutcome) => void;
  done: Promise<CommitOutcome>;
}

/** A change refused inside its savepoint; the savepoint is rolled back and the others go on. */
class Refusal extends Error {
  constructor(readonly outcome: CommitOutcome) {
    super('refused');
  }
}

const PAGE = 256;

/**
 * Whether an error means the session is gone (no verdict on what it was doing), as opposed to
 * an error the server answered with (SQLSTATE other than connection or operator classes).
 */
function connectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57') || code.startsWith('58') || code.startsWith('XX');
}

function sameHead(meta: StreamMeta, e: { generation: number; nextPosition: number; writerEpoch: number }): boolean {
  return meta.generation === e.generation && meta.nextPosition === e.nextPosition && meta.writer.epoch === e.writerEpoch;
}

function decodeHead(streamId: string, body: string): StreamMeta {
  return decodeRow<StreamMeta>(RowKey.head(streamId), body, { streamId });
}

export interface PostgresStreamsOptions {
  log?: Logger;
}

export class PostgresStreams implements StreamPort {
  readonly #sql: Sql;
  readonly #log: Logger | undefined;
  readonly #committed = new Map<string, StreamMeta>();
  /** Admitted heads not yet durable, with the number of their changes in flight. */
  readonly #admitted = new Map<string, { meta: StreamMeta; inFlight: number; durable: Promise<unknown> }>();
  readonly #pendingOps = new Map<string, Map<string, { op: StoredOperation; durable: Promise<unknown> }>>();
  readonly #pendingMsgs = new Map<string, Map<string, number>>();
  /** What `prepare` fetched (and this process committed since), per stream. */
  readonly #known = new Map<string, { ops: Map<string, StoredOperation>; msgs: Map<string, number> }>();
  /** Operations whose commit's outcome is unknown, with the backend pid of that session. */
  readonly #unknownOps = new Map<string, number | null>();
  #queue: Admitted[] = [];
  #scheduled = false;
  #chain: Promise<void> = Promise.resolve();
  #readOnly = false;
  #closing = false;
  readonly #listeners = new Set<{ push: (n: HeadNotice) => void; end: () => void }>();
  #unlisten: (() => Promise<void>) | undefined;
  /** Group commits and the changes in them, since open. */
  readonly stats = { batches: 0, writes: 0 };

  private constructor(sql: Sql, options: PostgresStreamsOptions) {
    this.#sql = sql;
    this.#log = options.log;
  }

  /** Load every head (the cache the daemon decides on) and listen for other daemons' commits. */
  static async open(sql: Sql, options: PostgresStreamsOptions = {}): Promise<PostgresStreams> {
    const s = new PostgresStreams(sql, options);
    await s.#loadHeads();
    const listening = await sql.listen(
      STREAMS_CHANNEL,
      (payload) => {
        s.#onNotify(payload);
      },
      // Called again after every reconnect of the LISTEN connection: notifications sent while it
      // was down are lost, so every head is reloaded (notices are a wake-up, not the data).
      () => {
        if (s.#unlisten)
          void s
            .#loadHeads()
            .catch((err: unknown) =>
              s.#log?.warn({ err: { message: (err as Error).message } }, 'reloading heads after a LISTEN reconnect failed'),
            );
      },
    );
    s.#unlisten = () => listening.unlisten();
    return s;
  }

  async #loadHeads(): Promise<void> {
    const rows = await this.#sql<{ stream_id: string; meta: string }[]>`select stream_id, meta from heads`;
    for (const r of rows) this.#committed.set(r.stream_id, decodeHead(r.stream_id, r.meta));
  }

  #onNotify(payload: string): void {
    let n: HeadNotice;
    try {
      n = JSON.parse(payload) as HeadNotice;
    } catch {
      return;
    }
    const cached = this.#committed.get(n.streamId);
    const behind =
      !cached || cached.generation < n.generation || (cached.generation === n.generation && cached.nextPosition < n.nextPosition);
    const refresh = behind ? this.#refreshHead(n.streamId) : Promise.resolve();
    void refresh.then(
      () => {
        for (const l of this.#listeners) l.push(n);
      },
      (err: unknown) =>
        this.#log?.warn({ err: { message: (err as Error).message }, streamId: n.streamId }, 'refreshing a head after a notice failed'),
    );
  }

  async #refreshHead(streamId: string): Promise<StreamMeta | undefined> {
    const [row] = await this.#sql<{ meta: string }[]>`select meta from heads where stream_id = ${streamId}`;
    const meta = row ? decodeHead(streamId, row.meta) : undefined;
    if (meta) this.#committed.set(streamId, meta);
    else this.#committed.delete(streamId);
    return meta;
  }

  /**
   * Heads moved by commits (this daemon's and the others'), after the cached head was
   * refreshed: what wakes live followers on every daemon. Ends with `close()`.
   */
  changes(): AsyncIterable<HeadNotice> {
    const queue: HeadNotice[] = [];
    let wake: (() => void) | undefined;
    let ended = this.#closing;
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

  // ---- heads --------------------------------------------------------------------------------

  head(streamId: string, view: 'admitted' | 'committed'): StreamMeta | undefined {
    this.#assertOpen();
    if (view === 'admitted') {
      const a = this.#admitted.get(streamId);
      if (a) return a.meta;
    }
    return this.#committed.get(streamId);
  }

  headPending(streamId: string): boolean {
    return this.#admitted.has(streamId);
  }

  /** Head and records are written in one transaction: there is no head to vouch for. */
  verifyHead(): null {
    return null;
  }

  async *streamIds(): AsyncIterable<string> {
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
    this.assertWritable();
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
    for (const h of heads) this.#committed.set(h.streamId, h);
    return 'ok';
  }

  // ---- admission lookups ----------------------------------------------------------------------

  prepare(streamId: string, operationId: string, clientMessageIds: readonly string[]): Promise<void> {
    const generation = this.head(streamId, 'admitted')?.generation ?? 1;
    return (async () => {
      const [ops, msgs] = await Promise.all([
        this.#sql<{ body: string }[]>`select body from operations where stream_id = ${streamId} and operation_id = ${operationId}`,
        clientMessageIds.length === 0
          ? Promise.resolve([] as { client_message_id: string; body: string }[])
          : this.#sql<{ client_message_id: string; body: string }[]>`
              select client_message_id, body from message_ids
              where stream_id = ${streamId} and generation = ${generation} and client_message_id in ${this.#sql(clientMessageIds as string[])}`,
      ]);
      const known = { ops: new Map<string, StoredOperation>(), msgs: new Map<string, number>() };
      const op = ops[0];
      if (op)
        known.ops.set(
          operationId,
          expandOperation(operationId, decodeRow<CompactOperation>(RowKey.operation(streamId, operationId), op.body, { streamId })),
        );
      for (const m of msgs)
        known.msgs.set(
          `${generation}/${m.client_message_id}`,
          decodeRow<number>(RowKey.messageId(streamId, generation, m.client_message_id), m.body, { streamId, generation }),
        );
      this.#known.set(streamId, known);
    })();
  }

  operation(streamId: string, operationId: string): StoredOperation | undefined {
    return this.#pendingOps.get(streamId)?.get(operationId)?.op ?? this.#known.get(streamId)?.ops.get(operationId);
  }

  messagePosition(streamId: string, generation: number, clientMessageId: string): number | undefined {
    const k = `${generation}/${clientMessageId}`;
    return this.#pendingMsgs.get(streamId)?.get(k) ?? this.#known.get(streamId)?.msgs.get(k);
  }

  // ---- commits ---------------------------------------------------------------------------------

  get readOnly(): boolean {
    return this.#readOnly;
  }

  assertWritable(operationId: string | null = null): void {
    if (this.#readOnly)
      throw errors.storageFailure(
        operationId,
        'READ_ONLY',
        'the daemon is read-only after a commit whose outcome is unknown; nothing was written; it recovers once the database is reachable again (or restart it)',
      );
    if (this.#closing) throw errors.shuttingDown(operationId, 'not-written');
  }

  // async: the admission below still runs synchronously, in the caller's turn (no await before it).
  async commit(change: StreamChange): Promise<CommitOutcome> {
    const operationId = change.kind === 'append' ? change.operation.operationId : null;
    this.assertWritable(operationId);
    const streamId = change.next.streamId;
    const current = this.head(streamId, 'admitted');
    if (change.expect !== null) {
      const fromMoved = change.kind === 'trim' && current !== undefined && current.firstPosition !== change.fromPosition;
      if (!current || !sameHead(current, change.expect) || fromMoved) return { status: 'stale', head: current };
    }
    if (change.kind === 'append') {
      const known = this.operation(streamId, change.operation.operationId);
      if (known) return { status: 'duplicate', what: 'operation', operation: known };
      for (const [id] of change.messageIds) {
        const at = this.messagePosition(streamId, change.next.generation, id);
        if (at !== undefined) return { status: 'duplicate', what: 'messageId', clientMessageId: id, position: at };
      }
    }

    let resolve!: (o: CommitOutcome) => void;
    const done = new Promise<CommitOutcome>((r) => (resolve = r));
    const a = this.#admitted.get(streamId);
    this.#admitted.set(streamId, { meta: change.next, inFlight: (a?.inFlight ?? 0) + 1, durable: done });
    if (change.kind === 'append') {
      const ops = this.#pendingOps.get(streamId) ?? new Map<string, { op: StoredOperation; durable: Promise<unknown> }>();
      ops.set(change.operation.operationId, { op: change.operation, durable: done });
      this.#pendingOps.set(streamId, ops);
      const msgs = this.#pendingMsgs.get(streamId) ?? new Map<string, number>();
      for (const [id, pos] of change.messageIds) msgs.set(`${change.next.generation}/${id}`, pos);
      this.#pendingMsgs.set(streamId, msgs);
    }
    this.#queue.push({ change, resolve, done });
    if (!this.#scheduled) {
      this.#scheduled = true;
      // Everything admitted in this turn of the event loop goes into one transaction.
      setImmediate(() => {
        this.#scheduled = false;
        const group = this.#queue;
        this.#queue = [];
        this.#chain = this.#chain.then(() => this.#commitGroup(group));
      });
    }
    return done;
  }

  async #commitGroup(group: Admitted[]): Promise<void> {
    let outcomes: CommitOutcome[];
    let pid: number | null = null;
    const started = performance.now();
    try {
      for (const g of group) if (g.change.kind === 'append' && g.change.ready) await g.change.ready;
      const fast = group.every((g) => g.change.expect !== null);
      const attempt = async (pipelined: boolean) =>
        this.#sql.begin(async (tx) => {
          const [p] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
          pid = p?.pid ?? null;
          const result = pipelined ? await this.#pipelined(tx, group) : await this.#oneByOne(tx, group);
          const moved = new Map<string, HeadNotice>();
          group.forEach((g, i) => {
            const n = g.change.next;
            if (result[i]?.status === 'ok')
              moved.set(n.streamId, { streamId: n.streamId, generation: n.generation, nextPosition: n.nextPosition });
          });
          await Promise.all([...moved.values()].map((n) => tx`select pg_notify(${STREAMS_CHANNEL}, ${JSON.stringify(n)})`));
          return result;
        });
      try {
        outcomes = await attempt(fast);
      } catch (err) {
        // A unique key another daemon took first aborted the pipelined transaction (the server
        // said so: nothing of it was written). Again, a savepoint each, to refuse only that change.
        if (!fast || (err as { code?: string }).code !== '23505') throw err;
        outcomes = await attempt(false);
      }
    } catch (err) {
      // No verdict from the database: the transaction may or may not have committed.
      this.#readOnly = true;
      const error = errors.storageFailure(
        null,
        'WRITE_FAILED',
        `the commit to PostgreSQL failed (${(err as Error).message}); it may or may not have been written: ask operations.get once the daemon is back`,
      );
      this.#log?.error(
        { err: { message: (err as Error).message, code: (err as { code?: string }).code } },
        'a PostgreSQL commit failed; its outcome is unknown; the store is read-only',
      );
      outcomes = group.map(() => ({ status: 'unknown', error }));
      // Only a lost session can still be committing: an error the server answered with means
      // the transaction was rolled back, and the tables already tell.
      const lost = connectionLost(err);
      for (const g of group)
        if (g.change.kind === 'append')
          this.#unknownOps.set(`${g.change.next.streamId}/${g.change.operation.operationId}`, lost ? pid : null);
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

  #settle(g: Admitted, outcome: CommitOutcome): void {
    const c = g.change;
    const streamId = c.next.streamId;
    if (outcome.status === 'ok') {
      this.#committed.set(streamId, c.next);
      if (c.kind === 'append') {
        const known = this.#known.get(streamId) ?? { ops: new Map<string, StoredOperation>(), msgs: new Map<string, number>() };
        known.ops.set(c.operation.operationId, c.operation);
        for (const [id, pos] of c.messageIds) known.msgs.set(`${c.next.generation}/${id}`, pos);
        this.#known.set(streamId, known);
      }
    } else if (outcome.status === 'stale') {
      if (outcome.head) this.#committed.set(streamId, outcome.head);
      else this.#committed.delete(streamId);
    }
    if (c.kind === 'append') {
      this.#pendingOps.get(streamId)?.delete(c.operation.operationId);
      for (const [id] of c.messageIds) this.#pendingMsgs.get(streamId)?.delete(`${c.next.generation}/${id}`);
    }
    const a = this.#admitted.get(streamId);
    if (a && --a.inFlight === 0) this.#admitted.delete(streamId);
    g.resolve(outcome);
  }

  /**
   * The fast path: one statement per change, all sent without waiting (postgres.js pipelines
   * them on the transaction's connection), so a group of 64 appends costs a few round trips and
   * one fsync. A stale head matches no row and writes nothing (no error, no savepoint needed);
   * a unique violation aborts the transaction and the group is redone one by one.
   */
  async #pipelined(tx: TxSql, group: Admitted[]): Promise<CommitOutcome[]> {
    const counts = await Promise.all(group.map((g) => this.#changeStatement(tx, g.change)));
    const out: CommitOutcome[] = [];
    for (const [i, g] of group.entries()) {
      if (counts[i] === 1) out.push({ status: 'ok' });
      else out.push(await this.#refusal(tx, g.change, new Refusal({ status: 'stale', head: undefined })));
    }
    return out;
  }

  /** The slow path: each change under its own savepoint. */
  async #oneByOne(tx: TxSql, group: Admitted[]): Promise<CommitOutcome[]> {
    const result: CommitOutcome[] = [];
    for (const g of group) {
      try {
        await tx.savepoint((sp) => this.#apply(sp, g.change));
        result.push({ status: 'ok' });
      } catch (err) {
        result.push(await this.#refusal(tx, g.change, err));
      }
    }
    return result;
  }

  /** A change with a precondition as one statement (a data-modifying CTE): 1 when the head matched, else 0. */
  async #changeStatement(tx: TxSql, c: StreamChange): Promise<number> {
    const n = c.next;
    const e = c.expect;
    if (e === null) throw new Error('a change without a precondition has no pipelined form');
    const records = c.kind === 'append' ? c.records : c.kind === 'claim' ? [c.fence] : [];
    const { positions, bodies } = recordRows(n, records);
    const op = c.kind === 'append' ? c.operation : null;
    const opIds = op ? [op.operationId] : [];
    const opFirst = op ? [op.firstPosition] : [];
    const opNext = op ? [op.nextPosition] : [];
    const opBodies = op ? [encodeRow(RowKey.operation(n.streamId, op.operationId), compactOperation(op))] : [];
    const logBodies = op ? [encodeRow(RowKey.opLog(n.streamId, op.generation, op.firstPosition), op.operationId)] : [];
    const msgs = c.kind === 'append' ? c.messageIds : [];
    const msgIds = msgs.map(([id]) => id);
    const msgPositions = msgs.map(([, p]) => p);
    const msgBodies = msgs.map(([id, p]) => encodeRow(RowKey.messageId(n.streamId, n.generation, id), p));
    const fromPosition = c.kind === 'trim' ? c.fromPosition : null;
    const trimBelow = c.kind === 'trim' ? n.firstPosition : null;
    const [row] = await tx<{ n: number }[]>`
      with h as (
        update heads set generation = ${n.generation}, first_position = ${n.firstPosition}, next_position = ${n.nextPosition},
          writer_epoch = ${n.writer.epoch}, meta = ${encodeRow(RowKey.head(n.streamId), n)}
        where stream_id = ${e.streamId} and generation = ${e.generation} and next_position = ${e.nextPosition}
          and writer_epoch = ${e.writerEpoch} and (${fromPosition}::bigint is null or first_position = ${fromPosition}::bigint)
        returning 1),
      r as (insert into records (stream_id, generation, position, body)
        select ${n.streamId}, ${n.generation}, t.p, t.b from unnest(${positions}::bigint[], ${bodies}::text[]) as t(p, b)
        where exists (select 1 from h)),
      o as (insert into operations (stream_id, operation_id, generation, first_position, next_position, body)
        select ${n.streamId}, t.id, ${n.generation}, t.f, t.x, t.b
        from unnest(${opIds}::text[], ${opFirst}::bigint[], ${opNext}::bigint[], ${opBodies}::text[]) as t(id, f, x, b)
        where exists (select 1 from h)),
      l as (insert into op_log (stream_id, generation, position, operation_id, body)
        select ${n.streamId}, ${n.generation}, t.f, t.id, t.b from unnest(${opIds}::text[], ${opFirst}::bigint[], ${logBodies}::text[]) as t(id, f, b)
        where exists (select 1 from h)),
      m as (insert into message_ids (stream_id, generation, client_message_id, position, body)
        select ${n.streamId}, ${n.generation}, t.id, t.p, t.b from unnest(${msgIds}::text[], ${msgPositions}::bigint[], ${msgBodies}::text[]) as t(id, p, b)
        where exists (select 1 from h)),
      d as (delete from records where ${trimBelow}::bigint is not null and stream_id = ${n.streamId} and generation = ${n.generation}
        and position < ${trimBelow}::bigint and exists (select 1 from h))
      select count(*)::int as n from h`;
    return row?.n ?? 0;
  }

  /** One change inside its savepoint; throws a {@link Refusal} (or the database's error) to roll it back. */
  async #apply(sp: TxSql, c: StreamChange): Promise<void> {
    const n = c.next;
    const body = encodeRow(RowKey.head(n.streamId), n);
    if (c.expect === null) {
      await sp`
        insert into heads (stream_id, chat_id, author, peer, generation, first_position, next_position, writer_epoch, meta)
        values (${n.streamId}, ${n.chatId}, ${n.authorAgentId}, ${n.peerAgentId}, ${n.generation}, ${n.firstPosition}, ${n.nextPosition}, ${n.writer.epoch}, ${body})
        on conflict (stream_id) do update set generation = excluded.generation, first_position = excluded.first_position,
          next_position = excluded.next_position, writer_epoch = excluded.writer_epoch, meta = excluded.meta`;
    } else {
      const e = c.expect;
      const fromPosition = c.kind === 'trim' ? c.fromPosition : null;
      // Compare-and-set of the head, and its row lock until COMMIT: a head another daemon moved
      // matches no row, and the change is stale.
      const updated = await sp`
        update heads set generation = ${n.generation}, first_position = ${n.firstPosition}, next_position = ${n.nextPosition},
          writer_epoch = ${n.writer.epoch}, meta = ${body}
        where stream_id = ${e.streamId} and generation = ${e.generation} and next_position = ${e.nextPosition}
          and writer_epoch = ${e.writerEpoch} and (${fromPosition}::bigint is null or first_position = ${fromPosition}::bigint)`;
      if (updated.count !== 1) throw new Refusal({ status: 'stale', head: undefined });
    }
    switch (c.kind) {
      case 'append': {
        await this.#insertRecords(sp, n, c.records);
        const op = c.operation;
        await sp`
          insert into operations (stream_id, operation_id, generation, first_position, next_position, body)
          values (${n.streamId}, ${op.operationId}, ${op.generation}, ${op.firstPosition}, ${op.nextPosition},
                  ${encodeRow(RowKey.operation(n.streamId, op.operationId), compactOperation(op))})`;
        await sp`
          insert into op_log (stream_id, generation, position, operation_id, body)
          values (${n.streamId}, ${op.generation}, ${op.firstPosition}, ${op.operationId},
                  ${encodeRow(RowKey.opLog(n.streamId, op.generation, op.firstPosition), op.operationId)})`;
        if (c.messageIds.length > 0) {
          const ids = c.messageIds.map(([id]) => id);
          const positions = c.messageIds.map(([, p]) => p);
          const bodies = c.messageIds.map(([id, p]) => encodeRow(RowKey.messageId(n.streamId, n.generation, id), p));
          await sp`
            insert into message_ids (stream_id, generation, client_message_id, position, body)
            select ${n.streamId}, ${n.generation}, * from unnest(${ids}::text[], ${positions}::bigint[], ${bodies}::text[])`;
        }
        return;
      }
      case 'claim':
        await this.#insertRecords(sp, n, [c.fence]);
        return;
      case 'trim':
        // Readers never see trimmed records again; operations and message ids go in sweepTrimmed.
        await sp`delete from records where stream_id = ${n.streamId} and generation = ${n.generation} and position < ${n.firstPosition}`;
        return;
      case 'release':
      case 'reset':
        return;
    }
  }

  async #insertRecords(sp: TxSql, n: StreamMeta, records: readonly StoredRecord[]): Promise<void> {
    if (records.length === 0) return;
    const { positions, bodies } = recordRows(n, records);
    await sp`
      insert into records (stream_id, generation, position, body)
      select ${n.streamId}, ${n.generation}, * from unnest(${positions}::bigint[], ${bodies}::text[])`;
  }

  /** What a change refused inside its savepoint becomes; an error that is not a refusal fails the group. */
  async #refusal(tx: TxSql, c: StreamChange, err: unknown): Promise<CommitOutcome> {
    const streamId = c.next.streamId;
    if (err instanceof Refusal && err.outcome.status === 'stale') {
      const [row] = await tx<{ meta: string }[]>`select meta from heads where stream_id = ${streamId}`;
      return { status: 'stale', head: row ? decodeHead(streamId, row.meta) : undefined };
    }
    const pg = err as { code?: string; constraint_name?: string };
    if (pg.code === '23505' && c.kind === 'append') {
      if (pg.constraint_name === 'operations_pkey') {
        const opId = c.operation.operationId;
        const [row] = await tx<{ body: string }[]>`select body from operations where stream_id = ${streamId} and operation_id = ${opId}`;
        if (row)
          return {
            status: 'duplicate',
            what: 'operation',
            operation: expandOperation(opId, decodeRow<CompactOperation>(RowKey.operation(streamId, opId), row.body, { streamId })),
          };
      }
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

  async headDurable(streamId: string): Promise<void> {
    await this.#admitted.get(streamId)?.durable;
  }

  async operationDurable(streamId: string, operationId: string): Promise<void> {
    await this.#pendingOps.get(streamId)?.get(operationId)?.durable;
  }

  /**
   * After an unknown outcome, once the database answers again: reload every head and accept
   * writes again. Throws while the database is unreachable (the store stays read-only).
   */
  async recover(): Promise<void> {
    await this.#chain;
    await this.#loadHeads();
    this.#known.clear();
    this.#readOnly = false;
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
    for (const h of heads) if (!this.#committed.has(h.streamId)) this.#committed.set(h.streamId, h);
  }

  /** Another half of the store failed a commit: refuse writes here too (READ_ONLY) until `recover()`. */
  refuseWrites(): void {
    this.#readOnly = true;
  }

  // ---- reads ------------------------------------------------------------------------------------

  #assertOpen(): void {
    if (this.#closing) throw errors.shuttingDown(null, null);
  }

  #expand(stream: StreamIdentity, generation: number, position: number, body: string): StoredRecord {
    const stored = decodeRow<CompactRecord | StoredRecord>(RowKey.record(stream.streamId, generation, position), body, {
      streamId: stream.streamId,
      generation,
      position,
    });
    return expandRecord(stored, { ...stream, generation, position });
  }

  async *records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    options: { reverse?: boolean; limit?: number } = {},
  ): AsyncIterable<StoredRecordAt> {
    this.#assertOpen();
    let left = options.limit ?? Infinity;
    let lo = from;
    let hi = end;
    while (left > 0 && lo < hi) {
      const take = Math.min(PAGE, left);
      const rows = options.reverse
        ? await this.#sql<{ position: string; body: string }[]>`
            select position, body from records where stream_id = ${stream.streamId} and generation = ${generation}
              and position >= ${lo} and position < ${hi} order by position desc limit ${take}`
        : await this.#sql<{ position: string; body: string }[]>`
            select position, body from records where stream_id = ${stream.streamId} and generation = ${generation}
              and position >= ${lo} and position < ${hi} order by position limit ${take}`;
      for (const r of rows) {
        const position = Number(r.position);
        yield { position, record: this.#expand(stream, generation, position, r.body), bytes: r.body.length };
      }
      left -= rows.length;
      const last = rows.at(-1);
      if (!last || rows.length < take) return;
      if (options.reverse) hi = Number(last.position);
      else lo = Number(last.position) + 1;
    }
  }

  async record(stream: StreamIdentity, generation: number, position: number): Promise<StoredRecord | undefined> {
    this.#assertOpen();
    const [row] = await this.#sql<{ body: string }[]>`
      select body from records where stream_id = ${stream.streamId} and generation = ${generation} and position = ${position}`;
    return row ? this.#expand(stream, generation, position, row.body) : undefined;
  }

  async *allRecords(stream: StreamIdentity): AsyncIterable<{ generation: number; position: number; record: StoredRecord | undefined }> {
    let after: [number, number] = [0, -1];
    for (;;) {
      const rows = await this.#sql<{ generation: string; position: string; body: string }[]>`
        select generation, position, body from records where stream_id = ${stream.streamId}
          and (generation, position) > (${after[0]}, ${after[1]}) order by generation, position limit ${PAGE}`;
      for (const r of rows) {
        const generation = Number(r.generation);
        const position = Number(r.position);
        const stored = tryDecodeRow<CompactRecord | StoredRecord>(RowKey.record(stream.streamId, generation, position), r.body);
        let record: StoredRecord | undefined;
        try {
          record = stored === undefined ? undefined : expandRecord(stored, { ...stream, generation, position });
        } catch {
          record = undefined;
        }
        yield { generation, position, record };
        after = [generation, position];
      }
      if (rows.length < PAGE) return;
    }
  }

  async operationStatus(streamId: string, operationId: string): Promise<OperationStatus> {
    this.#assertOpen();
    if (this.#pendingOps.get(streamId)?.has(operationId)) return { state: 'pending' };
    const key = `${streamId}/${operationId}`;
    if (this.#unknownOps.has(key)) {
      // The session of the unknown commit may still be finishing it (waiting for the standby):
      // until it is gone, neither "committed" nor "absent" is final.
      const pid = this.#unknownOps.get(key);
      const alive = pid == null ? [] : await this.#sql`select 1 from pg_stat_activity where pid = ${pid}`;
      if (alive.length > 0) return { state: 'pending' };
      this.#unknownOps.delete(key);
    }
    const op = await this.findOperation(streamId, operationId);
    return op ? { state: 'committed', operation: op } : { state: 'absent' };
  }

  async findOperation(streamId: string, operationId: string): Promise<StoredOperation | undefined> {
    this.#assertOpen();
    const [row] = await this.#sql<
      { body: string }[]
    >`select body from operations where stream_id = ${streamId} and operation_id = ${operationId}`;
    return row
      ? expandOperation(operationId, decodeRow<CompactOperation>(RowKey.operation(streamId, operationId), row.body, { streamId }))
      : undefined;
  }

  async *opLog(
    streamId: string,
    range: { after?: { generation: number; position: number }; before?: { generation: number; position: number }; limit?: number } = {},
  ): AsyncIterable<OpLogEntry> {
    this.#assertOpen();
    let after = range.after ?? { generation: 0, position: -1 };
    const before = range.before ?? { generation: Number.MAX_SAFE_INTEGER, position: 0 };
    let left = range.limit ?? Infinity;
    while (left > 0) {
      const take = Math.min(PAGE, left);
      const rows = await this.#sql<{ generation: string; position: string; operation_id: string; body: string }[]>`
        select generation, position, operation_id, body from op_log where stream_id = ${streamId}
          and (generation, position) > (${after.generation}, ${after.position})
          and (generation, position) < (${before.generation}, ${before.position})
        order by generation, position limit ${take}`;
      for (const r of rows) {
        const generation = Number(r.generation);
        const position = Number(r.position);
        const operationId = decodeRow<string>(RowKey.opLog(streamId, generation, position), r.body, { streamId, generation, position });
        yield { generation, position, operationId };
        after = { generation, position };
      }
      left -= rows.length;
      if (rows.length < take) return;
    }
  }

  async *operationIds(streamId: string): AsyncIterable<string> {
    let after = '';
    for (;;) {
      const rows = await this.#sql<{ operation_id: string }[]>`
        select operation_id from operations where stream_id = ${streamId} and operation_id > ${after} order by operation_id limit ${PAGE}`;
      for (const r of rows) yield r.operation_id;
      const last = rows.at(-1);
      if (!last || rows.length < PAGE) return;
      after = last.operation_id;
    }
  }

  async *messageIds(streamId: string, generation: number): AsyncIterable<string> {
    let after = '';
    for (;;) {
      const rows = await this.#sql<{ client_message_id: string }[]>`
        select client_message_id from message_ids where stream_id = ${streamId} and generation = ${generation}
          and client_message_id > ${after} order by client_message_id limit ${PAGE}`;
      for (const r of rows) yield r.client_message_id;
      const last = rows.at(-1);
      if (!last || rows.length < PAGE) return;
      after = last.client_message_id;
    }
  }

  // ---- housekeeping -----------------------------------------------------------------------------

  async sweepTrimmed(streamId: string, generation: number, firstPosition: number): Promise<SweepResult> {
    this.assertWritable();
    const swept = await this.#sql.begin(async (tx) => {
      const records =
        await tx`delete from records where stream_id = ${streamId} and generation = ${generation} and position < ${firstPosition}`;
      // An operation cut in two by the trim stays; its log entry goes with it.
      const ops = await tx<{ first_position: string }[]>`
        delete from operations where stream_id = ${streamId} and generation = ${generation} and next_position <= ${firstPosition}
        returning first_position`;
      await tx`
        delete from op_log where stream_id = ${streamId} and generation = ${generation}
          and position = any(${ops.map((o) => Number(o.first_position))}::bigint[])`;
      const msgs =
        await tx`delete from message_ids where stream_id = ${streamId} and generation = ${generation} and position < ${firstPosition}`;
      return { records: records.count, operations: ops.count, messageIds: msgs.count };
    });
    // What prepare() fetched may name what was just deleted; the next prepare() fetches again.
    this.#known.delete(streamId);
    return swept;
  }

  async approximateBytes(streamId: string): Promise<number> {
    const [row] = await this.#sql<{ n: string | null }[]>`select sum(length(body)) as n from records where stream_id = ${streamId}`;
    return Number(row?.n ?? 0);
  }

  /** Wait for admitted changes to settle, stop listening; the pool is the caller's to end. */
  async close(): Promise<void> {
    this.#closing = true;
    while (this.#queue.length > 0 || this.#scheduled) await new Promise((r) => setImmediate(r));
    await this.#chain;
    const unlisten = this.#unlisten;
    this.#unlisten = undefined;
    await unlisten?.().catch(() => {});
    for (const l of this.#listeners) l.end();
  }
}

/** The rows of `records` of `n`'s stream: their positions and checksummed compact bodies. */
function recordRows(n: StreamMeta, records: readonly StoredRecord[]): { positions: number[]; bodies: string[] } {
  const positions: number[] = [];
  const bodies: string[] = [];
  for (const r of records) {
    const position = Number(r.position);
    const generation = Number(r.generation);
    const place = {
      streamId: n.streamId,
      generation,
      position,
      chatId: n.chatId,
      authorAgentId: n.authorAgentId,
      peerAgentId: n.peerAgentId,
    };
    positions.push(position);
    bodies.push(encodeRow(RowKey.record(n.streamId, generation, position), compactRecord(r, place)));
  }
  return { positions, bodies };
}
