// The figures of docs/security.md "Limits" for issue 21, on the daemon's default limits (only
// the session cap per agent raised, so one agent can hold all the never-reading connections):
//
//   1. admin latency during a flood of 2,048 connections that never send a byte: connect +
//      hello + daemon.status of a new admin connection, and daemon.status round trips;
//   2. valid hellos during a flood of bad ones (8 connections × 3 bad hellos, repeated);
//   3. peak VmRSS with N connections that pipeline 16 chats.history {limit: 500} over ~255 KB
//      messages and never read (N from BENCH_NEVER_READING, default 64,320), sampled every
//      100 ms, and the kernel's own high-water mark (VmHWM), which no sampling misses.
//
// Run after `npm run build`: node bench/limits.mjs. Prints one table per figure.
// BENCH_LIMITS=memory runs only the third (flood,hellos,memory: the default, all three).

import { readFileSync } from 'node:fs';
import net from 'node:net';
import { WireClient } from '../test/helpers/wire-client.mjs';
import {
  Daemon,
  cleanupAll,
  connectConn,
  envCounts,
  makeTempDir,
  median,
  nowMs,
  openConn,
  percentile,
  rssKiB,
  sleep,
  table,
} from './lib.mjs';

const FLOOD = 2_048;
const RECORDS = 40;
const CONTENT_CHARS = 255_000;
const WATCH_MIN_MS = 5_000;
const WATCH_MAX_MS = 60_000;

