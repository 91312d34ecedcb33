import type { Socket } from 'node:net';
import type { JSONRPCRequest, JSONRPCResponse } from 'json-rpc-2.0';
import type { Logger } from 'pino';
import { errors, JSONRPC_INVALID_REQUEST, JSONRPC_PARSE_ERROR, type YelloError } from '../shared/errors.js';
import { MAX_APPEND_REQUEST_BYTES } from '../shared/paths.js';
import type { Caller } from './caller.js';
import type { CallContext, ConnectionHandle, RpcServer } from './rpc-server.js';

const NEWLINE = 0x0a;
const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Requests in flight on one connection before we stop reading from it. */
const MAX_IN_FLIGHT = 16;
/** Bytes queued for the socket above which notifications wait for `drain`. */
export const WRITE_HIGH_WATER = 1_048_576;

let nextConnectionId = 1;

/**
 * One client connection: newline-delimited JSON-RPC framing, the line and append size caps,
 * request shape checks the library does not do safely, and write backpressure.
 */
export class Connection implements ConnectionHandle {
  readonly id = nextConnectionId++;
  readonly #socket: Socket;
  readonly #rpc: RpcServer;
  readonly #log: Logger;
  readonly #maxLineBytes: number;
  readonly #ctx: CallContext;
  #input: Buffer[] = [];
  #inputOffset = 0;
  #chunks: Buffer[] = [];
  #chunkBytes = 0;
  #discarding = false;
  #inFlight = 0;
  #closed = false;
  #closeListeners: Array<() => void> = [];
  #drainListeners: Array<() => void> = [];

  constructor(socket: Socket, rpc: RpcServer, log: Logger, maxLineBytes: number) {
    this.#socket = socket;
    this.#rpc = rpc;
    this.#log = log;
    this.#maxLineBytes = maxLineBytes;
    this.#ctx = { caller: null, connection: this };
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('drain', () => this.#onDrain());
    socket.on('error', (err) => this.#log.debug({ conn: this.id, err: err.message }, 'connection error'));
    socket.on('close', () => this.#onClose());
  }

  get caller(): Caller | null {
    return this.#ctx.caller;
  }

  setCaller(caller: Caller): void {
    this.#ctx.caller = caller;
  }

  onClose(listener: () => void): void {
    if (this.#closed) listener();
    else this.#closeListeners.push(listener);
  }

  /** Called once the socket buffer has drained below the high-water mark. */
  onDrain(listener: () => void): void {
    this.#drainListeners.push(listener);
  }

  /** True when more output should wait: the peer is not reading fast enough. */
  get congested(): boolean {
    return this.#socket.writableLength >= WRITE_HIGH_WATER;
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
    this.#socket.write(line + '\n');
  }

  /**
   * Input is queued and parsed only while the connection may take more work: at most
   * MAX_IN_FLIGHT requests running and the output buffer under its high-water mark. Otherwise
   * the socket is paused and the rest waits here, so a client that does not read its answers
   * cannot make the daemon do (and buffer) unbounded work for it.
   */
  #onData(chunk: Buffer): void {
    this.#input.push(chunk);
    this.#pumpInput();
  }

  #blocked(): boolean {
    return this.#inFlight >= MAX_IN_FLIGHT || this.congested;
  }

  #pumpInput(): void {
    while (this.#input.length > 0 && !this.#closed) {
      if (this.#blocked()) {
        this.#socket.pause();
        return;
      }
      const chunk = this.#input[0]!;
      const nl = chunk.indexOf(NEWLINE, this.#inputOffset);
      const end = nl === -1 ? chunk.length : nl;
      if (!this.#discarding) {
        const piece = chunk.subarray(this.#inputOffset, end);
        this.#chunkBytes += piece.length;
        if (this.#chunkBytes > this.#maxLineBytes) {
          // Answer at once, then drop the rest of this line: the connection stays usable.
          this.#discarding = true;
          this.#chunks = [];
          this.#sendError(null, errors.tooLarge(this.#maxLineBytes, this.#chunkBytes));
        } else if (piece.length > 0) {
          this.#chunks.push(piece);
        }
      }
      if (nl === -1) {
        this.#input.shift();
        this.#inputOffset = 0;
        continue;
      }
      this.#inputOffset = nl + 1;
      if (this.#inputOffset >= chunk.length) {
        this.#input.shift();
        this.#inputOffset = 0;
      }
      if (!this.#discarding && this.#chunkBytes > 0) {
        const line = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#chunkBytes);
        this.#handleLineSafely(line);
      }
      this.#chunks = [];
      this.#chunkBytes = 0;
      this.#discarding = false;
    }
    if (!this.#closed) this.#socket.resume();
  }

  /** Nothing a line contains may escape as an exception: answer INTERNAL and carry on. */
  #handleLineSafely(line: Buffer): void {
    try {
      this.#handleLine(line);
    } catch (err) {
      this.#log.error({ conn: this.id, err: (err as Error)?.message }, 'line handling failed');
      this.#sendRaw({ jsonrpc: '2.0', id: null, error: { code: JSONRPC_INVALID_REQUEST, message: 'Invalid Request' } });
    }
  }

  #handleLine(line: Buffer): void {
    let text: string;
    let message: unknown;
    try {
      text = utf8.decode(line);
      message = JSON.parse(text);
    } catch {
      this.#sendRaw({ jsonrpc: '2.0', id: null, error: { code: JSONRPC_PARSE_ERROR, message: 'Parse error: not UTF-8 JSON' } });
      return;
    }
    if (Array.isArray(message)) {
      if (message.length === 0) {
        this.#sendRaw(invalidRequest(null));
        return;
      }
      this.#track(
        Promise.all(message.map((m) => this.#handleMessage(m, batchElementSize(m)))).then((responses) => {
          const out = responses.filter((r): r is JSONRPCResponse => r !== null);
          if (out.length > 0) this.#sendRaw(out);
        }),
      );
      return;
    }
    this.#track(this.#handleMessage(message, line.length).then((r) => r && this.#sendRaw(r)));
  }

  #track(work: Promise<unknown>): void {
    this.#inFlight++;
    work
      .catch((err: unknown) => this.#log.error({ conn: this.id, err: (err as Error)?.message }, 'request handling failed'))
      .finally(() => {
        this.#inFlight--;
        if (!this.#closed) this.#pumpInput();
      });
  }

  async #handleMessage(message: unknown, size: number): Promise<JSONRPCResponse | null> {
    if (!isRequestShape(message)) {
      const id = isObject(message) && isId(message.id) ? message.id : null;
      return invalidRequest(id);
    }
    // The append cap is on the raw request bytes and comes before every other check (§3, §6).
    if (message.method === 'streams.append' && size > MAX_APPEND_REQUEST_BYTES) {
      if (message.id === undefined) return null;
      const e = errors.tooLarge(MAX_APPEND_REQUEST_BYTES, size);
      return { jsonrpc: '2.0', id: message.id, error: { code: e.code, message: e.message, data: e.toData() } };
    }
    return this.#rpc.receive(message, this.#ctx);
  }

  #sendError(id: null, e: YelloError): void {
    this.#sendRaw({ jsonrpc: '2.0', id, error: { code: e.code, message: e.message, data: e.toData() } });
  }

