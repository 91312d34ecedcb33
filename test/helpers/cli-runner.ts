// Runs the real `yello` CLI (docs/protocol.md §9) as a user would: socket and data dir come
// from $YELLO_SOCKET / $YELLO_DATA_DIR (or flags), and every run reports stdout, stderr and the
// exit code. By default the CLI runs inside the test worker (src/cli/program.ts runCli with its
// own buffers, an explicit environment and an abort signal for SIGINT/SIGTERM), which saves a
// process start per call; `{ process: true }` spawns `node bin/yello` instead, for what only a
// process shows: exit by a signal, real stdin and stdout pipes, process start and exit, the
// built binary. `startCli` keeps a long-running command (`chats follow`) alive and hands its
// stdout back line by line.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { repoRoot } from './daemon-process.js';

export const yelloBin = path.join(repoRoot, 'bin/yello');

const DEFAULT_TIMEOUT_MS = 30_000;

/** What one CLI run left behind. */
export interface CliResult {
  args: string[];
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface CliOptions {
  /** Extra environment (wins over the runner's base env). `undefined` values unset a variable. */
  env?: Record<string, string | undefined>;
  /** Written to stdin, which is then closed. Without it stdin is closed at once (empty). */
  input?: string | Buffer;
  timeoutMs?: number;
  /** Another working directory: a spawned process only (`process: true`). */
  cwd?: string;
  /** Spawn `node bin/yello` (the process is under test) instead of running the CLI in this worker. */
  process?: boolean;
}

/**
 * The environment of a CLI run: the test process's env minus every yello variable (so a
 * developer's own $YELLO_TOKEN never leaks into a test), plus `extra`.
 */
export function cliEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const inherited = Object.entries(process.env).filter(([k]) => !k.startsWith('YELLO_') && k !== 'NODE_OPTIONS');
  const merged: Record<string, string | undefined> = { ...Object.fromEntries(inherited), FORCE_COLOR: '0', NO_COLOR: '1', ...extra };
  // An `undefined` in `extra` unsets the variable: it is left out.
  return Object.fromEntries(Object.entries(merged).filter(([, v]) => v !== undefined));
}

/** Where a run's output goes, as it arrives, and how it ended. */
interface RunSink {
  stdout(chunk: string): void;
  stderr(chunk: string): void;
  exit(code: number | null, signal: NodeJS.Signals | null, timedOut: boolean): void;
}

/** A running CLI, whichever way it runs. */
interface Run {
  readonly pid: number | undefined;
  signal(sig: NodeJS.Signals): void;
}

/** `input`: stdin's whole content, or null to leave stdin open (a long-running command). */
function spawnRun(args: string[], opts: CliOptions, input: string | Buffer | null, sink: RunSink): Run {
  const child: ChildProcess = spawn(process.execPath, [yelloBin, ...args], {
    cwd: opts.cwd ?? repoRoot,
    env: cliEnv(opts.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    sink.stdout(c);
  });
  child.stderr!.setEncoding('utf8').on('data', (c: string) => {
    sink.stderr(c);
  });
  child.stdin!.on('error', () => undefined);
  if (input !== null) child.stdin!.end(input);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  child.on('close', (code, signal) => {
    clearTimeout(timer);
    sink.exit(code, signal, timedOut);
  });
  child.on('error', (err) => {
    clearTimeout(timer);
    sink.stderr(String(err));
    sink.exit(-1, null, timedOut);
  });
  return {
    pid: child.pid,
    signal: (sig) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    },
  };
}

/** A stream that hands each write to `onText`, decoded as UTF-8. */
function textSink(onText: (text: string) => void): Writable {
  const decoder = new StringDecoder('utf8');
  return new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      onText(typeof chunk === 'string' ? chunk : decoder.write(chunk));
      done();
    },
  });
}

/**
 * The CLI in this worker. Only SIGINT and SIGTERM have a meaning here (the run's abort signal,
 * what the binary's handlers do); any other signal, or the timeout, abandons the run, reported
 * as killed by it.
 */
