/**
 * Requests as the services take them: plain typed values, converted from the validated wire
 * params at the handler edge (rpc-methods.ts). Positions and generations are numbers (the
 * schema has checked their decimal form), and defaults are applied there, once.
 */

/** A `chat.message` record to append. */
export interface MessageInput {
  type: 'chat.message';
  messageId: string;
  content: string;
}

/**
 * A `chat.receipt` record to append. Its positions stay decimal strings: they are the record's
 * content, stored and signed as the author sent them (the store parses them to check them).
 */
export interface ReceiptInput {
  type: 'chat.receipt';
  peerStreamId: string;
  peerGeneration: string;
  nextPosition: string;
  batchId: string;
}

/** `streams.append`. */
export interface AppendRequest {
  streamId: string;
  coordinatorToken: string;
  generation: number;
  expectedPosition: number;
  operationId: string;
  records: Array<MessageInput | ReceiptInput>;
}

/** `streams.read` without waiting: at most `limit` records and (at least one record) about `maxBytes`. */
export interface ReadRequest {
  streamId: string;
  generation: number;
  fromPosition: number;
  limit: number;
  maxBytes: number;
}

/** `streams.read` with its long poll: wait up to `waitMs` for records (0: answer at once). */
export interface WaitingReadRequest extends ReadRequest {
  waitMs: number;
}

/** `chats.history`: a first page (no cursor) or the next page of a snapshot. */
export interface HistoryRequest {
  chatId: string;
  cursor?: string;
  limit: number;
  /** Only for a first page; a cursor keeps the direction it was made with. */
  direction?: 'backward' | 'forward';
}

/** `streams.checkpoint` of [fromPosition, nextPosition) of one generation (defaults: its bounds). */
export interface CheckpointRequest {
  streamId: string;
  generation: number;
  fromPosition?: number;
  nextPosition?: number;
}

/**
 * `streams.claim`: `replace` false refuses any holder, `"if-abandoned"` refuses only a holder
 * with an open connection, true displaces any holder.
 */
export interface ClaimRequest {
  streamId: string;
  replace: boolean | 'if-abandoned';
  reason?: string;
}

/** `streams.release`; an agent releases with its coordinator token, the admin without one. */
export interface ReleaseRequest {
  streamId: string;
  coordinatorToken?: string;
}

/**
 * `chats.follow`: from a compound cursor, the current ends (default), the caller's receipts
 * (the resume policy), or position 0 of the peer stream's current generation.
 */
export interface FollowRequest {
  chatId: string;
  cursor?: string;
  from?: 'end' | 'acknowledged' | 'generation-start';
}
