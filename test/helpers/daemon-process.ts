// Spawns the real daemon (`node bin/yello daemon …`) on a throwaway socket and data dir, the
// way an operator would run it (docs/protocol.md §2), and waits for the contract's notion of
// ready: the socket accepts and `session.hello` with the admin token answers.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectAs, connectWire, type Wire } from './wire-fixtures.js';
import { waitFor } from './wait.js';
import { testStoreIsPostgres, withTestStore } from './test-store.js';

/** Repository root (the directory holding bin/yello). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// A daemon on PostgreSQL connects, loads its heads and directory and publishes its keys before
// it is ready: on the loaded 2-core machine that alone took 2–6 s.
const READY_TIMEOUT_MS = testStoreIsPostgres() ? 30_000 : 10_000;

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface DaemonOptions {
  /** Extra CLI arguments appended after the standard ones. */
  extraArgs?: string[];
  /** Reuse an existing temp dir (it is then not removed by cleanup()). */
  dir?: string;
  /** Override the socket path (default `<dir>/y.sock`). */
  socketPath?: string;
  /** Override the data dir (default `<dir>/data`). */
  dataDir?: string;
  /** Extra environment. */
  env?: NodeJS.ProcessEnv;
  /** Wait for readiness (default true). */
  waitReady?: boolean;
}

/** Makes a short temp dir (socket paths must stay under ~100 bytes). */
export async function makeTempDir(prefix = 'yl-'): Promise<string> {
  let base = os.tmpdir();
  if (base.length > 60) base = '/tmp';
  return fs.mkdtemp(path.join(base, prefix));
}

export class DaemonProcess {
  readonly dir: string;
  readonly socketPath: string;
  readonly dataDir: string;
  readonly extraArgs: string[];
  readonly env: NodeJS.ProcessEnv;
  readonly ownsDir: boolean;
  /** Admin token read from `<data-dir>/admin.token` (trimmed), once ready. */
  adminToken = '';
  /** Every stdout line of every run of this daemon (pino JSON logs). */
  readonly stdoutLines: string[] = [];
  /** Every stderr chunk of every run. */
  stderr = '';
  child!: ChildProcess;
  /** Resolves with the exit code/signal of the current run. */
  exited!: Promise<ExitInfo>;
  exitInfo: ExitInfo | null = null;
  readonly #clients: Wire[] = [];

  private constructor(dir: string, opts: DaemonOptions, ownsDir: boolean) {
    this.dir = dir;
    this.socketPath = opts.socketPath ?? path.join(dir, 'y.sock');
    this.dataDir = opts.dataDir ?? path.join(dir, 'data');
    this.extraArgs = opts.extraArgs ?? [];
    this.env = opts.env ?? {};
    this.ownsDir = ownsDir;
    if (Buffer.byteLength(this.socketPath) >= 100) throw new Error(`socket path too long: ${this.socketPath}`);
  }

  /** Spawns a daemon and (by default) waits until it is ready. */
  static async start(opts: DaemonOptions = {}): Promise<DaemonProcess> {
    const ownsDir = opts.dir === undefined;
    const dir = opts.dir ?? (await makeTempDir());
    // YELLO_TEST_STORE=postgresql: the daemon stores in a database of its own (test-store.ts).
    const d = new DaemonProcess(dir, await withTestStore(opts, opts.dataDir ?? path.join(dir, 'data')), ownsDir);
    d.#spawn();
    if (opts.waitReady ?? true) {
      try {
        await d.waitReady();
        if (testStoreIsPostgres() && !d.extraArgs.includes('--store')) {
          // The daemon answers on its socket before this process has read its log from the pipe
          // (seen once on a loaded CI machine): wait for the line a while, do not check once.
          const reported = () => d.stdoutLines.some((l) => l.includes('"backend":"postgresql"'));
          await waitFor(reported, 'the daemon to report its PostgreSQL store', 10_000, 25).catch(() => undefined);
          if (!reported()) throw new Error(`the daemon was given a PostgreSQL store but did not report one: ${d.stdoutLines.join('\n')}`);
        }
      } catch (e) {
        // Never leave a half-started daemon or its temp dir behind.
        if (d.running) await d.kill().catch(() => undefined);
        await d.cleanup().catch(() => undefined);
        throw e;
      }
    }
    return d;
  }

  /** The argv after `node`. */
  get args(): string[] {
    return [
      path.join(repoRoot, 'bin/yello'),
      'daemon',
      '--socket',
      this.socketPath,
      '--data-dir',
      this.dataDir,
      '--log-level',
      'info',
      ...this.extraArgs,
    ];
  }

  get running(): boolean {
    return this.exitInfo === null;
  }

