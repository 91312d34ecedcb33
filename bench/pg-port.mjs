// Group-commit throughput of the streams port on PostgreSQL (src/daemon/store/postgres/, issue 24)
// beside LevelDB (src/daemon/store/leveldb/) in the same run: C concurrent writers, each
// appending one message at a time to its own stream through StreamPort.commit, so that the
// appends admitted in one turn share one transaction (PostgreSQL, fsync and synchronous_commit
// on, a throwaway cluster) or one LevelDB batch (sync write). Each client count runs on LevelDB
// first, then on PostgreSQL, on the same disk (the temp dir), so that the ratio is measured under
// the same load. Prints appends/s, changes per commit, latency p50/p99, this process's CPU per
// append, and the PostgreSQL/LevelDB ratio. The load average is printed before and after: the
// machine is shared, figures taken under load are not comparable with other runs (the ratio is).
//
//   npm run build && node bench/pg-port.mjs        # BENCH_SECONDS=3 BENCH_CLIENTS=1,8,64
//   BENCH_STANDBY=1 node bench/pg-port.mjs         # with a synchronous standby (every COMMIT waits for it)

import { mkdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { Counters } from '../dist/daemon/store/leveldb/counters.js';
import { LevelStore } from '../dist/daemon/store/leveldb/level-store.js';
import { openStore } from '../dist/daemon/store/leveldb/store-open.js';
import { openPool, resolveStoreUrl } from '../dist/daemon/store/postgres/connection.js';
import { migrate } from '../dist/daemon/store/postgres/migrate.js';
import { PostgresStreams } from '../dist/daemon/store/postgres/stream-store.js';
import { outcomeOf, expectOf } from '../dist/daemon/store/port/stream-port.js';
import { cloneMeta, newStreamMeta } from '../dist/daemon/store/stream-meta.js';
import { PgCluster } from '../test/helpers/pg-cluster.mjs';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CLIENTS = (process.env.BENCH_CLIENTS ?? '1,8,64').split(',').map(Number);
const STANDBY = process.env.BENCH_STANDBY === '1';
const ENGINES = (process.env.BENCH_ENGINES ?? 'leveldb,postgres').split(',');
const log = pino({ level: 'silent' });
const T = '2026-12-02T03:00:00.000Z';
const CONTENT = 'x'.repeat(200);

function append(head) {
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

/** C writers appending for SECONDS through `port`; `commits()` counts the port's commits. */
async function drive(port, heads, commits) {
  const latencies = [];
  let appends = 0;
  const commits0 = commits();
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + SECONDS * 1000;
  await Promise.all(
    heads.map(async (head) => {
      let h = head;
      while (performance.now() < end) {
        const change = append(h);
        const t0 = performance.now();
        const outcome = await outcomeOf(port.admit(change));
        if (outcome.status !== 'ok') throw new Error(`append ${outcome.status}`);
        latencies.push(performance.now() - t0);
        appends++;
        h = change.next;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  return {
    rate: appends / seconds,
    perCommit: appends / (commits() - commits0),
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
    cpu: (cpu.user + cpu.system) / appends,
  };
}

const chatHeads = (clients, tag) =>
  Array.from({ length: clients }, (_, i) => [
    newStreamMeta(`chat${tag}-${i}`, `alice${i}`, `bob${i}`, T),
    newStreamMeta(`chat${tag}-${i}`, `bob${i}`, `alice${i}`, T),
  ]);

async function runLevel(clients, tag) {
  const root = path.join(tmpdir(), `yl-bench-${process.pid}-${tag}`);
  mkdirSync(path.join(root, 'db'), { recursive: true });
  const opened = await openStore(root, log);
  const store = new LevelStore(opened.storage, await Counters.load(opened.storage, log));
  try {
    const heads = [];
    for (const pairOf of chatHeads(clients, tag)) {
      const [a, b] = pairOf;
      const outcome = await outcomeOf(
        store.directory.createChat({ id: a.chatId, agentAId: a.authorAgentId, agentBId: b.authorAgentId, createdAt: T }, [a, b]),
      );
      if (outcome.status !== 'ok') throw new Error(`createChat ${outcome.status}`);
      heads.push(a);
    }
    let commits = 0;
    store.onCommit(() => commits++);
    return await drive(store.streams, heads, () => commits);
  } finally {
    await store.close();
    rmSync(root, { recursive: true, force: true });
  }
}

async function runPostgres(cluster, pair, clients, tag) {
  const name = `b${tag}`;
  await cluster.psql(`create database ${name}`);
  const url = pair ? pair.url(name) : cluster.url(name);
  const sql = openPool(resolveStoreUrl(url), { max: 4 });
  try {
    await migrate(sql);
    const port = await PostgresStreams.open(sql);
    try {
      const heads = [];
      for (const [a, b] of chatHeads(clients, tag)) {
        await port.createStreams([a, b]);
        heads.push(a);
      }
      return await drive(port, heads, () => port.stats.batches);
    } finally {
      await port.close();
    }
  } finally {
    await sql.end({ timeout: 1 });
  }
}

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
const loadBefore = load();
const pair = STANDBY && ENGINES.includes('postgres') ? await PgCluster.startPair() : null;
const cluster = !ENGINES.includes('postgres') ? null : pair ? pair.primary : await PgCluster.start();
const rows = [];
try {
  let tag = 0;
  for (const clients of CLIENTS) {
    tag++;
    const level = ENGINES.includes('leveldb') ? await runLevel(clients, tag) : null;
    const pg = cluster ? await runPostgres(cluster, pair, clients, tag) : null;
    for (const [engine, r] of [
      ['LevelDB', level],
      ['PostgreSQL', pg],
    ]) {
      if (!r) continue;
      rows.push([
        clients,
        engine,
        Math.round(r.rate),
        r.perCommit.toFixed(1),
        r.p50.toFixed(2),
        r.p99.toFixed(2),
        Math.round(r.cpu),
        engine === 'PostgreSQL' && level ? `${(r.rate / level.rate).toFixed(2)}×` : '',
      ]);
    }
  }
} finally {
  if (pair) await pair.stop();
  else await cluster?.stop();
}

console.log(
  `streams port, group commit, ${SECONDS} s a row, durable commits${STANDBY ? ', PostgreSQL with a synchronous standby' : ''}; load average ${loadBefore} before, ${load()} after (${process.env.BENCH_NOTE ?? ''})`,
);
console.log('| clients | engine | appends/s | changes/commit | p50 ms | p99 ms | CPU µs/append | PG/LevelDB |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
