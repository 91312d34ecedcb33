/**
 * Whether a socket directory can be trusted (docs/security.md, "Socket directory trust").
 *
 * The threat: with `$XDG_RUNTIME_DIR` unset, the socket lives in `/tmp/yello-$UID`, a name any
 * local user can create first (or point at their own directory with a symlink). Whoever
 * controls that directory can move the real socket aside and plant a fake daemon, which then
 * receives the token of the next `session.hello`. So, like ssh-agent and gpg-agent, client and
 * daemon check the directory before they trust a socket in it.
 *
 * Pure policy: the callers lstat and pass plain facts, so this module does no I/O.
 */

/** The facts of one `lstat` the policy needs. */
export interface StatLike {
  isDirectory: boolean;
  isSymbolicLink: boolean;
  uid: number;
  /** `st_mode`; only the permission bits are read. */
  mode: number;
}

const GROUP_OR_OTHER_WRITE = 0o022;

function octal(mode: number): string {
  return '0' + (mode & 0o7777).toString(8).padStart(3, '0');
}

function ownerProblem(uid: number, trustedUid: number): string | null {
  if (uid === trustedUid || uid === 0) return null;
  return `owned by uid ${uid}, not ${trustedUid === 0 ? '0' : `${trustedUid} (or 0)`}`;
}

/**
 * Why a directory is not safe on its own, or null: it must be a real directory (not a
 * symlink), owned by `uid` or root, with no group- or other-write bit. The daemon applies
 * this to its socket directory; the client applies it as the first of two ways to trust one.
 */
export function ownedDirectoryProblem(dir: StatLike, uid: number): string | null {
  if (dir.isSymbolicLink) return 'it is a symbolic link';
  if (!dir.isDirectory) return 'it is not a directory';
  const owner = ownerProblem(dir.uid, uid);
  if (owner) return owner;
  if (dir.mode & GROUP_OR_OTHER_WRITE) return `writable by group or others (mode ${octal(dir.mode)})`;
  return null;
}

/**
 * Why a client must not send a token to a socket in `dir`, or null when it may.
 *
 * `dir` must be a real directory that neither group nor others can write. Then either it is
 * owned by `uid` or root, or its parent is a real directory owned by `uid` or root that
 * neither group nor others can write: only a trusted user can have created `dir` there (as
 * systemd creates `/run/yello` owned by the daemon's user `yello` under root's `/run`).
 * A group-writable socket directory is refused even there: every member of the group (the
 * agents that may connect, typically) could replace the socket.
 */
export function socketDirectoryProblem(dir: StatLike, parent: StatLike | null, uid: number): string | null {
  if (dir.isSymbolicLink) return 'it is a symbolic link';
  if (!dir.isDirectory) return 'it is not a directory';
  if (dir.mode & GROUP_OR_OTHER_WRITE) return `writable by group or others (mode ${octal(dir.mode)})`;
  const own = ownerProblem(dir.uid, uid);
  if (own === null) return null;
  const parentProblem = parent === null ? 'it has no parent directory' : ownedDirectoryProblem(parent, uid);
  if (parentProblem === null) return null;
  return `${own}, and its parent is not trusted either: ${parentProblem}`;
}
