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

/** Checks out at once, at most: more wait and go together in the next query. */
const MAX_OUT = 2;

/**
 * How long a call waits for the database to answer its check before it is answered
 * STORAGE_FAILURE/UNAVAILABLE: a daemon cut off from its database answers its callers well within
 * their call timeout (the client library's default is 30 s, a coordinator's 10 s), instead of
 * holding them until TCP gives up.
 */
export const SESSION_CHECK_DEADLINE_MS = 5_000;

interface Waiting {
  agentId: string;
  tokenHash: string;
  resolve: (valid: boolean) => void;
  reject: (err: unknown) => void;
}

export class SessionChecks {
  readonly #sql: Sql;
  readonly #onUnreachable: (err: unknown) => void;
  #waiting: Waiting[] = [];
  #out = 0;

  /** `onUnreachable` is told of each check the database did not answer (the store logs the loss once). */
  constructor(sql: Sql, onUnreachable: (err: unknown) => void) {
    this.#sql = sql;
    this.#onUnreachable = onUnreachable;
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
    void this.#flush(batch).finally(() => {
      this.#out--;
      this.#send();
    });
  }

  async #flush(batch: Waiting[]): Promise<void> {
    const hashes = [...new Set(batch.map((w) => w.tokenHash))];
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`no answer from PostgreSQL within ${SESSION_CHECK_DEADLINE_MS / 1000} s`));
      }, SESSION_CHECK_DEADLINE_MS);
    });
    let rows: Array<{ token_hash: string; agent_id: string }>;
    try {
      rows = await Promise.race([
        this.#sql<
          { token_hash: string; agent_id: string }[]
        >`select token_hash, agent_id from tokens where token_hash = any(${hashes}::text[])`,
        deadline,
      ]);
    } catch (err) {
      this.#onUnreachable(err);
      const refusal = errors.storageFailure(
        null,
        'UNAVAILABLE',
        `the daemon cannot reach its PostgreSQL database to check this session (${(err as Error).message}); nothing was done; ask again once it is reachable, or through another daemon`,
      );
      for (const w of batch) w.reject(refusal);
      return;
    } finally {
      clearTimeout(timer);
    }
    const owner = new Map(rows.map((r) => [r.token_hash, r.agent_id]));
    for (const w of batch) w.resolve(owner.get(w.tokenHash) === w.agentId);
  }
}
