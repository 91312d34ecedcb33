import type {
  ChatBatchNotification,
  ChatBreakNotification,
  ChatErrorNotification,
  ChatOpenedNotification,
  CorruptStream,
  Role,
} from './types.js';

/**
 * Result types of the methods whose results are not one of the value types of types.ts, and
 * the params of the daemon's notifications. The method table (methods.ts) names the result
 * type of every method.
 */

/** The result of `session.hello`. */
export interface HelloResult {
  role: Role;
  /** The agent of an agent session; null for admin. */
  agentId: string | null;
  protocol: 'yello.chat.v1';
  daemon: { version: string };
  limits: { maxAppendRequestBytes: number; maxLineBytes: number };
  signing: { kid: string; alg: 'ES256' };
}

/** The result of `daemon.metrics`: one Prometheus scrape. */
export interface MetricsScrape {
  /** The exposition format's content type (`text/plain; version=0.0.4; charset=utf-8`). */
  contentType: string;
  /** The metrics in the Prometheus text exposition format. */
  text: string;
}

/** The result of `daemon.status`. */
export interface DaemonStatus {
  version: string;
  uptimeMs: number;
  counts: { agents: number; chats: number; streams: number; records: number };
  storage: 'ok' | 'read-only';
  /** Synced batches written since start, the writes grouped into them, and log checkpoints. */
  commits: { batches: number; writes: number; checkpoints: number };
  kid: string;
  policy: 'grants' | 'open';
  /**
   * Which storage backend this daemon runs on: `leveldb` (its data dir's `db/`) or `postgresql`
   * (`url` redacted: never a password). Absent from daemons older than 0.x (issue 24).
   */
  store?: StoreInfo;
  /** Streams the daemon cannot vouch for (see `yello doctor`), and write-ahead-log losses found at startup. */
  integrity: {
    corruptStreams: CorruptStream[];
    walIncidents: Array<{ detectedAt: string; bytes: number; streams: number; guardDamaged: boolean }>;
  };
}

/** The storage backend of `daemon.status`. */
export type StoreInfo = { backend: 'leveldb' } | { backend: 'postgresql'; url: string };

/** Operation state as `operations.get` reports it; fields an uncommitted operation lacks are null (§4). */
export interface OperationInfo {
  operationId: string;
  state: 'committed' | 'pending' | 'unknown';
  generation: string | null;
  firstPosition: string | null;
  nextPosition: string | null;
  committedAt: string | null;
  requestDigest: string | null;
}

/** A grant. */
export interface Grant {
  agentId: string;
  peerAgentId: string;
  grantedAt: string;
}

/** The result of `chats.permissions`. */
export interface ChatPermissions {
  chatId: string;
  policy: 'grants' | 'open';
  participants: Array<{ agentId: string; canRead: boolean; canSend: boolean; canClaim: boolean; grant: { grantedAt: string } | null }>;
}

/** Notifications the daemon pushes. */
export interface NotificationParams {
  'chats.batch': ChatBatchNotification;
  'chats.break': ChatBreakNotification;
  'chats.error': ChatErrorNotification;
  'chats.opened': ChatOpenedNotification;
}

/** One stream's retained range of its current generation when a backup was taken. */
export interface BackupStreamCheckpoint {
  streamId: string;
  generation: string;
  firstPosition: string;
  nextPosition: string;
}

/**
 * `manifest.json` of a backup (`daemon.backup`, `yello backup`): what the snapshot held, so a
 * restore can prove it complete (every stream's head as listed, the same count of records).
 */
export interface BackupManifest {
  format: 'yello.backup.v1';
  /** When the snapshot was taken (wall clock, for people). */
  createdAt: string;
  daemonVersion: string;
  /** LevelDB entries copied, and the records among them. */
  entries: number;
  records: number;
  /** Bytes of the values copied, as stored. */
  bytes: number;
  /** Every stream's current generation and retained range at the snapshot, ordered by id. */
  streams: BackupStreamCheckpoint[];
  /** The data-dir files copied beside the store (signing keys, admin token, token secret). */
  files: string[];
  /**
   * The symlinks of the data dir the backup followed to copy their files (`name` as in `files`,
   * or `keys/<file>`; `target` the path it led to). Empty when there were none; absent in
   * backups of older versions.
   */
  followed?: BackupFollowed[];
}

/** A symlink of the data dir that `daemon.backup` followed (the backup holds the file it led to). */
export interface BackupFollowed {
  name: string;
  target: string;
}
