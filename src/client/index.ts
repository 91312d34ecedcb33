/**
 * The yello client library: what agents embed. Types are exported separately from values;
 * nothing internal (transport, daemon code) is reachable from here.
 */
export { YelloClient, defaultSocketPath, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_MAX_INBOUND_LINE_BYTES } from './yello-client.js';
export type { ConnectOptions, CallOptions, ClientEvents, ClientNotification, NotificationIterator, RpcMethods } from './yello-client.js';
export { Coordinator } from './coordinator.js';
export type {
  CoordinatorOptions,
  CoordinatorState,
  CoordinatorEvents,
  NativeAdapter,
  PeerBatch,
  UncertainOutcome,
} from './coordinator-types.js';
export { Conversation } from './conversation.js';
export type { ConversationOptions, ConversationStart, ConversationEvents, Acknowledged } from './conversation.js';
export { ChatWriter } from './chat-writer.js';
export { Inbox } from './inbox.js';
export type { InboxBatch, InboxEntry, InboxOptions } from './inbox.js';
export { NotFollowedError } from './inbox-errors.js';
export { ConnectionPool } from './connection-pool.js';
export type { PoolEvents } from './connection-pool.js';
export type { ChatWriterOptions, ChatWriterState, ChatWriterEvents, Unsettled } from './chat-writer.js';
export { receiptFor, toMessageBatch } from './message-batch.js';
export type { MessageBatch, ReceiptRecordInput } from './message-batch.js';
export { FileCursorStore, MemoryCursorStore } from './cursor-store.js';
export type { CursorStore } from './cursor-store.js';
export { verifyCheckpoint, verifyRecord } from './verify.js';
export { ExportVerifier, verifyExport } from './verify-export.js';
export type { ExportGeneration, ExportProblem, ExportProblemKind, ExportVerification } from './verify-export.js';
export {
  YelloClientError,
  RemoteError,
  FencedError,
  PositionMismatchError,
  ContinuityBreakError,
  InvalidParamsError,
  UnauthenticatedError,
  PermissionDeniedError,
  NotFoundError,
  RequestTooLargeError,
  WriterActiveError,
  OperationConflictError,
  DuplicateMessageError,
  InvalidReceiptError,
  PolicyRejectedError,
  RateLimitedError,
  QuotaExceededError,
  StorageFailureError,
  InternalError,
  ConnectionLostError,
  TimeoutError,
  LineTooLargeError,
  UntrustedSocketError,
  CoordinatorPausedError,
  VerificationError,
  remoteError,
} from './errors.js';
export type { ClientErrorType, RpcErrorObject, TimedOutRequest, YelloErrorType } from './errors.js';
export type {
  Agent,
  AgentSummary,
  Chat,
  Checkpoint,
  CheckpointSignature,
  ChatMessage,
  ChatReceipt,
  WriterFence,
  StoredRecord,
  StreamState,
  Jwks,
  PublicJwk,
  ReadBatch,
  ChatBatchNotification,
  ChatBreakNotification,
  ChatErrorNotification,
  ChatOpenedNotification,
  AppendResult,
  Redaction,
  PiiMode,
  Role,
  DoctorReport,
  DoctorProblem,
  CorruptStream,
} from '../shared/types.js';
export type { HelloResult, OperationInfo, Grant } from '../shared/results.js';
export type { MethodName, MethodParams, MethodResults, ParamsIn, AppendMessageInput, AppendReceiptInput } from '../shared/method-types.js';
