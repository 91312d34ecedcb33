// The real daemon on a throwaway socket and data dir. By default it runs inside the test worker
// (startDaemon from src/daemon, its flags parsed as `yello daemon` parses them, its log lines
// captured): the real socket server and store, without a node process to boot, and its code
// counted by coverage. `{ process: true }` spawns `node bin/yello daemon …` the way an operator
// runs it (docs/protocol.md §2), for tests whose subject is the process itself: SIGKILL and
// crashes, signals and exit codes, SIGSTOP, and the LD_PRELOAD / --require shims. Either way
// start() waits for the contract's notion of ready: the socket accepts and `session.hello` with
// the admin token answers.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunningDaemon } from '../../src/daemon/entry.js';
import { connectAs, connectWire, type Wire } from './wire-fixtures.js';
import { waitFor } from './wait.js';
import { testStoreIsPostgres, withTestStore } from './test-store.js';

/** Repository root (the directory holding bin/yello). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// A daemon on PostgreSQL connects, loads its heads and directory and publishes its keys (and
// migrates a new database) before it is ready: on the loaded 2-core machine that alone took 2–6 s.
const READY_TIMEOUT_MS = 10_000;
const PG_READY_TIMEOUT_MS = 30_000;

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
  /**
   * Spawn `node bin/yello daemon` instead of running the daemon in this worker: only where the
   * process is what the test checks (SIGKILL, signals, exit codes, SIGSTOP, LD_PRELOAD or
   * --require shims, what the installed binary does).
   */
  process?: boolean;
}

/**
 * The variables an in-process daemon honours: those its flags and store are resolved from. Any
 * other (LD_PRELOAD, NODE_OPTIONS, PG*, fault triggers) only reaches a spawned daemon.
 */
const IN_PROCESS_ENV = new Set([
  'YELLO_STORE',
  'YELLO_SOCKET',
  'YELLO_DATA_DIR',
  'XDG_RUNTIME_DIR',
  'XDG_STATE_HOME',
  'HOME',
  'STATE_DIRECTORY',
]);

/** Makes a short temp dir (socket paths must stay under ~100 bytes). */
export async function makeTempDir(prefix = 'yl-'): Promise<string> {
  let base = os.tmpdir();
  if (base.length > 60) base = '/tmp';
  return fs.mkdtemp(path.join(base, prefix));
}

let modules:
  | Promise<
      [
        typeof import('../../src/daemon/entry.js'),
        typeof import('../../src/cli/daemon-config.js'),
        typeof import('../../src/cli/daemon-options.js'),
      ]
    >
  | undefined;

/** The daemon's modules, loaded once per worker on first use: tests that only need repoRoot or a spawned daemon never load them. */
function daemonModules(): NonNullable<typeof modules> {
  modules ??= Promise.all([
    import('../../src/daemon/entry.js'),
    import('../../src/cli/daemon-config.js'),
    import('../../src/cli/daemon-options.js'),
  ]);
  return modules;
}

export class DaemonProcess {
  readonly dir: string;
  readonly socketPath: string;
  readonly dataDir: string;
  readonly extraArgs: string[];
  readonly env: NodeJS.ProcessEnv;
  readonly ownsDir: boolean;
  /** Whether the daemon runs in this worker (the default) rather than in a process of its own. */
  readonly inProcess: boolean;
  /** Admin token read from `<data-dir>/admin.token` (trimmed), once ready. */
  adminToken = '';
  /** Every log line of every run of this daemon (pino JSON: its stdout, or its log destination in-process). */
  readonly stdoutLines: string[] = [];
  /** Every stderr chunk of every run (in-process: what `yello daemon` would have printed there). */
  stderr = '';
  #child: ChildProcess | undefined;
  /**
   * Resolves with the exit code/signal of the current run. In-process: code 0 once stop() has
   * stopped it, or the exit code `yello daemon` gives the startup failure.
   */
  exited!: Promise<ExitInfo>;
  exitInfo: ExitInfo | null = null;
  readonly #clients: Wire[] = [];
  /** In-process: the current run, from its start to its stop. */
  #run: { loaded: Promise<unknown>; starting: Promise<RunningDaemon | null>; exit: (info: ExitInfo) => void } | undefined;

