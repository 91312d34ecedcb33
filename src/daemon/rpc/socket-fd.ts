import { readFileSync, readlinkSync } from 'node:fs';
import type { Socket } from 'node:net';

/**
 * What Linux tells about an accepted socket without SO_PEERCRED (Node 20 does not expose it):
 * its file descriptor and the inode of the daemon's end, which `ss -xp` maps to the peer
 * process while the connection lives. Both are best effort: null when not on Linux or when the
 * handle has no fd.
 */
export function socketFd(socket: Socket): number | null {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : null;
}

/** The inode of `socket:[N]` behind our fd, or null. */
export function socketInode(fd: number | null): number | null {
  if (fd === null) return null;
  try {
    const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
    return m ? Number(m[1]) : null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EMFILE' || code === 'ENFILE' ? 0 : null;
  }
}

/**
 * The soft limit on open files (RLIMIT_NOFILE) as it is now: read from /proc/self/limits at
 * each call, because an operator may change it on a live daemon (`prlimit --pid`). No fd left
 * to open the file reads as 0 (no room at all); not being on Linux is null (unknown).
 */
export function openFileLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (!m) return null;
    return m[1] === 'unlimited' ? Infinity : Number(m[1]);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EMFILE' || code === 'ENFILE' ? 0 : null;
  }
}
