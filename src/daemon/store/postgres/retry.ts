// The one retry loop of the PostgreSQL store: work that must eventually happen once the database
// answers again (leaving read-only after an unknown outcome, reading the heads again after a
// LISTEN reconnect) is tried until it succeeds or the store closes, with the project's one
// backoff between tries, jittered so that every daemon cut off by the same failover does not
// come back in the same millisecond.

import { Backoff } from '../../../shared/backoff.js';
import { errors, type YelloError } from '../../../shared/errors.js';

/** 100 ms doubling to 5 s, jittered. */
export const RETRY_BACKOFF = { minDelayMs: 100, maxDelayMs: 5_000, jitter: true } as const;

export interface RetryOptions {
  /** The work; it throws while it cannot be done yet. */
  attempt: () => Promise<void>;
  /** Read before and after every wait and try: once true, the loop ends quietly. */
  stopped: () => boolean;
  /**
   * Told of the first failure (not after `stopped()`), with the attempt's number: a database cut
   * off for minutes is logged once, not once per try (issue 52), and `recovered` says when it ends.
   */
  failed: (err: unknown, attempt: number) => void;
  /** Told once the work succeeded after at least one failure, with the number of tries it took. */
  recovered?: (attempts: number) => void;
  /** Wait the first delay before the first try too (default: the first try at once). */
  delayFirst?: boolean;
  /** How to wait (default: an unref'd timer); a caller may resolve it early to retry at once. */
  sleep?: (ms: number) => Promise<void>;
}

const unrefSleep = (ms: number): Promise<void> =>
  new Promise((r) => {
    setTimeout(r, ms).unref();
  });

/** Try `attempt` until it succeeds or `stopped()`; never rejects. */
export async function retryUntilDone(o: RetryOptions): Promise<void> {
  const sleep = o.sleep ?? unrefSleep;
  const backoff = new Backoff(RETRY_BACKOFF);
  for (let step = backoff.next(); step && !o.stopped(); step = backoff.next()) {
    if (o.delayFirst === true || step.attempt > 1) {
      await sleep(step.delayMs);
      if (o.stopped()) return;
    }
    try {
      await o.attempt();
      if (step.attempt > 1) o.recovered?.(step.attempt);
      return;
    } catch (err) {
      if (o.stopped()) return;
      if (step.attempt === 1) o.failed(err, step.attempt);
    }
  }
}

/**
 * How long a caller waits for the database: a group commit not answered by then is answered as an
 * unknown outcome (STORAGE_FAILURE/WRITE_FAILED; the store turns read-only and recovers once the
 * database answers), a session check as STORAGE_FAILURE/UNAVAILABLE. A daemon cut off from its
 * database without a word (packets dropped, the TCP connection still open) held its callers
 * until TCP gave up, minutes later (issue 52 finding 7); now it answers well within the client
 * library's call timeout (30 s; a coordinator's 10 s).
 */
export const ANSWER_DEADLINE_MS = 5_000;

/**
 * How long a recovery waits for a commit of this daemon still in flight before it gives up and
 * is retried: one waiting on a lock, or on a synchronous standby that is not streaming (a
 * promoted primary acknowledges nothing until one is back), must not make recover() wait
 * silently with it (test/pg/store-recovers.test.ts).
 */
export const RECOVER_WAIT_MS = 15_000;

/** How long the store's close() lets queries still in flight finish before their connections are ended. */
export const CLOSE_WAIT_MS = 5_000;

/** The store's waits on PostgreSQL. */
export interface PgWaits {
  /** ANSWER_DEADLINE_MS. */
  answerDeadlineMs: number;
  /** RECOVER_WAIT_MS. */
  recoverWaitMs: number;
  /** CLOSE_WAIT_MS. */
  closeWaitMs: number;
}

/** The waits of a daemon; tests give a store shorter ones, so as not to sit out the production figures. */
export const PG_WAITS: Readonly<PgWaits> = {
  answerDeadlineMs: ANSWER_DEADLINE_MS,
  recoverWaitMs: RECOVER_WAIT_MS,
  closeWaitMs: CLOSE_WAIT_MS,
};

/**
 * `work`, or a rejection with `timeout()` once `ms` passed first (`work` goes on). The one wait
 * on PostgreSQL with a bound: a caller's answer (withinDeadline), a recovery's wait for this
 * daemon's own commits (pg-group-commit.ts settledForRecovery).
 */
export async function within<T>(work: Promise<T>, ms: number, timeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(timeout());
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** `work`, or a rejection naming the deadline (code DEADLINE) once `ms` passed (`work` goes on). */
export function withinDeadline<T>(work: Promise<T>, what: string, ms: number): Promise<T> {
  return within(work, ms, () => Object.assign(new Error(`${what}: no answer from PostgreSQL within ${ms / 1000} s`), { code: 'DEADLINE' }));
}

/** The refusal of a recovery that gave up, after `ms`, on a commit of `half` still unanswered (the store stays read-only). */
export function commitUnanswered(half: 'stream' | 'directory', ms: number): YelloError {
  return errors.storageFailure(
    null,
    'READ_ONLY',
    `the daemon is read-only: a ${half} commit it sent ${ms / 1000} s ago has not been answered by PostgreSQL yet (waiting on a lock, or on a synchronous standby that is not streaming?); recovery is retried`,
  );
}
