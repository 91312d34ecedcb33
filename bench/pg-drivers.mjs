// Which PostgreSQL driver for the storage backend of issue 24: `pg` (node-postgres) or
// `postgres` (postgres.js), measured on yello's append shape, in one run on one throwaway
// cluster (test/helpers/pg-cluster.mjs), so the ratios hold even on a loaded machine.
//
//   npm install --no-save pg@8.23.1 && node bench/pg-drivers.mjs     # BENCH_SECONDS=3 a cell
//
// `pg` is not a dependency (postgres.js was chosen: docs/design/storage-port.md), hence the
// install without saving; without it the table has the postgres.js rows only.
//
// The append: compare-and-append on the stream head, the record row, the operation row, in one
// transaction, as the backend must do it (issue 24 item 2). Two ways to send it:
//   - "txn": BEGIN; UPDATE head … WHERE position = expected; INSERT record; INSERT operation;
//     COMMIT — five statements (pg sends them one round trip each; postgres.js pipelines
//     the statements of a `sql.begin` callback that returns them as an array);
//   - "cte": one statement (a data-modifying CTE), one round trip, autocommit;
//   - "group": the daemon's group commit: one statement (unnest of arrays) carrying one append
//     for each of the C streams, one transaction and one fsync for all of them.
// Each of C clients appends to its own stream, one append at a time, over a pool of at most 16
// connections; the figure is appends per second and the driver's CPU (this process) per append.

import { performance } from 'node:perf_hooks';
import postgres from 'postgres';
import { PgCluster } from '../test/helpers/pg-cluster.mjs';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CLIENTS = (process.env.BENCH_CLIENTS ?? '1,8,64').split(',').map(Number);
const POOL = 16;
const BODY = JSON.stringify({ type: 'chat.message', content: 'x'.repeat(200), sig: 'y'.repeat(96) });

const SCHEMA = `
  drop table if exists heads, records, operations;
  create table heads (stream text primary key, position bigint not null);
  create table records (stream text not null, position bigint not null, body text not null, primary key (stream, position));
  create table operations (stream text not null, operation_id text not null, position bigint not null, primary key (stream, operation_id));
`;

const UPDATE_HEAD = 'update heads set position = position + 1 where stream = $1 and position = $2 returning position';
const INSERT_RECORD = 'insert into records (stream, position, body) values ($1, $2, $3)';
const INSERT_OPERATION = 'insert into operations (stream, operation_id, position) values ($1, $2, $3)';
const CTE = `with h as (update heads set position = position + 1 where stream = $1 and position = $2 returning position),
  r as (insert into records (stream, position, body) select $1, position - 1, $3 from h),
  o as (insert into operations (stream, operation_id, position) select $1, $4, position - 1 from h)
  select position from h`;

// A turn's appends (one per stream) in one statement: the group commit of the daemon, where one
// transaction (one fsync) carries every append gathered in a turn. Each head must be at its
// expected position, or the whole group is refused (the backend then retries the others).
const GROUP = `with input as (select * from unnest($1::text[], $2::bigint[], $3::text[], $4::text[]) as t(stream, position, body, op)),
  h as (update heads set position = heads.position + 1 from input where heads.stream = input.stream and heads.position = input.position returning heads.stream),
  r as (insert into records (stream, position, body) select stream, position, body from input),
  o as (insert into operations (stream, operation_id, position) select stream, op, position from input)
  select count(*)::int as n from h`;

function groupParams(streams, pos) {
  return [streams, streams.map(() => pos), streams.map(() => BODY), streams.map(() => `op-${pos}`)];
}

const pg = await import('pg').then((m) => m.default).catch(() => null);

function makePg(cluster) {
  const pool = new pg.Pool({ ...cluster.connection(), max: POOL });
  return {
    name: 'pg 8.23.1',
    async txn(stream, pos) {
      const c = await pool.connect();
      try {
        await c.query('begin');
        const h = await c.query(UPDATE_HEAD, [stream, pos]);
        if (h.rowCount !== 1) throw new Error('head moved');
        await c.query(INSERT_RECORD, [stream, pos, BODY]);
        await c.query(INSERT_OPERATION, [stream, `op-${pos}`, pos]);
        await c.query('commit');
      } catch (err) {
        await c.query('rollback');
        throw err;
      } finally {
        c.release();
      }
    },
    async cte(stream, pos) {
      const r = await pool.query(CTE, [stream, pos, BODY, `op-${pos}`]);
      if (r.rowCount !== 1) throw new Error('head moved');
    },
    async group(streams, pos) {
      const r = await pool.query(GROUP, groupParams(streams, pos));
      if (r.rows[0].n !== streams.length) throw new Error('head moved');
    },
    async exec(text) {
      await pool.query(text);
    },
    end: () => pool.end(),
  };
}

