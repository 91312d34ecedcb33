import {
  ConnectionLostError,
  ContinuityBreakError,
  CoordinatorPausedError,
  DuplicateMessageError,
  FencedError,
  InvalidParamsError,
  InvalidReceiptError,
  NotFollowedError,
  NotFoundError,
  PermissionDeniedError,
  PolicyRejectedError,
  RateLimitedError,
  RemoteError,
  RequestTooLargeError,
  StorageFailureError,
  TimeoutError,
  UnauthenticatedError,
  WriterActiveError,
  YelloClientError,
} from '../client/index.js';

/**
 * A failure the MCP layer decides itself (nothing presented, an append of unknown outcome, a
 * chat stopped for intervention), with what the agent or a person should do about it. Its
 * `type` is a tool error type of docs/mcp.md, not one of the client's (`YelloErrorType`), so
 * it is not a `YelloClientError`.
 */
export class ToolFailure extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly action: string,
    readonly data: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ToolFailure';
  }
}

/** What an append carried: a message, a receipt, or both. */
export type AppendKind = 'send' | 'acknowledge' | 'reply';

/**
 * `acknowledge` (or a reply with `acknowledge: true`) with nothing presented, or naming another
 * batch than the presented one; `again`: the named batch was looked for by presenting again (it
 * was presented before this server restarted, or is already acknowledged).
 */
export function presentationFailure(
  chatId: string,
  batchId: string | undefined,
  presented: { batchId: string; fromPosition: string; nextPosition: string } | null,
  what: 'acknowledge' | 'reply' = 'acknowledge',
  again = false,
): ToolFailure {
  const nothing = what === 'reply' ? 'nothing was sent and nothing acknowledged' : 'nothing was written';
  if (!presented)
    return new ToolFailure(
      'NOTHING_PRESENTED',
      again
        ? `batch ${String(batchId)} is not waiting to be acknowledged in chat ${chatId} (it is acknowledged already, or no longer the next batch) and nothing else is new; ${nothing}`
        : `nothing is presented in chat ${chatId}, so there is nothing to acknowledge; ${nothing}`,
      what === 'reply'
        ? 'Call read_new (or wait_for_message) first and reply to what it shows; to send without a receipt, leave acknowledge out.'
        : 'Call read_new (or wait_for_message) first, then acknowledge what it shows.',
      { chatId },
    );
  return new ToolFailure(
    'NOT_PRESENTED',
    again
      ? `batch ${String(batchId)} is not the batch waiting in chat ${chatId} (this server may have restarted since it was shown, and the peer wrote more since); the batch waiting now covers positions ${presented.fromPosition}..${presented.nextPosition} (batchId ${presented.batchId}); ${nothing}`
      : `batch ${String(batchId)} is not the batch presented in chat ${chatId} (that one covers positions ${presented.fromPosition}..${presented.nextPosition} and has batchId ${presented.batchId}); ${nothing}`,
    'Call read_new to see the batch waiting now, then acknowledge it (batchId can be left out: it defaults to the batch presented).',
    { chatId, presentedBatchId: presented.batchId },
  );
}

/** An append that went out and got no answer: never to be resent before operation_status settled it. */
export function outcomeUnknown(chatId: string, operationId: string, kind: AppendKind, err: unknown): ToolFailure {
  const type = err instanceof YelloClientError ? err.type : null;
  const what = kind === 'acknowledge' ? 'receipt' : kind === 'reply' ? 'message and its receipt' : 'message';
  return new ToolFailure(
    'OUTCOME_UNKNOWN',
    `the ${what} (operation ${operationId}) went to the daemon but no answer came (${type ?? 'ERROR'}: ${(err as Error).message}); it may or may not be stored`,
    `Do not send it again. Call operation_status with chatId ${chatId}: it settles the outcome once the daemon answers. Until then every append in this chat is refused.`,
    { chatId, operationId, cause: type },
    { cause: err },
  );
}

/** operation_status could not settle within its wait. */
export function settleTimeout(chatId: string, operationId: string, ms: number): ToolFailure {
  return new ToolFailure(
    'TIMEOUT',
    `the daemon has not answered about operation ${operationId} within ${ms} ms; its outcome is still unknown`,
    'Call operation_status again in a moment (the daemon may be restarting or stopped). Appends in this chat stay refused until it is settled.',
    { chatId, operationId },
  );
}

/** A chat whose subscription the daemon ended for a reason that is not a break (`chats.error`: corrupt data, a daemon bug). */
export function chatStopped(chatId: string, error: Error): ToolFailure {
  const type = (error as Partial<YelloClientError>).type ?? 'UNKNOWN';
  return new ToolFailure(
    'CHAT_STOPPED',
    `the daemon stopped delivering chat ${chatId} (${type}: ${error.message}); this server presents and sends nothing more in it`,
    "A person must look before the agent goes on: `yello status` (its integrity section) and the daemon's log. Then restart `yello mcp`.",
    { ...((error as { data?: Record<string, unknown> }).data ?? {}), chatId, cause: type },
    { cause: error },
  );
}

