import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileDurable } from './files.js';

/**
 * Who holds the store: LevelDB's `db/LOCK` says only that somebody does, so the daemon that
 * got the lock writes its pid and socket beside it (`<data-dir>/db/yellod-holder.json`), and a
 * second daemon refused the lock (exit 73) names that holder. Advisory only: the lock itself
 * is LevelDB's; a file left by a killed daemon is ignored when its pid is gone.
 */
export interface LockHolder {
  pid: number;
  socket: string;
  startedAt: string;
}

const FILE = 'yellod-holder.json';

function holderPath(dbDir: string): string {
  return join(dbDir, FILE);
}

/** Record this process as the holder (right after the lock was taken). */
export function writeLockHolder(dbDir: string, socket: string): void {
  const holder: LockHolder = { pid: process.pid, socket, startedAt: new Date().toISOString() };
  writeFileDurable(holderPath(dbDir), JSON.stringify(holder) + '\n', 0o644);
}

/** Remove the record (a clean stop, a failed start), if it is still this process's; never throws. */
export function removeLockHolder(dbDir: string): void {
  try {
    if (readLockHolder(dbDir)?.pid === process.pid) rmSync(holderPath(dbDir), { force: true });
  } catch {
    /* advisory: a leftover names a pid that is gone, and is ignored */
  }
}

/** The recorded holder, if the file is there, parses and its process still exists. */
export function readLockHolder(dbDir: string): LockHolder | null {
  let holder: Partial<LockHolder>;
  try {
    holder = JSON.parse(readFileSync(holderPath(dbDir), 'utf8')) as Partial<LockHolder>;
  } catch {
    return null;
  }
  if (typeof holder.pid !== 'number' || typeof holder.socket !== 'string' || typeof holder.startedAt !== 'string') return null;
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to another user (still the holder); ESRCH: gone.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return null;
  }
  return { pid: holder.pid, socket: holder.socket, startedAt: holder.startedAt };
}

/** `pid 1234, socket /run/yello/yello.sock, since …`, or null when the holder is unknown. */
export function describeLockHolder(dbDir: string): string | null {
  const h = readLockHolder(dbDir);
  return h ? `pid ${h.pid}, socket ${h.socket}, since ${h.startedAt}` : null;
}
