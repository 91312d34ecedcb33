// The one raw client of the yello wire (docs/protocol.md §3: JSON-RPC 2.0, one message per
// `\n`-terminated line on a Unix socket), for the tests and the benchmarks alike.
//
// It is an independent verifier, so it shares no code with src/: it writes one JSON message per
// line, parses each line it gets, matches responses to requests by id, and keeps everything else
// (notifications, `id: null` errors, lines that are not JSON) for the caller to inspect. `call()`
// never throws on a JSON-RPC error: it resolves with the whole response, so tests can assert on
// `error.code` and `error.data.type`; `request()` is the throwing form for setup and load.
//
// Plain ESM with its types in wire-client.d.mts beside it, because the bench runs under plain
// node without a TypeScript loader.

import { EventEmitter } from 'node:events';
import net from 'node:net';
import { StringDecoder } from 'node:string_decoder';

const DEFAULT_TIMEOUT_MS = 15_000;

/**
 * Every error response a keeping client in this process has seen, so a test file can finish
 * with "never an error with code 0, never a stack" over everything it provoked.
 */
export const seenErrors = [];

/** A JSON-RPC error answer, thrown by `request()`. */
export class WireCallError extends Error {
  constructor(method, error) {
    super(`${method}: ${error.message} (${error.code}${error.data?.type ? ' ' + error.data.type : ''})`);
    this.name = 'WireCallError';
    this.method = method;
    this.code = error.code;
    this.data = error.data;
  }
}

function requestLine(id, method, params) {
  return (
    (params === undefined ? JSON.stringify({ jsonrpc: '2.0', id, method }) : JSON.stringify({ jsonrpc: '2.0', id, method, params })) + '\n'
  );
}

export class WireClient extends EventEmitter {
  /** Notifications received, in arrival order (kept only with `keep`). */
  notifications = [];
  /** Responses that matched no pending request (e.g. `id: null` errors), in arrival order (kept only with `keep`). */
  orphans = [];
  /** Lines that were not valid JSON (should never happen; kept only with `keep`). */
  garbage = [];
  /** Bytes handed to the parser so far (not what the kernel buffered while paused). */
  bytesReceived = 0;
  isClosed = false;
  /** The `session.hello` result, after `open()`. */
  helloResult = undefined;

  #buffer = '';
  #decoder = new StringDecoder('utf8');
  #nextId = 1;
  #pending = new Map();
  #batches = [];
  #keep;
  #clientName;

  /** Use `WireClient.connect()` or `WireClient.open()`. */
  constructor(socket, { keep = true, clientName = 'yello-tests' } = {}) {
    super();
    this.socket = socket;
    this.#keep = keep;
    this.#clientName = clientName;
    socket.on('data', (chunk) => this.#onData(chunk));
    this.closed = new Promise((resolve) => {
      socket.on('close', () => {
        this.isClosed = true;
        const err = new Error('connection closed');
        for (const p of this.#pending.values()) {
          clearTimeout(p.timer);
          p.reject(err);
        }
        this.#pending.clear();
        for (const b of this.#batches.splice(0)) {
          clearTimeout(b.timer);
          b.reject(err);
        }
        this.emit('close');
        resolve();
      });
    });
    // Errors surface as a closed connection and rejected pending calls.
    socket.on('error', () => undefined);
  }

  /** Connects to the daemon's Unix socket. Rejects if the socket does not accept in time. */
  static connect(socketPath, options = {}) {
    const { timeoutMs = 5_000, paused = false } = options;
    return new Promise((resolve, reject) => {
      const socket = net.connect(socketPath);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`connect to ${socketPath} timed out`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeListener('error', reject);
        // Paused before the data listener is attached, the socket stays paused until resume().
        if (paused) socket.pause();
        resolve(new WireClient(socket, options));
      });
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  }

  /** Connects and says hello with `token`; rejects (and closes) if the hello is refused. */
  static async open(socketPath, token, options = {}) {
    const c = await WireClient.connect(socketPath, options);
    const r = await c.hello(token);
    if (r.error || r.result === undefined) {
      c.close();
      throw new WireCallError('session.hello', r.error ?? { code: 0, message: 'no result' });
    }
    c.helloResult = r.result;
    return c;
  }

  /** A fresh numeric request id. */
  newId() {
    return this.#nextId++;
  }

  /** Sends a request and resolves with the full response ({result} or {error}). */
  call(method, params, timeoutMs = DEFAULT_TIMEOUT_MS) {
    const id = this.#nextId++;
    return this.#send(id, requestLine(id, method, params), timeoutMs, method, false);
  }

  /** Sends a request and resolves with its result; rejects with a WireCallError on an error answer. */
  request(method, params, timeoutMs = DEFAULT_TIMEOUT_MS) {
    const id = this.#nextId++;
    return this.#send(id, requestLine(id, method, params), timeoutMs, method, true);
  }

  /**
   * Writes `line` (already serialized, newline included by the caller) and resolves with the
   * response carrying `id`. For oversize and hand-escaped requests.
   */
  callRaw(id, line, timeoutMs = DEFAULT_TIMEOUT_MS, method = '(raw)') {
    return this.#send(id, line, timeoutMs, method, false);
  }

  /** `unwrap`: settle with the result or a WireCallError instead of the whole response. */
  #send(id, line, timeoutMs, method, unwrap) {
    return new Promise((resolve, reject) => {
      if (this.isClosed) {
        reject(new Error('connection closed'));
        return;
      }
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`no response to ${method} (id ${String(id)}) within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer, method, unwrap });
      this.socket.write(line);
    });
  }

  /** Sends a notification (no id); nothing comes back. */
  notify(method, params) {
    this.socket.write(JSON.stringify(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params }) + '\n');
  }

  /** Writes raw bytes as they are (for garbage, partial and oversize lines). */
  sendRaw(data) {
    this.socket.write(data);
  }

  /** Sends a batch array and resolves with the array the daemon answers. */
  batch(requests, timeoutMs = DEFAULT_TIMEOUT_MS) {
    const msgs = requests.map((r) =>
      r.params === undefined
        ? { jsonrpc: '2.0', id: this.newId(), method: r.method }
        : { jsonrpc: '2.0', id: this.newId(), method: r.method, params: r.params },
    );
    return this.batchRaw(msgs, timeoutMs);
  }

  /** Sends an arbitrary array of messages; resolves with the array response containing their ids. */
  batchRaw(messages, timeoutMs = DEFAULT_TIMEOUT_MS) {
    const ids = new Set();
    for (const m of messages) {
      const id = m?.id;
      if (typeof id === 'string' || typeof id === 'number') ids.add(id);
    }
    return new Promise((resolve, reject) => {
      const entry = {
        ids,
        resolve,
        reject,
        timer: setTimeout(() => {
          const i = this.#batches.indexOf(entry);
          if (i >= 0) this.#batches.splice(i, 1);
          reject(new Error(`no batch response within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.#batches.push(entry);
      this.socket.write(JSON.stringify(messages) + '\n');
    });
  }

