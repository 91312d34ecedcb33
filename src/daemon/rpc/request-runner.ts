import type { JSONRPCResponse } from 'json-rpc-2.0';
import type { Logger } from 'pino';
import { errors, JSONRPC_INVALID_REQUEST, JSONRPC_PARSE_ERROR } from '../../shared/errors.js';
import { MAX_APPEND_REQUEST_BYTES } from '../../shared/paths.js';
import type { Audit, PeerInfo } from './audit.js';
import type { Caller } from '../caller.js';
import { BATCH_ANSWER_BYTES, MAX_BATCH_ELEMENTS, MAX_BATCH_ELEMENTS_UNAUTHENTICATED } from '../limits.js';
import type { CallContext, ConnectionHandle, RpcServer } from './rpc-server.js';
import { OutputBudget, Owed } from './output-budget.js';
import type { OutputPool, PoolMember } from './output-pool.js';
import { batchElementSize, errorResponse, invalidRequest, isId, isObject, isRequestShape, notRun } from './request-shape.js';
import { errorMessage } from '../runtime/error-fields.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Methods that read pages of records: each counts as a page against the daemon-wide budget while it runs. */
const READ_METHODS = new Set(['chats.history', 'streams.read']);

/** What a runner reads of its connection (connection.ts): who is calling, and whether it is gone. */
export interface RunnerConnection extends ConnectionHandle {
  readonly peer: PeerInfo;
  readonly caller: Caller | null;
  readonly closed: boolean;
}

export interface RequestRunnerOptions {
  rpc: RpcServer;
  log: Logger;
  audit: Audit;
  /** The daemon-wide memory budget reads wait for, and the connection's place in it. */
  pool: OutputPool | undefined;
  member: PoolMember;
  /** Output written to the socket and not yet taken by the peer: what a page is cut against. */
  unsent: () => number;
  /** Writes one answer line: the connection's write, under its cap on unsent output. */
  write: (line: string) => void;
}

/**
 * What a request line becomes, apart from the socket it came on: decode and parse, the batch
 * limits, the request shape checks the library does not do safely (request-shape.ts), the append
 * cap, the daemon-wide read pool, the page budget the line's answers share (output-budget.ts),
 * and the audit of rate refusals. The connection (connection.ts) keeps the socket side: framing,
 * how many lines run at once, writes, and the caps on what its client leaves unread.
 */
export class RequestRunner {
  readonly #connection: RunnerConnection;
  readonly #rpc: RpcServer;
  readonly #log: Logger;
  readonly #audit: Audit;
  readonly #pool: OutputPool | undefined;
  readonly #member: PoolMember;
  readonly #budget: OutputBudget;
  readonly #write: (line: string) => void;

  constructor(connection: RunnerConnection, opts: RequestRunnerOptions) {
    this.#connection = connection;
    this.#rpc = opts.rpc;
    this.#log = opts.log;
    this.#audit = opts.audit;
    this.#pool = opts.pool;
    this.#member = opts.member;
    this.#budget = new OutputBudget(opts.unsent);
    this.#write = opts.write;
  }

  /**
   * Handles one complete line: what can be answered at once is written now; otherwise the work
   * is returned for the connection to count while it runs (its MAX_IN_FLIGHT). Nothing a line
   * contains may escape as an exception: it is answered Invalid Request and the connection carries on.
   */
  line(line: Buffer): Promise<void> | undefined {
    try {
      return this.#line(line);
    } catch (err) {
      this.#log.error({ conn: this.#connection.id, err: errorMessage(err) }, 'line handling failed');
      this.#sendRaw({ jsonrpc: '2.0', id: null, error: { code: JSONRPC_INVALID_REQUEST, message: 'Invalid Request' } });
      return undefined;
    }
  }

