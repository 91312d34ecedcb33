import { randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import type { BackupManifest, BackupStreamCheckpoint } from '../../../shared/results.js';
import type { DoctorReport } from '../../../shared/types.js';
import { ensureDir, fsyncDir } from '../../runtime/files.js';
import { describeLockHolder } from '../../runtime/lock-info.js';
import { BACKUP_FORMAT, HeadCollector, MANIFEST_FILE } from './backup.js';
import { BACKUP_FILES, BackupTreeError, checkBackupTree, copyChecked } from './backup-files.js';
import { DataDirLock } from './data-dir-lock.js';
import { runDoctorOffline } from './doctor-offline.js';
import { GUARD_FILE } from './store-open.js';

/** Why a restore refused; nothing in the data dir was changed. */
export class RestoreError extends Error {
  readonly code: 'NOT_A_BACKUP' | 'UNSAFE_BACKUP' | 'LOCKED' | 'CHECK_FAILED';

  constructor(code: RestoreError['code'], message: string) {
    super(message);
    this.name = 'RestoreError';
    this.code = code;
  }
}

/** What a restore did. */
export interface RestoreResult {
  manifest: BackupManifest;
  report: DoctorReport;
  /** Where the data dir's previous store, keys and secrets now are (null: there were none). */
  setAside: string | null;
}

/** What the data dir holds of a daemon's state, moved aside by a restore. */
const STATE_ENTRIES = ['db', ...BACKUP_FILES, GUARD_FILE];

/**
 * `yello restore`: replace a stopped daemon's store, keys and secrets with a backup's. Refuses
 * while any daemon holds the data dir: the data dir's lock (`lock/`, a PostgreSQL daemon's,
 * taken here for the whole restore) and LevelDB's lock on `db/` (held here until the swap).
 * Every name the manifest lists and every entry of the backup is checked before anything is
 * copied (`backup-files.ts`: known names only, no symlinks); the backup is then copied into the
 * data dir under a temporary name and checked there with the doctor's full check and against
 * its manifest (every stream's head as listed, the same number of records); only a clean copy
 * is swapped in, and what the data dir held before is kept in `before-restore-<time>/` beside
 * it, never deleted.
 */
export async function restoreBackup(backupDir: string, dataDir: string): Promise<RestoreResult> {
  const manifest = readManifest(backupDir);
  let entries;
  try {
    entries = checkBackupTree(backupDir, manifest.files);
  } catch (err) {
    if (err instanceof BackupTreeError)
      throw new RestoreError('UNSAFE_BACKUP', `${backupDir} cannot be restored: ${err.message}; nothing was changed`);
    throw err;
  }
  ensureDir(dataDir, 0o700);
  const lockDir = join(dataDir, 'lock');
  // Made here if no daemon on PostgreSQL ever ran in this data dir; removed again on a refusal.
  const made = !existsSync(lockDir);
  const dirLock = await lockDataDir(lockDir);
  let restored = false;
  try {
    const current = join(dataDir, 'db');
    const held = existsSync(current) ? await lockStore(current) : null;
    const staging = join(dataDir, `.restore-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      mkdirSync(staging, { mode: 0o700 });
      copyChecked(backupDir, entries, staging);
      const report = await runDoctorOffline(staging, { mark: false });
      if (report.problems.length > 0) {
        const first = report.problems[0];
        throw new RestoreError(
          'CHECK_FAILED',
          `the backup fails the doctor's check (${report.problems.length} problems, first: ${first?.kind ?? ''} ${first?.key ?? ''}: ${first?.detail ?? ''}); nothing was restored`,
        );
      }
      const mismatch = await compareWithManifest(join(staging, 'db'), manifest);
      if (mismatch) throw new RestoreError('CHECK_FAILED', `the backup does not match its manifest (${mismatch}); nothing was restored`);
      await held?.close();
      const setAside = swapIn(dataDir, staging);
      restored = true;
      return { manifest, report, setAside };
    } catch (err) {
      rmSync(staging, { recursive: true, force: true });
      if (err instanceof BackupTreeError) throw new RestoreError('UNSAFE_BACKUP', `${backupDir} cannot be restored: ${err.message}`);
      throw err;
    } finally {
      await held?.close();
    }
  } finally {
    await dirLock.release();
    if (made && !restored) rmSync(lockDir, { recursive: true, force: true });
  }
}

