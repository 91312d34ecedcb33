import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import { errors, YelloError } from '../../../shared/errors.js';
import { errorMessage } from '../../runtime/error-fields.js';
import { formatDecimal } from '../../../shared/ids.js';
import type { BackupManifest, BackupStreamCheckpoint } from '../../../shared/results.js';
import { fsyncDir, writeFileDurable } from '../../runtime/files.js';
import type { StreamTail } from '../record-layout.js';
import type { SnapshotIterator, Storage } from './storage.js';
import type { StreamMeta } from '../stream-meta.js';
import { copyDataFiles } from './backup-files.js';
import { withTail } from './stream-tables.js';
import { decodeValue } from './value-codec.js';

/** The manifest's name in a backup directory. */
export const MANIFEST_FILE = 'manifest.json';
export const BACKUP_FORMAT = 'yello.backup.v1';

/** Entries copied per LevelDB batch. */
const PAGE = 1_000;

/**
 * `daemon.backup`: a consistent copy of the store while the daemon keeps serving. Everything
 * comes from one LevelDB snapshot, taken before anything else is read, so every write that was
 * acknowledged before the call is in it (a write is acknowledged only once it is in LevelDB),
 * and nothing is half in it: a head and the records of its last append came in one batch.
 * The copy is made under a temporary name beside `target` (0700 directories, 0600 files), made
 * durable, and renamed to `target` last; a backup that fails leaves nothing under `target`.
 */
export async function writeBackup(storage: Storage, dataDir: string, target: string, daemonVersion: string): Promise<BackupManifest> {
  checkTarget(target);
  const tmp = join(dirname(target), `.${basename(target)}.partial-${process.pid}-${randomBytes(4).toString('hex')}`);
  // The snapshot first: the key files copied next are at least as new as it (a key is on
  // disk before anything is signed with it), which is all a restore needs from them.
  const snapshot = storage.snapshot();
  try {
    mkdirSync(tmp, { mode: 0o700 });
    chmodSync(tmp, 0o700);
    const { files, followed } = copyDataFiles(dataDir, tmp);
    const copied = await copyStore(snapshot, join(tmp, 'db'));
    const manifest: BackupManifest = {
      format: BACKUP_FORMAT,
      createdAt: new Date().toISOString(),
      daemonVersion,
      entries: copied.entries,
      records: copied.records,
      bytes: copied.bytes,
      streams: copied.streams,
      files,
      followed,
    };
    writeFileDurable(join(tmp, MANIFEST_FILE), JSON.stringify(manifest, null, 2) + '\n');
    fsyncDir(tmp);
    if (existsSync(target)) throw errors.invalidParams('path', `${target} appeared while the backup was written; nothing was replaced`);
    renameSync(tmp, target);
    fsyncDir(dirname(target));
    return manifest;
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException | null)?.code;
    // The target's filesystem refused (permissions, space): the caller's path, not the store.
    if (!(err instanceof YelloError) && typeof code === 'string' && code.startsWith('E')) {
      throw errors.invalidParams('path', `cannot write a backup at ${target} (${code}: ${errorMessage(err)}); nothing was written there`);
    }
    throw err;
  } finally {
    await snapshot.close().catch(() => {});
  }
}

/** An absolute path that does not exist yet, in a directory that does. */
function checkTarget(target: string): void {
  if (!isAbsolute(target)) throw errors.invalidParams('path', `${target} is not an absolute path`);
  if (lstatSync(target, { throwIfNoEntry: false })) {
    throw errors.invalidParams('path', `${target} already exists; a backup never replaces anything: name a new directory`);
  }
  const parent = lstatSync(dirname(target), { throwIfNoEntry: false });
  if (!parent?.isDirectory()) throw errors.invalidParams('path', `${dirname(target)} is not a directory; create it first`);
}

function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Write every entry of the snapshot, as stored, into a new LevelDB at `dbDir`. */
async function copyStore(
  snapshot: SnapshotIterator,
  dbDir: string,
): Promise<{ entries: number; records: number; bytes: number; streams: BackupStreamCheckpoint[] }> {
  mkdirSync(dbDir, { mode: 0o700 });
  const db = new ClassicLevel<string, string>(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  await db.open();
  const heads = new HeadCollector();
  let entries = 0;
  let records = 0;
  let bytes = 0;
  try {
    let page = await snapshot.nextv(PAGE);
    while (page.length > 0) {
      const batch = db.batch();
      for (const [key, raw] of page) {
        batch.put(key, raw);
        entries++;
        bytes += raw.length;
        if (key.startsWith('r/')) records++;
        heads.see(key, raw);
      }
      page = await snapshot.nextv(PAGE);
      // The last batch is synced: LevelDB's log is sequential, so its fsync covers the others.
      await batch.write({ sync: page.length === 0 });
    }
  } finally {
    await db.close();
  }
  for (const name of readdirSync(dbDir)) {
    chmodSync(join(dbDir, name), 0o600);
    syncFile(join(dbDir, name));
  }
  chmodSync(dbDir, 0o700);
  fsyncDir(dbDir);
  return { entries, records, bytes, streams: heads.checkpoints() };
}

/**
 * The stream heads (`s/`, and the tails every append updates, `h/`) of a scan in key order, as
 * checkpoints. A value that fails its checksum is left out: the doctor names it.
 */
export class HeadCollector {
  readonly #metas = new Map<string, StreamMeta>();
  readonly #tails = new Map<string, StreamTail>();

  see(key: string, raw: string): void {
    const table = key.slice(0, 2);
    if (table !== 's/' && table !== 'h/') return;
    const json = decodeValue(key, raw);
    if (json === null) return;
    try {
      if (table === 's/') this.#metas.set(key.slice(2), JSON.parse(json) as StreamMeta);
      else this.#tails.set(key.slice(2), JSON.parse(json) as StreamTail);
    } catch {
      /* not JSON after a matching checksum: the doctor reports it */
    }
  }

  checkpoints(): BackupStreamCheckpoint[] {
    return [...this.#metas.entries()]
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([streamId, meta]) => {
        const tail = this.#tails.get(streamId);
        const head = tail ? withTail(meta, tail) : meta;
        return {
          streamId,
          generation: formatDecimal(head.generation),
          firstPosition: formatDecimal(head.firstPosition),
          nextPosition: formatDecimal(head.nextPosition),
        };
      });
  }
}
