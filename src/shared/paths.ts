/**
 * Default locations of docs/protocol.md §2, as pure functions: the caller passes the environment,
 * uid and home directory, so this module stays free of process state.
 */

/** The process facts path resolution depends on. */
export interface PathContext {
  env: Record<string, string | undefined>;
  uid: number;
  home: string;
  pid: number;
}

/** Whether systemd passed listening sockets to this very process. */
export function hasSocketActivation(ctx: PathContext): boolean {
  const { LISTEN_FDS, LISTEN_PID } = ctx.env;
  return LISTEN_FDS !== undefined && Number(LISTEN_FDS) >= 1 && (LISTEN_PID === undefined || Number(LISTEN_PID) === ctx.pid);
}

/**
 * The socket a client dials: `--socket`, `$YELLO_SOCKET`, `$XDG_RUNTIME_DIR/yello/yello.sock`,
 * `/tmp/yello-$UID/yello.sock`.
 */
export function resolveSocketPath(flag: string | undefined, ctx: PathContext): string {
  if (flag) return flag;
  if (ctx.env.YELLO_SOCKET) return ctx.env.YELLO_SOCKET;
  return defaultSocketLocation(ctx);
}

/**
 * The socket the daemon listens on: as {@link resolveSocketPath}, except that with socket
 * activation (and neither `--socket` nor `$YELLO_SOCKET`) it is null: systemd holds the socket.
 */
export function resolveDaemonSocketPath(flag: string | undefined, ctx: PathContext): string | null {
  if (flag) return flag;
  if (ctx.env.YELLO_SOCKET) return ctx.env.YELLO_SOCKET;
  if (hasSocketActivation(ctx)) return null;
  return defaultSocketLocation(ctx);
}

function defaultSocketLocation(ctx: PathContext): string {
  if (ctx.env.XDG_RUNTIME_DIR) return `${ctx.env.XDG_RUNTIME_DIR}/yello/yello.sock`;
  return `/tmp/yello-${ctx.uid}/yello.sock`;
}

/** `--data-dir`, `$YELLO_DATA_DIR`, `$STATE_DIRECTORY`, `$XDG_STATE_HOME/yello`, `~/.local/state/yello`. */
export function resolveDataDir(flag: string | undefined, ctx: PathContext): string {
  if (flag) return flag;
  if (ctx.env.YELLO_DATA_DIR) return ctx.env.YELLO_DATA_DIR;
  // systemd joins several StateDirectory= entries with ':'; the first is ours.
  if (ctx.env.STATE_DIRECTORY) return firstPathEntry(ctx.env.STATE_DIRECTORY);
  if (ctx.env.XDG_STATE_HOME) return `${ctx.env.XDG_STATE_HOME}/yello`;
  return `${ctx.home}/.local/state/yello`;
}

function firstPathEntry(list: string): string {
  const colon = list.indexOf(':');
  return colon === -1 ? list : list.slice(0, colon);
}

/** Default line cap (`--max-line-bytes`). */
export const DEFAULT_MAX_LINE_BYTES = 1_048_576;
/** Cap on a serialized `streams.append` request line. */
export const MAX_APPEND_REQUEST_BYTES = 262_144;
