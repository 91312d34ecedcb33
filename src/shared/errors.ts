/**
 * The error registry of docs/protocol.md §3. The `data.type` strings and numeric codes are the
 * contract; messages are for humans and may change. Daemon code throws {@link YelloError};
 * the RPC boundary maps it to `{code, message, data}` exactly once.
 */
export const ERROR_CODES = {
  INVALID_PARAMS: -32602,
  UNAUTHENTICATED: 4001,
  PERMISSION_DENIED: 4003,
  NOT_FOUND: 4004,
  REQUEST_TOO_LARGE: 4013,
  FENCED: 4090,
  POSITION_MISMATCH: 4091,
  WRITER_ACTIVE: 4092,
  OPERATION_CONFLICT: 4093,
  DUPLICATE_MESSAGE: 4094,
  INVALID_RECEIPT: 4095,
  CONTINUITY_BREAK: 4100,
  POLICY_REJECTED: 4220,
  RATE_LIMITED: 4290,
  QUOTA_EXCEEDED: 4291,
  STORAGE_FAILURE: 5030,
  INTERNAL: -32603,
} as const;

/** A stable application error type (`data.type`). */
export type ErrorType = keyof typeof ERROR_CODES;

/** JSON-RPC codes for protocol-level errors that carry no `data.type`. */
export const JSONRPC_PARSE_ERROR = -32700;
/** The request is not a JSON-RPC 2.0 request object. */
export const JSONRPC_INVALID_REQUEST = -32600;

/** Every reason a read cannot continue exactly (docs/protocol.md §3.5); a list so the docs can be checked against it. */
export const CONTINUITY_REASONS = ['STREAM_MISSING', 'GENERATION_CHANGED', 'PREFIX_UNAVAILABLE'] as const;

/** Why a read cannot continue exactly (`CONTINUITY_BREAK.data.reason`, `chats.break.reason`). */
export type ContinuityReason = (typeof CONTINUITY_REASONS)[number];

/**
 * Why a STORAGE_FAILURE happened (`data.reason`). `WRITE_FAILED`: a synced write failed after
 * the request was queued, so its outcome is unknown; `READ_ONLY` and `SHUTTING_DOWN`: refused
 * before anything was queued; `CORRUPT`: stored data failed an integrity check (`data.key`,
 * `data.streamId`, `data.generation`, `data.fromPosition` say where); `UNSUPPORTED`: the store's
 * engine does not do this (`daemon.backup` on PostgreSQL), nothing was done, and the message
 * says what to use instead; `UNAVAILABLE`: the daemon cannot reach its PostgreSQL database to
 * check the caller's session, nothing was done (ask again).
 */
export type StorageFailureReason = 'WRITE_FAILED' | 'READ_ONLY' | 'SHUTTING_DOWN' | 'CORRUPT' | 'UNSUPPORTED' | 'UNAVAILABLE';

/**
 * What a STORAGE_FAILURE answer to a write means (`data.outcome`): `unknown` — it may or may
 * not be on disk (ask `operations.get` after a restart); `not-written` — refused before
 * anything was queued. `null` for reads.
 */
export type WriteOutcome = 'unknown' | 'not-written' | null;

/** Where corrupt data was found (`data` of a STORAGE_FAILURE with reason CORRUPT). */
export interface CorruptionDetails {
  /** The LevelDB key, when one value is to blame. */
  key: string | null;
  streamId: string | null;
  /** Generation and first position of the damaged range, as decimal strings, when known. */
  generation: string | null;
  fromPosition: string | null;
  /** What failed: a checksum, a missing record, a head that disagrees with its records, a lost log. */
  detail: string;
}

/** Details carried in `error.data` besides `type`. */
export type ErrorDetails = Record<string, unknown>;

/** An application error with a stable `type` and the contract's `code`. */
export class YelloError extends Error {
  readonly type: ErrorType;
  readonly code: number;
  readonly details: ErrorDetails;

  constructor(type: ErrorType, message: string, details: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'YelloError';
    this.type = type;
    this.code = ERROR_CODES[type];
    this.details = details;
  }

  /** Add details (returns this, for chaining at the throw site). */
  withDetails(more: ErrorDetails): this {
    Object.assign(this.details, more);
    return this;
  }

  /** The `data` member of the JSON-RPC error object. */
  toData(): ErrorDetails & { type: ErrorType } {
    return { type: this.type, ...this.details };
  }
}

