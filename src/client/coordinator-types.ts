import type { OperationInfo } from '../shared/results.js';
import type { WriterFence } from '../shared/types.js';
import type { Unsettled } from './chat-writer.js';
import type { Acknowledged, ConversationStart } from './conversation.js';
import type { CursorStore } from './cursor-store.js';
import type { MessageBatch } from './message-batch.js';

/** Lifecycle states; `needs-intervention` and `fenced` are terminal until a human acts. */
export type CoordinatorState = 'idle' | 'starting' | 'running' | 'reconnecting' | 'paused' | 'fenced' | 'needs-intervention' | 'stopped';

/** A peer batch handed to the native adapter: always one holding a message (receipts and fences are state). */
export type PeerBatch = MessageBatch;

/** The agent runtime the coordinator feeds. */
export interface NativeAdapter {
  /** Show one peer batch to the agent. Resolve once it has it; acknowledging is a separate, explicit step. */
  present(batch: PeerBatch): Promise<void> | void;
  /**
   * Told when an append's outcome became unknown (connection lost, timeout, or a synced write
   * that failed in the daemon): the coordinator is paused and sends nothing until
   * `resolveUncertain()` settles `operationId`. Nothing is resent by itself.
   */
  uncertain?(info: { operationId: string; error: Error }): Promise<void> | void;
  /** Told how an append of unknown outcome ended, so the agent's own view can be corrected. */
  resolved?(outcome: UncertainOutcome): Promise<void> | void;
}

/** What `resolveUncertain()` found. */
export interface UncertainOutcome {
  operationId: string;
  committed: boolean;
  operation: OperationInfo;
}

/** Options of a {@link Coordinator}. */
export interface CoordinatorOptions {
  token: string;
  chatId: string;
  adapter: NativeAdapter;
  cursorStore: CursorStore;
  socketPath?: string;
  /**
   * Where to start when `cursorStore` holds no cursor for the chat (the one resume policy,
   * {@link ConversationStart}). `'acknowledged'` (default): after this agent's own latest
   * receipt, so every message not yet acknowledged is presented, including those sent before
   * the first start; unread messages behind a reset stop it with `ContinuityBreakError`.
   * `'end'`: only what arrives later. `'generation-start'`: a person's choice after a break.
   */
  start?: ConversationStart;
  /**
   * How the first write claims the stream: `'if-abandoned'` (default) takes over a claim whose
   * holder is gone; `true` also fences a connected holder (a person's decision); `false` never
   * takes over.
   */
  replace?: boolean | 'if-abandoned';
  reason?: string;
  /** Per-call timeout; an append that times out pauses the coordinator. Default 10 s. */
  callTimeoutMs?: number;
  /** Cap on one line from the daemon (see `ConnectOptions.maxInboundLineBytes`). */
  maxInboundLineBytes?: number;
  /** See `ConnectOptions.verifySocket`; default true. */
  verifySocket?: boolean;
  /** Reconnect backoff. */
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
}

/** Observable coordinator events. */
export interface CoordinatorEvents {
  state: { state: CoordinatorState; previous: CoordinatorState; error?: Error; operationId?: string };
  presented: PeerBatch;
  error: Error;
  /** The peer's receipts of this agent's stream moved forward. */
  'peer-acknowledged': Acknowledged;
  /** The peer's stream got a new writer. */
  'peer-writer': WriterFence;
  /** The first write took a claim over: what the displaced holder committed since its claim. */
  unsettled: Unsettled;
}
