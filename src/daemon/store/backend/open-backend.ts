// Opening the store the daemon was told to use (issue 24): LevelDB in the data dir (the
// default), or a PostgreSQL database shared with other daemons (`--store postgresql://…`,
// `$YELLO_STORE`). The composition root gets the storage port plus, on LevelDB only, the
// engine's own tools (recovery check, doctor, WAL incidents); what a backend lacks is null, and
// the RPC methods that need it answer UNSUPPORTED (docs/protocol.md §6.3).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { DoctorReport } from '../../../shared/types.js';
import type { StoreInfo } from '../../../shared/results.js';
import type { Signer } from '../../crypto/signer.js';
import { StartupError } from '../../runtime/startup-error.js';
import { EXIT_CODES } from '../../runtime/exit-codes.js';
import { startupFailure } from '../../runtime/startup-errors.js';
import { describeLockHolder } from '../../runtime/lock-info.js';
import type { Integrity } from '../integrity.js';
import type { StorePort } from '../port/store-port.js';
import { openStore, type OpenedStore } from '../leveldb/store-open.js';
import { Counters } from '../leveldb/counters.js';
import { LevelStore } from '../leveldb/level-store.js';
import { applyRecoveryReport, walIncidents } from '../leveldb/recovery-check.js';
import { checkStore } from '../leveldb/doctor.js';

/** Which store, as `--store` / `$YELLO_STORE` said (null, `leveldb`, `leveldb:`: the data dir's LevelDB). */
export interface StoreSelection {
  store: string | null;
  passwordFile: string | null;
}

/** LevelDB's own tools, which have no PostgreSQL counterpart (PostgreSQL has its own). */
export interface LevelOnlyTools {
  /** Act on what LevelDB reported while recovering its log (docs/protocol.md §2.5 step 3). */
  applyRecoveryReport(integrity: Integrity, log: Logger): Promise<void>;
  /** `daemon.check`: the full scan of store/leveldb/doctor.ts. */
  check(integrity: Integrity, signer: Signer, mark: boolean): Promise<DoctorReport>;
  /** Write-ahead-log losses found at this and earlier starts (`daemon.status`). */
  walIncidents(): Array<{ detectedAt: string; bytes: number; streams: number; guardDamaged: boolean }>;
}

/** An opened store, locked for this daemon. */
export interface OpenedBackend {
  readonly port: StorePort;
  /** What `daemon.status` says about the store (a URL redacted: never a password). */
  readonly info: StoreInfo;
  /** For the startup log: the backend, and where it is (redacted). */
  readonly describe: Record<string, unknown>;
  /** The data-dir entry holding the lock (and the lock-holder file): `db` on LevelDB, `lock` otherwise. */
  readonly lockEntry: string;
  /** Null on backends without them (PostgreSQL). */
  readonly level: LevelOnlyTools | null;
  /**
   * Heads moved by commits of other daemons on the same store (and this one's), as they are
   * noticed; null when nobody else writes the store (LevelDB). Ends when the port closes.
   */
  readonly headChanges: AsyncIterable<{ streamId: string }> | null;
  /**
   * Register for the ids of chats other daemons on the same store created, as this one learns
   * them (what its `chats.watch` subscriptions are told of); null when nobody else writes the store.
   */
  readonly onChatsLearned: ((listener: (chatIds: readonly string[]) => void) => void) | null;
  /** Release what the port does not own (the data dir lock), after `port.close()`; never throws. */
  release(): Promise<void>;
}

/** Whether a `--store` value is LevelDB (the default) rather than a database URL. */
export function isLevelSelection(store: string | null): boolean {
  return store === null || store === '' || /^leveldb:?$/i.test(store);
}

/**
 * Open and lock the store. Throws a {@link StartupError} (one line, its exit code) when it
 * cannot: locked by another daemon (73), corrupt (76), the database unreachable (69), its
 * credentials refused (77), a bad URL or a schema from a newer yello (78).
 */
export async function openBackend(
  dataDir: string,
  selection: StoreSelection,
  log: Logger,
  options: { failSyncFile?: string | null; applicationName?: string; pgAnswerDeadlineMs?: number | undefined },
): Promise<OpenedBackend> {
  if (isLevelSelection(selection.store)) return openLevel(dataDir, log, options.failSyncFile ?? null);
  return openPostgres(dataDir, selection.store ?? '', selection.passwordFile, log, options);
}

