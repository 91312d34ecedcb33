import { lstat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { socketDirectoryProblem, type StatLike } from '../shared/socket-trust.js';
import { ConnectionLostError, UntrustedSocketError } from './errors.js';

function facts(st: Stats): StatLike {
  return { isDirectory: st.isDirectory(), isSymbolicLink: st.isSymbolicLink(), uid: st.uid, mode: st.mode };
}

async function lstatOrCannotConnect(path: string, socketPath: string): Promise<Stats> {
  try {
    return await lstat(path);
  } catch (err) {
    // Missing (a daemon restarting, say) or unreadable: nothing to connect to, so nothing to
    // trust. Reported as a connection failure, as connect() itself would have, without
    // connecting to a path that was not checked.
    throw new ConnectionLostError(`cannot connect to yellod at ${socketPath}: ${(err as Error).message}`, false, err);
  }
}

/**
 * Check, before a token is sent, that nobody but the caller, root or the daemon's own user
 * can have put the socket at `socketPath` there (docs/security.md, "Socket directory trust"):
 * the socket is a socket, not a symlink, and its directory passes
 * {@link socketDirectoryProblem}. Throws `UntrustedSocketError`, or `ConnectionLostError`
 * when there is nothing there. On a platform without uids (no `process.getuid`) it does nothing.
 */
export async function assertTrustedSocket(socketPath: string, uid: number | undefined = process.getuid?.()): Promise<void> {
  if (uid === undefined) return;
  const dir = dirname(resolve(socketPath));
  const dirStat = await lstatOrCannotConnect(dir, socketPath);
  const parentPath = dirname(dir);
  const parentStat = parentPath === dir ? null : await lstatOrCannotConnect(parentPath, socketPath);
  const problem = socketDirectoryProblem(facts(dirStat), parentStat && facts(parentStat), uid);
  if (problem) {
    throw new UntrustedSocketError(
      socketPath,
      `the socket directory ${dir} is not trusted: ${problem}; use a private directory (mode 0700) such as $XDG_RUNTIME_DIR/yello`,
    );
  }
  const sock = await lstatOrCannotConnect(socketPath, socketPath);
  if (sock.isSymbolicLink()) throw new UntrustedSocketError(socketPath, 'the socket path is a symbolic link');
  if (!sock.isSocket()) throw new UntrustedSocketError(socketPath, 'the socket path is not a socket');
}
