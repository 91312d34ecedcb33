import { createConnection, type Socket } from 'node:net';
import { ERROR_CODES } from '../shared/errors.js';
import {
  ConnectionLostError,
  LineTooLargeError,
  RequestTooLargeError,
  TimeoutError,
  remoteError,
  type RpcErrorObject,
  type TimedOutRequest,
} from './errors.js';
import { LineOverflow, LineSplitter } from './line-splitter.js';
import { assertTrustedSocket } from './socket-check.js';

/** The `data.type`s of an error line (id null) the daemon sends just before it closes the connection. */
const FAREWELL_TYPES = new Set(['RATE_LIMITED', 'UNAUTHENTICATED']);

interface Pending {
  method: string;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

/** Handler for daemon notifications. */
export type NotificationHandler = (method: string, params: unknown) => void;

/** The request caps `session.hello` announces (`limits`), enforced before writing. */
export interface RequestLimits {
  maxLineBytes: number;
  maxAppendRequestBytes: number;
}

/** How to connect. */
export interface TransportOptions {
  /** Cap on one inbound line, in bytes. */
  maxInboundLineBytes: number;
  /** Check the socket and its directory before connecting (default true). */
  verifySocket?: boolean;
}

/**
 * One socket, newline-delimited JSON-RPC. Pending calls reject with a transient
 * `ConnectionLostError` when the socket drops; nothing is ever resent.
 */
export class LineTransport {
  readonly #socket: Socket;
  readonly #pending = new Map<number, Pending>();
  readonly #splitter: LineSplitter;
  #nextId = 1;
  #closed = false;
  /**
   * The error line (id null) the daemon sent before closing the connection on purpose (a
   * refused or evicted connection: RATE_LIMITED; no hello in time: UNAUTHENTICATED). Calls the
   * close fails get it instead of a bare ConnectionLostError, so the caller sees why.
   */
  #farewell: Error | null = null;
  #closeListeners: Array<(err: Error) => void> = [];
  onNotification: NotificationHandler = () => {};
  /** Caps to refuse over-size requests locally; null until `session.hello` told them. */
  limits: RequestLimits | null = null;

