import { errors } from '../../shared/errors.js';
import { monotonicMs } from '../runtime/clock.js';

/** Per-connection failure state; dropped on success or when the connection closes. */
interface Failures {
  failures: number;
  blockedUntil: number;
}

/**
 * Slows down failing `session.hello` callers, and only them (docs/security.md "Hello
 * limiting"). A connection may fail a few times, then must wait before each next try, the wait
 * doubling up to 30 s; while it waits its hellos are refused unread. When failures across all
 * connections exceed a daemon-wide rate, a failing connection loses its free tries and waits at
 * once. A valid token on a connection that has not failed is never refused, whatever others
 * did: the daemon-wide rate only decides how fast the failing callers are slowed. Tokens carry
 * 256 random bits, so this bounds the cost of a flood, not the odds of a guess.
 *
 * Every time here is monotonic (`clock.ts`): a wall clock stepped back cannot lock anyone out.
 */
export class HelloLimiter {
  static readonly FREE_FAILURES = 3;
  /** Failures per second across connections past which failing connections wait from their first failure. */
  static readonly GLOBAL_PER_SECOND = 20;
  static readonly MAX_WAIT_MS = 30_000;
  readonly #now: () => number;
  #globalWindowStart = -Infinity;
  #globalFailures = 0;
  readonly #perConnection = new Map<number, Failures>();

  /** `now`: milliseconds on a monotonic clock (injected by tests). */
  constructor(now: () => number = monotonicMs) {
    this.#now = now;
  }

  /** Throw RATE_LIMITED if this connection must wait before trying again (its own failures only). */
  check(connectionId: number): void {
    const now = this.#now();
    const c = this.#perConnection.get(connectionId);
    if (c && c.blockedUntil > now)
      throw errors.rateLimited(Math.ceil(c.blockedUntil - now), 'failed session.hello attempts on this connection');
  }

  /**
   * A failed hello on this connection. Returns the wait to answer with RATE_LIMITED instead of
   * UNAUTHENTICATED when failures across the daemon are over their rate (the flood is told to
   * slow down), else null.
   */
  failed(connectionId: number): number | null {
    const now = this.#now();
    if (now - this.#globalWindowStart >= 1000) {
      this.#globalWindowStart = now;
      this.#globalFailures = 0;
    }
    this.#globalFailures++;
    const c = this.#perConnection.get(connectionId) ?? { failures: 0, blockedUntil: 0 };
    c.failures++;
    // In a flood, a new connection gets no free tries: reconnecting does not reset the wait.
    const flood = this.#globalFailures > HelloLimiter.GLOBAL_PER_SECOND;
    const free = flood ? 0 : HelloLimiter.FREE_FAILURES;
    let wait = 0;
    if (c.failures >= free) {
      const doublings = Math.min(16, c.failures - Math.max(1, free));
      wait = Math.min(HelloLimiter.MAX_WAIT_MS, 250 * 2 ** doublings);
      c.blockedUntil = now + wait;
    }
    this.#perConnection.set(connectionId, c);
    return flood ? wait : null;
  }

  succeeded(connectionId: number): void {
    this.#perConnection.delete(connectionId);
  }

  forget(connectionId: number): void {
    this.#perConnection.delete(connectionId);
  }
}
