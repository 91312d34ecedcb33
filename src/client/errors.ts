import { ERROR_CODES, type ContinuityReason, type ErrorType } from '../shared/errors.js';

/** The JSON-RPC error object as received. */
export interface RpcErrorObject {
  code: number;
  message: string;
  data?: { type?: string; [key: string]: unknown };
}

/**
 * The types of the errors the client raises itself; they never travel on the wire.
 * - `CONNECTION_LOST`, `LINE_TOO_LARGE`, `TIMEOUT`: the connection or the call failed
 *   ({@link ConnectionLostError}, {@link LineTooLargeError}, {@link TimeoutError});
 * - `UNTRUSTED_SOCKET`: refused to connect ({@link UntrustedSocketError});
 * - `PAUSED`: the coordinator waits for `resolveUncertain()` ({@link CoordinatorPausedError});
 * - `VERIFICATION_FAILED`: offline verification ({@link VerificationError});
 * - `BAD_STATE`, `BAD_TOKEN`, `ADAPTER_FAILED`: the coordinator was asked something its state
 *   does not allow, was given an admin token, or its adapter threw while presenting;
 * - `NOT_FOLLOWED`: an inbox could not follow a chat (`NotFollowedError`, inbox-errors.ts).
 */
export type ClientErrorType =
  | 'CONNECTION_LOST'
  | 'LINE_TOO_LARGE'
  | 'TIMEOUT'
  | 'UNTRUSTED_SOCKET'
  | 'PAUSED'
  | 'VERIFICATION_FAILED'
  | 'BAD_STATE'
  | 'BAD_TOKEN'
  | 'ADAPTER_FAILED'
  | 'NOT_FOLLOWED';

/** Every `type` this client knows: the protocol's `data.type` strings (§3) and the client's own. */
export type YelloErrorType = ErrorType | ClientErrorType;