  #line(line: Buffer): Promise<void> | undefined {
    let text: string;
    let message: unknown;
    try {
      text = utf8.decode(line);
      message = JSON.parse(text);
    } catch {
      this.#sendRaw({ jsonrpc: '2.0', id: null, error: { code: JSONRPC_PARSE_ERROR, message: 'Parse error: not UTF-8 JSON' } });
      return undefined;
    }
    if (Array.isArray(message)) {
      if (message.length === 0) {
        this.#sendRaw(invalidRequest(null));
        return undefined;
      }
      // Before a session, one line may cost only a few KiB of errors (no amplification).
      const caller = this.#connection.caller;
      const max = caller ? MAX_BATCH_ELEMENTS : MAX_BATCH_ELEMENTS_UNAUTHENTICATED;
      if (message.length > max) {
        this.#sendRaw({
          jsonrpc: '2.0',
          id: null,
          error: {
            code: JSONRPC_INVALID_REQUEST,
            message: `Invalid Request: a batch of ${message.length} requests; at most ${max}${caller ? '' : ' before session.hello'}`,
          },
        });
        return undefined;
      }
      return this.#runBatch(message);
    }
    return this.#runOne(message, line.length);
  }

  /** A call context per request line: the session is the connection's, the page budget the line's. */
  #contextFor(owed: Owed, requestBytes: number): CallContext {
    // Read at each access: `session.hello` sets the caller while the line is being handled.
    const connection = this.#connection;
    return {
      get caller() {
        return connection.caller;
      },
      connection,
      pageBytes: () => this.#budget.page(owed),
      requestBytes,
    };
  }

  async #runOne(message: unknown, size: number): Promise<void> {
    const owed = new Owed();
    const pool = isObject(message) && READ_METHODS.has(String(message.method)) ? this.#pool : undefined;
    try {
      if (pool) await pool.startRead(this.#member);
      // Work not started for a client that left is dropped, not done.
      if (this.#connection.closed) return;
      const r = await this.#handleMessage(message, size, this.#contextFor(owed, size));
      if (r) this.#sendRaw(r);
    } finally {
      this.#budget.release(owed);
      pool?.endRead(this.#member);
    }
  }

  /**
   * A batch runs its elements in order, one at a time, so its answer can be bounded: once the
   * answers so far reach BATCH_ANSWER_BYTES, the remaining elements are not run and each owed
   * answer is REQUEST_TOO_LARGE. The client sends those again, knowing none of them happened.
   */
  async #runBatch(elements: unknown[]): Promise<void> {
    const owed = new Owed();
    const answers: string[] = [];
    // A batch with reads counts as one read: its answer is held whole, at most BATCH_ANSWER_BYTES.
    const pool = elements.some((m) => isObject(m) && READ_METHODS.has(String(m.method))) ? this.#pool : undefined;
    try {
      if (pool) await pool.startRead(this.#member);
      for (const m of elements) {
        // Work not started for a client that left is dropped, not done.
        if (this.#connection.closed) return;
        const r = owed.answered >= BATCH_ANSWER_BYTES ? notRun(m, owed.answered) : await this.#handleElement(m, owed);
        const answer = r === null ? null : JSON.stringify(r);
        const bytes = answer === null ? 0 : Buffer.byteLength(answer, 'utf8');
        this.#budget.answered(owed, bytes);
        if (answer !== null) answers.push(answer);
      }
      if (answers.length > 0) this.#write(`[${answers.join(',')}]`);
    } finally {
      this.#budget.release(owed);
      pool?.endRead(this.#member);
    }
  }

  #handleElement(m: unknown, owed: Owed): Promise<JSONRPCResponse | null> {
    const size = batchElementSize(m);
    return this.#handleMessage(m, size, this.#contextFor(owed, size));
  }

  async #handleMessage(message: unknown, size: number, ctx: CallContext): Promise<JSONRPCResponse | null> {
    if (!isRequestShape(message)) {
      const id = isObject(message) && isId(message.id) ? message.id : null;
      return invalidRequest(id);
    }
    // The append cap is on the raw request bytes and comes before every other check (§3, §6).
    if (message.method === 'streams.append' && size > MAX_APPEND_REQUEST_BYTES) {
      if (message.id === undefined) return null;
      return errorResponse(message.id, errors.tooLarge(MAX_APPEND_REQUEST_BYTES, size));
    }
    const r = await this.#rpc.receive(message, ctx);
    const data = r?.error?.data as { type?: unknown; retryAfterMs?: unknown } | undefined;
    if (data?.type === 'RATE_LIMITED') {
      const caller = this.#connection.caller;
      this.#audit.burst('rate-limited', message.method, {
        ...this.#connection.peer,
        method: message.method,
        retryAfterMs: typeof data.retryAfterMs === 'number' ? data.retryAfterMs : null,
        role: caller?.role ?? null,
        agentId: caller?.role === 'agent' ? caller.agentId : null,
      });
    }
    return r;
  }

  #sendRaw(value: unknown): void {
    this.#write(JSON.stringify(value));
  }
}
