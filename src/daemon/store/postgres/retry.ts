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
  /** Told of each failure (not after `stopped()`), with the attempt's number from 1. */
  failed: (err: unknown, attempt: number) => void;
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
      return;
    } catch (err) {
      if (o.stopped()) return;
      o.failed(err, step.attempt);
    }
  }
}

/**
 * How long a recovery waits for a commit of this daemon still in flight before it gives up and
 * is retried: one waiting on a lock, or on a synchronous standby that is not streaming (a
 * promoted primary acknowledges nothing until one is back), must not make recover() wait
 * silently with it (test/pg/store-recovers.test.ts).
 */
export const RECOVER_WAIT_MS = 15_000;

/** Whether `chain` (a commit chain: it never rejects) settled within RECOVER_WAIT_MS. */
export async function chainSettled(chain: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    chain.then(() => true),
    new Promise<false>((r) => {
      timer = setTimeout(() => {
        r(false);
      }, RECOVER_WAIT_MS);
    }),
  ]);
  clearTimeout(timer);
  return settled;
}

/** The refusal of a recovery that gave up on a commit of `half` still unanswered (the store stays read-only). */
export function commitUnanswered(half: 'stream' | 'directory'): YelloError {
  return errors.storageFailure(
    null,
    'READ_ONLY',
    `the daemon is read-only: a ${half} commit it sent ${RECOVER_WAIT_MS / 1000} s ago has not been answered by PostgreSQL yet (waiting on a lock, or on a synchronous standby that is not streaming?); recovery is retried`,
  );
}