/** Base of every error the client raises; `type` is the stable contract, `message` is not. */
export class YelloClientError extends Error {
  /**
   * One of {@link YelloErrorType}: every subclass narrows it to its own (`TimeoutError` to
   * `'TIMEOUT'`, `FencedError` to `'FENCED'`). Typed `string` here only because a
   * {@link RemoteError} passes on the `data.type` of a daemon newer than this client as it came.
   */
  readonly type: string;
  /** True when retrying the same request may succeed. */
  readonly transient: boolean;
  constructor(type: YelloErrorType, message: string, options?: { cause?: unknown; transient?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.type = type;
    this.transient = options?.transient ?? false;
  }
}

/** An error answered by the daemon. */
export class RemoteError extends YelloClientError {
  readonly code: number;
  readonly data: Record<string, unknown>;
  constructor(error: RpcErrorObject) {
    // The one way an unknown type gets in: passed on as received (see YelloClientError.type).
    const type = (error.data?.type ?? `JSONRPC_${error.code}`) as YelloErrorType;
    // A daemon that is stopping answers STORAGE_FAILURE/SHUTTING_DOWN: asking again once it is
    // back may succeed (unlike READ_ONLY, WRITE_FAILED or CORRUPT, which need a person).
    // UNAVAILABLE: the daemon could not reach its PostgreSQL database; nothing was done.
    const transient =
      type === 'RATE_LIMITED' ||
      (type === 'STORAGE_FAILURE' && (error.data?.reason === 'SHUTTING_DOWN' || error.data?.reason === 'UNAVAILABLE'));
    super(type, error.message, { transient });
    this.code = error.code;
    this.data = error.data ?? {};
  }
}

/** The coordinator token is not the current one: another coordinator took over. */
export class FencedError extends RemoteError {
  declare readonly type: 'FENCED';
}
/** `expectedPosition` was not the stream's next position. */
export class PositionMismatchError extends RemoteError {
  declare readonly type: 'POSITION_MISMATCH';
  get nextPosition(): string {
    return String(this.data.nextPosition);
  }
}
/** A read cannot continue exactly; a human must intervene. */
export class ContinuityBreakError extends RemoteError {
  declare readonly type: 'CONTINUITY_BREAK';
  get reason(): ContinuityReason {
    return this.data.reason as ContinuityReason;
  }
}
/** Params failed validation; `path` names the field. */
export class InvalidParamsError extends RemoteError {
  declare readonly type: 'INVALID_PARAMS';
  get path(): string {
    // A string on the wire (docs/protocol.md §3); '' for the params object.
    const path = this.data.path;
    return typeof path === 'string' ? path : '';
  }
}
/** No session, or a bad token. */
export class UnauthenticatedError extends RemoteError {
  declare readonly type: 'UNAUTHENTICATED';
}
/** The caller may not do this. */
export class PermissionDeniedError extends RemoteError {
  declare readonly type: 'PERMISSION_DENIED';
}
/** No such agent, chat, stream, operation or subscription. */
export class NotFoundError extends RemoteError {
  declare readonly type: 'NOT_FOUND';
}
/**
 * The request or line was over its limit (`data.limit`, `data.size`, in bytes). The daemon
 * answers this for a line over `maxLineBytes` or an append over `maxAppendRequestBytes`; the
 * client raises it itself, before writing anything, for a request it knows is over the
 * limits `session.hello` announced (`sent: false`). Either way the request had no effect.
 */
export class RequestTooLargeError extends RemoteError {
  declare readonly type: 'REQUEST_TOO_LARGE';
  /** False when the client refused the request locally and nothing reached the daemon. */
  readonly sent: boolean;
  /** Always false: an over-size request is rejected before anything is checked or written. */
  readonly outcomeUnknown = false;
  constructor(error: RpcErrorObject, options?: { sent?: boolean }) {
    super(error);
    this.sent = options?.sent ?? true;
  }
  /** The limit in bytes. */
  get limit(): number {
    return Number(this.data.limit);
  }
  /** The request's size in bytes (for a line, at least this many). */
  get size(): number {
    return Number(this.data.size);
  }
}
/** A claim without `replace` while a coordinator holds the stream. */
export class WriterActiveError extends RemoteError {
  declare readonly type: 'WRITER_ACTIVE';
}
/** The operationId was used for a different request. */
export class OperationConflictError extends RemoteError {
  declare readonly type: 'OPERATION_CONFLICT';
}
/** The messageId is already stored in this stream generation. */
export class DuplicateMessageError extends RemoteError {
  declare readonly type: 'DUPLICATE_MESSAGE';
}
/** The receipt does not match a presented batch, or goes backwards. */
export class InvalidReceiptError extends RemoteError {
  declare readonly type: 'INVALID_RECEIPT';
}
/** The outbound PII policy rejected the content. */
export class PolicyRejectedError extends RemoteError {
  declare readonly type: 'POLICY_REJECTED';
}
/** Too many attempts; see `data.retryAfterMs`. */
export class RateLimitedError extends RemoteError {
  declare readonly type: 'RATE_LIMITED';
  /** How long to wait before trying again, in milliseconds. */
  get retryAfterMs(): number {
    return Number(this.data.retryAfterMs);
  }
}
/**
 * A per-agent quota that waiting does not restore (today: stored bytes); `data.quota`,
 * `data.limit` and `data.used` say which and how much. Nothing was written.
 */
export class QuotaExceededError extends RemoteError {
  declare readonly type: 'QUOTA_EXCEEDED';
}
/**
 * The store failed or refused (`data.reason`): `WRITE_FAILED`, `READ_ONLY`, `CORRUPT` need a
 * person; `SHUTTING_DOWN` and `UNAVAILABLE` are `transient` (the daemon is stopping, or cannot
 * reach its PostgreSQL database: ask again).
 */
export class StorageFailureError extends RemoteError {
  declare readonly type: 'STORAGE_FAILURE';
}
/** A daemon bug; `data.correlationId` finds it in the daemon's log. */
export class InternalError extends RemoteError {
  declare readonly type: 'INTERNAL';
}

const classes: Record<ErrorType, new (e: RpcErrorObject) => RemoteError> = {
  INVALID_PARAMS: InvalidParamsError,
  UNAUTHENTICATED: UnauthenticatedError,
  PERMISSION_DENIED: PermissionDeniedError,
  NOT_FOUND: NotFoundError,
  REQUEST_TOO_LARGE: RequestTooLargeError,
  FENCED: FencedError,
  POSITION_MISMATCH: PositionMismatchError,
  WRITER_ACTIVE: WriterActiveError,
  OPERATION_CONFLICT: OperationConflictError,
  DUPLICATE_MESSAGE: DuplicateMessageError,
  INVALID_RECEIPT: InvalidReceiptError,
  CONTINUITY_BREAK: ContinuityBreakError,
  POLICY_REJECTED: PolicyRejectedError,
  RATE_LIMITED: RateLimitedError,
  QUOTA_EXCEEDED: QuotaExceededError,
  STORAGE_FAILURE: StorageFailureError,
  INTERNAL: InternalError,
};

/** The class for a received error, keyed by `data.type`; unknown types stay `RemoteError`. */
export function remoteError(error: RpcErrorObject): RemoteError {
  const type = error.data?.type;
  const Cls = type !== undefined && Object.hasOwn(ERROR_CODES, type) ? classes[type as ErrorType] : RemoteError;
  return new Cls(error);
}

/**
 * The connection dropped. For a request that was already written, the outcome is unknown:
 * the client never resends it; inspect `operations.get` instead.
 */
export class ConnectionLostError extends YelloClientError {
  declare readonly type: 'CONNECTION_LOST' | 'LINE_TOO_LARGE';
  /** True when the request had been written before the loss. */
  readonly outcomeUnknown: boolean;
  constructor(
    message: string,
    outcomeUnknown: boolean,
    cause?: unknown,
    options?: { type?: 'CONNECTION_LOST' | 'LINE_TOO_LARGE'; transient?: boolean },
  ) {
    super(options?.type ?? 'CONNECTION_LOST', message, { cause, transient: options?.transient ?? true });
    this.outcomeUnknown = outcomeUnknown;
  }
}

/**
 * The daemon sent a line longer than the client's cap (`maxInboundLineBytes`), so the client
 * closed the connection rather than buffer without bound. A `ConnectionLostError` (pending
 * calls were written: their outcome is unknown), with its own `type`, `LINE_TOO_LARGE`, and
 * not transient: asking again would bring the same line. Raise the cap or ask for less
 * (a smaller `limit`).
 */
export class LineTooLargeError extends ConnectionLostError {
  declare readonly type: 'LINE_TOO_LARGE';
  /** The cap in bytes. */
  readonly limit: number;
  /** Bytes of the line received when the cap was crossed. */
  readonly size: number;
  constructor(limit: number, size: number, outcomeUnknown: boolean) {
    super(`yellod sent a line of more than ${limit} bytes (maxInboundLineBytes); the connection was closed`, outcomeUnknown, undefined, {
      type: 'LINE_TOO_LARGE',
      transient: false,
    });
    this.limit = limit;
    this.size = size;
  }
}

/** What a {@link TimeoutError} says about the request that got no answer. */
export interface TimedOutRequest {
  /** The JSON-RPC id the request was sent with. */
  id: number;
  /** For `streams.append` (and any request naming one): the stream. */
  streamId?: string;
  /** For `streams.append`: the operation to look up with `operations.get`. */
  operationId?: string;
}

/**
 * No answer in time. The request was written, so its outcome is unknown: for
 * `streams.append`, `operations.get {streamId, operationId}` tells whether it committed.
 * The client never resends it. A late answer is dropped.
 */
export class TimeoutError extends YelloClientError {
  declare readonly type: 'TIMEOUT';
  readonly outcomeUnknown = true;
  /** The method called. */
  readonly method: string;
  /** The timeout that expired, in ms. */
  readonly timeoutMs: number;
  /** The JSON-RPC id of the request, or null when not known. */
  readonly requestId: number | null;
  /** The request's `streamId`, or null. */
  readonly streamId: string | null;
  /** The request's `operationId` (`streams.append`), or null. */
  readonly operationId: string | null;
  constructor(method: string, ms: number, request?: TimedOutRequest) {
    const op = request?.operationId !== undefined ? ` (stream ${request.streamId ?? '?'}, operation ${request.operationId})` : '';
    super('TIMEOUT', `${method}${op} got no answer within ${ms} ms; its outcome is unknown`, { transient: true });
    this.method = method;
    this.timeoutMs = ms;
    this.requestId = request?.id ?? null;
    this.streamId = request?.streamId ?? null;
    this.operationId = request?.operationId ?? null;
  }
}

/**
 * The client refused to connect: the socket, or the directory it lives in, could be
 * controlled by another local user, who could then run a fake daemon and collect the token
 * of `session.hello`. Nothing was sent. `reason` says what is wrong; see docs/security.md,
 * "Socket directory trust".
 */
export class UntrustedSocketError extends YelloClientError {
  declare readonly type: 'UNTRUSTED_SOCKET';
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super('UNTRUSTED_SOCKET', `refusing to send a token to ${path}: ${reason}`);
  }
}