/** What a tool error tells the agent: a stable `type`, what happened, and what to do. */
export interface ToolErrorInfo {
  type: string;
  message: string;
  action: string;
  data: Record<string, unknown>;
}

/** A field of an error's `data` (JSON from the daemon) in a message; `fallback` when it is absent. */
function field(value: unknown, fallback: string): string {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

const INSPECT = (chatId: string) =>
  `yello chats show ${chatId}; yello chats export ${chatId} > chat.jsonl && yello keys list --json > jwks.json && yello verify chat.jsonl --jwks jwks.json`;

/** The fence explanation, shared by FENCED from the daemon and by a fence the coordinator saw in its own stream. */
function fencedInfo(chatId: string, err: { data: Record<string, unknown> }): ToolErrorInfo {
  return {
    type: 'FENCED',
    message: `replaced by another coordinator: your stream ${field(err.data.streamId, `${chatId}:…`)} is now held by writer epoch ${field(err.data.epoch, '?')} (another \`yello mcp\` or CLI command that took over a claim left abandoned while this server was disconnected, one started with --replace, or an admin release or reset); this server writes nothing more in chat ${chatId}`,
    action:
      'Stop using this chat here. A person decides which process speaks for this agent: keep the other one, or stop it and restart this server (with --replace if the other one is still running) to take the stream back.',
    data: { ...err.data, chatId },
  };
}

/** The continuity-break explanation, for a break seen live or at the start of a session. */
function breakInfo(chatId: string, err: ContinuityBreakError): ToolErrorInfo {
  const { streamId, expected, actual } = err.data;
  const what =
    err.reason === 'GENERATION_CHANGED'
      ? `an admin reset ${String(streamId)}: messages of generation ${JSON.stringify(expected)} were never acknowledged, and generation ${JSON.stringify(actual)} started, so they may have been removed or rewritten`
      : err.reason === 'PREFIX_UNAVAILABLE'
        ? `records of ${String(streamId)} from position ${JSON.stringify(expected)} were trimmed before they were acknowledged (retained from ${JSON.stringify(actual)})`
        : `the stream ${String(streamId)} no longer exists`;
  return {
    type: 'CONTINUITY_BREAK',
    message: `continuity break (${err.reason}) in chat ${chatId}: ${what}. This server presents and sends nothing more in this chat`,
    action: `A person must look before the agent goes on: 1) see what the agent missed (sealed generations stay readable, the export has them first): ${INSPECT(chatId)}; 2) tell the agent what it missed, if anything; 3) restart \`yello mcp\` with --resume-after-break to continue at the start of what the peer stream now holds (the CLI's equivalent: \`yello chats read ${chatId} --from generation-start --ack\`).`,
    data: { ...err.data, chatId },
  };
}

/** Map any failure of a tool to what the agent is told. */
export function describeError(err: unknown, context: { chatId?: string; socketPath: string }): ToolErrorInfo {
  const chatId = context.chatId ?? '';
  if (err instanceof ToolFailure) return { type: err.type, message: err.message, action: err.action, data: err.data };
  if (err instanceof FencedError) return fencedInfo(chatId, err);
  if (err instanceof ContinuityBreakError) return breakInfo(chatId, err);
  if (err instanceof WriterActiveError) {
    const streamId = field(err.data.streamId, `${chatId}:<your agent id>`);
    const connected = err.data.connected !== false;
    return {
      type: 'WRITER_ACTIVE',
      message: connected
        ? `another process holds your stream in chat ${chatId} and is connected right now (writer epoch ${String(err.data.epoch)}, claimed at ${String(err.data.claimedAt)}): most likely another \`yello mcp\` or \`yello chats follow --ack\` for the same agent; nothing was written`
        : `your stream in chat ${chatId} is held by a claim (writer epoch ${String(err.data.epoch)}, claimed at ${String(err.data.claimedAt)}) that this server may not take over; nothing was written`,
      action: `Only one process may write for an agent in a chat. A person stops the other one (then this server takes over by itself), or restarts this server with --replace (the other one is then fenced), or releases the claim as the admin: \`yello streams release ${streamId}\`.`,
      data: { ...err.data, chatId },
    };
  }
  if (err instanceof CoordinatorPausedError) {
    return {
      type: 'PAUSED',
      message: `an earlier append in chat ${chatId} (operation ${err.operationId}) has an unknown outcome; nothing more is written in this chat until it is settled`,
      action: `Call operation_status with chatId ${chatId}. Do not send that message again before it says the operation was not stored.`,
      data: { chatId, operationId: err.operationId },
    };
  }
  if (err instanceof StorageFailureError) {
    const corrupt = err.data.reason === 'CORRUPT' || err.data.reason === 'CORRUPT_RECORD';
    return {
      type: 'STORAGE_FAILURE',
      message: `the daemon's storage failed: ${err.message}`,
      action: corrupt
        ? 'Stored data failed its check. A person must look (`yello status`, integrity section) before this chat is used again.'
        : 'Nothing was written. The daemon is read-only or shutting down: a person must check `yello status` and restart it; then try again.',
      data: { ...err.data, chatId },
    };
  }
  if (err instanceof PolicyRejectedError) {
    return {
      type: 'POLICY_REJECTED',
      message: `your outbound PII policy rejected the text (kinds: ${JSON.stringify(err.data.kinds)}); nothing was sent`,
      action: 'Remove those details from the text and send again.',
      data: err.data,
    };
  }
  if (err instanceof DuplicateMessageError) {
    return {
      type: 'DUPLICATE_MESSAGE',
      message: `a message with this messageId is already stored at position ${String(err.data.position)}; nothing was sent`,
      action: 'That message was already sent: do not send it again. Use another messageId for a different message.',
      data: err.data,
    };
  }
  if (err instanceof InvalidReceiptError) {
    return {
      type: 'INVALID_RECEIPT',
      message: `the daemon refused the receipt (${String(err.data.reason)}): ${err.message}`,
      action: 'Call read_new and acknowledge the batch it presents.',
      data: err.data,
    };
  }
  if (err instanceof PermissionDeniedError) {
    const reason = field(err.data.reason, '');
    const action =
      reason === 'NO_GRANT'
        ? 'A person must grant it: `yello grants add <you> <peer>` (or run the daemon with --policy open).'
        : reason === 'NOT_PARTICIPANT'
          ? 'This is not one of your chats: list_chats shows yours.'
          : 'This agent may not do that.';
    return { type: 'PERMISSION_DENIED', message: `${err.message} (${reason})`, action, data: err.data };
  }
  if (err instanceof NotFoundError) {
    return {
      type: 'NOT_FOUND',
      message: `no such ${field(err.data.kind, 'thing')}: ${field(err.data.id, '')}`,
      action: 'Check the id: list_chats lists your chats; open_chat takes an agent id or a username.',
      data: err.data,
    };
  }
  if (err instanceof InvalidParamsError) {
    return {
      type: 'INVALID_PARAMS',
      message: `${err.path || 'params'}: ${field(err.data.reason, err.message)}`,
      action: 'Fix that parameter and call again.',
      data: err.data,
    };
  }
  if (err instanceof UnauthenticatedError) {
    return {
      type: 'UNAUTHENTICATED',
      message: "the daemon no longer accepts this server's agent token (rotated, or the agent was disabled)",
      action: 'A person must give this server a valid token file and restart it.',
      data: {},
    };
  }
  if (err instanceof NotFollowedError) {
    return {
      type: 'NOT_FOLLOWED',
      message: err.message,
      action:
        "The server tries again by itself; meanwhile wait_for_message does not see this chat's messages (read_new in it still reads). A person can close other sessions of this agent, or raise the daemon's --max-sessions-per-agent.",
      data: { chatId: err.chatId },
    };
  }
  if (err instanceof RateLimitedError) {
    return { type: 'RATE_LIMITED', message: err.message, action: `Try again after ${String(err.data.retryAfterMs)} ms.`, data: err.data };
  }
  if (err instanceof RequestTooLargeError) {
    return {
      type: 'REQUEST_TOO_LARGE',
      message: `${err.message}; nothing was written`,
      action: 'Send a shorter text, or split it into several messages (docs/mcp.md, "Limits", lists the limits in bytes).',
      data: err.data,
    };
  }
  if (err instanceof RemoteError)
    return { type: err.type, message: err.message, action: 'See docs/mcp.md for this error type.', data: err.data };
  if (err instanceof ConnectionLostError) {
    return {
      type: 'CONNECTION_LOST',
      message: `cannot reach yellod at ${context.socketPath}: ${err.message}`,
      action: 'Nothing was written. Check that the daemon runs (`yello status`), then try again.',
      data: {},
    };
  }
  if (err instanceof TimeoutError) {
    return {
      type: 'TIMEOUT',
      message: err.message,
      action: 'The daemon did not answer in time (busy or stopped). Nothing was written by this call; try again.',
      data: {},
    };
  }
  if (err instanceof YelloClientError && err.type === 'BAD_STATE' && err.transient) {
    return {
      type: 'RECONNECTING',
      message: `the connection for chat ${chatId} is being re-established`,
      action: 'Nothing was written; try again in a moment.',
      data: { chatId },
    };
  }
  if (err instanceof YelloClientError)
    return { type: err.type, message: err.message, action: 'See docs/mcp.md for this error type.', data: {} };
  return {
    type: 'INTERNAL',
    message: err instanceof Error ? err.message : String(err),
    action: 'This is a bug in yello mcp; its stderr log has details.',
    data: {},
  };
}
