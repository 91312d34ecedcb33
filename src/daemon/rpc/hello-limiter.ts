import { errors } from '../../shared/errors.js';

/**
 * Slows down token guessing: each connection may fail `session.hello` a few times, then must
 * wait, doubling each time; a global budget caps failures across all connections.
 */
export class HelloLimiter {
  static readonly FREE_FAILURES = 3;
  static readonly GLOBAL_PER_SECOND = 20;
  #globalWindowStart = 0;
  #globalFailures = 0;
  readonly #perConnection = new Map<number, { failures: number; blockedUntil: number }>();

  /** Throw RATE_LIMITED if this connection must wait before trying again. */
  check(connectionId: number, now = Date.now()): void {
    const c = this.#perConnection.get(connectionId);
    if (c && c.blockedUntil > now) throw errors.rateLimited(c.blockedUntil - now, 'failed session.hello attempts');
    if (now - this.#globalWindowStart < 1000 && this.#globalFailures >= HelloLimiter.GLOBAL_PER_SECOND) {
      throw errors.rateLimited(1000 - (now - this.#globalWindowStart), 'failed session.hello attempts');
    }
  }

  failed(connectionId: number, now = Date.now()): void {
    if (now - this.#globalWindowStart >= 1000) {
      this.#globalWindowStart = now;
      this.#globalFailures = 0;
    }
    this.#globalFailures++;
    const c = this.#perConnection.get(connectionId) ?? { failures: 0, blockedUntil: 0 };
    c.failures++;
    if (c.failures >= HelloLimiter.FREE_FAILURES)
      c.blockedUntil = now + Math.min(30_000, 250 * 2 ** (c.failures - HelloLimiter.FREE_FAILURES));
    this.#perConnection.set(connectionId, c);
  }

  succeeded(connectionId: number): void {
    this.#perConnection.delete(connectionId);
  }

  forget(connectionId: number): void {
    this.#perConnection.delete(connectionId);
  }
}
