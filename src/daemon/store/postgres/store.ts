// The whole storage port on PostgreSQL (issue 24): the streams half (stream-store.ts), the
// directory (directory.ts), keys and integrity marks (keys-integrity.ts) over one pool, with one
// read-only state, one close, and the counts of `daemon.status`. `openPostgresStore` is how the
// daemon opens it: resolve the URL (connection.ts: no password in it, redacted in logs), open
// the pool, migrate (migrate.ts, under an advisory lock), load heads and the directory.

import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { PG_WAITS, retryUntilDone, type PgWaits } from './retry.js';
import { errors } from '../../../shared/errors.js';
import type { BackupManifest } from '../../../shared/results.js';
import { StoreGate } from '../port/gate.js';
import type { StorePort } from '../port/store-port.js';
import type { CommitStats, StoreCounts, StreamMeta } from '../port/values.js';
import { describeStore, openPool, resolveStoreUrl, StoreConfigError, type Sql } from './connection.js';
import { PostgresDirectory } from './directory.js';
import { PostgresIntegrity, PostgresKeys } from './keys-integrity.js';
import { migrate } from './migrate.js';
import { PostgresStreams, type SettledChange } from './stream-store.js';

/** What a head counts in `counts().records`: its current range plus its sealed generations'. */
interface Counted {
  generation: number;
  firstPosition: number;
  nextPosition: number;
  records: number;
}

function counted(h: StreamMeta): Counted {
  let records = h.nextPosition - h.firstPosition;
  for (const s of h.sealed) records += s.nextPosition - s.firstPosition;
  return { generation: h.generation, firstPosition: h.firstPosition, nextPosition: h.nextPosition, records };
}

/** Whether `h` is the same as or later than what was counted (heads only move forward). */
function notBehind(h: StreamMeta, c: Counted): boolean {
  return (
    h.generation > c.generation || (h.generation === c.generation && h.nextPosition >= c.nextPosition && h.firstPosition >= c.firstPosition)
  );
}

export const BACKUP_UNSUPPORTED_MESSAGE =
  'daemon.backup copies a LevelDB store, and this daemon stores in PostgreSQL: back the database up with pg_dump (a consistent logical copy while the daemons keep serving) or with continuous WAL archiving and point-in-time recovery (pg_basebackup; see docs/multi-host.md); the data dir (keys, admin.token, secret.key) is copied with the file system; nothing was written';

/**
 * The storage port over one PostgreSQL database shared by several daemons.
 *
 * Counts: agents and chats are the directory's cached rows (plus creations in flight); streams
 * and records are kept from the heads this daemon knows: every head loaded at open, its own
 * commits as they settle, and other daemons' commits as their notices refresh a head. Exact for
 * this daemon's own changes at once; another daemon's appends, claims, resets and new chats are
 * counted when their notice arrives; its trims when the stream's head is next refreshed (a trim
 * moves no position the notice compares). A restart recounts from the tables.
 */
export class PostgresStore implements StorePort {
  readonly streams: PostgresStreams;
  readonly directory: PostgresDirectory;
  readonly integrity: PostgresIntegrity;
  readonly keys: PostgresKeys;
  readonly deploymentSecret: Buffer;
  readonly #sql: Sql;
  readonly #gate: StoreGate;
  readonly #log: Logger | undefined;
  readonly #closeWaitMs: number;
  readonly #counted = new Map<string, Counted>();
  #records = 0;
  #stopping = false;
  /** The background recovery after an unknown outcome, while it runs; and what cuts its wait short. */
  #recovering: Promise<void> | undefined;
  #recoverWake: (() => void) | undefined;
  readonly #failureListeners: Array<() => void> = [];
  readonly #commitListeners: Array<(writes: number, seconds: number) => void> = [];
  #watching: Promise<void> = Promise.resolve();

  private constructor(
    sql: Sql,
    gate: StoreGate,
    streams: PostgresStreams,
    directory: PostgresDirectory,
    secret: Buffer,
    log: Logger | undefined,
    closeWaitMs: number,
  ) {
    this.#sql = sql;
    this.#gate = gate;
    this.deploymentSecret = secret;
    this.#log = log;
    this.#closeWaitMs = closeWaitMs;
    this.streams = streams;
    this.directory = directory;
    this.integrity = new PostgresIntegrity(sql);
    this.keys = new PostgresKeys(sql);
  }

