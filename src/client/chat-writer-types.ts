import type { OperationInfo } from '../shared/results.js';
import type { Conversation } from './conversation.js';
import type { UncertainOutcome } from './coordinator-types.js';
import type { FencedError } from './errors.js';

// The types of a ChatWriter, apart from the class so that it stays one readable file.

/** Options of a {@link ChatWriter}. */
export interface ChatWriterOptions {
  chatId: string;
  /**
   * How the first write claims the stream: `'if-abandoned'` (default) takes over a claim whose
   * holder has no open connection (a crashed process, a daemon restart) and is `WRITER_ACTIVE`
   * while the holder is connected; `true` forces (a person's decision: the holder is fenced);
   * `false` only claims a stream nobody holds.
   */
  replace?: boolean | 'if-abandoned';
  /** Recorded in the claim's fence. */
  reason?: string;
  /** Resume a kept claim instead of claiming: its token (the stream's current epoch is assumed). */
  coordinatorToken?: string;
  /** The reading side of the same chat: told the writer's epoch (so it sees being replaced) and the receipts written. */
  conversation?: Conversation;
  /** How long an append waits for the client to reconnect before failing (nothing written). Default 10 s. */
  connectWaitMs?: number;
  /**
   * How long a claim refused for the agent's claims per minute (`RATE_LIMITED`, nothing written)
   * waits for the quota, asking again after each `retryAfterMs`, before the refusal is the
   * write's answer. Default 30 s.
   */
  claimWaitMs?: number;
}

/** State of a {@link ChatWriter}. */
export type ChatWriterState = 'unclaimed' | 'claimed' | 'paused' | 'fenced' | 'released';
// 'released' claims again on the next write, like 'unclaimed'; only 'fenced' is final.

/** What a claim that took over another holder's found in the stream's operations, before the first write. */
export interface Unsettled {
  /** The epoch that was displaced. */
  previousEpoch: string;
  /** Appends of the current generation committed since the displaced holder claimed: it may not have learnt of them. */
  operations: OperationInfo[];
}

/** Events of a {@link ChatWriter}. */
export interface ChatWriterEvents {
  claimed: { epoch: string; generation: string; nextPosition: string; tookOver: boolean };
  /** After a takeover, before the first write: what the displaced holder may have left unsettled. */
  unsettled: Unsettled;
  /** An append's outcome became unknown: the writer is paused until `resolveUncertain()`. */
  uncertain: { operationId: string; error: Error };
  resolved: UncertainOutcome;
  fenced: FencedError;
}