  /** The end of what the daemon wrote, for an error that says why it is gone or not ready. */
  outputTail(): string {
    return `stderr: ${this.stderr.slice(-2000)}\nstdout: ${this.stdoutLines.slice(-20).join('\n')}`;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  #spawn(): void {
    this.exitInfo = null;
    const child = spawn(process.execPath, this.args, {
      cwd: repoRoot,
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    let partial = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      partial += chunk;
      let nl: number;
      while ((nl = partial.indexOf('\n')) >= 0) {
        this.stdoutLines.push(partial.slice(0, nl));
        partial = partial.slice(nl + 1);
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        // Let the pipes drain before reporting the exit.
        setImmediate(() => {
          if (partial) {
            this.stdoutLines.push(partial);
            partial = '';
          }
          this.exitInfo = { code, signal };
          resolve(this.exitInfo);
        });
      });
      child.on('error', () => {
        this.exitInfo = { code: -1, signal: null };
        resolve(this.exitInfo);
      });
    });
  }

  /** Polls until the socket accepts and `session.hello` with the admin token answers. */
  async waitReady(timeoutMs = READY_TIMEOUT_MS): Promise<void> {
    const tokenFile = path.join(this.dataDir, 'admin.token');
    let lastError = '';
    const outcome = await waitFor(
      async (): Promise<'ready' | 'exited' | undefined> => {
        if (this.exitInfo) return 'exited';
        try {
          const token = (await fs.readFile(tokenFile, 'utf8')).trim();
          if (!token) return undefined;
          const c = await connectWire(this.socketPath, 1_000);
          try {
            const r = await c.hello(token);
            if (r.result) {
              this.adminToken = token;
              return 'ready';
            }
            lastError = JSON.stringify(r.error);
          } finally {
            c.close();
          }
        } catch (e) {
          lastError = String(e);
        }
        return undefined;
      },
      'the daemon to be ready',
      timeoutMs,
      25,
    ).catch(() => 'timeout' as const);
    if (outcome === 'ready') return;
    const tail = this.outputTail();
    if (outcome === 'exited') throw new Error(`daemon exited before ready: ${JSON.stringify(this.exitInfo)}\n${tail}`);
    throw new Error(`daemon not ready within ${timeoutMs} ms (${lastError})\n${tail}`);
  }

  /** Waits for the current run to exit, failing after `timeoutMs`. */
  async waitExit(timeoutMs = 10_000): Promise<ExitInfo> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`daemon did not exit within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A new raw connection (closed by cleanup()). */
  async connect(): Promise<Wire> {
    const c = await connectWire(this.socketPath);
    this.#clients.push(c);
    return c;
  }

  /** A new connection that has said hello with `token` (default: the admin token). */
  async connectAs(token = this.adminToken): Promise<Wire> {
    const c = await connectAs(this.socketPath, token);
    this.#clients.push(c);
    return c;
  }

  /** SIGTERM, then await the exit; returns the exit code. */
  async stop(timeoutMs = 10_000): Promise<number | null> {
    if (this.exitInfo) return this.exitInfo.code;
    this.child.kill('SIGTERM');
    const info = await this.waitExit(timeoutMs);
    return info.code;
  }

  /** SIGKILL, then await the exit. */
  async kill(): Promise<ExitInfo> {
    if (!this.exitInfo) this.child.kill('SIGKILL');
    return this.waitExit();
  }

  /**
   * Stops (SIGTERM) if running, then starts again on the same socket and data dir. `timeoutMs`
   * bounds the wait for ready (a start on a damaged store verifies more before it answers).
   */
  async restart(timeoutMs = READY_TIMEOUT_MS): Promise<void> {
    if (this.running) await this.stop();
    this.#closeClients();
    this.#spawn();
    try {
      await this.waitReady(timeoutMs);
    } catch (e) {
      if (this.running) await this.kill().catch(() => undefined);
      throw e;
    }
  }

  /** Parsed stdout log lines; lines that are not JSON come back as `{ __unparsed: line }`. */
  logs(): Record<string, unknown>[] {
    return this.stdoutLines
      .filter((l) => l.trim() !== '')
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, unknown>;
        } catch {
          return { __unparsed: l };
        }
      });
  }

  #closeClients(): void {
    for (const c of this.#clients.splice(0)) c.close();
  }

  /** Closes clients, stops the daemon (SIGKILL if SIGTERM hangs) and removes the temp dir. */
  async cleanup(): Promise<void> {
    this.#closeClients();
    if (this.running) {
      try {
        await this.stop(5_000);
      } catch {
        await this.kill().catch(() => undefined);
      }
    }
    if (this.ownsDir && existsSync(this.dir)) await fs.rm(this.dir, { recursive: true, force: true });
  }
}