/** The process's peak resident set since it started (VmHWM), in KiB. */
function hwmKiB(pid) {
  const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmHWM for pid ${pid}`);
  return Number(m[1]);
}

const PARTS = new Set((process.env.BENCH_LIMITS ?? 'flood,hellos,memory').split(',').map((s) => s.trim()));

async function withDaemon(fn) {
  const d = new Daemon(makeTempDir('ylim-'), { extraArgs: ['--max-sessions-per-agent', '100000'] });
  await d.start();
  try {
    return await fn(d);
  } finally {
    await d.stop();
  }
}

async function adminDuringFlood(d) {
  const sockets = [];
  const t0 = nowMs();
  await Promise.all(
    Array.from(
      { length: FLOOD },
      () =>
        new Promise((resolve) => {
          const s = net.createConnection(d.socketPath);
          sockets.push(s);
          s.on('error', resolve);
          s.on('close', resolve);
          s.on('connect', resolve);
          s.resume();
        }),
    ),
  );
  const floodMs = nowMs() - t0;
  const connects = [];
  const statuses = [];
  for (let i = 0; i < 20; i++) {
    const t = nowMs();
    const admin = await openConn(d.socketPath, d.adminToken);
    await admin.request('daemon.status', {});
    connects.push(nowMs() - t);
    for (let j = 0; j < 10; j++) {
      const u = nowMs();
      await admin.request('daemon.status', {});
      statuses.push(nowMs() - u);
    }
    admin.close();
  }
  for (const s of sockets) s.destroy();
  return [
    [
      `${FLOOD} silent connections (opened in ${floodMs.toFixed(0)} ms)`,
      'connect+hello+status',
      median(connects).toFixed(1),
      percentile(connects, 0.99).toFixed(1),
    ],
    ['', 'daemon.status', median(statuses).toFixed(1), percentile(statuses, 0.99).toFixed(1)],
  ];
}

async function helloFlood(d) {
  const admin = await d.admin();
  const { token } = await admin.request('agents.create', { username: 'victim', name: 'victim' });
  admin.close();
  let stop = false;
  let bad = 0;
  const attackers = Array.from({ length: 8 }, async (_, n) => {
    while (!stop) {
      const w = await connectConn(d.socketPath);
      await Promise.all([0, 1, 2].map((i) => w.call('session.hello', { token: `yello_agt_bad${n}${i}${bad}` }).catch(() => null)));
      bad += 3;
      w.close();
    }
  });
  let ok = 0;
  let tried = 0;
  const t0 = nowMs();
  while (nowMs() - t0 < 10_000) {
    const w = await connectConn(d.socketPath);
    const r = await w.call('session.hello', { token });
    w.close();
    tried++;
    if (!r.error) ok++;
  }
  stop = true;
  await Promise.all(attackers);
  return [[`8 × 3 bad hellos, repeated (${bad} in 10 s)`, `${ok} of ${tried}`]];
}

async function neverReading(d, n) {
  const admin = await d.admin();
  const a = await admin.request('agents.create', { username: 'alice', name: 'alice' });
  const b = await admin.request('agents.create', { username: 'bob', name: 'bob' });
  for (const id of [a.agent.id, b.agent.id]) await admin.request('agents.setPolicy', { agentId: id, pii: 'off' });
  const alice = await openConn(d.socketPath, a.token);
  const { chat } = await alice.request('chats.open', { peerAgentId: b.agent.id });
  const streamId = `${chat.id}:${a.agent.id}`;
  const claim = await alice.request('streams.claim', { streamId });
  const filler = 'lorem ipsum dolor sit amet '.repeat(Math.ceil(CONTENT_CHARS / 27)).slice(0, CONTENT_CHARS);
  for (let i = 0; i < RECORDS; i++) {
    await alice.request('streams.append', {
      streamId,
      coordinatorToken: claim.coordinatorToken,
      generation: claim.generation,
      expectedPosition: String(Number(claim.nextPosition) + i),
      operationId: `big-${i}`,
      records: [{ type: 'chat.message', messageId: `big.${i}`, content: `${i} ${filler}` }],
    });
  }
  const pid = d.pid;
  const baseline = rssKiB(pid) / 1024;
  const greedy = [];
  for (let c = 0; c < n; c++) {
    const w = await WireClient.connect(d.socketPath, { paused: true });
    greedy.push(w);
    const lines = [{ jsonrpc: '2.0', id: 0, method: 'session.hello', params: { token: b.token } }];
    for (let i = 1; i <= 16; i++) lines.push({ jsonrpc: '2.0', id: i, method: 'chats.history', params: { chatId: chat.id, limit: 500 } });
    w.sendRaw(lines.map((m) => JSON.stringify(m) + '\n').join(''));
  }
  let peak = baseline;
  const t0 = nowMs();
  const latencies = [];
  let lastRss = 0;
  let still = 0;
  while (nowMs() - t0 < WATCH_MAX_MS) {
    const rss = rssKiB(pid) / 1024;
    peak = Math.max(peak, rss);
    const t = nowMs();
    await admin.request('daemon.status', {}, 30_000);
    latencies.push(nowMs() - t);
    // Done once RSS has not moved by more than 1 MB for 2 s (after the minimum watch).
    still = Math.abs(rss - lastRss) < 1 ? still + 1 : 0;
    lastRss = rss;
    if (nowMs() - t0 > WATCH_MIN_MS && still >= 20) break;
    await sleep(100);
  }
  const hwm = hwmKiB(pid) / 1024;
  for (const w of greedy) w.close();
  admin.close();
  alice.close();
  return [
    `${n}`,
    baseline.toFixed(0),
    peak.toFixed(0),
    hwm.toFixed(0),
    median(latencies).toFixed(1),
    percentile(latencies, 0.99).toFixed(1),
    ((nowMs() - t0) / 1000).toFixed(1),
  ];
}

try {
  if (PARTS.has('flood'))
    console.log(
      table('admin during a connection flood (ms)', ['flood', 'call', 'p50', 'p99'], await withDaemon(adminDuringFlood), 2) + '\n',
    );
  if (PARTS.has('hellos'))
    console.log(
      table('valid hellos during a bad-hello flood', ['flood', 'valid hellos that succeeded'], await withDaemon(helloFlood), 2) + '\n',
    );
  const rows = [];
  for (const n of PARTS.has('memory') ? envCounts('BENCH_NEVER_READING', '64,320') : []) {
    rows.push(await withDaemon((d) => neverReading(d, n)));
    console.log(`never-reading ${rows.at(-1).join(' | ')}`);
  }
  console.log(
    table(
      'never-reading connections × 16 chats.history {limit: 500} over ~255 KB messages',
      ['connections', 'RSS before MB', 'peak RSS MB (sampled)', 'VmHWM MB', 'status p50 ms', 'status p99 ms', 'watched s'],
      rows,
    ),
  );
} finally {
  cleanupAll();
}
