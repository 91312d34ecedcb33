import type { OperationInfo } from '../shared/results.js';
import type { ChatBatchNotification } from '../shared/types.js';
import type { CursorStore } from './cursor-store.js';

/** Lifecycle states; `needs-intervention` and `fenced` are terminal until a human acts. */
export type CoordinatorState = 'idle' | 'starting' | 'running' | 'reconnecting' | 'paused' | 'fenced' | 'needs-intervention' | 'stopped';

/** A peer batch handed to the native adapter. */
export type PeerBatch = ChatBatchNotification;

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
   * Where to start when `cursorStore` holds no cursor for the chat. `'acknowledged'` (default):
   * the peer stream from where this agent's own latest receipt left off, so every message not
   * yet acknowledged is presented, including those sent before the first start. `'end'`: the
   * current ends, presenting only what arrives later.
   */
  start?: 'acknowledged' | 'end';
  /** Take the stream over from a live coordinator. Never done unless asked. */
  replace?: boolean;
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
}
