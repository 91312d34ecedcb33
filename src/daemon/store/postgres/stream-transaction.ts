// The transaction of one group commit of the PostgreSQL streams port (its scheduling, deadline
// and unknown outcomes are pg-group-commit.ts's). Every change carries the head it was decided on
// as a precondition, checked in the transaction by a conditional UPDATE of the head row (which
// also row-locks it until COMMIT). The usual group is one statement (group-statement.ts), so a
// change whose head moved (another daemon) is refused alone while the rest commits, paying one
// fsync for all; a change whose operation id or clientMessageId another daemon took first aborts
// that statement, and the group is redone with a savepoint per change, to refuse only that one.

import postgres from 'postgres';
import { expandOperation, type CompactOperation } from '../record-layout.js';
import type { CommitOutcome, StreamChange } from '../port/stream-port.js';
import type { Sql } from './connection.js';
import { groupStatement, type Layered } from './group-statement.js';
import { decodeHead } from './head-cache.js';
import { decodeRow, encodeRow, RowKey } from './row-codec.js';
import {
  commitSessionOf,
  insertHead,
  notifyHead,
  resetPlans,
  selectHead,
  selectHeadsOf,
  selectMessagePositions,
  selectOperationBody,
  sessionOf,
  type Scope,
  type Session,
} from './stream-statements.js';

/** An admitted change waiting for its group commit. */
export interface Admitted {
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
export function bodyOf(g: Admitted): string {
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

/**
 * Whether an error means the session is gone (no verdict on what it was doing), as opposed to
 * an error the server answered with (SQLSTATE other than connection or operator classes).
 */
export function connectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57') || code.startsWith('58') || code.startsWith('XX');
}

/** Whether an error ended the session it came from (a driver error: the socket is gone; or FATAL). */
function sessionEnded(err: unknown): boolean {
  if (!(err instanceof postgres.PostgresError)) return true;
  return err.severity === 'FATAL' || err.severity === 'PANIC' || err.code.startsWith('08');
}

type TxSql = Parameters<Parameters<Sql['begin']>[1]>[0];
type Reserved = Awaited<ReturnType<Sql['reserve']>>;

/** The group commit's own connection; busy while a group is out on it. */
interface Own {
  sql: Reserved;
  busy: boolean;
}
type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

// A failure of a statement of a transaction fails the transaction too: it is reported there.
const noop = (): void => {};

export interface StreamTransactionOptions {
  /** A change the directory denied in the transaction: its outcome (the caller tells the directory). */
  denied(change: StreamChange, reason: 'session' | 'grant'): CommitOutcome;
  /** A stale change found this stored head body: the committed head once it settles. */
  noteStale(streamId: string, body: string): void;
}

export class StreamTransactions {
  readonly #sql: Sql;
  readonly #o: StreamTransactionOptions;
  /**
   * The connection the fast path runs on, kept from group to group while its session lasts: it
   * plans the group statement once (commitSessionOf), and a group never waits for a pool
   * connection behind reads. Another is reserved when its session ended, or while a group that
   * was answered past its deadline is still out on it (that one goes back to the pool once it
   * settled).
   */
  #own: Own | undefined;
  #closed = false;

  constructor(sql: Sql, options: StreamTransactionOptions) {
    this.#sql = sql;
    this.#o = options;
  }