  #sendRaw(value: unknown): void {
    this.#write(JSON.stringify(value));
  }

  #onDrain(): void {
    this.#pumpInput();
    const listeners = this.#drainListeners.splice(0);
    for (const l of listeners) l();
  }

  #onClose(): void {
    if (this.#closed) return;
    this.#closed = true;
    // Work not started for a client that left is dropped, not done.
    this.#input = [];
    for (const l of this.#closeListeners.splice(0)) l();
    this.#drainListeners = [];
  }
}

/**
 * The serialized size of one batch element, for the append cap. Only appends need it, and a
 * value too deep to serialize is answered as an invalid request rather than crashing.
 */
function batchElementSize(m: unknown): number {
  if (!isObject(m) || m.method !== 'streams.append') return 0;
  try {
    return Buffer.byteLength(JSON.stringify(m), 'utf8');
  } catch {
    return Number.MAX_SAFE_INTEGER;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isId(v: unknown): v is string | number | null {
  return typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)) || v === null;
}

function isRequestShape(v: unknown): v is JSONRPCRequest {
  if (!isObject(v)) return false;
  if (v.jsonrpc !== '2.0' || typeof v.method !== 'string') return false;
  if ('id' in v && !isId(v.id)) return false;
  if ('params' in v && v.params !== undefined && typeof v.params !== 'object') return false;
  if ('result' in v || 'error' in v) return false;
  return true;
}

function invalidRequest(id: string | number | null): JSONRPCResponse {
  return { jsonrpc: '2.0', id, error: { code: JSONRPC_INVALID_REQUEST, message: 'Invalid Request: not a JSON-RPC 2.0 request object' } };
}
