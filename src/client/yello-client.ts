import { homedir } from 'node:os';
import { METHOD_NAMES } from '../shared/method-names.js';
import type { MethodName, ParamsIn, Result } from '../shared/method-types.js';
import { resolveSocketPath } from '../shared/paths.js';
import type { HelloResult, NotificationParams } from '../shared/results.js';
import type { Jwks } from '../shared/types.js';
import { Backoff } from '../shared/backoff.js';
import { ConnectionLostError, YelloClientError } from './errors.js';
import { LineTransport } from './transport.js';
import { Listeners, type Listener } from './listeners.js';
import { DEFAULT_CALL_TIMEOUT_MS, timeoutFor } from './call-timeout.js';
import { WaitQueue } from './wait-queue.js';

export { DEFAULT_CALL_TIMEOUT_MS };

/**
 * Default of {@link ConnectOptions.maxInboundLineBytes}: 256 MiB. Legitimate answers get big:
 * a `chats.history` page or a catch-up `chats.batch` holds up to 500 records, and with
 * messages near the 256 KiB append cap that is about 126 MiB on one line. The cap is there so
 * that a broken or hostile peer cannot make the client buffer (and then fail to decode) an
 * endless line; it is not a budget for ordinary pages.
 */
export const DEFAULT_MAX_INBOUND_LINE_BYTES = 256 * 1024 * 1024;

/**
 * Options of {@link YelloClient.connect}.
 *
 * Limits, all enforced by the client itself (docs/security.md, "Client limits"):
 * - every call times out after `callTimeoutMs` (default 30 s; a `waitMs` long poll gets its
 *   `waitMs` on top) with `TimeoutError`, which names the method, the request id and, for
 *   `streams.append`, the `streamId` and `operationId` to look up with `operations.get`;
 * - a request over the `limits` that `session.hello` announced (`maxLineBytes`, and
 *   `maxAppendRequestBytes` for `streams.append`) is refused with `RequestTooLargeError`
 *   (`sent: false`) before a byte is written, so its outcome is known: nothing happened;
 * - an inbound line over `maxInboundLineBytes` closes the connection; pending calls reject
 *   with `LineTooLargeError` (a `ConnectionLostError`, outcome unknown).
 *
 * Socket trust (docs/security.md, "Socket directory trust"): before any token is sent, on
 * every connect and reconnect, the socket must be a socket (not a symlink) in a directory
 * that is a real directory no group or other user can write, owned by the caller or root, or
 * else sitting in such a directory itself (as systemd's `/run/yello`). Otherwise the connect
 * fails with `UntrustedSocketError` and nothing is sent.
 */
export interface ConnectOptions {
  /** Default: `$YELLO_SOCKET`, `$XDG_RUNTIME_DIR/yello/yello.sock`, `/tmp/yello-$UID/yello.sock`. */
  socketPath?: string;
  /** Agent or admin token. */
  token: string;
  /**
   * Per-call timeout in ms, default {@link DEFAULT_CALL_TIMEOUT_MS} (30 s); `0` or `Infinity`
   * for none. A call with `waitMs` (a `streams.read` long poll) waits that much longer.
   * Override per call with `call(method, params, {timeoutMs})`. A timed-out call has an
   * unknown outcome and is never resent.
   */
  callTimeoutMs?: number;
  /** Cap on one line from the daemon, in bytes; default {@link DEFAULT_MAX_INBOUND_LINE_BYTES} (256 MiB). */
  maxInboundLineBytes?: number;
  /**
   * Check that the socket and its directory are trustworthy before sending the token.
   * Default true. Turn it off only for a setup the rule cannot express (a daemon of another
   * user in a world-writable directory, say) and only when no other user can reach that path.
   */
  verifySocket?: boolean;
  /** Reconnect with backoff after a loss (never resending anything). Default false. */
  reconnect?: boolean | { minDelayMs?: number; maxDelayMs?: number; maxAttempts?: number };
  /** Sent in `session.hello` as `client`. */
  clientName?: string;
}

/** Options of one call. */
export interface CallOptions {
  /** This call's timeout in ms, instead of the client's `callTimeoutMs`; `0` or `Infinity` for none. */
  timeoutMs?: number;
}

/** Events of a client. */
export interface ClientEvents {
  'chats.batch': NotificationParams['chats.batch'];
  'chats.break': NotificationParams['chats.break'];
  /** A subscription ended for a reason that is not a continuity break (corrupt data, a daemon bug). */
  'chats.error': NotificationParams['chats.error'];
  /** A `chats.watch` subscription: a new chat includes this agent. */
  'chats.opened': NotificationParams['chats.opened'];
  disconnected: Error;
  reconnecting: { attempt: number; delayMs: number };
  reconnected: HelloResult;
}

