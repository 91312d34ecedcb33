import type { QuotaOptions } from '../streams/quotas.js';
import type { RetentionPolicy } from '../streams/retention-policy.js';

/** Everything the daemon needs to start, resolved from flags and environment (§2). */
export interface DaemonConfig {
  /** null: use the socket passed by systemd (LISTEN_FDS). */
  socketPath: string | null;
  dataDir: string;
  logLevel: string;
  socketMode: number;
  maxLineBytes: number;
  policy: 'grants' | 'open';
  maxConnections: number;
  /** Unsent output one connection may leave unread before it is closed (default DEFAULT_MAX_UNSENT_BYTES). */
  maxUnsentBytes?: number;
  /** Daemon-wide budget of answers in the making and unsent output (default DEFAULT_MAX_OUTPUT_BYTES). */
  maxOutputBytes?: number;
  /** Admission (docs/security.md "Connection admission"); defaults in limits.ts. */
  helloTimeoutMs?: number;
  maxPendingHellos?: number;
  maxSessionsPerAgent?: number;
  /** Worker threads that sign busy turns' messages (`--sign-workers`; 0: none); default sign-pool.ts defaultSignWorkers. */
  signWorkers?: number;
  /** Per-agent quotas (0: none); defaults in limits.ts DEFAULT_QUOTAS. */
  quotas?: Partial<QuotaOptions>;
  /** Serve GET /metrics over HTTP here (`--metrics-listen`); null or absent: not at all. */
  metricsListen?: { host: string; port: number } | null;
  /** The operator's retention policy (docs/operations.md); none when absent. */
  retention?: RetentionPolicy | null;
  /**
   * The store (`--store`, `$YELLO_STORE`): null, `leveldb` or `leveldb:` for the data dir's
   * LevelDB (the default), or a `postgresql://` URL without a password (issue 24).
   */
  store?: string | null;
  /** `--store-password-file`: a 0600 file holding only the database password. */
  storePasswordFile?: string | null;
  /** Fault injection for tests: once this file exists, synced writes fail. */
  faultFailSyncFile?: string | null;
  /** Tests only: how long a PostgreSQL store waits for an answer (default postgres/retry.ts ANSWER_DEADLINE_MS). */
  pgAnswerDeadlineMs?: number | undefined;
  /** Tests only: how long an idle `--metrics-listen` connection is kept (default metrics-http.ts METRICS_IDLE_MS). */
  metricsIdleMs?: number | undefined;
}
