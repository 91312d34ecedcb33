import { PassThrough, type Readable, type Writable } from 'node:stream';

/**
 * What one run of the CLI reads and writes. The entry (main.ts) passes the process's own
 * streams, environment and signals; a test passes buffers and an explicit environment, so a run
 * inside a test worker reads nothing of the worker's process.
 */
export interface CliIo {
  stdout: Writable;
  stderr: Writable;
  /** Read by commands given `-` (send, verify, --coordinator-token-file); default: empty. */
  stdin?: Readable;
  /** The environment the CLI reads ($YELLO_*, $HOME, $XDG_STATE_HOME …): process.env only at the entry. */
  env: Readonly<Record<string, string | undefined>>;
  /** Width of help text (a terminal's columns); default 100. */
  columns?: number;
  /** Aborting it asks a long-running command to stop, as SIGINT does at the entry (tests). */
  signal?: AbortSignal;
  /** The entry: call `handler` on the first SIGINT or SIGTERM, absorbing later ones while registered; returns its unregister function. */
  onSignals?: (handler: () => void) => () => void;
  /** The entry: end the process now. Without it a run that ends early resolves with its exit code. */
  exit?: (code: number) => void;
}

/**
 * One run's I/O, as commands see it (`args.io`): the streams and environment of {@link CliIo},
 * the exit code, and how a run ends when something outside asks it to (SIGINT, SIGTERM, a test,
 * or a reader that went away: `yello status | head -3`). Long-running commands register
 * cleanups (stop a coordinator so its claim is released, print the cursor) that run first.
 */
export class Io {
  readonly stdout: Writable;
  readonly stderr: Writable;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly columns: number | undefined;
  /** Read by commands given `-`; empty unless the caller gave one. */
  get stdin(): Readable {
    return this.#io.stdin ?? emptyInput();
  }

  /** The exit code of a command that returns (verify and doctor: 1 when they found problems). */
  exitCode = 0;
  /** Resolves with the exit code once a {@link shutdown} has run its cleanups. */
  readonly stopped: Promise<number>;
  readonly #io: CliIo;
  readonly #cleanups = new Set<() => Promise<void> | void>();
  readonly #unregister = new Set<() => void>();
  #resolveStopped: (code: number) => void = () => undefined;
  #exiting = false;
  #endProcess = false;

  constructor(io: CliIo) {
    this.#io = io;
    this.stdout = io.stdout;
    this.stderr = io.stderr;
    this.env = io.env;
    this.columns = io.columns;
    this.stopped = new Promise((resolve) => (this.#resolveStopped = resolve));
  }

  /**
   * Call `handler` once on SIGINT or SIGTERM (in a test: when the run's signal aborts); returns
   * the unregister function. Until a command asks for this, a signal ends the process as usual.
   */
  onSignals(handler: () => void): () => void {
    if (this.#io.onSignals) return this.#io.onSignals(handler);
    const signal = this.#io.signal;
    if (!signal) return () => undefined;
    if (signal.aborted) queueMicrotask(handler);
    else signal.addEventListener('abort', handler, { once: true });
    const off = () => {
      this.#unregister.delete(off);
      signal.removeEventListener('abort', handler);
    };
    this.#unregister.add(off);
    return off;
  }

  /** SIGINT and SIGTERM end a long-running command cleanly with exit 0. */
  exitCleanlyOnSignals(): void {
    this.onSignals(() => {
      this.shutdown(0);
    });
  }

  /**
   * Run `fn` before the run ends on a signal or a closed stdout (at once if that is under way);
   * returns an unregister function.
   */
  onShutdown(fn: () => Promise<void> | void): () => void {
    if (this.#exiting)
      void Promise.resolve()
        .then(fn)
        .catch(() => undefined);
    else this.#cleanups.add(fn);
    return () => this.#cleanups.delete(fn);
  }

  /** Run the cleanups (bounded in time), then end with `code`. Later calls are ignored. */
  shutdown(code: number, timeoutMs = 5_000): void {
    if (this.#exiting) return;
    this.#exiting = true;
    const all = Promise.allSettled([...this.#cleanups].map(async (fn) => fn()));
    const timer = new Promise((r) => setTimeout(r, timeoutMs).unref());
    void Promise.race([all, timer]).then(() => {
      this.#io.exit?.(code);
      this.#resolveStopped(code);
    });
  }

  /** All of stdin, up to its end. */
  async readStdin(): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of this.stdin) chunks.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer));
    return Buffer.concat(chunks);
  }

  /** Whether a shutdown is under way (long-running loops stop reconnecting then). */
  get shuttingDown(): boolean {
    return this.#exiting;
  }

  /**
   * End with `code` once the command returns, whatever it leaves running: a finished MCP server's
   * reconnect timers, a stopped daemon's last handles.
   */
  exit(code: number): void {
    this.exitCode = code;
    this.#endProcess = true;
  }

  /** Whether this run is the process itself (the entry), not a run inside a test worker. */
  get ownsProcess(): boolean {
    return this.#io.exit !== undefined;
  }

  /** Whether the command asked to end the process ({@link exit}). */
  get endsProcess(): boolean {
    return this.#endProcess;
  }

  /**
   * A closed stdout (EPIPE: the reader exited) ends the command quietly with exit 0, as for any
   * Unix filter, instead of an unhandled 'error' event and a stack trace.
   */
  guardStdout(): void {
    this.stdout.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') this.shutdown(0);
      else {
        this.stderr.write(`yello: cannot write to stdout: ${err.message}\n`);
        this.shutdown(1);
      }
    });
  }

  /** Forget this run's listeners on its abort signal (it has ended; the entry's process handlers stay, as before). */
  close(): void {
    for (const off of [...this.#unregister]) off();
  }
}

function emptyInput(): Readable {
  const input = new PassThrough();
  input.end();
  return input;
}