/** The iterator `notifications()` returns; `return()` stops listening. */
export type NotificationIterator = AsyncIterableIterator<ClientNotification> & {
  return(value?: unknown): Promise<IteratorResult<ClientNotification>>;
};

/** One daemon notification, as `notifications()` yields it. */
export type ClientNotification =
  | { method: 'chats.batch'; params: NotificationParams['chats.batch'] }
  | { method: 'chats.break'; params: NotificationParams['chats.break'] }
  | { method: 'chats.error'; params: NotificationParams['chats.error'] }
  | { method: 'chats.opened'; params: NotificationParams['chats.opened'] };

type Namespace<M extends string> = M extends `${infer NS}.${string}` ? NS : never;
/** Typed method groups: `client.rpc.streams.append({...})`. */
export type RpcMethods = {
  [NS in Namespace<MethodName>]: {
    [M in MethodName as M extends `${NS}.${infer F}` ? F : never]: (params: ParamsIn<M>, options?: CallOptions) => Promise<Result<M>>;
  };
};

/** Default socket path for clients (§2, without socket activation). */
export function defaultSocketPath(): string {
  return resolveSocketPath(undefined, { env: process.env, uid: process.getuid?.() ?? 0, home: homedir(), pid: process.pid });
}

/**
 * A typed yello client over the Unix socket. Every method of the protocol is available as
 * `call(method, params)` and as `rpc.<namespace>.<name>(params)`; errors are classes keyed by
 * `data.type`. On connection loss, pending calls reject with `ConnectionLostError`; with
 * `reconnect` the client dials again with backoff and says hello again, but never resends.
 */
export class YelloClient {
  readonly #options: ConnectOptions & { socketPath: string };
  #transport: LineTransport;
  #hello: HelloResult;
  #closed = false;
  #reconnecting = false;
  readonly #listeners = new Listeners<ClientEvents>();
  #onClosed = new Set<() => void>();
  /** Typed methods grouped by namespace. */
  readonly rpc: RpcMethods;

  private constructor(options: ConnectOptions & { socketPath: string }, transport: LineTransport, hello: HelloResult) {
    this.#options = options;
    this.#transport = transport;
    this.#hello = hello;
    this.#wire(transport);
    const rpc: Record<string, Record<string, (p: unknown, o?: CallOptions) => Promise<unknown>>> = {};
    for (const name of METHOD_NAMES) {
      const [ns, fn] = name.split('.') as [string, string];
      (rpc[ns] ??= {})[fn] = (params: unknown, options?: CallOptions) => this.call(name, params as never, options);
    }
    this.rpc = rpc as unknown as RpcMethods;
  }

  /** Connect and say hello. */
  static async connect(options: ConnectOptions): Promise<YelloClient> {
    const full = { ...options, socketPath: options.socketPath ?? defaultSocketPath() };
    const { transport, hello } = await YelloClient.#open(full);
    return new YelloClient(full, transport, hello);
  }

