import { lstatSync, readdirSync, rmSync, rmdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ensureDir } from './files.js';
import { EXIT_CODES } from './exit-codes.js';
import { startupFailure } from './startup-errors.js';
import { StartupError } from './startup-error.js';
import { errorMessage } from './error-fields.js';

// The data dir as a start finds it and leaves it (daemon.ts): created 0700 and refused when
// another user owns it, before any store is opened; and after a start that failed, what that
// start made there goes again, and nothing else (another daemon may be filling the same dir).

/** The names in the data dir before this start touched it; null when there was no data dir. */
export function dataDirEntries(dataDir: string): Set<string> | null {
  try {
    return new Set(readdirSync(dataDir));
  } catch {
    return null;
  }
}

/**
 * After a start that failed while holding the lock: remove the data dir entries this start
 * created (keys, admin token, secret), and a store this start created, once it is closed
 * (nothing was ever acknowledged from it).
 */
export async function removeCreated(
  dataDir: string,
  before: Set<string> | null,
  lockEntry: string,
  closeStore: () => Promise<void>,
  log: Logger,
): Promise<void> {
  const created = [...(dataDirEntries(dataDir) ?? [])].filter((name) => !before?.has(name));
  for (const name of created.filter((n) => n !== lockEntry)) removeLogged(join(dataDir, name), log);
  await closeStore();
  if (created.includes(lockEntry)) removeLogged(join(dataDir, lockEntry), log);
  removeEmptyDirsCreated(dataDir, before);
}

function removeLogged(path: string, log: Logger): void {
  try {
    rmSync(path, { recursive: true, force: true });
  } catch (err) {
    log.warn({ err: { message: errorMessage(err) }, path }, 'could not remove what a failed start created');
  }
}

/** After a failed start: remove the directories this start made, if they are empty. */
export function removeEmptyDirsCreated(dataDir: string, before: Set<string> | null): void {
  const tryRmdir = (path: string) => {
    try {
      rmdirSync(path);
    } catch {
      /* not empty (another daemon's files), or already gone */
    }
  };
  if (!before?.has('db')) tryRmdir(join(dataDir, 'db'));
  if (before === null) tryRmdir(dataDir);
}

/**
 * The data dir holds the signing keys and the admin token: create it 0700, and refuse one that
 * another user owns (they could read or replace what is in it).
 */
export function prepareDataDir(dataDir: string, withDb: boolean): void {
  try {
    const st = lstatSync(dataDir, { throwIfNoEntry: false });
    if (st) {
      if (st.isSymbolicLink() && !statSync(dataDir).isDirectory())
        throw new StartupError(
          `cannot use the data dir ${dataDir}: it is a symbolic link to something that is not a directory`,
          EXIT_CODES.config,
        );
      const uid = process.getuid?.();
      const owner = statSync(dataDir).uid;
      if (uid !== undefined && owner !== uid) {
        throw new StartupError(
          `cannot use the data dir ${dataDir}: it is owned by uid ${owner}, not by this daemon's uid ${uid}`,
          EXIT_CODES.config,
        );
      }
    }
    ensureDir(dataDir, 0o700);
    if (withDb) ensureDir(join(dataDir, 'db'), 0o700);
  } catch (err) {
    throw startupFailure(err, `open the data dir ${dataDir}`);
  }
}