function inProcessRun(args: string[], opts: CliOptions, input: string | Buffer | null, sink: RunSink): Run {
  if (opts.cwd !== undefined && path.resolve(opts.cwd) !== repoRoot)
    throw new Error(`cli-runner: a run in another directory (${opts.cwd}) needs its own process: pass { process: true }`);
  if (args[0] === 'daemon' && !args.some((a) => a === '--help' || a === '-h'))
    throw new Error(
      'cli-runner: `yello daemon` is a process of its own (exit codes, signals, the fast start path): pass { process: true }',
    );
  if (process.cwd() !== repoRoot) throw new Error(`cli-runner: the in-process CLI resolves paths from ${process.cwd()}, not ${repoRoot}`);
  const stdin = new PassThrough();
  if (input !== null) stdin.end(input);
  const stop = new AbortController();
  let ended = false;
  const end = (code: number | null, signal: NodeJS.Signals | null, timedOut: boolean) => {
    if (ended) return;
    ended = true;
    clearTimeout(timer);
    sink.exit(code, signal, timedOut);
  };
  const timer = setTimeout(() => {
    stop.abort();
    end(null, 'SIGKILL', true);
  }, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  void import('../../src/cli/program.js')
    .then(({ runCli: yello }) =>
      yello(args, {
        stdout: textSink((t) => {
          sink.stdout(t);
        }),
        stderr: textSink((t) => {
          sink.stderr(t);
        }),
        stdin,
        env: cliEnv(opts.env),
        signal: stop.signal,
      }),
    )
    .then(
      (code) => {
        end(code, null, false);
      },
      (err: unknown) => {
        // runCli maps every failure to an exit code; reaching this is a bug in the CLI.
        sink.stderr(`cli-runner: runCli threw: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
        end(-1, null, false);
      },
    );
  return {
    pid: undefined,
    signal: (sig) => {
      if (ended) return;
      if (sig === 'SIGINT' || sig === 'SIGTERM') stop.abort();
      else {
        stop.abort();
        end(null, sig, false);
      }
    },
  };
}

/** Runs `yello …args` to completion (or gives up on it after the timeout). */
export function runCli(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    let stdout = '';
    let stderr = '';
    const sink: RunSink = {
      stdout: (c) => (stdout += c),
      stderr: (c) => (stderr += c),
      exit: (code, signal, timedOut) => {
        resolve({ args, code, signal, stdout, stderr, timedOut });
      },
    };
    (opts.process ? spawnRun : inProcessRun)(args, opts, opts.input ?? '', sink);
  });
}

/** A one-line summary of a run, for assertion messages. */
export function describeRun(r: CliResult): string {
  return `yello ${r.args.join(' ')}\n  exit ${r.code}${r.signal ? ` (${r.signal})` : ''}${r.timedOut ? ' TIMED OUT' : ''}\n  stdout: ${r.stdout.slice(0, 2000)}\n  stderr: ${r.stderr.slice(0, 2000)}`;
}

/** Throws (with the whole run) unless the exit code is `code`. */
export function expectExit(r: CliResult, code: number): CliResult {
  if (r.code !== code) throw new Error(`expected exit ${code}\n${describeRun(r)}`);
  return r;
}

/** Parses stdout as one JSON document (throws with the run on failure); the caller says what it expects it to hold. */
export function parseJson(r: CliResult): unknown {
  try {
    return JSON.parse(r.stdout);
  } catch (e) {
    throw new Error(`stdout is not one JSON document (${(e as Error).message})\n${describeRun(r)}`, { cause: e });
  }
}

/** Parses stdout as JSON lines (every non-empty line one document); `T` is what the caller expects each to hold. */
export function parseJsonLines<T = unknown>(text: string): T[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l, i) => {
      try {
        return JSON.parse(l) as T;
      } catch (e) {
        throw new Error(`line ${i + 1} is not JSON (${(e as Error).message}): ${l.slice(0, 300)}`, { cause: e });
      }
    });
}

/**
 * Problems with an error report: §9 wants one line on stderr, never a stack trace. Empty when
 * it is fine.
 */
export function oneLineErrorProblems(r: CliResult): string[] {
  const problems: string[] = [];
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
  if (lines.length !== 1) problems.push(`stderr has ${lines.length} non-empty lines`);
  if (/\n\s{4}at /.test('\n' + r.stderr) || /^\s+at .*:\d+:\d+\)?$/m.test(r.stderr)) problems.push('stderr has a stack trace');
  return problems;
}

/** A CLI bound to one daemon: socket and data dir through the environment. */
export class Cli {
  constructor(
    readonly socketPath: string,
    readonly dataDir: string,
    readonly baseEnv: Record<string, string | undefined> = {},
  ) {}

  env(extra: Record<string, string | undefined> = {}): Record<string, string | undefined> {
    return { YELLO_SOCKET: this.socketPath, YELLO_DATA_DIR: this.dataDir, ...this.baseEnv, ...extra };
  }

  /** `yello …args` with YELLO_SOCKET / YELLO_DATA_DIR set. */
  run(args: string[], opts: CliOptions = {}): Promise<CliResult> {
    return runCli(args, { ...opts, env: this.env(opts.env) });
  }

  /** Runs and expects exit 0. */
  async ok(args: string[], opts: CliOptions = {}): Promise<CliResult> {
    return expectExit(await this.run(args, opts), 0);
  }

  /** Runs with `--json`, expects exit 0 and returns the parsed document. */
  async json<T = unknown>(args: string[], opts: CliOptions = {}): Promise<T> {
    return parseJson(await this.ok([...args, '--json'], opts)) as T;
  }

  /** The same CLI acting as an agent (`--token-file`). */
  as(tokenFile: string): AgentCli {
    return new AgentCli(this, tokenFile);
  }

  start(args: string[], opts: CliOptions = {}): LongRunningCli {
    return startCli(args, { ...opts, env: this.env(opts.env) });
  }
}

/** The CLI with `--token-file FILE` in front of every command. */
export class AgentCli {
  constructor(
    readonly cli: Cli,
    readonly tokenFile: string,
  ) {}

  run(args: string[], opts: CliOptions = {}): Promise<CliResult> {
    return this.cli.run(['--token-file', this.tokenFile, ...args], opts);
  }

  async ok(args: string[], opts: CliOptions = {}): Promise<CliResult> {
    return expectExit(await this.run(args, opts), 0);
  }

  async json<T = unknown>(args: string[], opts: CliOptions = {}): Promise<T> {
    return parseJson(await this.ok([...args, '--json'], opts)) as T;
  }

  start(args: string[], opts: CliOptions = {}): LongRunningCli {
    return this.cli.start(['--token-file', this.tokenFile, ...args], opts);
  }
}

/** A CLI command that keeps running (`chats follow`): stdout arrives as lines. */
export class LongRunningCli {
  readonly lines: string[] = [];
  stderr = '';
  readonly exited: Promise<CliResult>;
  result: CliResult | null = null;
  readonly #run: Run;
  readonly #waiters = new Set<() => void>();

  constructor(
    readonly args: string[],
    opts: CliOptions,
  ) {
    let partial = '';
    let stdout = '';
    let resolveExit: (r: CliResult) => void = () => undefined;
    this.exited = new Promise((resolve) => (resolveExit = resolve));
    this.#run = (opts.process ? spawnRun : inProcessRun)(args, { ...opts, timeoutMs: opts.timeoutMs ?? 60_000 }, opts.input ?? null, {
      stdout: (chunk) => {
        stdout += chunk;
        partial += chunk;
        let nl: number;
        while ((nl = partial.indexOf('\n')) >= 0) {
          this.lines.push(partial.slice(0, nl));
          partial = partial.slice(nl + 1);
        }
        this.#wake();
      },
      stderr: (chunk) => {
        this.stderr += chunk;
        this.#wake();
      },
      exit: (code, signal) => {
        if (partial) this.lines.push(partial);
        this.result = { args, code, signal, stdout, stderr: this.stderr, timedOut: false };
        this.#wake();
        resolveExit(this.result);
      },
    });
  }

  /** The child's pid (a spawned run only). */
  get pid(): number | undefined {
    return this.#run.pid;
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  /** Resolves once `predicate()` holds (checked on every output and at exit); rejects on timeout. */
  waitFor(predicate: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (predicate()) {
          done();
          resolve();
        } else if (this.result) {
          done();
          reject(
            new Error(
              `yello ${this.args.join(' ')} exited (${this.result.code}) before ${what}\nstdout: ${this.lines.join('\n')}\nstderr: ${this.stderr}`,
            ),
          );
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for ${what}\nstdout: ${this.lines.join('\n')}\nstderr: ${this.stderr}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Waits until at least `n` non-empty stdout lines arrived; returns them. */
  async waitForLines(n: number, timeoutMs = 15_000): Promise<string[]> {
    const full = () => this.lines.filter((l) => l.trim() !== '');
    await this.waitFor(() => full().length >= n, `${n} stdout lines`, timeoutMs);
    return full();
  }

  /** Waits until stderr contains `text`. */
  waitForStderr(text: string | RegExp, timeoutMs = 15_000): Promise<void> {
    return this.waitFor(
      () => (typeof text === 'string' ? this.stderr.includes(text) : text.test(this.stderr)),
      `stderr ${String(text)}`,
      timeoutMs,
    );
  }

  /** SIGINT or SIGTERM: what the binary does on it (in this worker: the run's abort signal). */
  signal(sig: NodeJS.Signals = 'SIGINT'): void {
    if (!this.result) this.#run.signal(sig);
  }

  /** Sends `sig` and waits for the exit (SIGKILL after `timeoutMs`). */
  async stop(sig: NodeJS.Signals = 'SIGINT', timeoutMs = 10_000): Promise<CliResult> {
    this.signal(sig);
    const timer = setTimeout(() => {
      this.signal('SIGKILL');
    }, timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Kills it if still running (for afterAll). */
  async kill(): Promise<void> {
    if (!this.result) {
      this.signal('SIGKILL');
      await this.exited;
    }
  }
}

/** Starts a long-running `yello …args`. */
export function startCli(args: string[], opts: CliOptions = {}): LongRunningCli {
  return new LongRunningCli(args, opts);
}

/** Writes `token` to a 0600 file in `dir` and returns its path. */
export function writeTokenFile(dir: string, name: string, token: string): string {
  const file = path.join(dir, `${name}.token`);
  fs.writeFileSync(file, token + '\n', { mode: 0o600 });
  return file;
}