  static async #open(options: ConnectOptions & { socketPath: string }): Promise<{ transport: LineTransport; hello: HelloResult }> {
    const transport = await LineTransport.connect(options.socketPath, {
      maxInboundLineBytes: options.maxInboundLineBytes ?? DEFAULT_MAX_INBOUND_LINE_BYTES,
      verifySocket: options.verifySocket ?? true,
    });
    try {
      const params = { token: options.token, client: options.clientName ?? 'yello-client' };
      const hello = (await transport.call('session.hello', params, timeoutFor(options.callTimeoutMs, undefined, params))) as HelloResult;
      // From now on, a request over the daemon's own caps is refused before it is written.
      transport.limits = hello.limits;
      return { transport, hello };
    } catch (err) {
      transport.close();
      throw err;
    }
  }

  /** What `session.hello` answered (role, agentId, limits, signing kid). */
  get session(): HelloResult {
    return this.#hello;
  }

  get connected(): boolean {
    return !this.#transport.closed;
  }

  /**
   * Whether the client is dialling again after a loss (option `reconnect`): true from the
   * `disconnected` event of the loss until `reconnected`, or until it gives up (then a second
   * `disconnected` says why). A reader that sees `disconnected` with this false is on its own.
   */
  get reconnecting(): boolean {
    return this.#reconnecting;
  }

  /**
   * Call any method with typed params and result. Rejects with `TimeoutError` after the
   * client's `callTimeoutMs` (or `options.timeoutMs`), plus `waitMs` for a long poll.
   */
  call<M extends MethodName>(method: M, params: ParamsIn<M>, options?: CallOptions): Promise<Result<M>> {
    return this.#transport.call(method, params, timeoutFor(this.#options.callTimeoutMs, options?.timeoutMs, params)) as Promise<Result<M>>;
  }

  /**
   * A separate new connection with this client's options, e.g. to release a claim after this
   * one was closed, or for more subscriptions than one connection holds (an Inbox). It does not
   * reconnect, unless `reconnect: true`: then it reconnects as this client does (its own
   * `reconnect` option). The caller closes it.
   */
  dialAgain(options: { reconnect?: boolean } = {}): Promise<YelloClient> {
    return YelloClient.connect({ ...this.#options, reconnect: options.reconnect ? (this.#options.reconnect ?? false) : false });
  }

  /** The daemon's JWKS, for {@link verifyRecord}. */
  fetchJwks(): Promise<Jwks> {
    return this.call('keys.list', {});
  }

  /** Listen to an event; returns a function that removes the listener. */
  on<E extends keyof ClientEvents>(event: E, listener: Listener<ClientEvents[E]>): () => void {
    return this.#listeners.on(event, listener);
  }

  /**
   * Notifications as an async iterator (`for await (const n of client.notifications())`).
   * Listening starts when this is called, not at the first `next()`: create it before
   * `chats.follow` so a batch that arrives together with the follow's answer is not missed.
   * Ends when the client closes or the connection drops.
   */
  notifications(): NotificationIterator {
    const queue = new WaitQueue<ClientNotification>();
    if (this.#closed) queue.end();
    const end = () => {
      queue.end();
    };
    const offs = [
      this.on('chats.batch', (params) => {
        queue.push({ method: 'chats.batch', params });
      }),
      this.on('chats.break', (params) => {
        queue.push({ method: 'chats.break', params });
      }),
      this.on('chats.error', (params) => {
        queue.push({ method: 'chats.error', params });
      }),
      this.on('chats.opened', (params) => {
        queue.push({ method: 'chats.opened', params });
      }),
      this.on('disconnected', end),
    ];
    this.#onClosed.add(end);
    offs.push(() => this.#onClosed.delete(end));
    const finish = (): IteratorResult<ClientNotification> => {
      for (const off of offs.splice(0)) off();
      return { done: true, value: undefined };
    };
    const iterator: NotificationIterator = {
      next: async () => {
        const value = await queue.next();
        return value ? { done: false, value } : finish();
      },
      return: () => Promise.resolve(finish()),
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }

  #wire(transport: LineTransport): void {
    transport.onNotification = (method, params) => {
      if (method === 'chats.batch' || method === 'chats.break' || method === 'chats.error' || method === 'chats.opened') {
        this.#listeners.emit(method, params as never);
      }
    };
    transport.onClose((err) => {
      if (this.#closed) return;
      this.#reconnecting = Boolean(this.#options.reconnect);
      this.#listeners.emit('disconnected', err);
      if (this.#options.reconnect) void this.#reconnect();
    });
  }

  async #reconnect(): Promise<void> {
    const cfg = typeof this.#options.reconnect === 'object' ? this.#options.reconnect : {};
    const backoff = new Backoff({
      minDelayMs: cfg.minDelayMs ?? 100,
      maxDelayMs: cfg.maxDelayMs ?? 5000,
      maxAttempts: cfg.maxAttempts,
      jitter: true,
    });
    for (let step = backoff.next(); step && !this.#closed; step = backoff.next()) {
      this.#listeners.emit('reconnecting', step);
      await new Promise((r) => setTimeout(r, step.delayMs));
      if (this.#isClosed()) return;
      try {
        const { transport, hello } = await YelloClient.#open(this.#options);
        // Closed while that dial was in flight (hung in hello, say): it must not come back to life.
        if (this.#isClosed()) {
          transport.close();
          return;
        }
        this.#transport = transport;
        this.#hello = hello;
        this.#reconnecting = false;
        this.#wire(transport);
        this.#listeners.emit('reconnected', hello);
        return;
      } catch (err) {
        // A daemon that is still stopping or starting (SHUTTING_DOWN, a hello timeout, a
        // rate limit) is dialled again; anything else (a revoked token, an untrusted socket) ends it.
        if (!(err instanceof ConnectionLostError) && !(err instanceof YelloClientError && err.transient)) {
          this.#reconnecting = false;
          this.#listeners.emit('disconnected', err as Error);
          return;
        }
      }
    }
    this.#reconnecting = false;
    if (!this.#closed) this.#listeners.emit('disconnected', new ConnectionLostError('gave up reconnecting to yellod', false));
  }

  /**
   * Whether `close()` was called. A method rather than the field for checks after an `await`:
   * `close()` may have run meanwhile, which the field's narrowing would rule out.
   */
  #isClosed(): boolean {
    return this.#closed;
  }

  /** Close the connection; pending calls reject with `ConnectionLostError`. */
  close(): void {
    this.#closed = true;
    this.#reconnecting = false;
    this.#transport.close();
    for (const f of [...this.#onClosed]) f();
  }
}
