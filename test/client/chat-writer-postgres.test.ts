// Pins the PostgreSQL-only behaviour of src/client/chat-writer.ts resolveUncertain()'s wait for the
// head (283–286,): `operations.get` can say committed before `streams.get` shows the commit, and
// the writer must wait for the head, or its next append is POSITION_MISMATCH. On LevelDB
// operations.get answers `pending` until the head is published, so the wait never happens there. On
// PostgreSQL it does when a commit is cut off after it was made: here the daemon's COMMIT waits for
// a synchronous standby that does not exist (committed locally, not yet visible) and its session is
// terminated. The commit then shows in the tables while the daemon, its outcome unknown, keeps its
// old heads until recover() reloads them. A lock on the heads table, queued before the session is
// cut, holds recover() back for as long as the test wants: the writer must still be waiting then,
// and resolve once it is released.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatWriter, TimeoutError, YelloClient } from '../../src/client/index.js';
import { openPool, resolveStoreUrl, type Sql } from '../../src/daemon/store/postgres/connection.js';
import {
  connectAdmin,
  connectAgent,
  createChat,
  readStream,
  rejectionOf,
  settledWithin,
  messageContents,
  startDaemon,
} from '../helpers/client-fixtures.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { PgCluster, pgAvailable } from '../helpers/pg-cluster.mjs';
import { waitFor } from '../helpers/wait.js';

describe.runIf(pgAvailable())('ChatWriter.resolveUncertain() on PostgreSQL: a commit the tables show before the head does', () => {
  let cluster: PgCluster;
  let daemon: DaemonProcess;
  let sql: Sql;
  const clients: YelloClient[] = [];

  beforeAll(async () => {
    cluster = await PgCluster.start();
    await cluster.psql('create database writer');
    daemon = await startDaemon(['--store', cluster.url('writer')]);
    sql = openPool(resolveStoreUrl(cluster.url('writer')), { max: 2 });
    await sql`create table probe (x int)`;
  }, 90_000);

  afterAll(async () => {
    for (const c of clients) c.close();
    await sql.end({ timeout: 1 });
    await daemon.cleanup();
    await cluster.stop();
  }, 60_000);

  it('waits while operations.get says committed and streams.get does not show it yet, then appends after it', async () => {
    const admin = await connectAdmin(daemon);
    clients.push(admin);
    const chat = await createChat(admin);
    // The append's answer is given up on while its commit waits: the outcome unknown to the writer.
    const alice = await connectAgent(daemon, chat.alice, { callTimeoutMs: 1000 });
    clients.push(alice);
    const w = new ChatWriter(alice, { chatId: chat.chatId });
    const first = await w.send('first');

    // From now on a COMMIT waits for a standby that never comes (committed locally, not visible).
    await cluster.psql(`alter system set synchronous_standby_names = 'nobody'`);
    await cluster.psql('select pg_reload_conf()');
    // The reload reaches the server's processes by signal: probe until a commit of the test's own
    // waits for the standby, then cancel that wait (the probe is committed locally).
    const waiting = async () =>
      (await sql<{ pid: number }[]>`select pid from pg_stat_activity where wait_event = 'SyncRep'`).map((r) => r.pid);
    await waitFor(async () => {
      let done = false;
      const probe = sql`insert into probe values (1)`.then(() => (done = true));
      const waited = await waitFor(async () => (done ? 'no' : (await waiting()).length > 0 ? 'yes' : null), 'the probe');
      await sql`select pg_cancel_backend(pid) from pg_stat_activity where wait_event = 'SyncRep'`;
      await probe;
      return waited === 'yes';
    }, 'commits to wait for the standby');
    const sent = rejectionOf(w.send('maybe'));
    await waitFor(async () => (await waiting()).length === 1, 'the daemon commit to wait for the standby');
    expect(await sent).toBeInstanceOf(TimeoutError);
    expect(w.state).toBe('paused');
    const operationId = w.uncertainOperationId!;

    // Queue a lock on the heads table behind the commit's row locks: granted when the session
    // ends, before the daemon's recover() can read the heads.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holding = sql.begin(async (tx) => {
      await tx`lock table heads in access exclusive mode`;
      locked();
      await released;
    });
    // Whatever fails below, the lock is released, the stopped backends go on (a stopped backend
    // outlives its cluster) and commits no longer wait for the standby.
    let listening: number[] = [];
    const goOn = () => {
      for (const p of listening.splice(0))
        try {
          process.kill(p, 'SIGCONT');
        } catch {
          // gone already
        }
    };
    try {
      await waitFor(
        async () =>
          (await sql`select 1 from pg_locks where relation = 'heads'::regclass and mode = 'AccessExclusiveLock' and not granted`).length ===
          1,
        'the lock on heads to be queued',
      );
      // The commit's notice would tell the daemon the new head at once (stream-store.ts #onNotify):
      // the backends of its LISTEN connection are stopped, so it hears nothing until they go on.
      listening = (await sql<{ pid: number }[]>`select pid from pg_stat_activity where datname = 'writer' and query like 'listen %'`).map(
        (r) => r.pid,
      );
      expect(listening.length).toBeGreaterThan(0);
      for (const p of listening) process.kill(p, 'SIGSTOP');
      // Cut the session off while the commit waits (dropping the standby first would let it finish).
      const [pid] = await waiting();
      await sql`select pg_terminate_backend(${pid!})`;
      await cluster.psql(`alter system reset synchronous_standby_names`);
      await cluster.psql('select pg_reload_conf()');
      await isLocked;

      // The tables say committed; the daemon's head is still the one before it.
      const op = await alice.call('operations.get', { streamId: chat.alice.streamId, operationId });
      expect(op).toMatchObject({ state: 'committed', firstPosition: first.nextPosition });
      const cutOff = op.nextPosition;
      expect((await alice.call('streams.get', { streamId: chat.alice.streamId })).nextPosition).toBe(first.nextPosition);

      const resolving = w.resolveUncertain();
      expect(await settledWithin(resolving, 1500)).toEqual({ status: 'pending' });
      expect(w.state).toBe('paused');
      release();
      await holding;
      goOn();
      expect(await settledWithin(resolving, 15_000)).toMatchObject({
        status: 'fulfilled',
        value: { operationId, committed: true, operation: { state: 'committed', nextPosition: cutOff } },
      });
      expect((await alice.call('streams.get', { streamId: chat.alice.streamId })).nextPosition).toBe(cutOff);
      expect([w.state, w.uncertainOperationId]).toEqual(['claimed', null]);
    } finally {
      goOn();
      release();
      await holding.catch(() => undefined);
      await cluster.psql(`alter system reset synchronous_standby_names`);
      await cluster.psql('select pg_reload_conf()');
    }
    // The writer's position is the head's: the next append lands after the cut-off one.
    await w.send('after');
    expect(messageContents(await readStream(alice, chat.alice.streamId))).toEqual(['first', 'maybe', 'after']);
    await w.release();
  }, 60_000);
});
