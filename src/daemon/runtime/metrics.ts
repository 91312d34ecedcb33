import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { YelloError } from '../../shared/errors.js';

/** What a scrape reads from the daemon's own state (no copies are kept here: read at scrape time). */
export interface MetricSources {
  counts(): { agents: number; chats: number; streams: number; records: number };
  commits(): { batches: number; writes: number; checkpoints: number };
  readOnly(): boolean;
  corruptMarks(): number;
  walIncidents(): number;
  followers(): number;
  connections(): { unauthenticated: number; agent: number; admin: number };
}

/** A per-agent quota that refused a call. */
export type QuotaName = 'appendRate' | 'storedBytes' | 'claimRate';

/** The read methods counted by `yello_reads_total`. */
export type ReadMethod = 'streams.read' | 'chats.history';

/**
 * A reason is a label only when it is one of the contract's fixed reason constants (§3.5:
 * `NOT_PARTICIPANT`, `CORRUPT`, `PREFIX_UNAVAILABLE`, …); INVALID_PARAMS carries prose that may
 * quote what the caller sent (a username), which must neither reach a scrape nor grow the label set.
 */
const REASON_CONSTANT = /^[A-Z][A-Z_]{0,31}$/;

/** Seconds, from 0.1 ms (a group commit on a fast disk) to 10 s (a stalled one). */
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];
/** Writes per synced batch: 1 (a lone writer) up to MAX_GROUP_WRITES (256, storage.ts). */
const GROUP_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/**
 * The daemon's Prometheus registry (prom-client), the one place metrics are defined: the RPC
 * layer and the store report events here (increments and one histogram observation each, no
 * serialization on the hot path), and everything `daemon.status` already counts is read from
 * its owner at scrape time.
 *
 * Labels are bounded by construction: error types, the contract's reason constants, method
 * names, roles, quota names. No chat id, stream id, agent id or username is ever a label: one
 * series per chat or agent would grow without bound with the directory (and a scrape would
 * become a list of who talks to whom). No message content, token or secret is ever recorded.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly #appends: Counter;
  readonly #appendedRecords: Counter;
  readonly #appendedBytes: Counter;
  readonly #duplicates: Counter;
  readonly #appendSeconds: Histogram;
  readonly #commitSeconds: Histogram;
  readonly #commitWrites: Histogram;
  readonly #reads: Counter<'method'>;
  readonly #readRecords: Counter<'method'>;
  readonly #refusals: Counter<'type' | 'reason'>;
  readonly #connectionsRefused: Counter<'reason'>;
  readonly #quotaHits: Counter<'quota'>;

  constructor(version: string) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    new Gauge({ name: 'yello_build_info', help: 'Always 1; the daemon version as a label.', labelNames: ['version'], registers }).set(
      { version },
      1,
    );
    this.#appends = new Counter({
      name: 'yello_appends_total',
      help: 'streams.append calls that committed (duplicates included).',
      registers,
    });
    this.#appendedRecords = new Counter({
      name: 'yello_appended_records_total',
      help: 'Records committed by streams.append (not counting duplicates).',
      registers,
    });
    this.#appendedBytes = new Counter({
      name: 'yello_appended_bytes_total',
      help: 'Bytes of the streams.append requests as sent (the line or batch element) committed (not counting duplicates).',
      registers,
    });
    this.#duplicates = new Counter({
      name: 'yello_append_duplicates_total',
      help: 'streams.append calls answered from an earlier commit of the same operationId.',
      registers,
    });
    this.#appendSeconds = new Histogram({
      name: 'yello_append_duration_seconds',
      help: 'streams.append from admission to the durable answer (the fsync included), for appends that committed.',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.#commitSeconds = new Histogram({
      name: 'yello_commit_duration_seconds',
      help: 'One group commit: the synced LevelDB batch (fsync) of the writes grouped into it.',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.#commitWrites = new Histogram({
      name: 'yello_commit_batch_writes',
      help: 'Writes grouped into one synced batch (group commit).',
      buckets: GROUP_BUCKETS,
      registers,
    });
    this.#reads = new Counter({
      name: 'yello_reads_total',
      help: 'Pages answered by streams.read and chats.history.',
      labelNames: ['method'],
      registers,
    });
    this.#readRecords = new Counter({
      name: 'yello_read_records_total',
      help: 'Records in the pages answered by streams.read and chats.history.',
      labelNames: ['method'],
      registers,
    });
    this.#refusals = new Counter({
      name: 'yello_refusals_total',
      help: 'Requests answered with an application error, by data.type and data.reason (empty when the error has no fixed reason).',
      labelNames: ['type', 'reason'],
      registers,
    });
    this.#connectionsRefused = new Counter({
      name: 'yello_connections_refused_total',
      help: 'Connections refused at accept (RATE_LIMITED and closed), by cause.',
      labelNames: ['reason'],
      registers,
    });
    this.#quotaHits = new Counter({
      name: 'yello_quota_hits_total',
      help: 'Calls refused by a per-agent quota (RATE_LIMITED or QUOTA_EXCEEDED).',
      labelNames: ['quota'],
      registers,
    });
    for (const method of ['streams.read', 'chats.history'] as const) {
      this.#reads.inc({ method }, 0);
      this.#readRecords.inc({ method }, 0);
    }
    for (const quota of ['appendRate', 'storedBytes', 'claimRate'] as const) this.#quotaHits.inc({ quota }, 0);
  }

  /** Register the gauges read from the daemon's state at scrape time. */
  observe(s: MetricSources): void {
    const registers = [this.registry];
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    gauge('yello_agents', 'Agents in the directory.', () => s.counts().agents);
    gauge('yello_chats', 'Chats in the directory.', () => s.counts().chats);
    gauge('yello_streams', 'Streams in the store.', () => s.counts().streams);
    gauge('yello_records', 'Records retained in the store (every type, trimmed ones not counted).', () => s.counts().records);
    // Counters kept by the store for daemon.status; exposed as counters (they only grow in a run).
    const counter = (name: string, help: string, read: () => number) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(read());
        },
      });
    counter('yello_commit_batches_total', 'Synced batches written since start (group commits).', () => s.commits().batches);
    counter('yello_commit_writes_total', 'Writes committed in those batches since start.', () => s.commits().writes);
    counter('yello_log_checkpoints_total', 'Write-ahead-log checkpoints since start.', () => s.commits().checkpoints);
    gauge('yello_storage_read_only', '1 while the daemon is read-only after a failed synced write (restart it), else 0.', () =>
      s.readOnly() ? 1 : 0,
    );
    gauge('yello_corrupt_marks', 'Corruption marks held (daemon.status integrity.corruptStreams).', () => s.corruptMarks());
    gauge('yello_wal_incidents', 'Write-ahead-log losses found at startup and on record.', () => s.walIncidents());
    gauge('yello_followers', 'Live subscriptions: chats.follow and chats.watch.', () => s.followers());
    new Gauge({
      name: 'yello_connections',
      help: 'Open connections, by the role of their session (unauthenticated: before a successful session.hello).',
      labelNames: ['role'],
      registers,
      collect() {
        for (const [role, n] of Object.entries(s.connections())) this.set({ role }, n);
      },
    });
  }

  /** A committed streams.append: `bytes` as the quotas count them (the request as sent). */
  appended(records: number, bytes: number, duplicate: boolean, seconds: number): void {
    this.#appends.inc();
    if (duplicate) {
      this.#duplicates.inc();
    } else {
      this.#appendedRecords.inc(records);
      this.#appendedBytes.inc(bytes);
    }
    this.#appendSeconds.observe(seconds);
  }

  /** One synced batch of `writes` writes took `seconds`. */
  committed(writes: number, seconds: number): void {
    this.#commitSeconds.observe(seconds);
    this.#commitWrites.observe(writes);
  }

  /** A page of `records` records answered by `method`. */
  read(method: ReadMethod, records: number): void {
    this.#reads.inc({ method });
    this.#readRecords.inc({ method }, records);
  }

  /** A request answered with an error. */
  refused(error: YelloError): void {
    const reason = error.details.reason;
    this.#refusals.inc({ type: error.type, reason: typeof reason === 'string' && REASON_CONSTANT.test(reason) ? reason : '' });
  }

  /** A connection refused at accept; `reason` is the audit log's constant (MAX_CONNECTIONS, …). */
  connectionRefused(reason: string): void {
    this.#connectionsRefused.inc({ reason: REASON_CONSTANT.test(reason) ? reason : 'OTHER' });
  }

  /** A call refused by a per-agent quota. */
  quotaHit(quota: QuotaName): void {
    this.#quotaHits.inc({ quota });
  }

  /** The text exposition format of every metric, and its content type. */
  async scrape(): Promise<{ contentType: string; text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}