  private constructor(dir: string, opts: DaemonOptions, ownsDir: boolean) {
    this.dir = dir;
    this.socketPath = opts.socketPath ?? path.join(dir, 'y.sock');
    this.dataDir = opts.dataDir ?? path.join(dir, 'data');
    this.extraArgs = opts.extraArgs ?? [];
    this.env = opts.env ?? {};
    this.ownsDir = ownsDir;
    this.inProcess = opts.process !== true;
    const outside = Object.keys(this.env).filter((k) => !IN_PROCESS_ENV.has(k));
    if (this.inProcess && outside.length > 0)
      throw new Error(`${outside.join(', ')} would not reach an in-process daemon: start it with { process: true }`);
    if (Buffer.byteLength(this.socketPath) >= 100) throw new Error(`socket path too long: ${this.socketPath}`);
  }

  /** Starts a daemon (in this worker unless `process: true`) and (by default) waits until it is ready. */
  static async start(opts: DaemonOptions = {}): Promise<DaemonProcess> {
    const ownsDir = opts.dir === undefined;
    const dir = opts.dir ?? (await makeTempDir());
    // YELLO_TEST_STORE=postgresql: the daemon stores in a database of its own (test-store.ts).
    const d = new DaemonProcess(dir, await withTestStore(opts, opts.dataDir ?? path.join(dir, 'data')), ownsDir);
    d.#launch();
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
        if (d.running) await (d.inProcess ? d.stop() : d.kill()).catch(() => undefined);
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

  /** How long a start may take to be ready: longer on PostgreSQL (the run's store, or a --store URL). */
  get readyTimeoutMs(): number {
    const onPostgres =
      testStoreIsPostgres() || this.extraArgs.some((a) => /^postgres(ql)?:/i.test(a)) || /^postgres/i.test(this.env.YELLO_STORE ?? '');
    return onPostgres ? PG_READY_TIMEOUT_MS : READY_TIMEOUT_MS;
  }

  get running(): boolean {
    return this.exitInfo === null;
  }

  /** The end of what the daemon wrote, for an error that says why it is gone or not ready. */
  outputTail(): string {
    return `stderr: ${this.stderr.slice(-2000)}\nstdout: ${this.stdoutLines.slice(-20).join('\n')}`;
  }

  /** The daemon's process (spawned daemons only). */
  get child(): ChildProcess {
    if (!this.#child)
      throw new Error('this daemon runs in the test worker: start it with { process: true } to signal or inspect its process');
    return this.#child;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The pid a lock holder record names: the daemon's process, or this worker when it runs here. */
  get holderPid(): number | undefined {
    return this.inProcess ? process.pid : this.child.pid;
  }

  #launch(): void {
    if (this.inProcess) this.#startInProcess();
    else this.#spawn();
  }

  /** Runs startDaemon here, with the flags `args` gives `yello daemon` and its log captured line by line. */
  #startInProcess(): void {
    this.exitInfo = null;
    let resolveExit!: (info: ExitInfo) => void;
    this.exited = new Promise((resolve) => {
      resolveExit = resolve;
    });
    const exit = (info: ExitInfo) => {
      if (this.exitInfo) return;
      this.exitInfo = info;
      resolveExit(info);
    };
    const loaded = daemonModules();
    const starting = (async (): Promise<RunningDaemon | null> => {
      const [{ startDaemon, createLogger, StartupError, EXIT_CODES }, { daemonConfig, DaemonUsageError }, { parseDaemonArgsFast }] =
        await loaded;
      const flags = this.args.slice(2);
      const argv = parseDaemonArgsFast(flags);
      if (!argv)
        throw new Error(`yello daemon ${flags.join(' ')}: not plain valid flags; a test of the CLI's parsing needs { process: true }`);
      try {
        const parsed = daemonConfig(argv, {
          env: { ...process.env, ...this.env },
          uid: process.getuid?.() ?? 0,
          home: os.homedir(),
          pid: process.pid,
        });
        // No signing worker threads in the test worker: they load dist/'s sign-worker.js, which a
        // daemon run from src/ has no compiled copy of (their default is 0 on 2 cores, more on a
        // bigger machine). A test of the workers runs a daemon process.
        if (argv['sign-workers'] !== undefined) throw new Error('--sign-workers needs { process: true }');
        const config = { ...parsed, signWorkers: 0 };
        let partial = '';
        const log = createLogger(config.logLevel, {
          write: (chunk: string) => {
            partial += chunk;
            let nl: number;
            while ((nl = partial.indexOf('\n')) >= 0) {
              this.stdoutLines.push(partial.slice(0, nl));
              partial = partial.slice(nl + 1);
            }
          },
        });
        return await startDaemon(config, { log });
      } catch (err) {
        // What `yello daemon` prints and exits with (src/cli/run-daemon.ts).
        if (err instanceof DaemonUsageError) {
          this.stderr += `yello: ${err.message}\n(see yello daemon --help)\n`;
          exit({ code: 2, signal: null });
        } else if (err instanceof StartupError) {
          this.stderr += `yello: ${err.message}\n`;
          exit({ code: err.exitCode, signal: null });
        } else {
          this.stderr += `yello: the daemon failed to start: ${err instanceof Error ? err.message : String(err)}\n`;
          exit({ code: EXIT_CODES.internal, signal: null });
        }
        return null;
      }
    })();
    // Its failure reaches the test through waitReady() or stop(); never as an unhandled rejection.
    starting.catch(() => undefined);
    this.#run = { loaded, starting, exit };
  }

  #spawn(): void {
    this.exitInfo = null;
    const child = spawn(process.execPath, this.args, {
      cwd: repoRoot,
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
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
  async waitReady(timeoutMs = this.readyTimeoutMs): Promise<void> {
    if (this.#run) {
      // The timeout is the daemon's, not the worker's first import of its modules (through
      // vite's transform: seconds on a loaded machine).
      await this.#run.loaded;
      await this.#settled(this.#run.starting, timeoutMs, 'become ready');
    }
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

  /** `p`, or an error once `timeoutMs` has passed. */
  async #settled<T>(p: Promise<T>, timeoutMs: number, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`daemon did not ${what} within ${timeoutMs} ms\n${this.outputTail()}`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([p, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A graceful stop (SIGTERM, or in-process the daemon's stop()), then await the exit; returns the exit code. */
  async stop(timeoutMs = 10_000): Promise<number | null> {
    if (this.exitInfo) return this.exitInfo.code;
    const run = this.#run;
    if (run) {
      await run.loaded;
      const running = await this.#settled(run.starting, timeoutMs, 'finish starting');
      if (!running) return this.exitInfo!.code;
      try {
        await this.#settled(running.stop(), timeoutMs, 'stop');
        // The daemon has closed its connections' descriptors; a client in this worker learns it
        // over a few turns of the loop (EOF read, its own end shut down, the handle closed, then
        // 'close'). Let those turns run before the test goes on, so that a stopped daemon is
        // one every client here has seen go, as with a process that has exited.
        for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
        run.exit({ code: 0, signal: null });
      } catch (err) {
        // As run-daemon.ts: a failed shutdown is exit 1, with the reason on stderr.
        this.stderr += `yello: shutdown failed: ${err instanceof Error ? err.message : String(err)}\n`;
        run.exit({ code: 1, signal: null });
      }
      return this.exitInfo!.code;
    }
    this.child.kill('SIGTERM');
    const info = await this.waitExit(timeoutMs);
    return info.code;
  }

  /** SIGKILL, then await the exit (a spawned daemon only: nothing in a worker can be killed so). */
  async kill(): Promise<ExitInfo> {
    if (!this.exitInfo) this.child.kill('SIGKILL');
    return this.waitExit();
  }

  /**
   * Stops (SIGTERM) if running, then starts again on the same socket and data dir. `timeoutMs`
   * bounds the wait for ready (a start on a damaged store verifies more before it answers).
   */
  async restart(timeoutMs = this.readyTimeoutMs): Promise<void> {
    if (this.running) await this.stop();
    this.#closeClients();
    this.#launch();
    try {
      await this.waitReady(timeoutMs);
    } catch (e) {
      if (this.running) await (this.inProcess ? this.stop() : this.kill()).catch(() => undefined);
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

  /** Closes clients, stops the daemon (a spawned one is SIGKILLed if SIGTERM hangs) and removes the temp dir. */
  async cleanup(): Promise<void> {
    this.#closeClients();
    if (this.running) {
      try {
        await this.stop(this.inProcess ? 15_000 : 5_000);
      } catch (err) {
        // In-process, a stop that hangs is the daemon's bug, not something to kill away.
        if (this.inProcess) throw err;
        await this.kill().catch(() => undefined);
      }
    }
    if (this.ownsDir && existsSync(this.dir)) await fs.rm(this.dir, { recursive: true, force: true });
  }
}