  /** The group's transaction: the pipelined statement, or one savepoint a change; throws without a verdict. */
  async transact(group: Admitted[], onSession: (s: Session | null) => void): Promise<CommitOutcome[]> {
    for (const g of group) if (g.change.kind === 'append' && g.change.ready) await g.change.ready;
    const slow = () =>
      this.#sql.begin(async (tx) => {
        // Not awaited: sent ahead of the group's statements on the same connection.
        const asked = sessionOf(tx).then(([p]) => {
          onSession(p ?? null);
        }, noop);
        // Each change notifies inside its savepoint: a refused one's notice is rolled back with it.
        const result = await this.#oneByOne(tx, group);
        await asked;
        return result;
      });
    if (!group.every((g) => g.change.expect !== null)) return slow();
    try {
      return await this.#pipelined(group, onSession);
    } catch (err) {
      // A unique key another daemon took first aborted the pipelined transaction (the server
      // said so: nothing of it was written). Again, a savepoint each, to refuse only that change.
      if ((err as { code?: string }).code !== '23505') throw err;
      return slow();
    }
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
    const own = await this.#connection();
    own.busy = true;
    const w = own.sql;
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
    const asked = settle(commitSessionOf(w).execute());
    const begun = one ? null : settle(w`begin`.execute());
    const statements = layers.map((l) => settle(groupStatement(w, l.changes)));
    const committed = one ? null : settle(w`commit`.execute());
    const a = await asked;
    onSession(a.ok ? (a.value[0] ?? null) : null);
    const moved = await Promise.all(statements);
    const all: Settled<unknown>[] = [a, ...(begun ? [await begun] : []), ...moved, ...(committed ? [await committed] : [])];
    own.busy = false;
    // A session that ended is among postgres.js's closed connections (or about to be):
    // releasing it would hand it to the pool as an open one.
    const gone = all.some((x) => !x.ok && sessionEnded(x.error));
    // Kept only from a pool that has another connection for everything else (a tool's pool of one).
    const kept = !gone && this.#own === own && !this.#closed && this.#sql.options.max > 1;
    if (!kept && this.#own === own) this.#own = undefined;
    if (!kept && !gone) this.#release(own);
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
    // Read after the commit: the head now, which is at least as new as the one that refused it.
    if (stale.length > 0) for (const r of await selectHeadsOf(this.#sql, [...new Set(stale)])) heads.set(r.stream_id, r.meta);
    return group.map((g, i): CommitOutcome => {
      if (ok.has(i)) return { status: 'ok' };
      const reason = denied.get(i);
      if (reason) return this.#o.denied(g.change, reason);
      const streamId = g.change.next.streamId;
      const body = heads.get(streamId);
      if (body !== undefined) this.#o.noteStale(streamId, body);
      return { status: 'stale', head: body === undefined ? undefined : decodeHead(streamId, body) };
    });
  }

  /** The fast path's connection: the one kept, unless a group is still out on it. */
  async #connection(): Promise<Own> {
    const kept = this.#own;
    if (kept && !kept.busy) return kept;
    const own: Own = { sql: await this.#sql.reserve(), busy: false };
    // One reserved meanwhile by another group (only after a deadline) is released when it settles.
    this.#own = own;
    return own;
  }

  /** Back to the pool, planning as the pool's connections do (sent before any query of its next user). */
  #release(own: Own): void {
    resetPlans(own.sql).execute().catch(noop);
    own.sql.release();
  }

  /** No more groups (the store is closing, its changes settled): the kept connection goes back to the pool. */
  close(): void {
    this.#closed = true;
    const own = this.#own;
    this.#own = undefined;
    if (own && !own.busy) this.#release(own);
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
  async #apply(sp: Scope, g: Admitted): Promise<void> {
    const c = g.change;
    const n = c.next;
    const body = bodyOf(g);
    if (c.expect !== null) {
      const done = await groupStatement(sp, [{ change: c, meta: body, after: afterOf(g) }]);
      const reason = done.denied.get(n.streamId);
      if (reason) throw new Refusal(this.#o.denied(c, reason));
      if (!done.moved.has(n.streamId)) throw new Refusal({ status: 'stale', head: undefined });
      return;
    }
    // Only a reset of a head rebuilt from its records has no precondition: it writes the head,
    // whatever the stored one is, and nothing else.
    await insertHead(sp, n, { body, replace: true });
    await notifyHead(sp, n, body);
  }

  /** What a change refused inside its savepoint becomes; an error that is not a refusal fails the group. */
  async #refusal(tx: TxSql, c: StreamChange, err: unknown): Promise<CommitOutcome> {
    const streamId = c.next.streamId;
    if (err instanceof Refusal && err.outcome.status === 'denied') return err.outcome;
    if (err instanceof Refusal && err.outcome.status === 'stale') {
      const row = await selectHead(tx, streamId);
      if (row) this.#o.noteStale(streamId, row.meta);
      return { status: 'stale', head: row ? decodeHead(streamId, row.meta) : undefined };
    }
    const pg = err as { code?: string; constraint_name?: string };
    if (pg.code === '23505' && c.kind === 'append') {
      // Whichever key the statement hit first, a taken operation id answers before a taken
      // message id (a replay wins, docs/protocol.md §6): both are looked up, in that order.
      const opId = c.operation.operationId;
      const op = await selectOperationBody(tx, streamId, opId);
      if (op !== undefined)
        return {
          status: 'duplicate',
          what: 'operation',
          operation: expandOperation(opId, decodeRow<CompactOperation>(RowKey.operation(streamId, opId), op, { streamId })),
        };
      if (pg.constraint_name === 'message_ids_pkey') {
        const rows = await selectMessagePositions(
          tx,
          streamId,
          c.next.generation,
          c.messageIds.map(([id]) => id),
        );
        const first = c.messageIds.find(([id]) => rows.some((r) => r.client_message_id === id));
        const row = rows.find((r) => r.client_message_id === first?.[0]);
        if (first && row) return { status: 'duplicate', what: 'messageId', clientMessageId: first[0], position: Number(row.position) };
      }
    }
    throw err;
  }
}
