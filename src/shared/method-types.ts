import type { BackupManifest, ChatPermissions, DaemonStatus, Grant, HelloResult, MetricsScrape, OperationInfo } from './results.js';
import type { Agent, AppendResult, Chat, Checkpoint, DoctorReport, Jwks, PiiMode, ReadBatch, StoredRecord, StreamState } from './types.js';

/**
 * The params and result of every RPC method as plain TypeScript types, without zod: the client
 * library's typed calls and its published declarations use these, so a program that depends on
 * the client does not type-check zod's typings. The method table (methods.ts) is checked against
 * this module at compile time (its `ParamsIn`/`Result` must equal these types), so the two
 * cannot drift. Optional params accept `null` as "unset" (§4).
 */

/** A message record of `streams.append`. */
export interface AppendMessageInput {
  type: 'chat.message';
  messageId: string;
  content: string;
}

/** A receipt record of `streams.append`. */
export interface AppendReceiptInput {
  type: 'chat.receipt';
  peerStreamId: string;
  peerGeneration: string;
  nextPosition: string;
  batchId: string;
}

type Empty = Record<string, never>;

/** What a caller sends, keyed by method name (before the daemon's normalisation). */
export interface MethodParams {
  'session.hello': { token: string; client?: unknown };
  'daemon.status': Empty;
  'daemon.metrics': Empty;
  'daemon.check': { mark?: boolean | null };
  'daemon.backup': { path: string };
  'keys.list': Empty;
  'keys.rotate': Empty;
  'agents.create': { username: string; name: string; image?: string | null };
  'agents.list': { cursor?: string | null; limit?: number | null };
  'agents.get': { agentId?: string | null; username?: string | null };
  'agents.rotateToken': { agentId: string };
  'agents.disable': { agentId: string };
  'agents.setPolicy': { agentId: string; pii: PiiMode };
  'grants.add': { agentId: string; peerAgentId: string };
  'grants.remove': { agentId: string; peerAgentId: string };
  'grants.list': { agentId?: string | null; cursor?: string | null; limit?: number | null };
  'chats.open': { peerAgentId?: string | null; agentAId?: string | null; agentBId?: string | null };
  'chats.get': { chatId: string };
  'chats.list': { cursor?: string | null; limit?: number | null };
  'chats.permissions': { chatId: string };
  'chats.history': { chatId: string; cursor?: string | null; limit?: number | null; direction?: 'backward' | 'forward' | null };
  'chats.follow': { chatId: string; cursor?: string | null; from?: 'end' | 'acknowledged' | 'generation-start' | null };
  'chats.watch': Empty;
  'chats.unfollow': { subscriptionId: string };
  'streams.get': { streamId: string };
  'streams.claim': { streamId: string; replace?: boolean | 'if-abandoned' | null; reason?: string | null };
  'streams.release': { streamId: string; coordinatorToken?: string | null };
  'streams.append': {
    streamId: string;
    coordinatorToken: string;
    generation: string;
    expectedPosition: string;
    operationId: string;
    records: (AppendMessageInput | AppendReceiptInput)[];
  };
  'streams.read': {
    streamId: string;
    generation: string;
    fromPosition: string;
    limit?: number | null;
    maxBytes?: number | null;
    waitMs?: number | null;
  };
  'streams.checkpoint': { streamId: string; generation: string; fromPosition?: string | null; nextPosition?: string | null };
  'streams.trim': { streamId: string; beforePosition: string; force?: boolean | null };
  'streams.reset': { streamId: string; reason: string };
  'operations.get': { streamId: string; operationId: string };
  'operations.list': { streamId: string; cursor?: string | null; limit?: number | null };
  'rpc.discover': Empty;
}

/** What each method answers, keyed by method name. */
export interface MethodResults {
  'session.hello': HelloResult;
  'daemon.status': DaemonStatus;
  'daemon.metrics': MetricsScrape;
  'daemon.check': DoctorReport;
  'daemon.backup': BackupManifest;
  'keys.list': Jwks;
  'keys.rotate': { kid: string };
  'agents.create': { agent: Agent; token: string };
  'agents.list': { agents: Agent[]; nextCursor: string | null };
  'agents.get': { agent: Agent };
  'agents.rotateToken': { token: string };
  'agents.disable': { agent: Agent };
  'agents.setPolicy': { agent: Agent };
  'grants.add': { grant: Grant };
  'grants.remove': { removed: boolean };
  'grants.list': { grants: Grant[]; nextCursor: string | null };
  'chats.open': { chat: Chat; created: boolean };
  'chats.get': { chat: Chat; streams: [StreamState, StreamState] };
  'chats.list': { chats: Chat[]; nextCursor: string | null };
  'chats.permissions': ChatPermissions;
  'chats.history': { entries: StoredRecord[]; nextCursor: string | null; liveCursor: string };
  'chats.follow': { subscriptionId: string; cursor: string };
  'chats.watch': { subscriptionId: string };
  'chats.unfollow': { subscriptionId: string; ended: boolean };
  'streams.get': StreamState;
  'streams.claim': { streamId: string; generation: string; epoch: string; coordinatorToken: string; nextPosition: string };
  'streams.release': StreamState;
  'streams.append': AppendResult;
  'streams.read': ReadBatch;
  'streams.checkpoint': Checkpoint;
  'streams.trim': { firstPosition: string };
  'streams.reset': StreamState;
  'operations.get': OperationInfo;
  'operations.list': { operations: OperationInfo[]; nextCursor: string | null };
  'rpc.discover': Record<string, unknown>;
}

/** Every RPC method name. */
export type MethodName = keyof MethodParams;
/** Params a caller sends for `M`. */
export type ParamsIn<M extends MethodName> = MethodParams[M];
/** What `M` answers: the type a client call resolves to. */
export type Result<M extends MethodName> = MethodResults[M];
