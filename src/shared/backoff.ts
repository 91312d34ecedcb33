/** Options of a {@link Backoff}. */
export interface BackoffOptions {
  /** Delay before the first attempt, in ms. */
  minDelayMs: number;
  /** Delays double up to this, in ms. */
  maxDelayMs: number;
  /** Give up after this many attempts; default: never. */
  maxAttempts?: number;
  /**
   * Scale each delay by a random factor in [0.5, 1), so that many clients cut off by the
   * same daemon restart do not all dial back in the same millisecond. Default false.
   */
  jitter?: boolean;
}

/** One attempt of a {@link Backoff}: its number (from 1) and how long to wait before it. */
export interface BackoffStep {
  attempt: number;
  delayMs: number;
}

/**
 * Exponential backoff of a reconnect loop: attempt n waits min(maxDelayMs, minDelayMs·2^(n−1))
 * ms (times the jitter factor). One instance per loop: YelloClient's reconnect, the
 * Coordinator's, and the PostgreSQL store's recovery all use it (the one backoff; in shared
 * because both the client and the daemon use it, and it does no I/O).
 */
export class Backoff {
  readonly #options: BackoffOptions;
  #attempt = 0;

  constructor(options: BackoffOptions) {
    this.#options = options;
  }

  /** Attempts handed out so far. */
  get attempt(): number {
    return this.#attempt;
  }

  /** The next attempt, or null once `maxAttempts` are used up. */
  next(): BackoffStep | null {
    const { minDelayMs, maxDelayMs, maxAttempts, jitter } = this.#options;
    if (maxAttempts !== undefined && this.#attempt >= maxAttempts) return null;
    const attempt = ++this.#attempt;
    const delayMs = Math.min(maxDelayMs, minDelayMs * 2 ** (attempt - 1));
    return { attempt, delayMs: jitter ? delayMs * (0.5 + Math.random() / 2) : delayMs };
  }
}
