import {
  chmodSync,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  realpathSync,
  statSync,
  writeSync,
} from 'node:fs';
import type { Stats } from 'node:fs';
import { join } from 'node:path';
import { errors } from '../../../shared/errors.js';
import type { BackupFollowed } from '../../../shared/results.js';
import { fsyncDir } from '../../runtime/files.js';

/**
 * The data-dir files a backup carries beside the store: the signing keys (every record's
 * signature was made with one of them, and `keys.list` must keep listing them for verifiers),
 * the admin token, and the secret cursors, batch ids and list cursors are sealed with (without
 * it the restored daemon would make a new one, and every cursor and batch id handed out before
 * would be refused; agent tokens are stored as plain hashes and do not depend on it). The
 * write-ahead-log guard is not copied: the copied store is written whole, with nothing left in
 * a log to guard. `keys` is a directory of files, the others are files.
 */
export const BACKUP_FILES = ['keys', 'admin.token', 'secret.key'] as const;
export type BackupFile = (typeof BACKUP_FILES)[number];

const isDirectoryEntry = (name: string) => name === 'keys' || name === 'db';

// ---- backup: the data dir's files, symlinks followed and recorded --------------------------

/**
 * Copy the key directory and the secret files into `into` (0700/0600), as regular files. The
 * daemon itself reads them through symlinks (an operator may keep secrets on another volume),
 * so a backup follows a symlink too, and records it (`followed`: the name and where it
 * pointed): the backup holds the content the daemon uses, and the manifest says it was a link.
 * Anything that cannot be copied as a regular file (a dangling link, a FIFO, a directory where
 * a file belongs) refuses the backup: a manifest never lists a file the backup does not hold.
 */
export function copyDataFiles(dataDir: string, into: string): { files: BackupFile[]; followed: BackupFollowed[] } {
  const files: BackupFile[] = [];
  const followed: BackupFollowed[] = [];
  for (const name of BACKUP_FILES) {
    const from = join(dataDir, name);
    const st = lstatSync(from, { throwIfNoEntry: false });
    if (!st) continue;
    const target = followLink(from, name, st, followed);
    if (isDirectoryEntry(name)) {
      if (!target.isDirectory()) throw cannotCopy(name, 'is not a directory');
      mkdirSync(join(into, name), { mode: 0o700 });
      chmodSync(join(into, name), 0o700);
      for (const entry of readdirSync(from).sort()) {
        const rel = `${name}/${entry}`;
        const est = followLink(join(from, entry), rel, lstatSync(join(from, entry)), followed);
        if (!est.isFile()) throw cannotCopy(rel, describeType(est));
        copyFileContent(join(from, entry), join(into, name, entry), false);
      }
      fsyncDir(join(into, name));
    } else {
      if (!target.isFile()) throw cannotCopy(name, describeType(target));
      copyFileContent(from, join(into, name), false);
    }
    files.push(name);
  }
  return { files, followed };
}