  /** Resolves with the next orphan response (no matching pending id, e.g. `id: null`). */
  nextOrphan(timeoutMs = DEFAULT_TIMEOUT_MS) {
    const existing = this.orphans.shift();
    if (existing) return Promise.resolve(existing);
    return new Promise((resolve, reject) => {
      const onOrphan = () => {
        clearTimeout(timer);
        const r = this.orphans.shift();
        if (r) resolve(r);
      };
      const timer = setTimeout(() => {
        this.removeListener('orphan', onOrphan);
        reject(new Error(`no id-less response within ${timeoutMs} ms`));
      }, timeoutMs);
      this.once('orphan', onOrphan);
    });
  }

  /** `session.hello` with a token (resolves with the full response). */
  hello(token) {
    return this.call('session.hello', { token, client: { name: this.#clientName } });
  }

  close() {
    this.socket.end();
    this.socket.destroy();
  }

  #onData(chunk) {
    this.bytesReceived += chunk.length;
    this.#buffer += this.#decoder.write(chunk);
    let nl;
    let start = 0;
    while ((nl = this.#buffer.indexOf('\n', start)) >= 0) {
      const line = this.#buffer.slice(start, nl);
      start = nl + 1;
      // Blank lines carry nothing; trim only what might be one (it copies the line).
      if (line.length === 0 || (line.charCodeAt(0) <= 32 && line.trim() === '')) continue;
      this.#onLine(line);
    }
    if (start > 0) this.#buffer = this.#buffer.slice(start);
  }

  #onLine(line) {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      if (this.#keep) this.garbage.push(line);
      this.emit('garbage', line);
      return;
    }
    this.emit('message', msg);
    if (Array.isArray(msg)) {
      for (const r of msg) this.#recordError(r, '(batch)');
      const batch = this.#batches.find((b) => msg.some((r) => r && r.id != null && b.ids.has(r.id))) ?? this.#batches[0];
      if (batch) {
        this.#batches.splice(this.#batches.indexOf(batch), 1);
        clearTimeout(batch.timer);
        batch.resolve(msg);
      } else {
        for (const r of msg) this.#orphan(r);
      }
      return;
    }
    if (msg && typeof msg === 'object' && typeof msg.method === 'string' && !('id' in msg)) {
      if (this.#keep) this.notifications.push(msg);
      this.emit('notification', msg);
      return;
    }
    const id = msg?.id;
    const p = id != null ? this.#pending.get(id) : undefined;
    if (p) {
      this.#pending.delete(id);
      clearTimeout(p.timer);
      this.#recordError(msg, p.method);
      // Synchronously, before the caller's promise settles: a listener can still pause the
      // socket before anything after this response is read.
      this.emit('response', msg);
      if (!p.unwrap) p.resolve(msg);
      else if (msg.error) p.reject(new WireCallError(p.method, msg.error));
      else p.resolve(msg.result);
      return;
    }
    this.#recordError(msg, '(orphan)');
    this.#orphan(msg);
  }

  #orphan(resp) {
    if (this.#keep) this.orphans.push(resp);
    this.emit('orphan', resp);
  }

  #recordError(resp, method) {
    if (this.#keep && resp && typeof resp === 'object' && resp.error) seenErrors.push({ method, error: resp.error });
  }
}
