// Shared helpers of the yello benchmark suite: raw NDJSON JSON-RPC connections, a daemon
// process wrapper (spawn, ready, stop, RSS), temp dirs, statistics and table printing.
//
// Plain ESM JavaScript so `npm run bench` needs no TypeScript loader; everything from the
// project itself is imported from dist/ (built by `npm run build` first).

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WireClient } from '../test/helpers/wire-client.mjs';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const yelloBin = path.join(repoRoot, 'bin', 'yello');

// ---- time, stats ------------------------------------------------------------------------

/** Monotonic time in milliseconds (float). */
export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Nearest-rank percentile of an unsorted array (q in [0, 1]); NaN when empty. */
export function percentile(values, q) {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}
export const median = (values) => {
  if (values.length === 0) return NaN;
  const s = Float64Array.from(values).sort();
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

// ---- configuration from the environment --------------------------------------------------

/** A positive number from the environment variable `name`, or `dflt` when unset. */
export function envNumber(name, dflt) {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(v)}`);
  return n;
}

/** A comma-separated list of positive integers from the environment (e.g. client counts). */
export function envCounts(name, dflt) {
  const list = (process.env[name] ?? dflt)
    .split(',')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
  if (list.length === 0) throw new Error(`${name} lists no positive integers`);
  return list;
}

// ---- temp dirs, cleanup -----------------------------------------------------------------

const tempDirs = new Set();
const children = new Set();

/** A short temp dir (Unix socket paths must stay under ~100 bytes). */
export function makeTempDir(prefix) {
  let base = os.tmpdir();
  if (base.length > 60) base = '/tmp';
  const dir = mkdtempSync(path.join(base, prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir) {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

/** Kill every child this process started (by pid) and remove every temp dir. Synchronous. */
export function cleanupAll() {
  for (const child of children) {
    try {
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  children.clear();
  if (process.env.BENCH_KEEP === '1') {
    if (tempDirs.size) process.stderr.write(`bench: BENCH_KEEP=1, leaving ${[...tempDirs].join(' ')}\n`);
    return;
  }
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

/** Track a spawned child for cleanup. */
export function trackChild(child) {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** VmRSS of a process in KiB, from /proc/<pid>/status. */
export function rssKiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

/** CPU time (user + system, all threads) a process has used so far, in ms (Linux clock ticks of 10 ms). */
export function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * CPU time (user + system) of a process and of its live children so far, in ms: a PostgreSQL
 * postmaster and its backends (which are its direct children). A backend that exits between
 * two reads takes its time with it, which the bench's pooled connections never do.
 */
export function treeCpuMs(rootPid) {
  let ms = cpuMs(rootPid);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const fields = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1].split(' ');
      if (Number(fields[1]) === rootPid) ms += (Number(fields[11]) + Number(fields[12])) * 10;
    } catch {
      /* exited meanwhile */
    }
  }
  return ms;
}

/** This process's CPU time so far (user + system), in ms. */
export function selfCpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

// ---- CPU per thread ----------------------------------------------------------------------

// Node 20 (libuv 1.46) names none of its threads: every /proc/<pid>/task/<tid>/comm reads
// "node". So threads are told apart by creation order, which Node fixes: the main thread, then
// before any JavaScript runs the V8 platform workers (GC helpers, concurrent compilation) with
// Node's delayed-task scheduler and inspector signal thread, then, on the first async fs, crypto
// or N-API job, all UV_THREADPOOL_SIZE libuv workers at once (LevelDB's reads, writes and
// fsyncs run there), and only after that anything else: LevelDB's own background compaction
// thread, worker_threads. A newer Node that names its threads is grouped by name instead.

export const THREAD_GROUPS = ['main', 'v8 platform', 'libuv pool', 'later'];
export const THREAD_GROUP_NOTES = {
  main: 'the event loop: JavaScript, JSON, sockets, inline crypto',
  'v8 platform': "V8's worker threads (parallel/concurrent GC, JIT) and Node's two idle helpers",
  'libuv pool': 'libuv threadpool: LevelDB get/put/batch/iterate, fsync, fs, async crypto',
  later: "threads created after the pool: LevelDB's background compaction, worker_threads",
};

let runtimeThreads = null;
/** Threads a bare `node` has before it runs any JavaScript (main + V8 platform + helpers). */
export function nodeRuntimeThreadCount() {
  runtimeThreads ??= Number(
    execFileSync(process.execPath, ['-e', "process.stdout.write(String(require('fs').readdirSync('/proc/self/task').length))"], {
      encoding: 'utf8',
    }),
  );
  return runtimeThreads;
}

function poolSize(pid) {
  let env = '';
  try {
    env = readFileSync(`/proc/${pid}/environ`, 'utf8');
  } catch {
    /* not ours to read: assume the default */
  }
  const m = /(?:^|\0)UV_THREADPOOL_SIZE=(\d+)/.exec(env);
  return m ? Math.min(1024, Math.max(1, Number(m[1]))) : 4;
}

/**
 * Every live thread of `pid`: { tid, comm, group, ms } with ms = utime + stime so far, in
 * creation order. Threads that exit between the listing and the read are skipped.
 */
export function threadSnapshot(pid) {
  const threads = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
      const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      threads.push({ tid: Number(tid), comm, ms: (Number(f[11]) + Number(f[12])) * 10, start: Number(f[19]) });
    } catch {
      /* exited meanwhile */
    }
  }
  threads.sort((a, b) => a.start - b.start || a.tid - b.tid);
  const others = threads.filter((t) => t.tid !== pid);
  const named = new Set(others.map((t) => t.comm)).size > 1;
  const runtime = nodeRuntimeThreadCount();
  const pool = poolSize(pid);
  threads.forEach((t, i) => {
    if (t.tid === pid) t.group = 'main';
    else if (named) t.group = t.comm;
    else if (i < runtime) t.group = 'v8 platform';
    else if (i < runtime + pool) t.group = 'libuv pool';
    else t.group = 'later';
  });
  return threads;
}

/**
 * CPU per group between two snapshots of one process: { group: { ms, threads } }. A thread
 * born in between counts from zero; one that died in between is lost (its time is still in
 * /proc/<pid>/stat, which cpuMs() reads).
 */
export function threadDelta(before, after) {
  const was = new Map(before.map((t) => [t.tid, t.ms]));
  const out = {};
  for (const t of after) {
    const g = (out[t.group] ??= { ms: 0, threads: 0 });
    g.ms += t.ms - (was.get(t.tid) ?? 0);
    g.threads++;
  }
  return out;
}

/** Per-append µs of each group of a threadDelta, plus `busy` (main-thread CPU ÷ wall time). */
export function perAppendByGroup(delta, appends, seconds) {
  const us = {};
  for (const [g, v] of Object.entries(delta)) us[g] = (v.ms * 1000) / appends;
  return {
    us,
    threads: Object.fromEntries(Object.entries(delta).map(([g, v]) => [g, v.threads])),
    mainBusy: (delta.main?.ms ?? 0) / (seconds * 1000),
  };
}

/** Medians over rounds of perAppendByGroup results (a group missing from a round counts 0). */
export function medianByGroup(list) {
  const rounds = list.filter(Boolean);
  if (rounds.length === 0) return null;
  const groups = [...new Set(rounds.flatMap((x) => Object.keys(x.us)))];
  return {
    us: Object.fromEntries(groups.map((g) => [g, median(rounds.map((x) => x.us[g] ?? 0))])),
    threads: Object.fromEntries(groups.map((g) => [g, Math.max(...rounds.map((x) => x.threads[g] ?? 0))])),
    mainBusy: median(rounds.map((x) => x.mainBusy)),
  };
}

// ---- JSON-RPC over NDJSON ---------------------------------------------------------------

// The bench speaks the wire through the tests' raw client (test/helpers/wire-client.mjs: plain
// ESM, no code from src/), keeping nothing it receives: loads listen to its events instead.
const BENCH_WIRE = { keep: false, clientName: 'yello-bench' };

/** A raw connection that has said hello with `token` (its result on `.helloResult`); rejects if refused. */
export const openConn = (socketPath, token) => WireClient.open(socketPath, token, BENCH_WIRE);

/** A raw connection, no hello. */
export const connectConn = (socketPath, timeoutMs = 5000) => WireClient.connect(socketPath, { ...BENCH_WIRE, timeoutMs });

/**
 * openConn, retried while the hello is refused for up to `timeoutMs`: an agent created through
 * one daemon is known to another daemon on the same database only once its notice arrived.
 */
export async function openRetrying(socketPath, token, timeoutMs = 10_000) {
  const deadline = nowMs() + timeoutMs;
  for (;;) {
    try {
      return await openConn(socketPath, token);
    } catch (err) {
      if (nowMs() > deadline) throw err;
      await sleep(20);
    }
  }
}

// ---- the daemon process -----------------------------------------------------------------

/**
 * Per-agent quotas and session caps off: the bench measures throughput, which the defaults
 * (docs/security.md "Quotas") would cap for one fast coordinator. bench/ab.mjs passes `[]` for
 * a build that predates these options.
 */
export const BENCH_DAEMON_ARGS = [
  '--quota-append-records',
  '0',
  '--quota-append-bytes',
  '0',
  '--quota-claims-per-minute',
  '0',
  '--max-sessions-per-agent',
  '1000000',
];

/** `node bin/yello daemon` on a private socket and data dir, log level warn, policy open. */
export class Daemon {
  /** `bin`/`cwd`: another checkout's bin/yello (bench/ab.mjs runs two builds side by side). */
  constructor(dir, { bin = yelloBin, cwd = repoRoot, extraArgs = BENCH_DAEMON_ARGS } = {}) {
    this.extraArgs = extraArgs;
    this.bin = bin;
    this.cwd = cwd;
    this.dir = dir;
    this.socketPath = path.join(dir, 'y.sock');
    this.dataDir = path.join(dir, 'data');
    this.child = null;
    this.output = '';
    this.adminToken = '';
  }

  get pid() {
    return this.child?.pid;
  }

  /** Spawn and wait until ready (socket accepts, session.hello answers). Returns ms spawn→ready. */
  async start(readyTimeoutMs = 60_000) {
    if (this.child) throw new Error('daemon already running');
    const t0 = nowMs();
    const child = spawn(
      process.execPath,
      [
        this.bin,
        'daemon',
        '--socket',
        this.socketPath,
        '--data-dir',
        this.dataDir,
        '--policy',
        'open',
        '--log-level',
        'warn',
        ...this.extraArgs,
      ],
      { cwd: this.cwd, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    trackChild(child);
    this.child = child;
    this.output = '';
    const keep = (chunk) => {
      this.output = (this.output + chunk).slice(-16_384);
    };
    child.stdout.setEncoding('utf8').on('data', keep);
    child.stderr.setEncoding('utf8').on('data', keep);
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const deadline = t0 + readyTimeoutMs;
    const tokenPath = path.join(this.dataDir, 'admin.token');
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`daemon exited before ready (${child.exitCode ?? child.signalCode}): ${this.output}`);
      }
      if (nowMs() > deadline) throw new Error(`daemon not ready after ${readyTimeoutMs} ms: ${this.output}`);
      if (existsSync(this.socketPath) && existsSync(tokenPath)) {
        try {
          this.adminToken = readFileSync(tokenPath, 'utf8').trim();
          const conn = await connectConn(this.socketPath, 2000);
          try {
            await conn.request('session.hello', { token: this.adminToken }, 5000);
          } finally {
            conn.close();
          }
          return nowMs() - t0;
        } catch {
          /* not ready yet */
        }
      }
      await sleep(2);
    }
  }

  admin() {
    return openConn(this.socketPath, this.adminToken);
  }

  rss() {
    return rssKiB(this.child.pid);
  }

  /** SIGTERM and wait (SIGKILL after timeoutMs). */
  async stop(timeoutMs = 30_000) {
    if (!this.child) return;
    const child = this.child;
    this.child = null;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => {
      try {
        child.kill('SIGKILL');
      } catch {
        /* gone */
      }
    }, timeoutMs);
    const info = await this.exited;
    clearTimeout(timer);
    if (info.code !== 0) process.stderr.write(`bench: daemon exited with ${info.code ?? info.signal}: ${this.output.slice(-2000)}\n`);
  }
}

/**
 * The straightforward pipeline (`bench/pipeline-server.mjs`) as a child process, and
 * `n` bare coordinators on it (own connection and stream each), usable with appendOne().
 */
export class PipelineServer {
  /** `mode`: 'pipeline' (the issue's), or 'contract' (the pipeline plus the least docs/protocol.md asks of an append). */
  constructor(dir, mode = 'pipeline') {
    this.mode = mode;
    this.socketPath = path.join(dir, 'p.sock');
    this.dbDir = path.join(dir, 'db');
    this.child = null;
  }

  get pid() {
    return this.child?.pid;
  }

  async start() {
    const child = trackChild(
      spawn(process.execPath, [path.join(repoRoot, 'bench', 'pipeline-server.mjs'), this.socketPath, this.dbDir, this.mode], {
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    );
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', resolve));
    await new Promise((resolve, reject) => {
      child.stdout.once('data', resolve);
      child.once('exit', (code) => reject(new Error(`pipeline server exited (${code}) before ready`)));
    });
  }

  coordinators(n) {
    return Promise.all(
      Array.from({ length: n }, async (_, i) => ({
        conn: await openConn(this.socketPath, 'bench'),
        streamId: `chat_p${i}:agt_p${i}`,
        coordinatorToken: 'bench',
        generation: '1',
        next: 0,
      })),
    );
  }

  async stop() {
    if (!this.child) return;
    this.child.kill('SIGTERM');
    await Promise.race([this.exited, sleep(10_000)]);
    this.child = null;
  }
}

// ---- workload helpers -------------------------------------------------------------------

/** Bytes of content per message: `BENCH_CONTENT_BYTES` (100 unless set; issue 54's target is at 1024). */
export const contentBytes = () => Math.round(envNumber('BENCH_CONTENT_BYTES', 100));

/** `contentBytes()` bytes of message content without digit runs (so the default PII policy finds nothing). */
export function content(tag, bytes = contentBytes()) {
  // Prose without digits, like most chat lines: digits would make every message look like it
  // might hold a phone or card number to the PII policy (BENCH_DIGITS=1 keeps them).
  const t = process.env.BENCH_DIGITS === '1' ? tag : String(tag).replace(/[0-9]/g, (d) => 'abcdefghij'[Number(d)]);
  const prose = ' the quick brown fox jumps over the lazy dog and keeps running far away';
  let text = `bench message ${t}${prose}`;
  while (text.length + prose.length <= bytes) text += prose;
  return text.length >= bytes ? text.slice(0, bytes) : text.padEnd(bytes, '.');
}

/** An agent + a peer + their chat + a claimed stream, on the agent's own connection. */
export async function setupCoordinator(daemon, admin, username, peerId) {
  const { agent, token } = await admin.request('agents.create', { username, name: username });
  const conn = await openConn(daemon.socketPath, token);
  const { chat } = await conn.request('chats.open', { peerAgentId: peerId });
  const streamId = `${chat.id}:${agent.id}`;
  const claim = await conn.request('streams.claim', { streamId });
  return {
    agentId: agent.id,
    token,
    conn,
    chatId: chat.id,
    streamId,
    coordinatorToken: claim.coordinatorToken,
    generation: claim.generation,
    next: Number(claim.nextPosition),
  };
}

/** The params of one streams.append of `n` chat.message records at position `at`. */
export function appendParams(co, at, n, bytes = contentBytes()) {
  const records = [];
  for (let i = 0; i < n; i++)
    records.push({ type: 'chat.message', messageId: `m-${at + i}`, content: content((at + i).toString(36), bytes) });
  return {
    streamId: co.streamId,
    coordinatorToken: co.coordinatorToken,
    generation: co.generation,
    expectedPosition: String(at),
    operationId: `op-${at}`,
    records,
  };
}

/** One streams.append of `n` chat.message records at the coordinator's tracked position. */
export async function appendOne(co, n = 1, timeoutMs = 60_000, bytes = contentBytes()) {
  const r = await co.conn.request('streams.append', appendParams(co, co.next, n, bytes), timeoutMs);
  co.next = Number(r.nextPosition);
  return r;
}

/**
 * Closed loops, one per coordinator (from setupCoordinator or PipelineServer.coordinators),
 * each on its own connection, for `seconds`, one message of `bytes` bytes per append: appends/s,
 * p50/p99 ms. With `serverPid`, also the
 * CPU that process spent per completed append (all threads: `serverCpuUs`; by thread group:
 * `server`, see perAppendByGroup), and always this bench process's own (`clientCpuUs`).
 */
export async function closedLoop(cos, seconds, serverPid = null, bytes = contentBytes()) {
  const latencies = [];
  const cpu0 = serverPid ? cpuMs(serverPid) : 0;
  const threads0 = serverPid ? threadSnapshot(serverPid) : null;
  const self0 = selfCpuMs();
  const t0 = nowMs();
  const deadline = t0 + seconds * 1000;
  await Promise.all(
    cos.map(async (co) => {
      while (nowMs() < deadline) {
        const s = nowMs();
        await appendOne(co, 1, 30_000, bytes);
        latencies.push(nowMs() - s);
      }
    }),
  );
  const secs = (nowMs() - t0) / 1000;
  const n = latencies.length;
  return {
    appends: n,
    seconds: secs,
    perSecond: n / secs,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    serverCpuUs: serverPid ? ((cpuMs(serverPid) - cpu0) * 1000) / n : null,
    clientCpuUs: ((selfCpuMs() - self0) * 1000) / n,
    server: serverPid ? perAppendByGroup(threadDelta(threads0, threadSnapshot(serverPid)), n, secs) : null,
  };
}

/**
 * Append → follower push latency: a writer coordinator and a follower agent share a chat, the
 * follower `chats.follow`s it on its own connection; run(n) appends one record at a time and
 * times the send of `streams.append` to the arrival of the `chats.batch` carrying it. With
 * `followerDaemon` (another daemon on the same PostgreSQL database) the follower connects
 * there: the push then travels through the database's NOTIFY.
 */
export class PushProbe {
  #waiters = new Map();

  static async setup(daemon, admin, name = 'push', followerDaemon = daemon) {
    const probe = new PushProbe();
    const { agent: follower, token } = await admin.request('agents.create', { username: `${name}-follower`, name: 'Follower' });
    probe.co = await setupCoordinator(daemon, admin, `${name}-writer`, follower.id);
    probe.fconn = await openRetrying(followerDaemon.socketPath, token);
    probe.fconn.on('notification', ({ method, params }) => {
      const at = nowMs();
      if (method !== 'chats.batch' || params.streamId !== probe.co.streamId) return;
      for (const rec of params.records) {
        const w = probe.#waiters.get(Number(rec.position));
        if (w) {
          probe.#waiters.delete(Number(rec.position));
          w(at);
        }
      }
    });
    await probe.fconn.request('chats.follow', { chatId: probe.co.chatId });
    return probe;
  }

  #waitPush(position) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(position);
        reject(new Error(`no chats.batch for position ${position} within 10 s`));
      }, 10_000);
      this.#waiters.set(position, (at) => {
        clearTimeout(timer);
        resolve(at);
      });
    });
  }

  /**
   * `n` appends one at a time: { push: ms[], rtt: ms[], afterAnswer: ms[] } (push: send of the
   * append → its push; rtt: the append's own round trip; afterAnswer: its answer → its push,
   * negative when the push came first, as it does on one daemon).
   */
  async run(n) {
    const push = [];
    const rtt = [];
    const afterAnswer = [];
    for (let i = 0; i < n; i++) {
      const pushed = this.#waitPush(this.co.next);
      const t0 = nowMs();
      await appendOne(this.co, 1, 30_000);
      const t1 = nowMs();
      const t2 = await pushed;
      push.push(t2 - t0);
      rtt.push(t1 - t0);
      afterAnswer.push(t2 - t1);
    }
    return { push, rtt, afterAnswer };
  }

  close() {
    this.fconn.close();
    this.co.conn.close();
  }
}

// ---- table output -----------------------------------------------------------------------

/** Print rows (arrays of cells) under a header, columns padded; the first `leftColumns` flush left. */
export function table(title, header, rows, leftColumns = 1) {
  const cells = [header, ...rows].map((r) => r.map((c) => String(c)));
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r) =>
    r
      .map((c, i) => (i < leftColumns ? c.padEnd(widths[i]) : c.padStart(widths[i])))
      .join('  ')
      .trimEnd();
  const out = [title, line(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)];
  return out.join('\n');
}

export const fmt = {
  int: (v) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a'),
  ms: (v) => (Number.isFinite(v) ? (v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)) : 'n/a'),
  ratio: (v) => (Number.isFinite(v) ? `${v < 10 ? v.toFixed(2) : v.toFixed(1)}x` : 'n/a'),
  mib: (kib) => (Number.isFinite(kib) ? (kib / 1024).toFixed(1) : 'n/a'),
};
