// After a commit without a verdict (its session lost) the PostgreSQL store is read-only; it must
// leave read-only by itself once the database answers again. Nothing in the daemon called
// recover() (only the failover test harness did), so a daemon whose commit was cut off by a
// failover, a restart of PostgreSQL or a terminated backend refused every write until it was
// restarted. Here the session of a commit blocked on a lock is terminated (an unknown outcome),
// and the store must accept writes again without anyone calling recover().
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, resolveStoreUrl, type Sql } from '../../src/daemon/store/postgres/connection.js';
import { migrate } from '../../src/daemon/store/postgres/migrate.js';
import { PostgresStore } from '../../src/daemon/store/postgres/store.js';
import type { PgWaits } from '../../src/daemon/store/postgres/retry.js';
import { outcomeOf, expectOf, type StreamChange } from '../../src/daemon/store/port/stream-port.js';
import { cloneMeta, newStreamMeta } from '../../src/daemon/store/stream-meta.js';
import type { StreamMeta } from '../../src/daemon/store/stream-meta.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';

const T = '2026-12-02T03:00:00.000Z';

// Shorter than a daemon's waits (5 s for an answer, 15 s for a recovery's own commit: retry.ts
// PG_WAITS), in the same order, so that the two cases below that sit out both take seconds.
const WAITS: Partial<PgWaits> = { answerDeadlineMs: 1_000, recoverWaitMs: 2_500 };

function append(h: StreamMeta, operationId: string): StreamChange {
  const next = cloneMeta(h);
  next.nextPosition = h.nextPosition + 1;
  return {
    kind: 'append',
    expect: expectOf(h),
    next,
    records: [
      {
        streamId: h.streamId,
        generation: String(h.generation),
        position: String(h.nextPosition),
        wrapper: {
          version: 2,
          chatId: h.chatId,
          authorAgentId: h.authorAgentId,
          operationId,
          recordIndex: 0,
          type: 'chat.receipt',
          receipt: { peerStreamId: `${h.chatId}:bob`, peerGeneration: '1', nextPosition: '0', batchId: 'b' },
        },
      },
    ],
    operation: {
      operationId,
      generation: h.generation,
      firstPosition: h.nextPosition,
      nextPosition: next.nextPosition,
      committedAt: T,
      requestDigest: 'd',
      redactions: [],
    },
    messageIds: [],
    ready: null,
  } as unknown as StreamChange;
}

