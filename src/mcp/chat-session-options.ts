import type { MessageBatch, OperationInfo, YelloClient } from '../client/index.js';
import type { McpLog } from './log.js';
import type { AppendKind } from './tool-errors.js';

/** Options of a {@link ChatSession}. */
export interface ChatSessionOptions {
  /** The server's one connection (reconnecting); every session reads and writes through it. */
  client: YelloClient;
  /** Take the stream over from a connected coordinator (the server's `--replace`); else only an abandoned claim. */
  replace: boolean;
  /** A person's decision after a break: start at the peer stream's current generation. */
  resumeAfterBreak: boolean;
  /** How long a tool waits for a reconnect, or for an uncertain append to be settled. */
  settleMs: number;
  /** How long the writer then waits for a reconnect itself (ChatWriter `connectWaitMs`, default 10 s; tests give less). */
  writerConnectWaitMs?: number;
  log: McpLog;
  /** The session stopped for good (fenced, continuity break, corrupt data). */
  onStopped(info: { chatId: string; error: Error }): void;
  /** This session's writer claimed the agent's stream (the channel tells its own claims from another process's). */
  onClaimed?(info: { chatId: string; epoch: string }): void;
  /** A batch the channel pushed in this chat, by its batchId: acknowledging it needs no read_new. */
  pushedBatch?(chatId: string, batchId: string): MessageBatch | undefined;
}

/** An append whose outcome is unknown, and what kind it was (the writer hands its receipt to the conversation once committed). */
export interface PendingAppend {
  operationId: string;
  kind: AppendKind;
}

/** What read_new gives: the batch shown (null: none came), whether it was shown before, whether more wait. */
export interface Presented {
  batch: MessageBatch | null;
  repeated: boolean;
  more: boolean;
}

/** What operation_status reports: the operation, whether it committed (null: not decided), whether it was the append of unknown outcome now settled. */
export interface OperationStatus {
  operation: OperationInfo | null;
  committed: boolean | null;
  resolved: boolean;
  kind: PendingAppend['kind'] | null;
  paused: boolean;
}
