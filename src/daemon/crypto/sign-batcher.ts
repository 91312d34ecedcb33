import type { SignJob, SignPool } from './sign-pool.js';
import type { Signer } from './signer.js';

/** Signatures asked for in one event-loop turn from which the turn's signing is deferred to its end. */
export const DEFER_MIN_BATCH = 4;

/**
 * Signing that adapts to load. While appends come one or two at a time, each is signed at once
 * (nothing would be gained by waiting). In a busy turn the signatures are asked for together at
 * its end, after every request already read from the sockets has been admitted: measured on two
 * cores at 64 clients against signing each append at once, 1.18x the appends/s (6 of 6 rounds)
 * and 0.83x the main thread's CPU per append (bench/README.md, "adaptive signing").
 *
 * A busy turn's signatures are computed off the event loop, which goes on reading and admitting
 * meanwhile: in the sign pool's worker threads when there is one (sign-pool.ts, where the host
 * has cores to spare), else in libuv's thread pool (node:crypto's callback form, which costs the
 * event loop far less per signature than a worker's messages). On two cores, against signing on
 * the event loop: 1.12x appends/s on LevelDB and 1.08x on PostgreSQL at 64 clients, the main
 * thread's CPU per append 0.75x and 0.87x (bench/README.md, "What was kept, what was removed").
 */
export class SignBatcher {
  readonly #signer: Signer;
  readonly #minBatch: number;
  readonly #pool: SignPool | null;
  #jobs: SignJob[] = [];
  #scheduled = false;
  /** Requests of the last turn and of this one: the measure of load. */
  #lastTurn = 0;
  #thisTurn = 0;
  /**
   * Signatures made at once and at the end of a turn, and of these the ones made in libuv's
   * thread pool, for tests and benchmarks.
   */
  readonly stats = { immediate: 0, deferred: 0, threadPool: 0 };

  constructor(signer: Signer, options: { minBatch?: number; pool?: SignPool | null } = {}) {
    this.#signer = signer;
    this.#minBatch = options.minBatch ?? DEFER_MIN_BATCH;
    this.#pool = options.pool ?? null;
  }

  /**
   * The signature value of `payload` under key `kid`: at once while the load is low, else at
   * the end of this event-loop turn together with the turn's other requests. "Low": this turn
   * and the last one had fewer than `minBatch` requests and nothing is waiting. Never rejects:
   * signing with a held key does not fail.
   */
  sign(kid: string, payload: string): string | Promise<string> {
    const busy =
      this.#lastTurn >= this.#minBatch || this.#thisTurn >= this.#minBatch - 1 || this.#jobs.length > 0 || this.#pool?.busy === true;
    this.#thisTurn++;
    this.#schedule();
    if (!busy) {
      this.stats.immediate++;
      return this.#signer.signPayloadAs(kid, payload);
    }
    return new Promise((resolve) => {
      this.#jobs.push({ kid, payload, resolve });
    });
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#flush();
    });
  }

  #flush(): void {
    this.#scheduled = false;
    this.#lastTurn = this.#thisTurn;
    this.#thisTurn = 0;
    const jobs = this.#jobs;
    this.#jobs = [];
    this.stats.deferred += jobs.length;
    if (this.#pool?.usable && jobs.length >= this.#minBatch) {
      this.#pool.sign(jobs);
      return;
    }
    this.stats.threadPool += jobs.length;
    for (const j of jobs) this.#signer.signPayloadAsInPool(j.kid, j.payload, j.resolve);
  }

  /** Signs whatever is still waiting, here or in the pool, and stops the pool (shutdown). */
  async close(): Promise<void> {
    const jobs = this.#jobs;
    this.#jobs = [];
    this.stats.deferred += jobs.length;
    for (const j of jobs) j.resolve(this.#signer.signPayloadAs(j.kid, j.payload));
    await this.#pool?.close();
  }
}