/** A lock error names the daemon holding it (its pid and socket, from the holder file). */
function lockFailure(err: unknown, doing: string, lockDir: string): StartupError {
  const failure = startupFailure(err, doing);
  if (failure.exitCode !== EXIT_CODES.storeLocked) return failure;
  const holder = describeLockHolder(lockDir);
  return new StartupError(
    `${failure.message} (${holder ?? 'holder unknown: its pid was not recorded'}); stop it first, or give this one another --data-dir`,
    failure.exitCode,
  );
}

async function openLevel(dataDir: string, log: Logger, failSyncFile: string | null): Promise<OpenedBackend> {
  const dbDir = join(dataDir, 'db');
  let opened: OpenedStore;
  try {
    opened = await openStore(dataDir, log, { injectFailure: failSyncFile ? () => existsSync(failSyncFile) : null });
  } catch (err) {
    throw lockFailure(err, `open the store ${dbDir}`, dbDir);
  }
  const { storage } = opened;
  try {
    const port = new LevelStore(storage, await Counters.load(storage, log));
    return {
      port,
      info: { backend: 'leveldb' },
      describe: { backend: 'leveldb', path: dbDir },
      lockEntry: 'db',
      headChanges: null,
      onChatsLearned: null,
      level: {
        applyRecoveryReport: async (integrity, l) => {
          await applyRecoveryReport(opened, integrity, l);
        },
        check: (integrity, signer, mark) => checkStore(storage, integrity, signer, { mark }),
        walIncidents: () =>
          walIncidents(opened).map((i) => ({ detectedAt: i.detectedAt, bytes: i.bytes, streams: i.streams, guardDamaged: i.guardDamaged })),
      },
      // The LevelDB lock is the store's own: closing the port releases it.
      release: () => Promise.resolve(),
    };
  } catch (err) {
    await storage.close().catch(() => {});
    throw startupFailure(err, `open the store ${dbDir}`);
  }
}

async function openPostgres(
  dataDir: string,
  url: string,
  passwordFile: string | null,
  log: Logger,
  { applicationName, pgAnswerDeadlineMs }: { applicationName?: string; pgAnswerDeadlineMs?: number | undefined },
): Promise<OpenedBackend> {
  const { redactStoreUrl, resolveStoreUrl, describeStore, StoreConfigError } = await import('../postgres/connection.js');
  const { postgresStartupFailure, scrubbedStartup } = await import('../postgres/open-errors.js');
  const { DataDirLock } = await import('../leveldb/data-dir-lock.js');
  const shown = redactStoreUrl(url);
  let described: Record<string, unknown>;
  try {
    // Checked here first (it reads no network): a bad URL or password file fails before the lock.
    described = describeStore(resolveStoreUrl(url, passwordFile === null ? {} : { passwordFile }));
  } catch (err) {
    if (err instanceof StoreConfigError) throw new StartupError(`cannot use the store: ${err.message}`, EXIT_CODES.config);
    throw scrubbedStartup(startupFailure(err, `open the store ${shown}`), url);
  }
  const lockDir = join(dataDir, 'lock');
  let lock: Awaited<ReturnType<typeof DataDirLock.take>>;
  try {
    lock = await DataDirLock.take(lockDir);
  } catch (err) {
    throw lockFailure(err, `lock the data dir ${dataDir}`, lockDir);
  }
  try {
    // Loaded here, so that daemons on LevelDB never load postgres.js.
    const { openPostgresStore } = await import('../postgres/store.js');
    const port = await openPostgresStore({
      url,
      ...(passwordFile === null ? {} : { passwordFile }),
      log,
      ...(applicationName === undefined ? {} : { applicationName }),
      ...(pgAnswerDeadlineMs ? { waits: { answerDeadlineMs: pgAnswerDeadlineMs } } : {}),
    });
    return {
      port,
      info: { backend: 'postgresql', url: shown },
      describe: { backend: 'postgresql', url: shown, ...described },
      lockEntry: 'lock',
      level: null,
      headChanges: port.streams.changes(),
      onChatsLearned: (listener) => {
        port.directory.onChatsLearned(listener);
      },
      release: () => lock.release().catch(() => {}),
    };
  } catch (err) {
    await lock.release().catch(() => {});
    if (err instanceof StartupError) throw scrubbedStartup(err, url);
    if (err instanceof StoreConfigError) throw new StartupError(`cannot use the store: ${err.message}`, EXIT_CODES.config);
    throw postgresStartupFailure(err, url) ?? scrubbedStartup(startupFailure(err, `open the store ${shown}`), url);
  }
}
