import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { FromWorker, ToWorker } from './sign-worker.js';
import type { Signer } from './signer.js';

/** Signatures asked for in one event-loop turn from which a worker is used instead of signing inline. */
export const WORKER_MIN_BATCH = 4;

interface Job {
  kid: string;
  payload: string;
  resolve: (value: string) => void;
}

/**
 * Adaptive signing. Appends ask for their signatures during admission; the requests of one
 * event-loop turn are signed together at its end: inline when there are few (one or two
 * clients: a hand-off to another thread would only add latency), or by a worker thread in one
 * message when there are many (the main thread is then the bottleneck, and ES256 is ~40 µs of
 * it per message). The promise never rejects: when the worker fails, everything is signed
 * inline from then on, so a write waiting for its signatures is never left hanging.
 */
export class SignBatcher {
  readonly #signer: Signer;
  readonly #log: Logger;
  readonly #minBatch: number;
  #worker: Worker | null = null;
  #workerDead = false;
  readonly #keysSent = new Set<string>();
  #jobs: Job[] = [];
  #scheduled = false;
  /** Requests of the last turn and of this one: the measure of load. */
  #lastTurn = 0;
  #thisTurn = 0;
  #nextId = 1;
  readonly #inFlight = new Map<number, Job[]>();
  /** Batches signed by the worker and inline, for benchmarks. */
  readonly stats = { workerBatches: 0, workerSignatures: 0, inlineSignatures: 0 };

  readonly #workerUrl: URL;

  constructor(signer: Signer, log: Logger, options: { worker?: boolean; minBatch?: number; workerUrl?: URL } = {}) {
    this.#signer = signer;
    this.#log = log;
    this.#workerUrl = options.workerUrl ?? new URL('./sign-worker.js', import.meta.url);
    this.#minBatch = options.minBatch ?? WORKER_MIN_BATCH;
    if (options.worker === false) this.#workerDead = true;
  }

  /**
   * The signature value of `payload` under key `kid`: at once (inline) while the load is low,
   * else at the end of this event-loop turn together with the turn's other requests. "Low":
   * this turn and the last one had fewer than `minBatch` requests and nothing is waiting.
   */
  sign(kid: string, payload: string): string | Promise<string> {
    const busy =
      this.#lastTurn >= this.#minBatch || this.#thisTurn >= this.#minBatch - 1 || this.#jobs.length > 0 || this.#inFlight.size > 0;
    this.#thisTurn++;
    this.#schedule();
    if (!busy) {
      this.stats.inlineSignatures++;
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
    if (jobs.length === 0) return;
    const worker = jobs.length >= this.#minBatch ? this.#ensureWorker() : null;
    if (!worker) {
      this.#inline(jobs);
      return;
    }
    for (const kid of new Set(jobs.map((j) => j.kid))) {
      if (this.#keysSent.has(kid)) continue;
      worker.postMessage({ type: 'key', kid, privateJwk: this.#signer.privateJwk(kid) } satisfies ToWorker);
      this.#keysSent.add(kid);
    }
    const id = this.#nextId++;
    this.#inFlight.set(id, jobs);
    worker.postMessage({ type: 'sign', id, jobs: jobs.map((j) => [j.kid, j.payload]) } satisfies ToWorker);
  }

  #inline(jobs: Job[]): void {
    for (const j of jobs) j.resolve(this.#signer.signPayloadAs(j.kid, j.payload));
    this.stats.inlineSignatures += jobs.length;
  }

  #ensureWorker(): Worker | null {
    if (this.#workerDead) return null;
    if (this.#worker) return this.#worker;
    const worker = new Worker(this.#workerUrl);
    // The worker must not keep a stopping daemon alive.
    worker.unref();
    worker.on('message', (m: FromWorker) => {
      const jobs = this.#inFlight.get(m.id);
      if (!jobs) return;
      this.#inFlight.delete(m.id);
      // The worker answers with one signature per job, in order; a job it left out (never
      // expected) is signed inline rather than left waiting.
      jobs.forEach((j, i) => {
        j.resolve(m.signatures[i] ?? this.#signer.signPayloadAs(j.kid, j.payload));
      });
      this.stats.workerBatches++;
      this.stats.workerSignatures += jobs.length;
    });
    const fail = (why: string) => {
      if (this.#workerDead) return;
      this.#workerDead = true;
      this.#worker = null;
      this.#log.error({ why }, 'signing worker failed; signing inline from now on');
      const pending = [...this.#inFlight.values()].flat();
      this.#inFlight.clear();
      this.#inline(pending);
    };
    worker.on('error', (err) => {
      fail(err.message);
    });
    worker.on('exit', (code) => {
      fail(`exited with ${code}`);
    });
    this.#worker = worker;
    return worker;
  }

  /** Stop the worker (shutdown); later requests are signed inline. */
  async close(): Promise<void> {
    const worker = this.#worker;
    this.#workerDead = true;
    this.#worker = null;
    if (this.#inFlight.size > 0) this.#inline([...this.#inFlight.values()].flat());
    this.#inFlight.clear();
    await worker?.terminate();
  }
}
