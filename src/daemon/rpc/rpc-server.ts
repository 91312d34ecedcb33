import { randomUUID } from 'node:crypto';
import { JSONRPCServer, type JSONRPCRequest, type JSONRPCResponse } from 'json-rpc-2.0';
import type { Logger } from 'pino';
import { errors, YelloError } from '../../shared/errors.js';
import type { MethodDescriptor } from '../../shared/method-descriptor.js';
import { methods, type MethodName, type Params, type Result } from '../../shared/methods.js';
import { errorCode, errorMessage, errorStack } from '../runtime/error-fields.js';
import { describeIssue } from '../../shared/schemas.js';
import type { PeerInfo } from './audit.js';
import type { Caller } from '../caller.js';

/** What a handler learns about the connection it serves. */
export interface CallContext {
  /** Fixed by a successful `session.hello`. */
  caller: Caller | null;
  /** Connection-scoped state the session and subscription handlers use. */
  readonly connection: ConnectionHandle;
  /**
   * The byte budget for a page this request is about to read (`chats.history`, `streams.read`):
   * what the connection's output window has left, at most PAGE_BYTES, at least 1 (one record).
   * Absent outside a real connection: PAGE_BYTES.
   */
  pageBytes?(): number;
  /**
   * The bytes of this request as it came over the wire: its line, or its element of a batch
   * serialized (what the append cap measures, §3). Absent outside a real connection.
   */
  readonly requestBytes?: number;
}

/** The connection operations handlers may use. */
export interface ConnectionHandle {
  readonly id: number;
  /** Who is on the other end, as far as the daemon can tell (for the audit log). */
  readonly peer?: PeerInfo;
  setCaller(caller: Caller): void;
  notify(method: string, params: unknown): void;
  onClose(listener: () => void): void;
  /** Once the client can send nothing more: its side ended, or the connection closed. */
  onHangUp(listener: () => void): void;
  /** True while the client is not reading fast enough; deliveries wait for `onDrain`. */
  readonly congested: boolean;
  onDrain(listener: () => void): void;
}

/**
 * A validated handler: typed params, authenticated caller (null only for public methods). It
 * returns the method's result type, so an answer that differs from what the client's types
 * promise does not compile.
 */
export type Handler<M extends MethodName> = (params: Params<M>, caller: Caller, ctx: CallContext) => Result<M> | Promise<Result<M>>;
/**
 * Writes whose commit checks the caller's session in its transaction where the store is shared
 * (store/port/stream-port.ts `ChangeAdmission`), with which of their answers came from such a
 * commit: a new append (not a replay), a claim (every claim commits its fence).
 */
const CONFIRMED_BY_COMMIT: Partial<Record<string, (result: unknown) => boolean>> = {
  'streams.append': (result) => (result as { duplicate?: unknown }).duplicate === false,
  'streams.claim': () => true,
};

/** Read again what a refusal names, where a shared store may have it unheard; true when the call should be decided again. */
export type ConfirmRefusal = (error: YelloError) => Promise<boolean>;

/** Handlers for every method. */
export type Handlers = { [M in MethodName]: Handler<M> };

/**
 * JSON-RPC dispatch over `json-rpc-2.0`, with the library's defaults replaced where they would
 * leak: its error listener (console) and its error mapper (any thrown message, code 0). Every
 * method goes through one gate: session, role, params schema, then the handler.
 */
export class RpcServer {
  readonly #server = new JSONRPCServer<CallContext>({ errorListener: () => {} });
  readonly #log: Logger;
  readonly #sessionValid: (caller: Caller) => boolean | (() => Promise<boolean>);
  readonly #confirmRefusal: ConfirmRefusal | undefined;
  readonly #onError: ((error: YelloError) => void) | undefined;

  /**
   * `sessionValid` says whether a session's token still holds (or gives a function that asks a
   * shared store, called when the answer needs it); `confirmRefusal` reads again what a
   * NOT_FOUND names, where another daemon may have made it unheard (true: the handler runs once
   * more); `onError` sees every error a method answers with, once it is mapped (metrics).
   */
  constructor(
    handlers: Handlers,
    log: Logger,
    sessionValid: (caller: Caller) => boolean | (() => Promise<boolean>),
    onError?: (error: YelloError) => void,
    confirmRefusal?: ConfirmRefusal,
  ) {
    this.#log = log;
    this.#sessionValid = sessionValid;
    this.#confirmRefusal = confirmRefusal;
    this.#onError = onError;
    this.#server.mapErrorToJSONRPCErrorResponse = (id, error) => this.#mapError(id, error);
    for (const method of Object.values(methods) as MethodDescriptor[]) {
      const handler = handlers[method.name as MethodName] as (params: unknown, caller: Caller, ctx: CallContext) => unknown;
      this.#server.addMethod(method.name, (params, ctx) => this.#invoke(method, handler, params, ctx));
    }
  }