function readManifest(backupDir: string): BackupManifest {
  let manifest: Partial<BackupManifest>;
  if (lstatSync(join(backupDir, MANIFEST_FILE), { throwIfNoEntry: false })?.isSymbolicLink()) {
    throw new RestoreError(
      'UNSAFE_BACKUP',
      `${join(backupDir, MANIFEST_FILE)} is a symlink; a backup holds no symlinks; nothing was changed`,
    );
  }
  try {
    const fd = openSync(join(backupDir, MANIFEST_FILE), constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      manifest = JSON.parse(readFileSync(fd, 'utf8')) as Partial<BackupManifest>;
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw new RestoreError(
      'NOT_A_BACKUP',
      `${backupDir} is not a yello backup (${join(backupDir, MANIFEST_FILE)}: ${(err as Error).message}); name a directory \`yello backup\` wrote`,
    );
  }
  if (
    typeof (manifest as unknown) !== 'object' ||
    (manifest as unknown) === null ||
    manifest.format !== BACKUP_FORMAT ||
    !Array.isArray(manifest.streams) ||
    !Array.isArray(manifest.files)
  ) {
    throw new RestoreError('NOT_A_BACKUP', `${join(backupDir, MANIFEST_FILE)} is not a ${BACKUP_FORMAT} manifest`);
  }
  if (!lstatSync(join(backupDir, 'db'), { throwIfNoEntry: false })?.isDirectory()) {
    throw new RestoreError('NOT_A_BACKUP', `${backupDir} has no db/ directory; it is not a complete backup`);
  }
  return manifest as BackupManifest;
}

/** The refusal when a daemon holds `lockDir` (`db/` or `lock/`), naming it when it can. */
function lockedBy(lockDir: string): RestoreError {
  const holder = describeLockHolder(lockDir);
  return new RestoreError(
    'LOCKED',
    `a daemon holds the data dir's lock ${lockDir} (${holder ?? 'holder unknown'}); stop it first: a restore is made with the daemon stopped; nothing was changed`,
  );
}

const lockCode = (err: unknown) => (err as { code?: string; cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code;

/** Take the data dir's lock (`lock/`, what a daemon on PostgreSQL holds), creating it if need be. */
async function lockDataDir(lockDir: string): Promise<DataDirLock> {
  try {
    return await DataDirLock.take(lockDir);
  } catch (err) {
    if (lockCode(err) === 'LEVEL_LOCKED') throw lockedBy(lockDir);
    throw new RestoreError('LOCKED', `cannot take the data dir's lock ${lockDir} (${(err as Error).message}); nothing was changed`);
  }
}

/** Take LevelDB's lock on the current store, so no daemon starts on it during the restore. */
async function lockStore(dbDir: string): Promise<ClassicLevel> {
  const db = new ClassicLevel<string, string>(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8', createIfMissing: false });
  try {
    await db.open();
  } catch (err) {
    if (lockCode(err) === 'LEVEL_LOCKED') throw lockedBy(dbDir);
    // A store LevelDB cannot open at all is what a restore is for: it is set aside unopened.
    return { close: () => Promise.resolve() } as unknown as ClassicLevel;
  }
  return db;
}

/** The first difference between the restored heads and records and the manifest, or null. */
async function compareWithManifest(dbDir: string, manifest: BackupManifest): Promise<string | null> {
  const db = new ClassicLevel<string, string>(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8', createIfMissing: false });
  await db.open();
  const heads = new HeadCollector();
  let records = 0;
  try {
    for await (const [key, raw] of db.iterator({ gte: 'h/', lt: 'h0' })) heads.see(key, raw);
    for await (const [key, raw] of db.iterator({ gte: 's/', lt: 's0' })) heads.see(key, raw);
    const keys = db.keys({ gte: 'r/', lt: 'r0' });
    try {
      for (let page = await keys.nextv(1_000); page.length > 0; page = await keys.nextv(1_000)) records += page.length;
    } finally {
      await keys.close();
    }
  } finally {
    await db.close();
  }
  if (records !== manifest.records) return `${records} records, the manifest lists ${manifest.records}`;
  const found = new Map(heads.checkpoints().map((c) => [c.streamId, c]));
  if (found.size !== manifest.streams.length) return `${found.size} streams, the manifest lists ${manifest.streams.length}`;
  for (const want of manifest.streams) {
    const got = found.get(want.streamId);
    if (!got || !sameCheckpoint(got, want)) {
      return `stream ${want.streamId}: ${got ? describe(got) : 'missing'}, the manifest lists ${describe(want)}`;
    }
  }
  return null;
}

const sameCheckpoint = (a: BackupStreamCheckpoint, b: BackupStreamCheckpoint) =>
  a.generation === b.generation && a.firstPosition === b.firstPosition && a.nextPosition === b.nextPosition;
const describe = (c: BackupStreamCheckpoint) => `generation ${c.generation} [${c.firstPosition}, ${c.nextPosition})`;

/**
 * Move the data dir's state aside, then the checked copy in. Each step is a rename inside the
 * data dir: a crash between them leaves every file either in the aside directory or in place,
 * never lost; the restore can be run again.
 */
function swapIn(dataDir: string, staging: string): string | null {
  const present = STATE_ENTRIES.filter((name) => lstatSync(join(dataDir, name), { throwIfNoEntry: false }));
  let aside: string | null = null;
  if (present.length > 0) {
    aside = join(dataDir, `before-restore-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    mkdirSync(aside, { mode: 0o700 });
    for (const name of present) renameSync(join(dataDir, name), join(aside, name));
    fsyncDir(aside);
  }
  for (const name of STATE_ENTRIES) {
    if (lstatSync(join(staging, name), { throwIfNoEntry: false })) renameSync(join(staging, name), join(dataDir, name));
  }
  fsyncDir(dataDir);
  rmSync(staging, { recursive: true, force: true });
  return aside;
}
