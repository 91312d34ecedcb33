import { createConnection, type Socket } from 'node:net';
import { ConnectionLostError, TimeoutError, remoteError, type RpcErrorObject } from './errors.js';

interface Pending {
  method: string;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

/** Handler for daemon notifications. */
export type NotificationHandler = (method: string, params: unknown) => void;

/**
 * One socket, newline-delimited JSON-RPC. Pending calls reject with a transient
 * `ConnectionLostError` when the socket drops; nothing is ever resent.
 */
export class LineTransport {
  readonly #socket: Socket;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #buffer = '';
  #closed = false;
  #closeListeners: Array<(err: Error) => void> = [];
  onNotification: NotificationHandler = () => {};

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.#onData(chunk));
    socket.on('close', () => this.#onClose(new ConnectionLostError('the connection to yellod closed', true)));
    socket.on('error', (err) => this.#onClose(new ConnectionLostError(`the connection to yellod failed: ${err.message}`, true, err)));
  }

  /** Connect to a Unix socket. */
  static connect(path: string): Promise<LineTransport> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(path);
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        resolve(new LineTransport(socket));
      });
      socket.once('error', (err) => reject(new ConnectionLostError(`cannot connect to yellod at ${path}: ${err.message}`, false, err)));
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  onClose(listener: (err: Error) => void): void {
    this.#closeListeners.push(listener);
  }

  /** Send one request; resolve with its result or reject with the typed error. */
  call(method: string, params: unknown, timeoutMs?: number): Promise<unknown> {
    if (this.#closed) return Promise.reject(new ConnectionLostError('the connection to yellod is closed', false));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
        this.#pending.delete(id);
        reject(new TimeoutError(method, timeoutMs));
      }, timeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer });
      this.#socket.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
  }

  close(): void {
    this.#socket.end();
    this.#socket.destroy();
  }

  #onData(chunk: string): void {
    this.#buffer += chunk;
    let nl: number;
    while ((nl = this.#buffer.indexOf('\n')) !== -1) {
      const line = this.#buffer.slice(0, nl);
      this.#buffer = this.#buffer.slice(nl + 1);
      if (line.length > 0) this.#onLine(line);
    }
  }

  #onLine(line: string): void {
    let msg: { id?: number | string | null; method?: string; params?: unknown; result?: unknown; error?: RpcErrorObject };
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof msg.method === 'string' && msg.id === undefined) {
      this.onNotification(msg.method, msg.params);
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
