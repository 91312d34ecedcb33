import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { errors, type YelloError } from '../../shared/errors.js';
import type { Audit, PeerInfo } from './audit.js';
import type { Caller } from '../caller.js';
import { WRITE_HIGH_WATER } from '../limits.js';
import type { ConnectionHandle, RpcServer } from './rpc-server.js';
import { LineFramer } from '../../shared/line-framing.js';
import { lineBytes } from './line-bytes.js';
import type { OutputPool, PoolMember } from './output-pool.js';
import { RequestRunner, type RunnerConnection } from './request-runner.js';
import { errorResponse } from './request-shape.js';
import { socketFd, socketInode } from './socket-fd.js';
import { errorMessage } from '../runtime/error-fields.js';

/** Requests in flight on one connection before we stop reading from it. */
const MAX_IN_FLIGHT = 16;

let nextConnectionId = 1;

/** How a connection is bounded. */
export interface ConnectionOptions {
  maxLineBytes: number;
  /** Hard cap on unsent output: past it after a write, the connection is closed and audited. */
  maxUnsentBytes: number;
  audit: Audit;
  /** The daemon-wide memory budget this connection's output and reads count against. */
  pool?: OutputPool;
  /** Admission checks a session against its caps before it is set (admission.ts). */
  admitSession?: (c: Connection, caller: Caller) => void;
}

/** How long a connection closed with an error line may linger for its client to read the line. */
const CLOSE_LINGER_MS = 1_000;

/**
 * One client connection, its socket side: newline-delimited JSON-RPC framing
 * (src/shared/line-framing.ts) and the line cap, how many requests run at once, write
 * backpressure, its place in the daemon-wide output pool, and the hard cap on what it leaves
 * unread. What each line becomes (parse, batches, the append cap, the page budget) is the
 * request runner's (request-runner.ts).
 */
export class Connection implements ConnectionHandle, RunnerConnection {
  readonly id = nextConnectionId++;
  readonly #socket: Socket;
  readonly #log: Logger;
  readonly #audit: Audit;
  readonly #maxLineBytes: number;
  readonly #maxUnsentBytes: number;
  readonly peer: PeerInfo;
  #caller: Caller | null = null;
  readonly #lines: LineFramer<Buffer>;
  #inFlight = 0;
  #closed = false;
  readonly #admitSession: ((c: Connection, caller: Caller) => void) | undefined;
  readonly #pool: OutputPool | undefined;
  readonly #member: PoolMember;
  readonly #runner: RequestRunner;
  #closeListeners: Array<() => void> = [];
  #hangUpListeners: Array<() => void> | null = [];
  #drainListeners: Array<() => void> = [];

