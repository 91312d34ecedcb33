// Shared helpers of the yello benchmark suite: a raw NDJSON JSON-RPC client, a daemon
// process wrapper (spawn, ready, stop, RSS), temp dirs, statistics and table printing.
//
// Plain ESM JavaScript so `npm run bench` needs no TypeScript loader; everything from the
// project itself is imported from dist/ (built by `npm run build` first).

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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

/** This process's CPU time so far (user + system), in ms. */
export function selfCpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

// ---- JSON-RPC over NDJSON ---------------------------------------------------------------

export class RpcError extends Error {
  constructor(method, error) {
    super(`${method}: ${error.message} (${error.code}${error.data?.type ? ' ' + error.data.type : ''})`);
    this.code = error.code;
    this.data = error.data;
  }
}

/** A raw NDJSON JSON-RPC 2.0 connection: one line per message, notifications to a listener. */
export class RpcConn {
  #socket;
  #buffer = '';
  #nextId = 1;
  #pending = new Map();
  #closed = false;
  /** (method, params, receivedAtMs) for every notification. */
  onNotification = null;

  constructor(socket) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => this.#onData(chunk));
    socket.on('close', () => this.#fail(new Error('connection closed')));
    socket.on('error', (err) => this.#fail(err));
  }

  static connect(socketPath, timeoutMs = 5000) {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(socketPath);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`connect to ${socketPath} timed out`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new RpcConn(socket));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  /** Connect and say hello with `token`; resolves with the connection (hello result on .hello). */
  static async open(socketPath, token) {
    const conn = await RpcConn.connect(socketPath);
    conn.hello = await conn.call('session.hello', { token, client: { name: 'yello-bench' } });
    return conn;
  }

  #onData(chunk) {
    const at = nowMs();
    this.#buffer += chunk;
    let nl;
    while ((nl = this.#buffer.indexOf('\n')) >= 0) {
      const line = this.#buffer.slice(0, nl);
      this.#buffer = this.#buffer.slice(nl + 1);
      if (line.length === 0) continue;
      const msg = JSON.parse(line);
      if (msg.id === undefined || msg.id === null) {
        if (msg.method) this.onNotification?.(msg.method, msg.params, at);
        else if (msg.error) this.#fail(new RpcError('(no id)', msg.error));
        continue;
      }
      const p = this.#pending.get(msg.id);
      if (!p) continue;
      this.#pending.delete(msg.id);
      clearTimeout(p.timer);
      if (msg.error) p.reject(new RpcError(p.method, msg.error));
      else p.resolve(msg.result);
    }
  }

  #fail(err) {
    if (this.#closed) return;
    this.#closed = true;
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.#pending.clear();
  }

  /** Call a method; rejects with RpcError, or after `timeoutMs`. */
  call(method, params, timeoutMs = 60_000) {
    if (this.#closed) return Promise.reject(new Error('connection closed'));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`${method} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer });
      this.#socket.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
  }

  close() {
    this.#closed = true;
    for (const p of this.#pending.values()) clearTimeout(p.timer);
    this.#pending.clear();
    this.#socket.destroy();
  }
}

// ---- the daemon process -----------------------------------------------------------------

/** `node bin/yello daemon` on a private socket and data dir, log level warn, policy open. */
export class Daemon {
  constructor(dir) {
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
      [yelloBin, 'daemon', '--socket', this.socketPath, '--data-dir', this.dataDir, '--policy', 'open', '--log-level', 'warn'],
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
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
          const conn = await RpcConn.connect(this.socketPath, 2000);
          try {
            await conn.call('session.hello', { token: this.adminToken }, 5000);
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
    return RpcConn.open(this.socketPath, this.adminToken);
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
  constructor(dir) {
    this.socketPath = path.join(dir, 'p.sock');
    this.dbDir = path.join(dir, 'db');
    this.child = null;
  }

  get pid() {
    return this.child?.pid;
  }

  async start() {
    const child = trackChild(spawn(process.execPath, [path.join(repoRoot, 'bench', 'pipeline-server.mjs'), this.socketPath, this.dbDir], { stdio: ['ignore', 'pipe', 'inherit'] }));
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', resolve));
    await new Promise((resolve, reject) => {
      child.stdout.once('data', resolve);
      child.once('exit', (code) => reject(new Error(`pipeline server exited (${code}) before ready`)));
    });
  }

  coordinators(n) {
    return Promise.all(Array.from({ length: n }, async (_, i) => ({
      conn: await RpcConn.open(this.socketPath, 'bench'), streamId: `chat_p${i}:agt_p${i}`, coordinatorToken: 'bench', generation: '1', next: 0,
    })));
  }

  async stop() {
    if (!this.child) return;
    this.child.kill('SIGTERM');
    await Promise.race([this.exited, sleep(10_000)]);
    this.child = null;
  }
}

// ---- workload helpers -------------------------------------------------------------------

/** ~100 bytes of message content without digit runs (so the default PII policy finds nothing). */
export function content(tag) {
  const base = `bench message ${tag} the quick brown fox jumps over the lazy dog and keeps running far away`;
  return base.length >= 100 ? base.slice(0, 100) : base.padEnd(100, '.');
}

/** An agent + a peer + their chat + a claimed stream, on the agent's own connection. */
export async function setupCoordinator(daemon, admin, username, peerId) {
  const { agent, token } = await admin.call('agents.create', { username, name: username });
  const conn = await RpcConn.open(daemon.socketPath, token);
  const { chat } = await conn.call('chats.open', { peerAgentId: peerId });
  const streamId = `${chat.id}:${agent.id}`;
  const claim = await conn.call('streams.claim', { streamId });
  return {
    agentId: agent.id, token, conn, chatId: chat.id, streamId,
    coordinatorToken: claim.coordinatorToken, generation: claim.generation, next: Number(claim.nextPosition),
  };
}

/** The params of one streams.append of `n` chat.message records at position `at`. */
export function appendParams(co, at, n) {
  const records = [];
  for (let i = 0; i < n; i++) records.push({ type: 'chat.message', messageId: `m-${at + i}`, content: content((at + i).toString(36)) });
  return {
    streamId: co.streamId, coordinatorToken: co.coordinatorToken, generation: co.generation,
    expectedPosition: String(at), operationId: `op-${at}`, records,
  };
}

/** One streams.append of `n` chat.message records at the coordinator's tracked position. */
export async function appendOne(co, n = 1, timeoutMs = 60_000) {
  const r = await co.conn.call('streams.append', appendParams(co, co.next, n), timeoutMs);
  co.next = Number(r.nextPosition);
  return r;
}

// ---- table output -----------------------------------------------------------------------

/** Print rows (arrays of cells) under a header, columns padded. */
export function table(title, header, rows) {
  const cells = [header, ...rows].map((r) => r.map((c) => String(c)));
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const out = [title, line(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)];
  return out.join('\n');
}

export const fmt = {
  int: (v) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a'),
  ms: (v) => (Number.isFinite(v) ? (v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)) : 'n/a'),
  ratio: (v) => (Number.isFinite(v) ? `${v < 10 ? v.toFixed(2) : v.toFixed(1)}x` : 'n/a'),
  mib: (kib) => (Number.isFinite(kib) ? (kib / 1024).toFixed(1) : 'n/a'),
};
