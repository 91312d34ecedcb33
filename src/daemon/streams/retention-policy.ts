import type { Logger } from 'pino';
import { monotonicMs } from '../runtime/clock.js';
import { errorMessage } from '../runtime/error-fields.js';
import type { StorePort } from '../store/port/store-port.js';
import { peerStreamIdOf, type StreamMeta } from '../store/stream-meta.js';
import type { StreamHeads } from './heads.js';
import type { Retention } from './retention.js';

/** What an operator sets once (`yello daemon --retention-*`); a limit of null is no limit. */
export interface RetentionPolicy {
  /** Keep at most this many records of each stream's current generation. */
  maxRecords: number | null;
  /** Trim records whose operation committed longer ago than this (wall clock: committedAt). */
  maxAgeMs: number | null;
  /** Also trim what the peer has not acknowledged (the `force` of `streams.trim`). */
  force: boolean;
  /** Time between runs, on the monotonic clock. */
  intervalMs: number;
}

/** What one run did. */
export interface RetentionRun {
  streams: number;
  trimmed: number;
}

/**
 * Runs the operator's retention policy in the background: every `intervalMs` (monotonic, so a
 * stepped wall clock neither skips nor repeats runs) each stream's current generation is
 * trimmed to the policy, through the same `streams.trim` path an admin uses (so subscribers
 * get `chats.break`/`PREFIX_UNAVAILABLE` and readers fail closed below the new start: never
 * a silent skip), and only below what the peer acknowledged unless `force` is set. A stream
 * that cannot be trimmed (corrupt, read-only store) is logged and left for the next run.
 */
export class RetentionRunner {
  readonly #policy: RetentionPolicy;
  readonly #store: StorePort;
  readonly #heads: StreamHeads;
  readonly #retention: Retention;
  readonly #log: Logger;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<RetentionRun> | null = null;
  #stopped = false;

  constructor(policy: RetentionPolicy, parts: { store: StorePort; heads: StreamHeads; retention: Retention; log: Logger }) {
    this.#policy = policy;
    this.#store = parts.store;
    this.#heads = parts.heads;
    this.#retention = parts.retention;
    this.#log = parts.log;
  }

  /** Whether the policy limits anything. */
  static enabled(policy: RetentionPolicy | null | undefined): policy is RetentionPolicy {
    return !!policy && (policy.maxRecords !== null || policy.maxAgeMs !== null);
  }

  /** First run at once, then one every interval, measured from the start of the previous one. */
  start(): void {
    const loop = (due: number) => {
      if (this.#stopped) return;
      const started = monotonicMs();
      const wait = Math.max(0, due - started);
      this.#timer = setTimeout(() => {
        const begun = monotonicMs();
        void this.runOnce().finally(() => {
          loop(begun + this.#policy.intervalMs);
        });
      }, wait);
      this.#timer.unref();
    };
    loop(monotonicMs());
  }

  /** Stop scheduling and wait for a run under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#running?.catch(() => undefined);
  }

  /** One pass over every stream (never two at once). */
  runOnce(): Promise<RetentionRun> {
    this.#running ??= this.#pass().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  async #pass(): Promise<RetentionRun> {
    const run: RetentionRun = { streams: 0, trimmed: 0 };
    const ids: string[] = [];
    for await (const streamId of this.#store.streams.streamIds()) ids.push(streamId);
    for (const streamId of ids) {
      if (this.#stopped || this.#store.stopping || this.#store.readOnly) break;
      try {
        const meta = this.#heads.committed(streamId);
        if (!meta) continue;
        const target = await this.#target(meta);
        if (target > meta.firstPosition) {
          await this.#retention.trim(streamId, target, this.#policy.force);
          run.streams++;
          run.trimmed += target - meta.firstPosition;
        } else if (meta.firstPosition > 0) {
          // What a trim interrupted by a crash left behind goes on a later run.
          await this.#retention.compact(streamId);
        }
      } catch (err) {
        this.#log.warn({ err: { message: errorMessage(err) }, streamId }, 'retention: stream not trimmed; tried again next run');
      }
    }
    this.#log.info(run, 'retention: run');
    return run;
  }

  /** Where the policy puts the stream's retained start (never past what may be trimmed). */
  async #target(meta: StreamMeta): Promise<number> {
    const { maxRecords, maxAgeMs, force } = this.#policy;
    let target = meta.firstPosition;
    if (maxRecords !== null) target = Math.max(target, meta.nextPosition - maxRecords);
    if (maxAgeMs !== null) target = Math.max(target, await this.#olderThan(meta, maxAgeMs));
    if (!force) {
      const peer = this.#heads.committed(peerStreamIdOf(meta));
      const acked = peer?.receipt && peer.receipt.peerGeneration === meta.generation ? peer.receipt.nextPosition : 0;
      target = Math.min(target, acked);
    }
    return Math.min(target, meta.nextPosition);
  }

  /** The end of the last run of operations, from the retained start on, committed before the age limit. */
  async #olderThan(meta: StreamMeta, maxAgeMs: number): Promise<number> {
    // Ages of stored records are wall-clock by nature (committedAt); the schedule is not.
    const cutoff = Date.parse(new Date().toISOString()) - maxAgeMs;
    let end = meta.firstPosition;
    const streams = this.#store.streams;
    const range = {
      after: { generation: meta.generation - 1, position: Number.MAX_SAFE_INTEGER },
      before: { generation: meta.generation, position: meta.nextPosition },
    };
    for await (const { operationId } of streams.opLog(meta.streamId, range)) {
      const op = await streams.findOperation(meta.streamId, operationId);
      if (!op || Date.parse(op.committedAt) > cutoff) break;
      end = Math.max(end, op.nextPosition);
    }
    return end;
  }
}
