// The gate every store's reads and writes pass (the abstract-level manner: the public side checks
// the state, the engine never does): refused while the store closes, writes refused once a commit's
// outcome is unknown. One gate per store, shared by its streams and its directory, so a failed
// commit of either half makes the whole store read-only; one wording of each refusal.

import { errors, type YelloError } from '../../../shared/errors.js';

/** How a backend leaves read-only: a restart (LevelDB) or a reload once the database answers (PostgreSQL). */
export type Recovery = 'restart' | 'reconnect';

const READ_ONLY_HOW: Record<Recovery, string> = {
  restart: 'restart it',
  reconnect: 'it recovers once the database is reachable again (or restart it)',
};

/**
 * STORAGE_FAILURE/WRITE_FAILED of every change of a group whose commit gave no verdict: `cause` is
 * what the engine said (an fsync error, a lost connection, a deadline).
 */
export function writeFailed(cause: string): YelloError {
  return errors.storageFailure(
    null,
    'WRITE_FAILED',
    `a commit failed (${cause}): this write may or may not be durable (outcome unknown; never resend it blindly: operations.get tells once the daemon is back); the daemon is read-only until then`,
  );
}

export class StoreGate {
  readonly #recovery: Recovery;
  #closing = false;
  #readOnly = false;
  readonly #failureListeners: Array<() => void> = [];

  constructor(recovery: Recovery) {
    this.#recovery = recovery;
  }

  /** True once `close()` began: reads and writes answer SHUTTING_DOWN. */
  get closing(): boolean {
    return this.#closing;
  }

  /** True once a commit's outcome was unknown, until `recovered()`. */
  get readOnly(): boolean {
    return this.#readOnly;
  }

  /** Reads: refused with SHUTTING_DOWN (outcome null) once the store is closing. */
  assertOpen(): void {
    if (this.#closing) throw errors.shuttingDown(null, null);
  }

  /** Writes: refused (nothing written) while read-only, and once the store is closing. */
  assertWritable(operationId: string | null = null): void {
    if (this.#readOnly)
      throw errors.storageFailure(
        operationId,
        'READ_ONLY',
        `the daemon is read-only after a commit whose outcome is unknown; nothing was written; ${READ_ONLY_HOW[this.#recovery]}`,
      );
    if (this.#closing) throw errors.shuttingDown(operationId, 'not-written');
  }

  /** From now on reads and writes are refused (SHUTTING_DOWN). */
  close(): void {
    this.#closing = true;
  }

  /**
   * The unknown-outcome latch: writes are refused from now on; the failure listeners run once per
   * turn to read-only (caches of admitted state are dropped, a recovery starts).
   */
  fail(): void {
    if (this.#readOnly) return;
    this.#readOnly = true;
    for (const l of this.#failureListeners) l();
  }

  /** Writes are accepted again (PostgreSQL, after the reload that follows a reconnect). */
  recovered(): void {
    this.#readOnly = false;
  }

  onFailure(listener: () => void): void {
    this.#failureListeners.push(listener);
  }
}

/** A thrown value as a rejected promise (what the synchronous part of a call threw). */
export function rejected(err: unknown): Promise<never> {
  return Promise.reject(err instanceof Error ? err : new Error(String(err)));
}
