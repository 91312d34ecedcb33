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
  /** Fault injection for tests: once this file exists, synced writes fail. */
  faultFailSyncFile?: string | null;
}