  /**
   * The store over an open, migrated pool: loads heads and the directory. The pool becomes the
   * store's. `waits` overrides PG_WAITS (tests, which would otherwise sit out the production waits).
   */
  static async open(sql: Sql, options: { log?: Logger; waits?: Partial<PgWaits> } = {}): Promise<PostgresStore> {
    const secret = await deploymentSecret(sql);
    // One gate for both halves: a commit of either whose outcome is unknown makes the store read-only.
    const gate = new StoreGate('reconnect');
    const waits = { ...PG_WAITS, ...options.waits };
    const streams = await PostgresStreams.open(sql, { gate, waits, ...(options.log ? { log: options.log } : {}) });
    // The directory's callbacks run only after open() returned (they follow commits and notices).
    const late: { store?: PostgresStore } = {};
    const directory = await PostgresDirectory.open(sql, streams, {
      gate,
      waits,
      ...(options.log ? { log: options.log } : {}),
      onChat: (heads) => {
        if (late.store) for (const h of heads) late.store.#count(h);
      },
      onUnreachable: (err) => {
        if (late.store) late.store.#reachable(false, err);
      },
      onReachable: () => {
        if (late.store) late.store.#reachable(true);
      },
    });
    const opened = new PostgresStore(sql, gate, streams, directory, secret, options.log, waits.closeWaitMs);
    late.store = opened;
    gate.onFailure(() => {
      opened.#turnedReadOnly();
    });
    streams.onDenied((admission, peerAgentId) => {
      directory.reloadDenied(admission.agentId, peerAgentId);
    });
    streams.onGroupCommit((settled, seconds) => {
      opened.#onGroupCommit(settled, seconds);
    });
    directory.onCommit((writes, seconds) => {
      for (const l of opened.#commitListeners) l(writes, seconds);
    });
    for await (const id of streams.streamIds()) {
      const h = streams.head(id, 'committed');
      if (h) opened.#count(h);
    }
    opened.#watching = opened.#watch();
    return opened;
  }

  #onGroupCommit(settled: ReadonlyArray<SettledChange>, seconds: number): void {
    for (const { change, outcome } of settled) if (outcome.status === 'ok') this.#count(change.next);
    for (const l of this.#commitListeners) l(settled.length, seconds);
  }

  /** Other daemons' commits: count the head each notice refreshed. */
  async #watch(): Promise<void> {
    try {
      for await (const n of this.streams.changes()) {
        // A notice refreshed while close() began: the heads are no longer answered, nor needed.
        if (this.stopping) return;
        const h = this.streams.head(n.streamId, 'committed');
        if (h) this.#count(h);
      }
    } catch (err) {
      // Counts only: a failure here must not end the process (close() awaits this promise).
      if (!this.stopping) this.#log?.warn({ err: { code: (err as { code?: string }).code } }, "counting other daemons' commits stopped");
    }
  }

  /** Whether the last session check was answered; what is logged is each change of it, once. */
  #answering = true;

