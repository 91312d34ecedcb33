// The group-commit engine of the PostgreSQL store, one for its streams and one for its directory:
// the port's scheduling policy (port/group-commit.ts: one transaction out at a time, the next
// one takes everything admitted meanwhile), a deadline on the transaction, and the one handling
// of a transaction that ends without a verdict (the connection lost, COMMIT unanswered, the
// deadline passed): every change of it is an unknown outcome (STORAGE_FAILURE/WRITE_FAILED) and
// the store's gate turns read-only (nothing retried silently) until the store recovered.

import type { Logger } from 'pino';
import type { YelloError } from '../../../shared/errors.js';
import { writeFailed, type StoreGate } from '../port/gate.js';
import { GroupCommit } from '../port/group-commit.js';
import { commitUnanswered, within, withinDeadline, type PgWaits } from './retry.js';
import type { Session } from './stream-statements.js';

/** What a transaction without a verdict leaves: the error, its session (if it answered), whether it is still out. */
export interface NoVerdict {
  error: unknown;
  session: Session | null;
  /** The transaction itself, when it was answered past its deadline: it may still commit; settles when it did. */
  stillOut: Promise<void> | null;
}

export interface PgGroupCommitOptions<T, O> {
  /** Which half, for logs and errors. */
  half: 'stream' | 'directory';
  gate: StoreGate;
  log?: Logger | undefined;
  /** What the group waits for before its transaction, outside its deadline (the signatures of its records). */
  before?(group: T[]): Promise<void>;
  /** The group's transaction: an outcome per item, or a throw without a verdict. `onSession` is told the session it ran in. */
  transact(group: T[], onSession: (s: Session | null) => void): Promise<O[]>;
  /** Whether the transaction is answered within `waits.answerDeadlineMs`, else as an unknown outcome. */
  deadline: boolean;
  /** The store's waits (retry.ts PG_WAITS in a daemon). */
  waits: PgWaits;
  /** The outcome of every item of a group without a verdict. */
  unknown(error: YelloError): O;
  /** Told of a group without a verdict before its items settle (the streams keep its operations pending). */
  noVerdict?(group: T[], what: NoVerdict): void;
  /** Settle one item with its outcome (caches first, then its promise). */
  settle(item: T, outcome: O): void;
}

const noop = (): void => {};

export class PgGroupCommit<T, O> {
  readonly #o: PgGroupCommitOptions<T, O>;
  readonly #groups: GroupCommit<T>;
  /** Transactions answered past their deadline that have not settled yet. */
  readonly #outstanding = new Set<Promise<void>>();
  readonly #listeners: Array<(group: readonly T[], outcomes: readonly O[], seconds: number) => void> = [];
  /** Group commits and the changes in them, since open. */
  readonly stats = { batches: 0, writes: 0 };

  constructor(options: PgGroupCommitOptions<T, O>) {
    this.#o = options;
    this.#groups = new GroupCommit((group) => this.#commit(group));
  }

  push(item: T): void {
    this.#groups.push(item);
  }

  /** Run `task` after the groups cut before it (a reload never reads before this daemon's own earlier commit settled). */
  after<R>(task: () => Promise<R>): Promise<R> {
    return this.#groups.after(task);
  }

  /** Settles once every group cut so far settled (never rejects). */
  get settled(): Promise<void> {
    return this.#groups.settled;
  }

  /** Settles once every group cut so far and every transaction answered past its deadline settled (one may join while it waits). */
  async allSettled(): Promise<void> {
    await this.#groups.settled;
    while (this.#outstanding.size > 0) await Promise.all([...this.#outstanding]);
  }

  /**
   * Before a recovery (of either half) reloads what this daemon's commits decide: resolves once
   * allSettled() did. Not forever: a commit still waiting (on a lock, on a synchronous standby
   * not back) throws commitUnanswered once `waits.recoverWaitMs` passed, and the caller retries
   * with backoff; a recovery that never returned left the daemon read-only with nothing said.
   */
  async settledForRecovery(): Promise<void> {
    const ms = this.#o.waits.recoverWaitMs;
    await within(this.allSettled(), ms, () => commitUnanswered(this.#o.half, ms));
  }

  /** Resolves once nothing is queued or out. */
  drained(): Promise<void> {
    return this.#groups.drained();
  }

  /** Called after each group with its items, their outcomes and the seconds the transaction took. */
  onCommit(listener: (group: readonly T[], outcomes: readonly O[], seconds: number) => void): void {
    this.#listeners.push(listener);
  }

  async #commit(group: T[]): Promise<void> {
    const started = performance.now();
    await this.#o.before?.(group);
    let session: Session | null = null;
    const work = this.#o.transact(group, (s) => {
      session = s;
    });
    let outcomes: O[];
    try {
      outcomes = await (this.#o.deadline ? withinDeadline(work, `a ${this.#o.half} group commit`, this.#o.waits.answerDeadlineMs) : work);
    } catch (err) {
      // No verdict from the database: the transaction may or may not have committed (or commit
      // still, once a link cut without a word heals: its changes are checked then).
      const message = (err as Error).message;
      this.#o.log?.error(
        { err: { message, code: (err as { code?: string }).code } },
        `a PostgreSQL ${this.#o.half} commit failed; its outcome is unknown; the store is read-only`,
      );
      this.#o.gate.fail();
      const stillOut = (err as { code?: string }).code === 'DEADLINE' ? this.#track(work) : null;
      this.#o.noVerdict?.(group, { error: err, session, stillOut });
      // An error each: the appender adds its operation id to the one it is given.
      outcomes = group.map(() => this.#o.unknown(writeFailed(`the commit to PostgreSQL failed: ${message}`)));
    }
    this.stats.batches++;
    this.stats.writes += group.length;
    const seconds = (performance.now() - started) / 1000;
    for (const [i, item] of group.entries()) this.#o.settle(item, outcomes[i] ?? this.#o.unknown(writeFailed('no outcome')));
    for (const l of this.#listeners) l(group, outcomes, seconds);
  }

  /** A transaction answered past its deadline: outstanding until it settles. */
  #track(work: Promise<unknown>): Promise<void> {
    const settling: Promise<void> = work.then(noop, noop).finally(() => this.#outstanding.delete(settling));
    this.#outstanding.add(settling);
    return settling;
  }
}