/** The coordinator is paused on an append of unknown outcome; call `resolveUncertain()`. */
export class CoordinatorPausedError extends YelloClientError {
  declare readonly type: 'PAUSED';
  constructor(readonly operationId: string) {
    super('PAUSED', `an append (operation ${operationId}) has an unknown outcome; call resolveUncertain() first`);
  }
}

/** A record failed offline verification. */
export class VerificationError extends YelloClientError {
  declare readonly type: 'VERIFICATION_FAILED';
  constructor(
    message: string,
    readonly position: string | null,
  ) {
    super('VERIFICATION_FAILED', message);
  }
}

/**
 * A `FencedError` the client concludes itself (it saw a newer fence, or the stream's head
 * names another epoch), shaped as the daemon would have answered it.
 */
export function fencedError(streamId: string, epoch: string, message: string): FencedError {
  return new FencedError({ code: ERROR_CODES.FENCED, message, data: { type: 'FENCED', streamId, epoch } });
}

/** A `ContinuityBreakError` the client concludes itself, shaped as the daemon's (§3.5). */
export function continuityBreakError(
  reason: ContinuityReason,
  streamId: string,
  expected: unknown,
  actual: unknown,
  message: string,
): ContinuityBreakError {
  return new ContinuityBreakError({
    code: ERROR_CODES.CONTINUITY_BREAK,
    message,
    data: { type: 'CONTINUITY_BREAK', reason, streamId, expected, actual },
  });
}
