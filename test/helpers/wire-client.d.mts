// Types of wire-client.mjs (hand-written: the module is plain ESM for the bench). Results are
// typed through a map from method name to result type that the caller supplies (the tests use
// the contract's MethodResults); a method not in the map answers `unknown`.

import { EventEmitter } from 'node:events';
import type net from 'node:net';

/** `data` of a JSON-RPC error: the stable `type` (§3) and whatever the error carries. */
export interface WireErrorData {
  type?: string;
  [key: string]: unknown;
}

/** A JSON-RPC error object as it arrived on the wire. */
export interface WireError {
  code: number;
  message: string;
  data?: WireErrorData;
}

/** A JSON-RPC response as it arrived on the wire; exactly one of result/error is expected. */
export interface WireResponse<T = unknown> {
  jsonrpc?: string;
  id?: string | number | null;
  result?: T;
  error?: WireError;
}

/** A server-to-client notification (a message with `method` and no `id`). */
export interface WireNotification {
  jsonrpc?: string;
  method: string;
  params?: unknown;
}

/** The result type of `M` in the map `R`, `unknown` for a method the map does not know. */
export type ResultOf<R, M extends string> = M extends keyof R ? R[M] : unknown;

export interface WireClientOptions {
  /** Connect timeout (default 5 s). */
  timeoutMs?: number;
  /** Start with the socket paused: nothing is read until `socket.resume()`. */
  paused?: boolean;
  /**
   * Keep notifications, orphans and garbage, and record errors in `seenErrors` (default true).
   * False for long-running loads (the bench), which listen to the events instead.
   */
  keep?: boolean;
  /** `client.name` sent with `session.hello` (default `yello-tests`). */
  clientName?: string;
}

/** Every error response a keeping client in this process has seen. */
export declare const seenErrors: { method: string; error: WireError }[];

/** A JSON-RPC error answer, thrown by `request()`. */
export declare class WireCallError extends Error {
  readonly method: string;
  readonly code: number;
  readonly data: WireErrorData | undefined;
  constructor(method: string, error: WireError);
}

export declare class WireClient<R extends object = object> extends EventEmitter {
  readonly socket: net.Socket;
  readonly notifications: WireNotification[];
  readonly orphans: WireResponse[];
  readonly garbage: string[];
  /** Bytes handed to the parser so far (not what the kernel buffered while paused). */
  readonly bytesReceived: number;
  readonly isClosed: boolean;
  /** Resolves when the socket has closed. */
  readonly closed: Promise<void>;
  /** The `session.hello` result, after `open()`. */
  readonly helloResult: ResultOf<R, 'session.hello'> | undefined;

  constructor(socket: net.Socket, options?: WireClientOptions);
  static connect<R extends object = object>(socketPath: string, options?: WireClientOptions): Promise<WireClient<R>>;
  static open<R extends object = object>(socketPath: string, token: string, options?: WireClientOptions): Promise<WireClient<R>>;

  newId(): number;
  call<M extends string>(method: M, params?: unknown, timeoutMs?: number): Promise<WireResponse<ResultOf<R, M>>>;
  request<M extends string>(method: M, params?: unknown, timeoutMs?: number): Promise<ResultOf<R, M>>;
  callRaw<T = unknown>(id: string | number, line: string | Buffer, timeoutMs?: number, method?: string): Promise<WireResponse<T>>;
  notify(method: string, params?: unknown): void;
  sendRaw(data: string | Buffer): void;
  batch<T = unknown>(requests: { method: string; params?: unknown }[], timeoutMs?: number): Promise<WireResponse<T>[]>;
  batchRaw<T = unknown>(messages: unknown[], timeoutMs?: number): Promise<WireResponse<T>[]>;
  nextOrphan(timeoutMs?: number): Promise<WireResponse>;
  hello(token: string): Promise<WireResponse<ResultOf<R, 'session.hello'>>>;
  close(): void;

  on(event: 'notification', listener: (n: WireNotification) => void): this;
  on(event: 'response' | 'orphan', listener: (r: WireResponse) => void): this;
  on(event: 'message', listener: (msg: unknown) => void): this;
  on(event: 'garbage', listener: (line: string) => void): this;
  on(event: 'close', listener: () => void): this;
  once(event: 'notification', listener: (n: WireNotification) => void): this;
  once(event: 'response' | 'orphan', listener: (r: WireResponse) => void): this;
  once(event: 'message', listener: (msg: unknown) => void): this;
  once(event: 'garbage', listener: (line: string) => void): this;
  once(event: 'close', listener: () => void): this;
}