describe.runIf(pgAvailable())('PostgreSQL store: leaves read-only by itself after an unknown outcome', () => {
  let cluster: FileDatabases | undefined;
  const pools: Sql[] = [];
  beforeAll(async () => {
    cluster = await FileDatabases.open();
  }, 120_000);
  afterAll(async () => {
    for (const p of pools) await p.end({ timeout: 1 });
    await cluster?.stop();
  });

  it('accepts writes again once the database answers, without recover() being called', async () => {
    const url = cluster!.url();
    const admin = openPool(resolveStoreUrl(url), { max: 2 });
    pools.push(admin);
    await migrate(admin);
    const sql = openPool(resolveStoreUrl(url), { max: 2 });
    const store = await PostgresStore.open(sql);
    try {
      await store.streams.createStreams([newStreamMeta('c1', 'alice', 'bob', T), newStreamMeta('c1', 'bob', 'alice', T)]);
      const h = store.streams.head('c1:alice', 'committed')!;

      // Hold the heads table so the commit waits on the lock, then cut its session off.
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = admin.begin(async (tx) => {
        await tx`lock table heads in exclusive mode`;
        locked();
        await released;
      });
      await isLocked;
      const outcome = outcomeOf(store.streams.admit(append(h, 'op-1')));
      for (;;) {
        const killed = await admin<{ n: number }[]>`
          select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
        if (killed[0]!.n > 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect((await outcome).status).toBe('unknown');
      expect(store.readOnly).toBe(true);
      release();
      await holder;

      // Nobody calls recover(): the store must do it itself (with backoff) and accept writes.
      const deadline = Date.now() + 30_000;
      while (store.readOnly && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(store.readOnly).toBe(false);
      const again = store.streams.head('c1:alice', 'committed')!;
      expect((await outcomeOf(store.streams.admit(append(again, 'op-2')))).status).toBe('ok');
    } finally {
      await store.close();
    }
  }, 120_000);

  it('recover() ends with a clear error while a commit of its own is still unanswered, and succeeds after', async () => {
    const url = cluster!.url();
    const admin = openPool(resolveStoreUrl(url), { max: 2 });
    pools.push(admin);
    await migrate(admin);
    const sql = openPool(resolveStoreUrl(url), { max: 2 });
    const store = await PostgresStore.open(sql, { waits: WAITS });
    let release = (): void => {};
    try {
      await store.streams.createStreams([newStreamMeta('c2', 'alice', 'bob', T), newStreamMeta('c2', 'bob', 'alice', T)]);
      const h = store.streams.head('c2:alice', 'committed')!;
      const released = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = admin.begin(async (tx) => {
        await tx`lock table heads in exclusive mode`;
        locked();
        await released;
      });
      await isLocked;
      const outcome = outcomeOf(store.streams.admit(append(h, 'op-1')));
      // The commit waits on the lock (its session alive): recover() must not wait with it forever.
      for (;;) {
        const [w] = await admin<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
        if (w!.n > 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const recovering = store.streams.recover().then(
        () => 'returned',
        (e: unknown) => {
          const y = e as { type?: string; details?: { reason?: string } };
          return `${y.type}/${y.details?.reason}`;
        },
      );
      const first = await Promise.race([
        recovering,
        new Promise((r) => {
          setTimeout(() => {
            r('still waiting');
          }, 40_000);
        }),
      ]);
      expect(first).toBe('STORAGE_FAILURE/READ_ONLY');
      // Its caller was not held with it: past the answer deadline the outcome is unknown, and
      // pending while the transaction is still out.
      expect((await outcome).status).toBe('unknown');
      expect((await store.streams.operationStatus('c2:alice', 'op-1')).state).toBe('pending');
      release();
      await holder;
      await store.streams.recover();
      expect((await store.streams.operationStatus('c2:alice', 'op-1')).state).toBe('committed');
    } finally {
      release(); // else close() waits on the blocked commit
      await store.close();
    }
  }, 120_000);

  it('the directory half too: recover() ends with a clear error while a directory commit is unanswered, and succeeds after', async () => {
    const url = cluster!.url();
    const admin = openPool(resolveStoreUrl(url), { max: 2 });
    pools.push(admin);
    await migrate(admin);
    const sql = openPool(resolveStoreUrl(url), { max: 2 });
    const store = await PostgresStore.open(sql, { waits: WAITS });
    let release = (): void => {};
    try {
      const released = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = admin.begin(async (tx) => {
        await tx`lock table grants in exclusive mode`;
        locked();
        await released;
      });
      await isLocked;
      const outcome = outcomeOf(store.directory.putGrant({ agentId: 'agt_a', peerAgentId: 'agt_b', grantedAt: T }));
      for (;;) {
        const [w] = await admin<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
        if (w!.n > 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      // Before, the directory's recover() waited on its commit chain with no bound.
      const recovering = store.directory.recover().then(
        () => 'returned',
        (e: unknown) => {
          const y = e as { type?: string; details?: { reason?: string } };
          return `${y.type}/${y.details?.reason}`;
        },
      );
      const first = await Promise.race([
        recovering,
        new Promise((r) => {
          setTimeout(() => {
            r('still waiting');
          }, 40_000);
        }),
      ]);
      expect(first).toBe('STORAGE_FAILURE/READ_ONLY');
      release();
      await holder;
      await outcome.catch(() => {});
      await store.directory.recover();
    } finally {
      release();
      await store.close();
    }
  }, 120_000);
});
