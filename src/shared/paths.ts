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
 * `--socket`, `$YELLO_SOCKET`, socket activation (daemon only: returns null),
 * `$XDG_RUNTIME_DIR/yello/yello.sock`, `/tmp/yello-$UID/yello.sock`.
 */
export function resolveSocketPath(flag: string | undefined, ctx: PathContext, forDaemon: boolean): string | null {
  if (flag) return flag;
  if (ctx.env.YELLO_SOCKET) return ctx.env.YELLO_SOCKET;
  if (forDaemon && hasSocketActivation(ctx)) return null;
  if (ctx.env.XDG_RUNTIME_DIR) return `${ctx.env.XDG_RUNTIME_DIR}/yello/yello.sock`;
  return `/tmp/yello-${ctx.uid}/yello.sock`;
}

/** `--data-dir`, `$YELLO_DATA_DIR`, `$STATE_DIRECTORY`, `$XDG_STATE_HOME/yello`, `~/.local/state/yello`. */
export function resolveDataDir(flag: string | undefined, ctx: PathContext): string {
  if (flag) return flag;
  if (ctx.env.YELLO_DATA_DIR) return ctx.env.YELLO_DATA_DIR;
  if (ctx.env.STATE_DIRECTORY) return ctx.env.STATE_DIRECTORY.split(':')[0]!;
  if (ctx.env.XDG_STATE_HOME) return `${ctx.env.XDG_STATE_HOME}/yello`;
  return `${ctx.home}/.local/state/yello`;
}

/** Default line cap (`--max-line-bytes`). */
export const DEFAULT_MAX_LINE_BYTES = 1_048_576;
/** Cap on a serialized `streams.append` request line. */
export const MAX_APPEND_REQUEST_BYTES = 262_144;