/** Shorthand constructors keep call sites short and the details named as in §3. */
export const errors = {
  invalidParams: (path: string, reason: string) =>
    new YelloError('INVALID_PARAMS', `invalid params at ${path || '(root)'}: ${reason}`, { path, reason }),
  unauthenticated: (message = 'call session.hello with a valid token first') => new YelloError('UNAUTHENTICATED', message),
  permissionDenied: (reason: string, message?: string) =>
    new YelloError('PERMISSION_DENIED', message ?? `permission denied: ${reason}`, { reason }),
  notFound: (kind: string, id: string) => new YelloError('NOT_FOUND', `no such ${kind}: ${id}`, { kind, id }),
  tooLarge: (limit: number, size: number) =>
    new YelloError('REQUEST_TOO_LARGE', `request of ${size} bytes exceeds the limit of ${limit}`, { limit, size }),
  fenced: (streamId: string, epoch: string) =>
    new YelloError('FENCED', `coordinator token is not current for ${streamId} (epoch ${epoch})`, { streamId, epoch }),
  positionMismatch: (nextPosition: string, generation: string) =>
    new YelloError('POSITION_MISMATCH', `expectedPosition does not match nextPosition ${nextPosition} of generation ${generation}`, {
      nextPosition,
      generation,
    }),
  writerActive: (streamId: string, epoch: string, claimedAt: string, connected: boolean) =>
    new YelloError(
      'WRITER_ACTIVE',
      connected
        ? `a coordinator holds ${streamId} since ${claimedAt} (epoch ${epoch}) and its connection is open: stop that coordinator ` +
            `(it releases the claim), or claim with replace: true to take over anyway; if it is stuck, the admin can run ` +
            `\`yello streams release ${streamId}\``
        : `a coordinator claimed ${streamId} at ${claimedAt} (epoch ${epoch}) but none of its connections is open (abandoned): ` +
            `claim with replace: "if-abandoned" to take over, or have the admin run \`yello streams release ${streamId}\``,
      { epoch, claimedAt, connected },
    ),
  operationConflict: (operation: string) =>
    new YelloError('OPERATION_CONFLICT', `operationId ${operation} was used for a different request`, { operation }),
  duplicateMessage: (position: string) =>
    new YelloError('DUPLICATE_MESSAGE', `messageId already stored at position ${position} of this generation`, { position }),
  invalidReceipt: (reason: string) => new YelloError('INVALID_RECEIPT', `invalid receipt: ${reason}`, { reason }),
  continuityBreak: (reason: ContinuityReason, streamId: string, expected: unknown, actual: unknown) =>
    new YelloError('CONTINUITY_BREAK', `cannot continue exactly on ${streamId}: ${reason}`, { reason, streamId, expected, actual }),
  policyRejected: (kinds: string[]) =>
    new YelloError('POLICY_REJECTED', `content matched the outbound PII policy: ${kinds.join(', ')}`, { kinds }),
  rateLimited: (retryAfterMs: number, what: string) =>
    new YelloError('RATE_LIMITED', `too many ${what}; retry after ${retryAfterMs} ms`, { retryAfterMs }),
  /** A per-agent quota that waiting does not restore (`retryAfterMs: null`): stored bytes. */
  quotaExceeded: (quota: 'storedBytes', limit: number, used: number) =>
    new YelloError(
      'QUOTA_EXCEEDED',
      `this agent has ${used} bytes stored, and the quota is ${limit}; trim old records (yello streams trim) or ask the operator for a larger --quota-stored-bytes`,
      { quota, limit, used, retryAfterMs: null },
    ),
  storageFailure: (operationId: string | null, reason: Exclude<StorageFailureReason, 'CORRUPT'>, message: string) =>
    new YelloError('STORAGE_FAILURE', message, { operationId, reason, outcome: reason === 'WRITE_FAILED' ? 'unknown' : 'not-written' }),
  /**
   * The daemon is stopping: a write not admitted (`outcome: "not-written"`) or a read the store
   * closed under (`outcome: null`). Transient: ask again once the daemon is back.
   */
  shuttingDown: (operationId: string | null, outcome: 'not-written' | null) =>
    new YelloError(
      'STORAGE_FAILURE',
      outcome === null
        ? 'the daemon is shutting down; nothing was read; ask again once it is back'
        : 'the daemon is shutting down; nothing was written; send it again once the daemon is back',
      { operationId, reason: 'SHUTTING_DOWN', outcome },
    ),
  corrupt: (where: CorruptionDetails, operationId: string | null = null) => {
    const at = where.streamId
      ? ` in ${where.streamId}${where.generation !== null ? ` generation ${where.generation}` : ''}${where.fromPosition !== null ? ` from position ${where.fromPosition}` : ''}`
      : '';
    const key = where.key ? ` (key ${where.key})` : '';
    return new YelloError('STORAGE_FAILURE', `stored data failed its integrity check${at}${key}: ${where.detail}; see yello doctor`, {
      operationId,
      reason: 'CORRUPT',
      outcome: operationId === null ? null : 'not-written',
      ...where,
    });
  },
  internal: (correlationId: string) => new YelloError('INTERNAL', `internal error (correlation id ${correlationId})`, { correlationId }),
};
