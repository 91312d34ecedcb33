// The operations of PostgreSQL commits whose outcome is unknown (no verdict: the connection lost,
// COMMIT unanswered, the deadline passed), for `operations.get`: `pending` while the session of
// that commit may still be finishing it (waiting for the standby) or while a commit answered past
// its deadline is still out; once neither, the tables tell.

import type { Sql } from './connection.js';
import { sessionAlive, type Session } from './stream-statements.js';
import { connectionLost } from './stream-transaction.js';

const opKey = (streamId: string, operationId: string) => `${streamId}/${operationId}`;

export class UnknownOutcomes {
  readonly #sql: Sql;
  /** Operations whose commit's outcome is unknown, with the session it ran in (null: gone, or not known). */
  readonly #sessions = new Map<string, Session | null>();
  /** Operations of a commit answered past its deadline whose transaction has not settled yet. */
  readonly #stillOut = new Set<string>();

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  /**
   * A group without a verdict, with its operations: only a lost session can still be committing
   * (an error the server answered with means the transaction was rolled back, and the tables
   * already tell). A commit past its deadline (`stillOut`) is pending until it settles.
   */
  add(
    operations: ReadonlyArray<{ streamId: string; operationId: string }>,
    error: unknown,
    session: Session | null,
    stillOut: Promise<void> | null,
  ): void {
    const keys = operations.map((o) => opKey(o.streamId, o.operationId));
    for (const key of keys) this.#sessions.set(key, connectionLost(error) ? session : null);
    if (!stillOut) return;
    for (const key of keys) this.#stillOut.add(key);
    // Settled: the tables tell now (its session, alive in the pool, says nothing more).
    void stillOut.then(() => {
      for (const key of keys) {
        this.#stillOut.delete(key);
        this.#sessions.delete(key);
      }
    });
  }

  /** Whether the operation's outcome is still open (`pending`); false: ask the tables. */
  async pending(streamId: string, operationId: string): Promise<boolean> {
    const key = opKey(streamId, operationId);
    if (this.#stillOut.has(key)) return true;
    if (!this.#sessions.has(key)) return false;
    const s = this.#sessions.get(key);
    if (s != null && (await sessionAlive(this.#sql, s))) return true;
    this.#sessions.delete(key);
    return false;
  }
}