/** What `path` is once a symlink is followed (recorded in `followed`); a dangling link refuses the backup. */
function followLink(path: string, name: string, st: Stats, followed: BackupFollowed[]): Stats {
  if (!st.isSymbolicLink()) return st;
  let target: string;
  let tst: Stats;
  try {
    target = realpathSync(path);
    tst = statSync(target);
  } catch (err) {
    throw cannotCopy(name, `is a symlink that leads nowhere (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  followed.push({ name, target });
  return tst;
}

function describeType(st: Stats): string {
  if (st.isDirectory()) return 'is a directory, not a file';
  if (st.isFIFO()) return 'is a FIFO, not a file';
  if (st.isSocket()) return 'is a socket, not a file';
  return 'is not a regular file';
}

function cannotCopy(name: string, why: string) {
  return errors.storageFailure(
    null,
    'UNSUPPORTED',
    `cannot back up ${name} of the data dir: it ${why}; a backup copies regular files only (a symlink is followed to one): replace it with the file itself; nothing was written`,
  );
}

// ---- restore: every entry checked before anything is copied --------------------------------

/** One entry of a backup, as checked: copied only if it is still this file (device and inode). */
export interface CheckedEntry {
  /** Path inside the backup, `/`-separated, from the known names only. */
  rel: string;
  kind: 'directory' | 'file';
  dev: number;
  ino: number;
}

/** Why a backup cannot be restored as it is; nothing was copied. */
export class BackupTreeError extends Error {}

/**
 * Check everything a restore would copy from `backupDir` before anything is copied: the
 * manifest's `files` are names of the known set (one plain component each, no repeats), and
 * `db/` and each listed name exist with the right type, with no symlink, device, FIFO or socket
 * anywhere (lstat of every entry, never followed). Returns the entries to copy, in order.
 */
export function checkBackupTree(backupDir: string, files: unknown[]): CheckedEntry[] {
  const names: string[] = [];
  for (const f of files) {
    if (typeof f !== 'string' || !(BACKUP_FILES as readonly string[]).includes(f)) {
      throw new BackupTreeError(
        `the manifest lists ${JSON.stringify(f)} among its files; a backup holds only ${BACKUP_FILES.join(', ')} beside db/ (the manifest was changed by hand or tampered with)`,
      );
    }
    if (names.includes(f)) throw new BackupTreeError(`the manifest lists ${f} twice among its files`);
    names.push(f);
  }
  const out: CheckedEntry[] = [];
  for (const name of ['db', ...names]) {
    const st = lstatSync(join(backupDir, name), { throwIfNoEntry: false });
    if (!st) throw new BackupTreeError(`the manifest lists ${name}, and the backup has no ${name}: it is incomplete`);
    checkType(name, st, isDirectoryEntry(name) ? 'directory' : 'file');
    out.push({ rel: name, kind: isDirectoryEntry(name) ? 'directory' : 'file', dev: st.dev, ino: st.ino });
    if (!isDirectoryEntry(name)) continue;
    for (const entry of readdirSync(join(backupDir, name)).sort()) {
      const rel = `${name}/${entry}`;
      const est = lstatSync(join(backupDir, rel));
      checkType(rel, est, 'file');
      out.push({ rel, kind: 'file', dev: est.dev, ino: est.ino });
    }
  }
  return out;
}

function checkType(rel: string, st: Stats, want: 'directory' | 'file'): void {
  if (st.isSymbolicLink())
    throw new BackupTreeError(`${rel} in the backup is a symlink; a backup holds no symlinks (yello backup writes none)`);
  const ok = want === 'directory' ? st.isDirectory() : st.isFile();
  if (!ok) throw new BackupTreeError(`${rel} in the backup is not a ${want === 'directory' ? 'directory' : 'regular file'}`);
}

/**
 * Copy checked entries from `backupDir` into `into` (a directory this process made): files are
 * opened with O_NOFOLLOW and must still be the inode that was checked, and are created new
 * (O_EXCL|O_NOFOLLOW, 0600) under directories made here (0700). Nothing outside `into` is
 * ever written, whatever the backup holds.
 */
export function copyChecked(backupDir: string, entries: CheckedEntry[], into: string): void {
  for (const e of entries) {
    const to = join(into, e.rel);
    if (e.kind === 'directory') {
      mkdirSync(to, { mode: 0o700 });
      chmodSync(to, 0o700);
      continue;
    }
    copyFileContent(join(backupDir, e.rel), to, true, e);
  }
  for (const e of entries) if (e.kind === 'directory') fsyncDir(join(into, e.rel));
}

const CHUNK = 1 << 20;

/**
 * Copy a file's bytes into a new file (O_EXCL|O_NOFOLLOW, 0600), synced. With `noFollow` the
 * source is opened with O_NOFOLLOW and must be the checked inode, a regular file.
 */
function copyFileContent(from: string, to: string, noFollow: boolean, checked?: CheckedEntry): void {
  const src = openSync(from, constants.O_RDONLY | (noFollow ? constants.O_NOFOLLOW : 0));
  try {
    const st = fstatSync(src);
    if (!st.isFile() || (checked && (st.dev !== checked.dev || st.ino !== checked.ino))) {
      throw new BackupTreeError(`${checked?.rel ?? from} changed while the restore read it; nothing was restored`);
    }
    const dst = openSync(to, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      const buf = Buffer.allocUnsafe(CHUNK);
      for (let n = readSync(src, buf, 0, CHUNK, null); n > 0; n = readSync(src, buf, 0, CHUNK, null)) {
        for (let off = 0; off < n;) off += writeSync(dst, buf, off, n - off);
      }
      fchmodSync(dst, 0o600);
      fsyncSync(dst);
    } finally {
      closeSync(dst);
    }
  } finally {
    closeSync(src);
  }
}
