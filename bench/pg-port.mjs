// Group-commit throughput of the PostgreSQL streams port (src/daemon/store/postgres/, issue 24)
// on a throwaway cluster with fsync on: C concurrent writers, each appending one message at a
// time to its own stream through PostgresStreams.commit, so that the appends admitted in one
// turn share a transaction (a savepoint each) and one fsync. Prints appends/s, changes per
// transaction, latency p50/p99 and this process's CPU per append.
//
//   npm run build && node bench/pg-port.mjs        # BENCH_SECONDS=3 BENCH_CLIENTS=1,8,64
//   BENCH_STANDBY=1 node bench/pg-port.mjs         # with a synchronous standby (every COMMIT waits for it)

import { performance } from 'node:perf_hooks';
import { openPool, resolveStoreUrl } from '../dist/daemon/store/postgres/connection.js';
import { migrate } from '../dist/daemon/store/postgres/migrate.js';
import { PostgresStreams } from '../dist/daemon/store/postgres/stream-store.js';
import { expectOf } from '../dist/daemon/store/port/stream-port.js';
import { cloneMeta, newStreamMeta } from '../dist/daemon/store/stream-meta.js';
import { PgCluster } from '../test/helpers/pg-cluster.mjs';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CLIENTS = (process.env.BENCH_CLIENTS ?? '1,8,64').split(',').map(Number);
const STANDBY = process.env.BENCH_STANDBY === '1';
const T = '2026-12-02T03:00:00.000Z';
const CONTENT = 'x'.repeat(200);

function append(head, n) {
  const next = cloneMeta(head);
  next.nextPosition = head.nextPosition + 1;
  const operationId = `op-${head.nextPosition}`;
  const clientMessageId = `m-${head.nextPosition}`;
  const record = {
    streamId: head.streamId,
    generation: String(head.generation),
    position: String(head.nextPosition),
    wrapper: {
      version: 2,
      chatId: head.chatId,
      authorAgentId: head.authorAgentId,
      operationId,
      recordIndex: 0,
      type: 'chat.message',
      message: {
        chatId: head.chatId,
        fromAgentId: head.authorAgentId,
        toAgentId: head.peerAgentId,
        clientMessageId,
        content: CONTENT,
        contentSha256: 'a'.repeat(64),
        signature: { kid: 'k1', alg: 'ES256', value: 's'.repeat(86), createdAt: T },
      },
    },
  };
  const operation = {
    operationId,
    generation: head.generation,
    firstPosition: head.nextPosition,
    nextPosition: next.nextPosition,
    committedAt: T,
    requestDigest: 'd'.repeat(16),
    redactions: [],
  };
  void n;
  return {
    kind: 'append',
    expect: expectOf(head),
    next,
    records: [record],
    operation,
    messageIds: [[clientMessageId, head.nextPosition]],
    ready: null,
  };
}

const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))] ?? NaN;

const pair = STANDBY ? await PgCluster.startPair() : null;
const cluster = pair ? pair.primary : await PgCluster.start();
const rows = [];
try {
  let db = 0;
  for (const clients of CLIENTS) {
    const name = `b${++db}`;
    await cluster.psql(`create database ${name}`);
    const url = pair ? pair.url(name) : cluster.url(name);
    const sql = openPool(resolveStoreUrl(url), { max: 4 });
    await migrate(sql);
    const port = await PostgresStreams.open(sql);
    const heads = [];
    for (let i = 0; i < clients; i++) {
      const a = newStreamMeta(`chat${i}`, 'alice', 'bob', T);
      await port.createStreams([a, newStreamMeta(`chat${i}`, 'bob', 'alice', T)]);
      heads.push(a);
    }
    const latencies = [];
    let appends = 0;
    const batches0 = port.stats.batches;
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    const end = start + SECONDS * 1000;
    await Promise.all(
      heads.map(async (head) => {
        let h = head;
        while (performance.now() < end) {
          const change = append(h, appends);
          const t0 = performance.now();
          const outcome = await port.commit(change);
          if (outcome.status !== 'ok') throw new Error(`append ${outcome.status}`);
          latencies.push(performance.now() - t0);
          appends++;
          h = change.next;
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const txns = port.stats.batches - batches0;
    latencies.sort((a, b) => a - b);
    rows.push({
      clients,
      'appends/s': Math.round(appends / seconds),
      'changes/txn': (appends / txns).toFixed(1),
      'p50 ms': pct(latencies, 50).toFixed(2),
      'p99 ms': pct(latencies, 99).toFixed(2),
      'CPU µs/append': Math.round((cpu.user + cpu.system) / appends),
    });
    await port.close();
    await sql.end({ timeout: 1 });
  }
} finally {
  if (pair) await pair.stop();
  else await cluster.stop();
}

console.log(`PostgreSQL streams port, group commit, ${SECONDS} s a row, fsync on${STANDBY ? ', synchronous standby' : ''}`);
console.log('| clients | appends/s | changes/txn | p50 ms | p99 ms | CPU µs/append |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const r of rows) console.log(`| ${Object.values(r).join(' | ')} |`);
