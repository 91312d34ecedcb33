// Pins behaviour of src/daemon/streams/heads.ts `movedSince` and `sameDecision`: code that runs
// only where the store is shared by many daemons (PostgreSQL; on LevelDB `movedSince` answers false
// at once), so the LevelDB guards never reach it. A refusal decided on a cached head is confirmed
// with `movedSince` before it is answered: it must say "moved" exactly when the head in the
// database differs in something a decision rests on (generation, range, writer, receipt), and not
// otherwise.
//
// Two "daemons" are two PostgresStreams over two pools on one database (as in
// test/store/port-postgres.test.ts); StreamHeads is built over the first. `movedSince` reads
// only the stream port, so the directory, integrity and presence it is also given are left out.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Directory } from '../../src/daemon/directory/directory.js';
import type { Integrity } from '../../src/daemon/store/integrity.js';
import { openPool, resolveStoreUrl, type Sql } from '../../src/daemon/store/postgres/connection.js';
import { migrate } from '../../src/daemon/store/postgres/migrate.js';
import { PostgresStreams } from '../../src/daemon/store/postgres/stream-store.js';
import type { StorePort } from '../../src/daemon/store/port/store-port.js';
import { outcomeOf, expectOf } from '../../src/daemon/store/port/stream-port.js';
import type { StreamMeta } from '../../src/daemon/store/port/values.js';
import { cloneMeta, newStreamMeta } from '../../src/daemon/store/stream-meta.js';
import { StreamHeads } from '../../src/daemon/streams/heads.js';
import type { WriterPresence } from '../../src/daemon/streams/writer-presence.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';

const T = '2026-12-02T03:00:00.000Z';

describe.runIf(pgAvailable())('stream heads on a shared store (heads.ts movedSince)', () => {
  let cluster: FileDatabases | undefined;
  const pools: Sql[] = [];
  const ports: PostgresStreams[] = [];
  let a: PostgresStreams;
  let b: PostgresStreams;
  let heads: StreamHeads;

  beforeAll(async () => {
    cluster = await FileDatabases.open();
    await cluster.createDatabase('moved');
    const url = resolveStoreUrl(cluster.url('moved'));
    const admin = openPool(url, { max: 1 });
    pools.push(admin);
    await migrate(admin);
    for (let i = 0; i < 2; i++) {
      const sql = openPool(url, { max: 4 });
      pools.push(sql);
      ports.push(await PostgresStreams.open(sql));
    }
    [a, b] = ports as [PostgresStreams, PostgresStreams];
    heads = new StreamHeads(
      { streams: a } as unknown as StorePort,
      null as unknown as Directory,
      null as unknown as Integrity,
      null as unknown as WriterPresence,
    );
  }, 60_000);

  afterAll(async () => {
    for (const p of ports) await p.close().catch(() => {});
    for (const p of pools) await p.end({ timeout: 1 });
    await cluster?.stop();
  });

  /** A new pair of streams through daemon a; the first, with `receipt`, as a has it. */
  async function stream(chat: string, receipt: StreamMeta['receipt']): Promise<StreamMeta> {
    const meta = newStreamMeta(chat, 'alice', 'bob', T);
    meta.receipt = receipt;
    expect(await a.createStreams([meta, newStreamMeta(chat, 'bob', 'alice', T)])).toBe('ok');
    return a.head(meta.streamId, 'admitted')!;
  }

  it('the head the database still has has not moved; once another daemon changed it, it has, and the cache holds the new head', async () => {
    const head = await stream('m1', null);
    expect(await heads.movedSince(head.streamId, head)).toBe(false);
    await b.recover();
    const next = cloneMeta(b.head(head.streamId, 'admitted')!);
    next.writer = { epoch: 1, claimedAt: T, active: true, tokenHash: 'h'.repeat(64) };
    expect(await outcomeOf(b.admit({ kind: 'release', expect: expectOf(head), next }))).toEqual({ status: 'ok' });
    // `head` is what a decided on; the database has b's (a's cache may or may not have heard b's
    // notice yet: movedSince must say so either way).
    expect(await heads.movedSince(head.streamId, head)).toBe(true);
    expect(a.head(head.streamId, 'admitted')?.writer.epoch).toBe(1);
  });

  it('a head differing in any one thing a decision rests on has moved; one differing in nothing of it has not', async () => {
    const head = await stream('m2', { peerGeneration: 1, nextPosition: 4 });
    const variants: Array<[string, (m: StreamMeta) => void]> = [
      ['generation', (m) => (m.generation += 1)],
      ['firstPosition', (m) => (m.firstPosition += 1)],
      ['nextPosition', (m) => (m.nextPosition += 1)],
      ['writer.epoch', (m) => (m.writer.epoch += 1)],
      ['writer.active', (m) => (m.writer.active = !m.writer.active)],
      ['writer.tokenHash', (m) => (m.writer.tokenHash = 'x'.repeat(64))],
      ['receipt.peerGeneration', (m) => (m.receipt = { ...m.receipt!, peerGeneration: 2 })],
      ['receipt.nextPosition', (m) => (m.receipt = { ...m.receipt!, nextPosition: 5 })],
    ];
    for (const [field, change] of variants) {
      const decidedOn = cloneMeta(head);
      change(decidedOn);
      expect(await heads.movedSince(head.streamId, decidedOn), field).toBe(true);
    }
    // Not part of a decision: the last signature time.
    const same = cloneMeta(head);
    same.lastCreatedAt = '2026-12-02T03:00:09.000Z';
    expect(await heads.movedSince(head.streamId, same)).toBe(false);
  });

  it('heads without a receipt compare without failing, on either side', async () => {
    const head = await stream('m3', null);
    expect(await heads.movedSince(head.streamId, cloneMeta(head))).toBe(false);
    const withReceipt = await stream('m4', { peerGeneration: 1, nextPosition: 0 });
    const decidedWithout = cloneMeta(withReceipt);
    decidedWithout.receipt = null;
    expect(await heads.movedSince(withReceipt.streamId, decidedWithout)).toBe(true);
    const decidedWith = cloneMeta(head);
    decidedWith.receipt = { peerGeneration: 1, nextPosition: 0 };
    expect(await heads.movedSince(head.streamId, decidedWith)).toBe(true);
  });

  it('a stream the database has no head for has moved (it was decided on a head that is gone)', async () => {
    const head = await stream('m5', null);
    const ghost = { ...cloneMeta(head), streamId: 'm6:alice' };
    expect(await heads.movedSince(ghost.streamId, ghost)).toBe(true);
  });
});