  #reachable(answering: boolean, err?: unknown): void {
    if (answering === this.#answering) return;
    this.#answering = answering;
    if (answering) this.#log?.info('the PostgreSQL database answers again');
    else
      this.#log?.error(
        { err: { message: (err as Error | undefined)?.message, code: (err as { code?: string } | undefined)?.code } },
        'the PostgreSQL database does not answer: every agent call is refused with STORAGE_FAILURE/UNAVAILABLE, and a commit past the deadline has an unknown outcome, until it answers again',
      );
  }

  #count(h: StreamMeta): void {
    const before = this.#counted.get(h.streamId);
    if (before && !notBehind(h, before)) return;
    const now = counted(h);
    this.#records += now.records - (before?.records ?? 0);
    this.#counted.set(h.streamId, now);
  }

  /** The gate turned read-only (a commit of either half had an unknown outcome): recover in the background. */
  #turnedReadOnly(): void {
    this.#recoverInBackground();
    for (const l of this.#failureListeners) l();
  }

  /**
   * Leave read-only by itself: retry recover() (the store's one retry loop, retry.ts) until it
   * succeeds or close() begins; the first try after the first delay. Nothing else calls
   * recover(): without this a daemon whose commit was cut off (a failover, a PostgreSQL restart,
   * a terminated backend) refused every write until it was restarted
   * (test/pg/store-recovers.test.ts).
   */
  #recoverInBackground(): void {
    if (this.#recovering || this.#stopping) return;
    this.#recovering = retryUntilDone({
      delayFirst: true,
      sleep: (ms) =>
        new Promise<void>((r) => {
          this.#recoverWake = r;
          setTimeout(r, ms).unref();
        }),
      // close() may begin during any await of the loop: an error then is not news.
      stopped: () => this.#stopping,
      attempt: () => this.recover(),
      failed: (err, attempt) =>
        // The SQLSTATE (or the driver's code) only: a server's message may quote row data.
        this.#log?.warn(
          { err: { code: (err as { code?: string }).code }, attempt },
          'the PostgreSQL store is still read-only: reloading after the unknown outcome failed (database unreachable, or a commit of this daemon still unanswered); retrying',
        ),
    }).finally(() => {
      this.#recovering = undefined;
      this.#recoverWake = undefined;
    });
  }

  counts(): StoreCounts {
    const d = this.directory.counts();
    return { agents: d.agents, chats: d.chats, streams: this.#counted.size, records: this.#records };
  }

  get stats(): CommitStats {
    return {
      batches: this.streams.stats.batches + this.directory.stats.batches,
      writes: this.streams.stats.writes + this.directory.stats.writes,
      checkpoints: 0,
    };
  }

  get readOnly(): boolean {
    return this.#gate.readOnly;
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  assertWritable(operationId: string | null = null): void {
    this.#gate.assertWritable(operationId);
  }

  onFailure(listener: () => void): void {
    this.#failureListeners.push(listener);
  }

  onCommit(listener: (writes: number, seconds: number) => void): void {
    this.#commitListeners.push(listener);
  }

  /** Refused: the database is backed up with PostgreSQL's tools (STORAGE_FAILURE/UNSUPPORTED, nothing written). */
  backup(): Promise<BackupManifest> {
    return Promise.reject(errors.storageFailure(null, 'UNSUPPORTED', BACKUP_UNSUPPORTED_MESSAGE));
  }

  /**
   * After an unknown outcome, once the database answers again: reload the directory and every
   * head, and accept writes again. Throws while the database is unreachable (still read-only).
   */
  async recover(): Promise<void> {
    await this.directory.recover();
    await this.streams.recover();
    this.#gate.recovered();
    this.#log?.info('the PostgreSQL store accepts writes again');
  }

  async close(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#gate.close();
    this.#recoverWake?.();
    // Both halves refuse writes from this turn on (a write after close() began is refused).
    const closing = Promise.all([this.directory.close(), this.streams.close()]);
    await this.#recovering;
    await closing;
    await this.#watching;
    await this.#sql.end({ timeout: this.#closeWaitMs / 1000 });
  }
}

/** The `meta` row holding the deployment secret (base64url of 32 random bytes). */
export const DEPLOYMENT_SECRET_NAME = 'deployment-secret';

/**
 * The deployment's sealing secret: created by the first daemon that opens the database, read
 * back by every one. Insert-if-absent then select, so two daemons starting at once both read
 * the row that won; the `meta` grants (select, insert) already allow it, no migration needed.
 */
async function deploymentSecret(sql: Sql): Promise<Buffer> {
  await sql`insert into meta (name, body) values (${DEPLOYMENT_SECRET_NAME}, ${randomBytes(32).toString('base64url')})
    on conflict (name) do nothing`;
  const [row] = await sql<{ body: string }[]>`select body from meta where name = ${DEPLOYMENT_SECRET_NAME}`;
  const secret = row ? Buffer.from(row.body, 'base64url') : Buffer.alloc(0);
  // A configuration fault for a person to fix (exit 78, not a restart loop), never a new secret
  // made quietly: that would void every cursor and batch id the other daemons issued.
  if (secret.length < 32)
    throw new StoreConfigError(
      `the deployment secret (table meta, name '${DEPLOYMENT_SECRET_NAME}') is missing or shorter than 32 bytes: delete that row so the next daemon start creates a new one (cursors and batch ids issued before stop being accepted)`,
    );
  return secret;
}

export interface OpenPostgresStoreOptions {
  /** The store URL (`--store`, `$YELLO_STORE`): `postgresql://USER@HOST:PORT/DB?…`, no password in it. */
  url: string;
  /** `--store-password-file` (mode 0600); else PGPASSWORD, a passfile, or none. */
  passwordFile?: string;
  log: Logger;
  /** `application_name` of the sessions (pg_stat_activity), unless the URL sets one. Default `yellod`. */
  applicationName?: string;
  /** The environment PG* variables are read from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Connections in the pool (default 8). */
  poolSize?: number;
  /** Shorter waits on PostgreSQL than PG_WAITS (tests only: `yello daemon --pg-answer-deadline-ms`). */
  waits?: Partial<PgWaits>;
}

/**
 * Open the PostgreSQL store the daemon runs on: resolve the URL (StoreConfigError, exit 78, for
 * a URL or password setting that cannot be used), open the pool, apply the schema migrations
 * (StoreFormatError, exit 78, for a database a newer yello migrated), load every head and the
 * directory, listen for the other daemons' commits.
 */
export async function openPostgresStore(options: OpenPostgresStoreOptions): Promise<PostgresStore> {
  const config = resolveStoreUrl(options.url, {
    ...(options.passwordFile !== undefined ? { passwordFile: options.passwordFile } : {}),
    ...(options.env ? { env: options.env } : {}),
  });
  if (options.applicationName !== undefined && !/[?&]application_name=/.test(options.url)) config.applicationName = options.applicationName;
  options.log.info({ store: describeStore(config) }, 'opening the PostgreSQL store');
  const sql = openPool(config, { max: options.poolSize ?? 8 });
  try {
    const migrated = await migrate(sql, options.log);
    if (migrated.applied.length > 0) options.log.info({ from: migrated.from, to: migrated.to }, 'schema migrated');
    return await PostgresStore.open(sql, { log: options.log, waits: options.waits });
  } catch (err) {
    await sql.end({ timeout: 1 }).catch(() => {});
    throw err;
  }
}
