import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { errorMessage } from '../runtime/error-fields.js';
import type { FromWorker, ToWorker } from './sign-worker.js';
import type { Signer } from './signer.js';

/** One signature asked for: what to sign, and where its value goes. */
export interface SignJob {
  kid: string;
  payload: string;
  resolve: (value: string) => void;
}

/** Most workers the default gives: past a few, the event loop feeding them is the limit again. */
const MAX_AUTO_WORKERS = 4;

/**
 * The default size of the pool: one worker per core beyond the two the daemon already keeps
 * busy under load (the event loop, and LevelDB's or PostgreSQL's I/O with the GC helpers), at
 * most MAX_AUTO_WORKERS. On two cores or fewer: none, every signature on the event loop.
 */
export function defaultSignWorkers(cores = availableParallelism()): number {
  return Math.max(0, Math.min(MAX_AUTO_WORKERS, cores - 2));
}

/**
 * Worker threads that compute ES256 signatures for the busy turns of the sign batcher
 * (sign-batcher.ts): a turn's jobs are split over the workers in one message each, and every
 * job resolves with its worker's answer. A worker that fails takes the pool down: what it and
 * the others still held is signed on the event loop, as is everything after, so a write waiting
 * for its signatures is never left hanging. The private keys go to the workers by message,
 * within this process; nothing leaves it.
 */
export class SignPool {
  readonly #signer: Signer;
  readonly #log: Logger;
  readonly #workers: Worker[] = [];
  readonly #keysSent: Array<Set<string>> = [];
  readonly #inFlight = new Map<number, SignJob[]>();
  #nextId = 1;
  #dead = false;
  /** Batches and signatures the workers made, for tests and benchmarks. */
  readonly stats = { batches: 0, signatures: 0 };

  constructor(signer: Signer, log: Logger, size: number, workerUrl = new URL('./sign-worker.js', import.meta.url)) {
    this.#signer = signer;
    this.#log = log;
    for (let i = 0; i < size; i++) {
      const worker = new Worker(workerUrl);
      // The workers must not keep a stopping daemon alive.
      worker.unref();
      worker.on('message', (m: FromWorker) => {
        this.#answered(m);
      });
      worker.on('error', (err) => {
        this.#fail(`signing worker failed: ${errorMessage(err)}`);
      });
      worker.on('exit', (code) => {
        this.#fail(`signing worker exited with ${code}`);
      });
      this.#workers.push(worker);
      this.#keysSent.push(new Set());
    }
  }

  /** Whether jobs can go to the workers (false once one failed, or with none). */
  get usable(): boolean {
    return !this.#dead && this.#workers.length > 0;
  }

  /** Whether some batch is still with a worker. */
  get busy(): boolean {
    return this.#inFlight.size > 0;
  }

  /** Sign `jobs` on the workers, split in one batch per worker (on the event loop once the pool is down). */
  sign(jobs: SignJob[]): void {
    if (!this.usable) {
      this.#inline(jobs);
      return;
    }
    const n = Math.min(this.#workers.length, jobs.length);
    const per = Math.ceil(jobs.length / n);
    for (let w = 0; w < n; w++) {
      const part = jobs.slice(w * per, (w + 1) * per);
      if (part.length === 0) break;
      this.#post(w, part);
    }
  }

  #post(w: number, jobs: SignJob[]): void {
    const worker = this.#workers[w] as Worker;
    const sent = this.#keysSent[w] as Set<string>;
    for (const j of jobs) {
      if (sent.has(j.kid)) continue;
      worker.postMessage({ type: 'key', kid: j.kid, privateJwk: this.#signer.privateJwk(j.kid) } satisfies ToWorker);
      sent.add(j.kid);
    }
    const id = this.#nextId++;
    this.#inFlight.set(id, jobs);
    worker.postMessage({ type: 'sign', id, jobs: jobs.map((j) => [j.kid, j.payload]) } satisfies ToWorker);
  }

  #answered(m: FromWorker): void {
    const jobs = this.#inFlight.get(m.id);
    if (!jobs) return;
    this.#inFlight.delete(m.id);
    // One signature per job, in order; one left out (never expected) is signed here rather than left waiting.
    jobs.forEach((j, i) => {
      j.resolve(m.signatures[i] ?? this.#signer.signPayloadAs(j.kid, j.payload));
    });
    this.stats.batches++;
    this.stats.signatures += jobs.length;
  }

  #inline(jobs: SignJob[]): void {
    for (const j of jobs) j.resolve(this.#signer.signPayloadAs(j.kid, j.payload));
  }

  /** Sign on the event loop whatever the workers still hold. */
  #takeBack(): void {
    const pending = [...this.#inFlight.values()].flat();
    this.#inFlight.clear();
    this.#inline(pending);
  }

  #fail(why: string): void {
    if (this.#dead) return;
    this.#dead = true;
    this.#log.error({ why }, 'signing on the event loop from now on');
    this.#takeBack();
    for (const w of this.#workers) void w.terminate();
  }

  /** Shutdown: what the workers hold is signed here, then they stop. */
  async close(): Promise<void> {
    this.#dead = true;
    this.#takeBack();
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}
