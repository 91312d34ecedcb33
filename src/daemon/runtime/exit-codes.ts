/**
 * Exit codes of `yello daemon` (sysexits-style). A startup failure prints one line and exits
 * with one of these; the permanent ones are in the systemd unit's `RestartPreventExitStatus`,
 * because restarting cannot fix them and would only loop.
 */
export const EXIT_CODES = {
  /** Clean stop (SIGTERM/SIGINT). */
  ok: 0,
  /** Bad command-line usage (a typo in `ExecStart=` stays a typo). Permanent. */
  usage: 2,
  /** A bug: an uncaught exception or unhandled rejection (logged first). Restarting may help. */
  internal: 70,
  /** Another daemon holds the store lock. Permanent. */
  storeLocked: 73,
  /** Another daemon is live on the socket path, or a non-socket file is in the way. Permanent. */
  socketInUse: 74,
  /** The disk is full or the filesystem is read-only or failing (ENOSPC, EROFS, EIO). Permanent until an operator acts. */
  storageUnavailable: 75,
  /** LevelDB reports corruption at open. Permanent: see `yello doctor`. */
  storeCorrupt: 76,
  /** Permission denied on the data dir or socket path (EACCES, EPERM), or the PostgreSQL store refused our credentials or privileges. Permanent. */
  permissionDenied: 77,
  /** The PostgreSQL store cannot be reached (refused, timed out, starting up, no such host). Restarting may help: not permanent. */
  databaseUnavailable: 69,
  /** Configuration: an unsafe runtime directory, a socket path that is too long or lies under a file. Permanent. */
  config: 78,
} as const;

/** Exit codes that restarting cannot fix (systemd `RestartPreventExitStatus`). */
export const PERMANENT_EXIT_CODES = [
  EXIT_CODES.usage,
  EXIT_CODES.storeLocked,
  EXIT_CODES.socketInUse,
  EXIT_CODES.storageUnavailable,
  EXIT_CODES.storeCorrupt,
  EXIT_CODES.permissionDenied,
  EXIT_CODES.config,
] as const;
