import type { Backoff } from '../shared/backoff.js';
import { RateLimitedError } from './errors.js';

// Refusals that waiting cures (`transient`): how long to wait, and calls that wait them out.

/**
 * How long to wait before asking again after a transient refusal: the loop's next backoff step,
 * and never less than a RATE_LIMITED's `retryAfterMs`.
 */
export function retryDelay(err: Error, backoff: Backoff): number {
  const step = backoff.next()?.delayMs ?? 0;
  const after = err instanceof RateLimitedError && Number.isFinite(err.retryAfterMs) ? err.retryAfterMs : 0;
  return Math.max(step, after);
}

/**
 * `call()`, asked again after each RATE_LIMITED's `retryAfterMs` (a refused call did nothing)
 * for as long as the next try still starts within `waitMs`; then the refusal is the answer.
 */
export async function waitingOutRateLimit<T>(call: () => Promise<T>, waitMs: number): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof RateLimitedError) || !Number.isFinite(err.retryAfterMs) || Date.now() + err.retryAfterMs > deadline) throw err;
      await new Promise((r) => setTimeout(r, err.retryAfterMs));
    }
  }
}