  private constructor(socket: Socket, maxInboundLineBytes: number) {
    this.#socket = socket;
    this.#splitter = new LineSplitter(maxInboundLineBytes, (line) => {
      this.#onLine(line);
    });
    socket.on('data', (chunk: Buffer) => {
      this.#onData(chunk);
    });
    socket.on('close', () => {
      this.#onClose(this.#farewell ?? new ConnectionLostError('the connection to yellod closed', true));
    });
    socket.on('error', (err) => {
      this.#onClose(this.#farewell ?? new ConnectionLostError(`the connection to yellod failed: ${err.message}`, true, err));
    });
  }

  /**
   * Connect to a Unix socket. Unless told otherwise, first check that the socket and its
   * directory can be trusted (`UntrustedSocketError`): this is the one place every client,
   * reconnect and coordinator dials, so no token is sent to an unchecked socket.
   */
  static async connect(path: string, options: TransportOptions): Promise<LineTransport> {
    if (options.verifySocket !== false) await assertTrustedSocket(path);
    return new Promise((resolve, reject) => {
      const socket = createConnection(path);
      const onError = (err: Error) => {
        reject(new ConnectionLostError(`cannot connect to yellod at ${path}: ${err.message}`, false, err));
      };
      socket.once('connect', () => {
        socket.removeListener('error', onError);
        resolve(new LineTransport(socket, options.maxInboundLineBytes));
      });
      socket.once('error', onError);
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  onClose(listener: (err: Error) => void): void {
    this.#closeListeners.push(listener);
  }

  /**
   * Send one request; resolve with its result or reject with the typed error. A request over
   * the announced `limits` is refused with `RequestTooLargeError` before anything is written.
   * `timeoutMs` undefined, 0 or Infinity: no timeout.
   */
  call(method: string, params: unknown, timeoutMs?: number): Promise<unknown> {
    if (this.#closed) return Promise.reject(this.#farewell ?? new ConnectionLostError('the connection to yellod is closed', false));
    const id = this.#nextId++;
    // The executor runs now; a throw in it (params JSON cannot encode: a cycle, a BigInt)
    // rejects the call.
    return new Promise((resolve, reject) => {
      // Encoded once: the size checked is exactly the bytes written (the daemon counts the
      // line's UTF-8 bytes without its newline).
      const bytes = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n', 'utf8');
      const tooLarge = this.#overLimit(method, bytes.length - 1);
      if (tooLarge) {
        reject(tooLarge);
        return;
      }
      const timer =
        timeoutMs === undefined || timeoutMs <= 0 || timeoutMs === Infinity
          ? undefined
          : setTimeout(() => {
              this.#pending.delete(id);
              reject(new TimeoutError(method, timeoutMs, requestFacts(id, params)));
            }, timeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer });
      this.#socket.write(bytes);
    });
  }

  close(): void {
    this.#socket.end();
    this.#socket.destroy();
  }

  /** The daemon's checks, in its order (§3): the line cap, then the append cap. */
  #overLimit(method: string, size: number): RequestTooLargeError | null {
    const limits = this.limits;
    if (!limits) return null;
    const limit =
      size > limits.maxLineBytes
        ? limits.maxLineBytes
        : method === 'streams.append' && size > limits.maxAppendRequestBytes
          ? limits.maxAppendRequestBytes
          : null;
    if (limit === null) return null;
    return new RequestTooLargeError(
      {
        code: ERROR_CODES.REQUEST_TOO_LARGE,
        message: `${method} request of ${size} bytes exceeds the limit of ${limit}; it was not sent`,
        data: { type: 'REQUEST_TOO_LARGE', limit, size },
      },
      { sent: false },
    );
  }

  #onData(chunk: Buffer): void {
    if (this.#closed) return;
    try {
      this.#splitter.push(chunk);
    } catch (err) {
      if (!(err instanceof LineOverflow)) throw err;
      // Never buffer a line without bound: close, and fail what is pending (written, so its
      // outcome is unknown) with an error that says why.
      this.#onClose(new LineTooLargeError(err.limit, err.size, true));
      this.#socket.destroy();
    }
  }

  #onLine(line: string): void {
    if (this.#closed) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return;
    }
    // Like a line that is not JSON, one that is not an object is no message.
    if (typeof parsed !== 'object' || parsed === null) return;
    const msg = parsed as { id?: number | string | null; method?: string; params?: unknown; result?: unknown; error?: RpcErrorObject };
    if (typeof msg.method === 'string' && msg.id === undefined) {
      try {
        this.onNotification(msg.method, msg.params);
      } catch (err) {
        // A listener's bug must not cost the rest of this chunk its framing: surface it as the
        // uncaught exception it is, after the splitter has finished.
        queueMicrotask(() => {
          throw err;
        });
      }
      return;
    }
    if (msg.id === null && msg.error && FAREWELL_TYPES.has(String(msg.error.data?.type))) {
      this.#farewell = remoteError(msg.error);
      return;
    }
    if (typeof msg.id !== 'number') return;
    const pending = this.#pending.get(msg.id);
    if (!pending) return;
    this.#pending.delete(msg.id);
    if (pending.timer) clearTimeout(pending.timer);
    if (msg.error) pending.reject(remoteError(msg.error));
    else pending.resolve(msg.result);
  }

  #onClose(err: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const [, p] of this.#pending) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(err);
    }
    this.#pending.clear();
    for (const l of this.#closeListeners.splice(0)) l(err);
  }
}

/** What a timeout names, so an agent can look the request up (`operations.get`). */
function requestFacts(id: number, params: unknown): TimedOutRequest {
  const facts: TimedOutRequest = { id };
  if (typeof params === 'object' && params !== null) {
    const { streamId, operationId } = params as { streamId?: unknown; operationId?: unknown };
    if (typeof streamId === 'string') facts.streamId = streamId;
    if (typeof operationId === 'string') facts.operationId = operationId;
  }
  return facts;
}
