import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import type { Logger } from 'pino';
import { migrateFormat } from './store-format.js';
import { Storage } from './storage.js';
import type { Db } from './verified-reads.js';
import { WalGuard, type GuardContents } from './wal-guard.js';

/** What LevelDB said it dropped from its write-ahead log while recovering it at open. */
export interface WalLossReport {
  /** The info-log lines (`… dropping N bytes; Corruption: …`), exactly as LevelDB wrote them. */
  lines: string[];
  bytes: number;
}

/** An opened store and what the previous run left for the integrity check. */
export interface OpenedStore {
  storage: Storage;
  guard: WalGuard;
  /** The streams written since LevelDB's last flush, as the guard file recorded them. */
  guarded: GuardContents;
  /** Drops LevelDB reported at this open (and at an earlier open whose check did not finish). */
  walLoss: WalLossReport | null;
}

/** Where the write-ahead-log guard keeps its file. */
export const GUARD_FILE = 'wal-guard';

/**
 * Open LevelDB (which locks it and replays its log), bring the format up to date, and read
 * what recovery reported. Throws the LevelDB error (`LEVEL_LOCKED`, `LEVEL_CORRUPTION`, I/O).
 */
export async function openStore(
  dataDir: string,
  log: Logger,
  options: { injectFailure?: (() => boolean) | null } = {},
): Promise<OpenedStore> {
  const dbDir = join(dataDir, 'db');
  const db: Db = new ClassicLevel<string, string>(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  // A larger memtable means fewer level-0 flushes and compactions competing with the event
  // loop for the two cores; a larger block cache keeps hot heads and indexes in memory.
  await db.open({ writeBufferSize: 16 << 20, cacheSize: 32 << 20 });
  try {
    await migrateFormat(db, log);
    const guard = new WalGuard(join(dataDir, GUARD_FILE));
    const guarded = guard.read();
    const walLoss = readRecoveryDrops(dbDir);
    const storage = new Storage(db, log, { guard, injectFailure: options.injectFailure ?? null });
    return { storage, guard, guarded, walLoss };
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
}

/**
 * LevelDB without `paranoid_checks` (classic-level does not expose it) skips damaged blocks of
 * its log at recovery and says so only in its info log: `LOG` for this open, `LOG.old` for the
 * one before (which matters when the daemon died before it could record what it found).
 */
export function readRecoveryDrops(dbDir: string): WalLossReport | null {
  const lines: string[] = [];
  let bytes = 0;
  for (const name of ['LOG.old', 'LOG']) {
    const path = join(dbDir, name);
    if (!existsSync(path)) continue;
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      const m = /: dropping (\d+) bytes; /.exec(line);
      if (!m) continue;
      lines.push(line);
      bytes += Number(m[1]);
    }
  }
  return lines.length > 0 ? { lines, bytes } : null;
}
