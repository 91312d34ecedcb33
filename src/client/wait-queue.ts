/**
 * The client's one way to wait (after nats.js's queued iterator, the one primitive its readers
 * share): {@link Waiters}, woken by whoever changed something, and {@link WaitQueue}, items
 * handed out in order to whoever waits for them. Every wait has a deadline and may take an
 * AbortSignal; none leaves a timer or a listener behind once it settled.
 */

/** setTimeout takes at most 2^31-1 ms; a longer wait (or Infinity) has no timer at all. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Those waiting for something to change; `wake()` tells them all that it may have. */
export class Waiters {
  readonly #waiting = new Set<() => void>();

  /** Wake everyone waiting now (each looks again at what it waits for). */
  wake(): void {
    for (const w of [...this.#waiting]) w();
  }

  /** Resolves at the next `wake()` or after `ms`; rejects with the signal's reason when `signal` aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const settle = () => {
        clearTimeout(timer);
        this.#waiting.delete(done);
        signal?.removeEventListener('abort', aborted);
      };
      const done = () => {
        settle();
        resolve();
      };
      // Not through done(): a promise resolved first ignores the reject after it.
      const aborted = () => {
        settle();
        reject(signal?.reason as Error);
      };
      const timer = ms <= MAX_TIMER_MS ? setTimeout(done, Math.max(0, ms)) : undefined;
      this.#waiting.add(done);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }

  /**
   * Resolves true as soon as `ready()` holds (looked at now and at every wake), false once `ms`
   * passed without it; rejects with the signal's reason when `signal` aborts.
   */
  async until(ready: () => boolean, ms: number, signal?: AbortSignal): Promise<boolean> {
    const deadline = Date.now() + ms;
    for (;;) {
      signal?.throwIfAborted();
      if (ready()) return true;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await this.wait(left, signal);
    }
  }
}

/** A pause of `ms`; rejects with the signal's reason as soon as `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Waiters().wait(ms, signal);
}

/**
 * Items handed out in the order they were pushed, to callers that wait for them. It can end
 * (`end()`: waits return null once what was pushed is taken) or fail (`fail(err)`: once what was
 * pushed is taken, takers get `err` thrown); after either, pushes are dropped.
 */
export class WaitQueue<T> {
  #items: T[] = [];
  #failure: Error | null = null;
  #ended = false;
  readonly #waiters = new Waiters();

  /** Items pushed and not taken. */
  get length(): number {
    return this.#items.length;
  }

  /** Why the queue failed, or null. */
  get failure(): Error | null {
    return this.#failure;
  }

  /** Whether `end()` was called. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Whether the queue ended or failed: nothing more will be pushed. */
  get over(): boolean {
    return this.#ended || this.#failure !== null;
  }

  /** Add an item for the next taker (dropped once the queue is over). */
  push(item: T): void {
    if (this.over) return;
    this.#items.push(item);
    this.#waiters.wake();
  }

  /** The item pushed last and not taken yet, to amend it. */
  last(): T | undefined {
    return this.#items.at(-1);
  }

  /** Drop every item not taken yet. */
  clear(): void {
    this.#items = [];
  }

  /** Take the next item now, or undefined. */
  shift(): T | undefined {
    return this.#items.shift();
  }

  /** No more items: takers get what is queued, then null. */
  end(): void {
    this.#ended = true;
    this.#waiters.wake();
  }

  /** Stop with `err`: takers get what is queued, then `err` thrown (the first failure wins; none after `end()`). */
  fail(err: Error): void {
    if (this.over) return;
    this.#failure = err;
    this.#waiters.wake();
  }

  /**
   * The next item; once none is left, the failure thrown, or null when the queue ended or
   * `waitMs` passed (0: do not wait; left out: as long as it takes). Rejects with the signal's
   * reason when `signal` aborts.
   */
  async next(options: { waitMs?: number; signal?: AbortSignal } = {}): Promise<T | null> {
    const deadline = options.waitMs === undefined ? Infinity : Date.now() + options.waitMs;
    for (;;) {
      options.signal?.throwIfAborted();
      if (this.#items.length > 0) return this.#items.shift() as T;
      if (this.#failure) throw this.#failure;
      if (this.#ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await this.#waiters.wait(left, options.signal);
    }
  }

  /** Resolves once `next()` would not wait (an item, the failure, the end), or after `ms`; never takes. */
  ready(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.#items.length > 0 || this.over) return Promise.resolve();
    return this.#waiters.wait(ms, signal);
  }
}