  /** Dispatch one request object (already shape-checked by the connection). */
  receive(request: JSONRPCRequest, ctx: CallContext): PromiseLike<JSONRPCResponse | null> {
    return this.#server.receive(request, ctx);
  }

  #invoke(
    method: MethodDescriptor,
    handler: (params: unknown, caller: Caller, ctx: CallContext) => unknown,
    rawParams: unknown,
    ctx: CallContext,
  ): unknown {
    const { access } = method;
    const caller = ctx.caller;
    if (access === 'public') return this.#run(method, handler, rawParams, ctx);
    if (!caller) throw errors.unauthenticated();
    const valid = this.#sessionValid(caller);
    if (typeof valid === 'boolean') return this.#authorized(valid, method, handler, rawParams, ctx);
    const committed = CONFIRMED_BY_COMMIT[method.name];
    // A session confirmed by a shared store: the call runs only once the store said it holds…
    if (!committed) return valid().then((v) => this.#authorized(v, method, handler, rawParams, ctx));
    // …except a write whose commit checks the session in its own transaction: it runs at once,
    // and an answer its commit made stands on that commit's check (no round trip before an
    // append, and none beside it: asking beside every append cost 0.85x the appends/s at 64
    // clients on PostgreSQL, bench/README.md). Any other answer of it waits for the check, asked
    // then: a revoked session's replay or refusal is UNAUTHENTICATED. An unknown outcome is
    // answered as it is.
    const confirmed = (answer: () => unknown) =>
      valid().then((v) => {
        if (!v) throw errors.unauthenticated('the token of this session was rotated or its agent disabled; call session.hello again');
        return answer();
      });
    return new Promise((resolve) => {
      resolve(this.#authorized(true, method, handler, rawParams, ctx));
    }).then(
      (result) => (committed(result) ? result : confirmed(() => result)),
      (err: unknown) => {
        if (err instanceof YelloError && err.type === 'STORAGE_FAILURE' && err.details.outcome === 'unknown') throw err;
        return confirmed(() => {
          throw err;
        });
      },
    );
  }

  #authorized(
    valid: boolean,
    method: MethodDescriptor,
    handler: (params: unknown, caller: Caller, ctx: CallContext) => unknown,
    rawParams: unknown,
    ctx: CallContext,
  ): unknown {
    const { name, access } = method;
    const caller = ctx.caller as Caller;
    if (!valid) throw errors.unauthenticated('the token of this session was rotated or its agent disabled; call session.hello again');
    if (access === 'admin' && caller.role !== 'admin') throw errors.permissionDenied('ADMIN_ONLY', `${name} is admin-only`);
    if (access === 'agent' && caller.role !== 'agent') throw errors.permissionDenied('AGENT_ONLY', `${name} is for agents`);
    return this.#run(method, handler, rawParams, ctx);
  }

  /**
   * Parse the params and run the handler. A NOT_FOUND it answers is decided on this daemon's
   * rows, which another daemon of a shared store may have made wrong unheard (a chat, an agent
   * or a stream created through it): read again (`confirmRefusal`) and decided once more before
   * it is answered, as a FENCED is confirmed against the store's head.
   */
  #run(
    method: MethodDescriptor,
    handler: (params: unknown, caller: Caller, ctx: CallContext) => unknown,
    rawParams: unknown,
    ctx: CallContext,
  ): unknown {
    const caller = ctx.caller;
    if (Array.isArray(rawParams)) throw errors.invalidParams('', 'params must be an object (by-name)');
    const parsed = method.params.safeParse(rawParams ?? {});
    if (!parsed.success) {
      // A failed parse reports at least one issue; the fallback only keeps the type honest.
      const issue = parsed.error.issues[0];
      const { path, reason } = issue ? describeIssue(issue) : { path: '', reason: 'invalid params' };
      throw errors.invalidParams(path, reason);
    }
    const run = () => handler(parsed.data, caller as Caller, ctx);
    const confirm = this.#confirmRefusal;
    if (!confirm) return run();
    const again = async (err: unknown): Promise<unknown> => {
      if (!(err instanceof YelloError) || err.type !== 'NOT_FOUND' || !(await confirm(err))) throw err;
      return run();
    };
    try {
      const result = run();
      return result instanceof Promise ? result.catch(again) : result;
    } catch (err) {
      return again(err);
    }
  }

  #mapError(id: JSONRPCRequest['id'], error: unknown): JSONRPCResponse & { error: object } {
    if (error instanceof YelloError) {
      this.#onError?.(error);
      return { jsonrpc: '2.0', id: id ?? null, error: { code: error.code, message: error.message, data: error.toData() } };
    }
    const correlationId = randomUUID();
    this.#log.error(
      { correlationId, err: { message: errorMessage(error), code: errorCode(error), stack: errorStack(error) } },
      'internal error',
    );
    const mapped = errors.internal(correlationId);
    this.#onError?.(mapped);
    return { jsonrpc: '2.0', id: id ?? null, error: { code: mapped.code, message: mapped.message, data: mapped.toData() } };
  }
}