function makePostgres(cluster) {
  const { host, port, user, database } = cluster.connection();
  const sql = postgres({ host, port, user, database, max: POOL, onnotice: () => {} });
  return {
    name: 'postgres 3.4.9',
    async txn(stream, pos) {
      await sql.begin(async (tx) => {
        const h = await tx.unsafe(UPDATE_HEAD, [stream, pos]);
        if (h.count !== 1) throw new Error('head moved');
        // Both inserts in one pipeline: postgres.js sends an array's queries without waiting.
        await Promise.all([tx.unsafe(INSERT_RECORD, [stream, pos, BODY]), tx.unsafe(INSERT_OPERATION, [stream, `op-${pos}`, pos])]);
      });
    },
    async cte(stream, pos) {
      const r = await sql.unsafe(CTE, [stream, pos, BODY, `op-${pos}`], { prepare: true });
      if (r.count !== 1) throw new Error('head moved');
    },
    async group(streams, pos) {
      const r = await sql.unsafe(GROUP, groupParams(streams, pos), { prepare: true });
      if (r[0].n !== streams.length) throw new Error('head moved');
    },
    async exec(text) {
      await sql.unsafe(text);
    },
    end: () => sql.end({ timeout: 5 }),
  };
}

async function cell(driver, mode, clients) {
  await driver.exec(SCHEMA);
  const streams = Array.from({ length: clients }, (_, i) => `s${i}`);
  await driver.exec(`insert into heads (stream, position) values ${streams.map((s) => `('${s}', 0)`).join(',')}`);
  const deadline = performance.now() + SECONDS * 1000;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let appends = 0;
  const lat = [];
  if (mode === 'group') {
    // One writer: each commit carries one append per stream (C appends a transaction).
    for (let pos = 0; performance.now() < deadline; pos++) {
      const a = performance.now();
      await driver.group(streams, pos);
      lat.push(performance.now() - a);
      appends += streams.length;
    }
  } else
    await Promise.all(
      streams.map(async (s) => {
        let pos = 0;
        while (performance.now() < deadline) {
          const a = performance.now();
          await driver[mode](s, pos);
          lat.push(performance.now() - a);
          pos++;
          appends++;
        }
      }),
    );
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  lat.sort((a, b) => a - b);
  return {
    rate: appends / secs,
    p50: lat[Math.floor(lat.length * 0.5)],
    p99: lat[Math.floor(lat.length * 0.99)],
    cpuUs: (cpu.user + cpu.system) / appends,
  };
}

const cluster = await PgCluster.start();
try {
  const rows = [];
  for (const mode of ['txn', 'cte', 'group']) {
    for (const clients of CLIENTS) {
      const results = [];
      for (const make of pg ? [makePg, makePostgres] : [makePostgres]) {
        const d = make(cluster);
        try {
          results.push({ name: d.name, ...(await cell(d, mode, clients)) });
        } finally {
          await d.end();
        }
      }
      for (const r of results) rows.push({ mode, clients, ...r, ratio: r.rate / results[0].rate });
    }
  }
  const head = ['mode', 'clients', 'driver', 'appends/s', 'p50 ms', 'p99 ms', 'CPU µs/append', 'vs pg'];
  const out = rows.map((r) => [
    r.mode,
    String(r.clients),
    r.name,
    r.rate.toFixed(0),
    r.p50.toFixed(2),
    r.p99.toFixed(2),
    r.cpuUs.toFixed(0),
    r.ratio.toFixed(2),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...out.map((o) => o[i].length)));
  const line = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join('  ');
  console.log(`pg drivers, ${SECONDS} s a cell, pool ${POOL}, PostgreSQL on a Unix socket with fsync on`);
  console.log(line(head));
  for (const o of out) console.log(line(o));
} finally {
  await cluster.stop();
}