  constructor(socket: Socket, rpc: RpcServer, log: Logger, opts: ConnectionOptions) {
    this.#socket = socket;
    this.#log = log;
    this.#audit = opts.audit;
    this.#maxLineBytes = opts.maxLineBytes;
    this.#lines = new LineFramer<Buffer>(opts.maxLineBytes, (parts, bytes) => Buffer.concat(parts, bytes));
    this.#maxUnsentBytes = opts.maxUnsentBytes;
    this.#admitSession = opts.admitSession;
    this.#pool = opts.pool;
    this.#member = {
      unsent: () => socket.writableLength,
      wake: () => {
        this.#onDrain();
      },
      shed: (fields) => {
        this.#closeForBudget(fields);
      },
    };
    this.#pool?.join(this.#member);
    this.#runner = new RequestRunner(this, {
      rpc,
      log,
      audit: opts.audit,
      pool: opts.pool,
      member: this.#member,
      unsent: () => socket.writableLength,
      write: (line) => {
        this.#write(line);
      },
    });
    // Taken now: once the socket closes, its fd number may belong to another one.
    this.peer = { conn: this.id, socketInode: socketInode(socketFd(socket)) };
    socket.on('data', (chunk: Buffer) => {
      this.#onData(chunk);
    });
    socket.on('drain', () => {
      this.#onDrain();
    });
    socket.on('error', (err) => {
      this.#log.debug({ conn: this.id, err: err.message }, 'connection error');
    });
    // The client can send nothing more once its side ended; 'close' follows only after our own
    // side is shut down, a loop turn or more later, and a request read meanwhile must already
    // see the hang-up (a claim left by an exited CLI is abandoned for the next caller).
    socket.on('end', () => {
      this.#onHangUp();
    });
    socket.on('close', () => {
      this.#onClose();
    });
  }

  get caller(): Caller | null {
    return this.#caller;
  }

  /** Throws RATE_LIMITED when admission refuses the session (per-agent and agent caps). */
  setCaller(caller: Caller): void {
    this.#admitSession?.(this, caller);
    this.#caller = caller;
  }

  /** True while a request is running or input waits to be read. */
  get busy(): boolean {
    return this.#inFlight > 0 || this.#lines.pending;
  }

  /**
   * Send `error` as one line (id null) and close: the socket lingers, dropping input, until the
   * client closes or CLOSE_LINGER_MS pass, so a client that wrote first still reads the line.
   */
  closeWith(error: YelloError): void {
    if (this.#closed || this.#socket.destroyed) return;
    this.#socket.end(
      JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: error.code, message: error.message, data: error.toData() } }) + '\n',
    );
    this.#onClose();
    this.#socket.resume();
    setTimeout(() => this.#socket.destroy(), CLOSE_LINGER_MS).unref();
  }

  onClose(listener: () => void): void {
    if (this.#closed) listener();
    else this.#closeListeners.push(listener);
  }

  onHangUp(listener: () => void): void {
    if (this.#hangUpListeners === null) listener();
    else this.#hangUpListeners.push(listener);
  }

  /** Called once the socket buffer has drained below the high-water mark. */
  onDrain(listener: () => void): void {
    this.#drainListeners.push(listener);
  }

  /** True when more output should wait: the peer is not reading fast enough. */
  get congested(): boolean {
    return this.#socket.writableLength >= WRITE_HIGH_WATER || (this.#pool?.holds(this.#member) ?? false);
  }

  get closed(): boolean {
    return this.#closed;
  }

  notify(method: string, params: unknown): void {
    this.#write(JSON.stringify({ jsonrpc: '2.0', method, params }));
  }

  /** Stop accepting requests and end the socket once pending writes are flushed. */
  end(): void {
    this.#socket.end();
  }

  destroy(): void {
    this.#socket.destroy();
  }

  #write(line: string): void {
    if (this.#closed || this.#socket.destroyed) return;
    this.#socket.write(lineBytes(line));
    this.#pool?.update(this.#member);
    const unsent = this.#socket.writableLength;
    if (unsent > this.#maxUnsentBytes) this.#closeForUnsent(unsent);
  }

  /**
   * The last resort behind backpressure and page budgets: a client that has left this much
   * unread is cut off, so no connection can make the daemon hold output without bound.
   */
  #closeForUnsent(unsent: number): void {
    const caller = this.#caller;
    this.#audit.security('connection.closed', {
      ...this.peer,
      reason: 'UNSENT_OUTPUT',
      unsentBytes: unsent,
      limit: this.#maxUnsentBytes,
      role: caller?.role ?? null,
      agentId: caller?.role === 'agent' ? caller.agentId : null,
    });
    this.#socket.destroy();
  }

  /** The daemon-wide budget is exhausted and this connection holds the most of it (output-pool.ts). */
  #closeForBudget(fields: Record<string, number>): void {
    const caller = this.#caller;
    this.#audit.security('connection.closed', {
      ...this.peer,
      reason: 'MEMORY_BUDGET',
      ...fields,
      role: caller?.role ?? null,
      agentId: caller?.role === 'agent' ? caller.agentId : null,
    });
    this.#socket.destroy();
    // Closed now, not at the socket's close event: its waiting requests must not start.
    this.#onClose();
  }

  /**
   * Input is queued and parsed only while the connection may take more work: at most
   * MAX_IN_FLIGHT requests running and the output buffer under its high-water mark. Otherwise
   * the socket is paused and the rest waits here, so a client that does not read its answers
   * cannot make the daemon do (and buffer) unbounded work for it.
   */
  #onData(chunk: Buffer): void {
    // Closed with an error line and lingering: input is dropped.
    if (this.#closed) return;
    this.#lines.push(chunk);
    this.#pumpInput();
  }

  #blocked(): boolean {
    return this.#inFlight >= MAX_IN_FLIGHT || this.congested;
  }

  #pumpInput(): void {
    while (this.#lines.pending && !this.#closed) {
      if (this.#blocked()) {
        this.#socket.pause();
        return;
      }
      const event = this.#lines.next();
      // A line over the cap is answered at once; the rest of it is dropped.
      if (event && 'tooLarge' in event) this.#sendRaw(errorResponse(null, errors.tooLarge(this.#maxLineBytes, event.tooLarge)));
      else if (event) {
        const work = this.#runner.line(event.line);
        if (work) this.#track(work);
      }
    }
    if (!this.#closed) this.#socket.resume();
  }

  #track(work: Promise<unknown>): void {
    this.#inFlight++;
    work
      .catch((err: unknown) => {
        this.#log.error({ conn: this.id, err: errorMessage(err) }, 'request handling failed');
      })
      .finally(() => {
        this.#inFlight--;
        if (!this.#closed) this.#pumpInput();
      });
  }

  #sendRaw(value: unknown): void {
    this.#write(JSON.stringify(value));
  }

  #onDrain(): void {
    this.#pool?.update(this.#member);
    this.#pumpInput();
    const listeners = this.#drainListeners.splice(0);
    for (const l of listeners) l();
  }

  #onHangUp(): void {
    const listeners = this.#hangUpListeners;
    this.#hangUpListeners = null;
    for (const l of listeners ?? []) l();
  }

  #onClose(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onHangUp();
    this.#pool?.leave(this.#member);
    // Work not started for a client that left is dropped, not done.
    this.#lines.clear();
    for (const l of this.#closeListeners.splice(0)) l();
    this.#drainListeners = [];
  }
}
