import type { WriterFence } from '../shared/types.js';
import type { Acknowledged } from './conversation-state.js';
import type { FencedError } from './errors.js';

// The public shapes of a Conversation: where it starts, its options and its events.

export type { Acknowledged };

/** Where a {@link Conversation} without a saved cursor starts (the one resume policy, docs/protocol.md §8). */
export type ConversationStart = 'acknowledged' | 'end' | 'generation-start';

/** Options of {@link Conversation.open}. */
export interface ConversationOptions {
  chatId: string;
  /**
   * `'acknowledged'` (default): the peer stream after this agent's latest receipt; unread
   * messages behind a reset or a trim are a `ContinuityBreakError`, never skipped.
   * `'end'`: only what arrives later. `'generation-start'`: a person's explicit act after a
   * break, the peer stream's current generation from position `"0"`.
   */
  start?: ConversationStart;
  /** A saved compound cursor (`cursor`, or a batch's): wins over `start`. */
  cursor?: string;
}

/** Events of a {@link Conversation}: state changes, never batches. */
export interface ConversationEvents {
  /** The peer's receipts of this agent's stream moved forward. */
  'peer-acknowledged': Acknowledged;
  /** The peer's stream got a new writer (a claim's fence). */
  'peer-writer': WriterFence;
  /** This agent's own stream was claimed by someone else (see {@link Conversation.expectWriter}). */
  replaced: FencedError;
  /** Reading stopped for a person: a `ContinuityBreakError`, or the `chats.error` (corrupt data). */
  break: Error;
}
