import { monotonicMs } from '../runtime/clock.js';

/** Appends of an author that look up first after one of its decisions without the lookup was refused. */
export const LOOKUP_FIRST_APPENDS = 16;
/** How long a penalty lasts if the author stops appending (monotonic milliseconds). */
export const LOOKUP_FIRST_MS = 60_000;
/** Above this many penalised authors, expired entries are swept on the next penalty. */
const SWEEP_ABOVE = 256;

interface Penalty {
  left: number;
  until: number;
}

/**
 * Which authors' appends look up before deciding (appender.ts `#optimistic`, PostgreSQL). A
 * refused decision without the lookup aborts its whole group's fast transaction, so an author
 * whose appends get refused (resending old ids) pays the lookup on its next appends, not everyone
 * else's group. A penalty ends after LOOKUP_FIRST_APPENDS appends or LOOKUP_FIRST_MS, whichever
 * comes first, so an author that stops appending leaves nothing behind for good; the clock is
 * monotonic (a wall clock stepped back cannot make it last).
 */
export class LookupPenalty {
  readonly #now: () => number;
  readonly #penalties = new Map<string, Penalty>();

  /** `now`: milliseconds on a monotonic clock (injected by tests). */
  constructor(now: () => number = monotonicMs) {
    this.#now = now;
  }

  /** The author's decision without the lookup was refused. */
  refused(agentId: string): void {
    const now = this.#now();
    if (this.#penalties.size >= SWEEP_ABOVE) this.#sweep(now);
    this.#penalties.set(agentId, { left: LOOKUP_FIRST_APPENDS, until: now + LOOKUP_FIRST_MS });
  }

  /** Whether the author's next append looks up first; counts that append against the penalty. */
  lookupFirst(agentId: string): boolean {
    const p = this.#penalties.get(agentId);
    if (p === undefined) return false;
    if (this.#now() >= p.until) {
      this.#penalties.delete(agentId);
      return false;
    }
    if (--p.left <= 0) this.#penalties.delete(agentId);
    return true;
  }

  /** Authors penalised now (for tests and the sweep bound). */
  get size(): number {
    return this.#penalties.size;
  }

  #sweep(now: number): void {
    for (const [agentId, p] of this.#penalties) if (now >= p.until) this.#penalties.delete(agentId);
  }
}
