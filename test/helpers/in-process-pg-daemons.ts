// Several "daemons" in one process on one PostgreSQL database (test/helpers/pg-cluster.mjs), each
// the daemon's own services (StreamStore, Directory, Integrity, Signer over its own PostgresStore
// and pool, built as daemon.ts builds them): for tests of what only a store shared by
// several daemons reaches. In-process, so a mutant of daemon code is switched on in the test's
// worker and costs no daemon start. What a daemon "has not heard yet" is made deterministic by
// holding the notices of the streams channel that reach its pool (`hold()`), the way a slow
// LISTEN connection would: its cached heads stay as they were until `release()`.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { SignBatcher } from '../../src/daemon/crypto/sign-batcher.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { TokenCodec } from '../../src/daemon/crypto/token-codec.js';
import { Directory } from '../../src/daemon/directory/directory.js';
import { Integrity } from '../../src/daemon/store/integrity.js';
import { openPool, resolveStoreUrl, type Sql } from '../../src/daemon/store/postgres/connection.js';
import { migrate } from '../../src/daemon/store/postgres/migrate.js';
import { STREAMS_CHANNEL } from '../../src/daemon/store/postgres/notices.js';
import type { PgWaits } from '../../src/daemon/store/postgres/retry.js';
import { PostgresStore } from '../../src/daemon/store/postgres/store.js';
import { StreamStore } from '../../src/daemon/streams/stream-store.js';
import { YelloError } from '../../src/shared/errors.js';
import { silentLog } from './in-process-store.js';
import { FileDatabases } from './run-pg.js';

/** One daemon's services over its own pool, with its streams notices behind a gate. */
export interface InProcessDaemon {
  name: string;
  port: PostgresStore;
  directory: Directory;
  integrity: Integrity;
  /** Seals this deployment's cursors and batch ids (the same key on every daemon of the database). */
  codec: TokenCodec;
  streams: StreamStore;
  /** From now on, notices of other daemons' stream commits wait (this daemon's heads stay as they are). */
  hold(): void;
  /** Deliver the held notices, in order, and pass new ones again. */
  release(): void;
}

export async function openInProcessDaemon(name: string, url: string, dir: string, waits?: Partial<PgWaits>): Promise<InProcessDaemon> {
  const sql: Sql = openPool(resolveStoreUrl(url), { max: 4 });
  let held: Array<() => void> | null = null;
  const listen = sql.listen.bind(sql);
  // The gate: PostgresStreams listens on STREAMS_CHANNEL through this pool's `listen`.
  sql.listen = (channel: string, onnotify: (value: string) => void, onlisten?: () => void) =>
    listen(
      channel,
      (value) => {
        if (channel === STREAMS_CHANNEL && held)
          held.push(() => {
            onnotify(value);
          });
        else onnotify(value);
      },
      onlisten,
    );
  await migrate(sql);
  const port = await PostgresStore.open(sql, { waits });
  const integrity = new Integrity(port, silentLog);
  await integrity.load();
  const codec = TokenCodec.forDeployment(port.deploymentSecret);
  const directory = new Directory(port, codec, 'admin-token', 'open');
  const signer = new Signer(path.join(dir, name, 'keys'));
  const streams = new StreamStore(port, directory, signer, codec, integrity, new SignBatcher(signer));
  // As daemon.ts does: another daemon's commit wakes this one's long polls and followers.
  void (async () => {
    for await (const n of port.streams.changes()) streams.moved(n.streamId);
  })().catch(() => {});
  return {
    name,
    port,
    directory,
    integrity,
    codec,
    streams,
    hold() {
      held ??= [];
    },
    release() {
      const queued = held ?? [];
      held = null;
      for (const deliver of queued) deliver();
    },
  };
}

/** The error a promise rejects with, as type and details (and message). */
export async function failure(p: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(YelloError);
    return { type: (err as YelloError).type, message: (err as YelloError).message, ...(err as YelloError).details };
  }
  throw new Error('expected a rejection, the call succeeded');
}

/**
 * Inside a `describe`: a database of the run's cluster (test/helpers/run-pg.ts), and daemons A
 * and B on it, opened before the block's tests (one at a time: the second finds the schema
 * migrated by the first) and closed after them.
 */
export function useTwoDaemons(database: string): { a: () => InProcessDaemon; b: () => InProcessDaemon; cluster: () => FileDatabases } {
  let cluster: FileDatabases | undefined;
  let dir: string | undefined;
  const opened: InProcessDaemon[] = [];
  beforeAll(async () => {
    cluster = await FileDatabases.open();
    await cluster.createDatabase(database);
    dir = mkdtempSync(path.join(tmpdir(), `yl-${database}-`));
    for (const name of ['a', 'b']) opened.push(await openInProcessDaemon(name, cluster.url(database), dir));
  }, 60_000);
  afterAll(async () => {
    for (const d of opened) {
      d.release();
      await d.port.close().catch(() => {});
    }
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);
  const started = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('useTwoDaemons: used before its beforeAll ran');
    return v;
  };
  return { a: () => started(opened[0]), b: () => started(opened[1]), cluster: () => started(cluster) };
}
