// The session check of every call on PostgreSQL (issue 52 finding 7): "the old token, and every
// session opened with it, stop working at once" after `agents.rotateToken` or `agents.disable`
// through any daemon. A daemon's rows in memory learn of a revocation through another daemon
// only when its notice arrives (later still across a partition), so a session's call is
// answered only once the database said its token row still names its agent: a rotation
// replaced that row, a disable deleted it. Batched as the admission lookups are: one query out
// at once while fewer than MAX_OUT are, the calls arriving meanwhile in the next one, so the
// cost is one round trip a call at one client and a fraction of one under load
// (docs/multi-host.md "What a revocation costs").

import { errors } from '../../../shared/errors.js';
import type { Sql } from './connection.js';
import { withinDeadline } from './retry.js';

/** Checks out at once, at most: more wait and go together in the next query. */
const MAX_OUT = 2;

interface Waiting {
  agentId: string;
  tokenHash: string;
  resolve: (valid: boolean) => void;
  reject: (err: unknown) => void;
}

export class SessionChecks {
  readonly #sql: Sql;
  readonly #onUnreachable: (err: unknown) => void;
  readonly #onReachable: () => void;
  readonly #closing: () => boolean;
  readonly #deadlineMs: number;
  #waiting: Waiting[] = [];
  #out = 0;
  /** Settles once the last batch sent was answered (never rejects). */
  #answered: Promise<void> = Promise.resolve();

  /**
   * Told of each check the database did not answer in time, and of each it did (the store logs a
   * loss once). `closing` says whether the store is closing: a check its pool's end cut off is
   * the daemon stopping, not the database lost. `deadlineMs`: how long a check waits for an
   * answer (retry.ts ANSWER_DEADLINE_MS in a daemon).
   */
  constructor(sql: Sql, onUnreachable: (err: unknown) => void, onReachable: () => void, closing: () => boolean, deadlineMs: number) {
    this.#sql = sql;
    this.#onUnreachable = onUnreachable;
    this.#onReachable = onReachable;
    this.#closing = closing;
    this.#deadlineMs = deadlineMs;
  }

  /** Whether `tokenHash` is still the token of `agentId`, an enabled agent, as the database has it now. */
  valid(agentId: string, tokenHash: string): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.#waiting.push({ agentId, tokenHash, resolve, reject });
      if (this.#out < MAX_OUT) this.#send();
    });
  }

  #send(): void {
    const batch = this.#waiting.splice(0);
    if (batch.length === 0) return;
    this.#out++;
    const previous = this.#answered;
    const answered = this.#flush(batch, previous);
    this.#answered = answered;
    void answered.finally(() => {
      this.#out--;
      this.#send();
    });
  }

  /**
   * One query for the batch; its calls are answered after the previous batch's, so calls start
   * in the order they arrived (two calls of one connection sent at once, as before the check).
   */
  async #flush(batch: Waiting[], previous: Promise<void>): Promise<void> {
    const hashes = [...new Set(batch.map((w) => w.tokenHash))];
    let rows: Array<{ token_hash: string; agent_id: string }>;
    try {
      // A daemon cut off from its database answers its callers within the deadline (retry.ts).
      rows = await withinDeadline(
        this.#sql<
          { token_hash: string; agent_id: string }[]
        >`select token_hash, agent_id from tokens where token_hash = any(${hashes}::text[])`,
        'the session check',
        this.#deadlineMs,
      );
    } catch (err) {
      await previous;
      if (this.#closing()) {
        for (const w of batch) w.reject(errors.shuttingDown(null, null));
        return;
      }
      this.#onUnreachable(err);
      const refusal = errors.storageFailure(
        null,
        'UNAVAILABLE',
        `the daemon cannot reach its PostgreSQL database to check this session (${(err as Error).message}); nothing was done; ask again once it is reachable, or through another daemon`,
      );
      for (const w of batch) w.reject(refusal);
      return;
    }
    await previous;
    this.#onReachable();
    const owner = new Map(rows.map((r) => [r.token_hash, r.agent_id]));
    for (const w of batch) w.resolve(owner.get(w.tokenHash) === w.agentId);
  }
}
