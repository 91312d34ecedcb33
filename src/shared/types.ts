/**
 * Protocol value types of docs/protocol.md §5–6, as they travel on the wire. Positions,
 * generations and epochs are canonical decimal strings.
 */

import type { ContinuityReason } from './errors.js';

/** Who a session speaks for. */
export type Role = 'agent' | 'admin';

/** Outbound PII policy modes (§7), as a list so the param schema can enumerate them. */
export const PII_MODES = ['off', 'redact', 'reject'] as const;

/** An outbound PII policy mode (§7); `redact` is the default. */
export type PiiMode = (typeof PII_MODES)[number];

/** An agent as listed to callers (never its token). */
export interface Agent {
  id: string;
  username: string;
  name: string;
  image: string | null;
  disabled: boolean;
  pii: PiiMode;
  createdAt: string;
}

/** The short agent form embedded in a chat. */
export interface AgentSummary {
  id: string;
  name: string;
  username: string;
  image: string | null;
}

/** A two-party chat; `agentAId` is the lexicographically smaller id. */
export interface Chat {
  id: string;
  agentAId: string;
  agentBId: string;
  agentA: AgentSummary;
  agentB: AgentSummary;
  createdAt: string;
}

/** A message signature (JWS ES256 encoding of the §5 payload). */
export interface MessageSignature {
  kid: string;
  alg: 'ES256';
  value: string;
  createdAt: string;
}

/** `wrapper.message`. */
export interface ChatMessage {
  chatId: string;
  fromAgentId: string;
  toAgentId: string;
  clientMessageId: string;
  content: string;
  contentSha256: string;
  signature: MessageSignature;
}

/** `wrapper.receipt`: acknowledges everything of the peer generation before `nextPosition`. */
export interface ChatReceipt {
  peerStreamId: string;
  peerGeneration: string;
  nextPosition: string;
  batchId: string;
}

/** `wrapper.fence`: written by `streams.claim`; never holds the token. */
export interface WriterFence {
  epoch: string;
  claimedAt: string;
  replaced: boolean;
  reason?: string;
}

interface WrapperBase {
  version: 2;
  chatId: string;
  authorAgentId: string;
  operationId: string;
  recordIndex: number;
}

/** The stored envelope, tagged by `type`. */
export type RecordWrapper =
  | (WrapperBase & { type: 'chat.message'; message: ChatMessage })
  | (WrapperBase & { type: 'chat.receipt'; receipt: ChatReceipt })
  | (WrapperBase & { type: 'chat.writer-fence'; fence: WriterFence });

/** What every read returns. */
export interface StoredRecord {
  streamId: string;
  generation: string;
  position: string;
  wrapper: RecordWrapper;
}

/** Public state of one directional stream. */
export interface StreamState {
  streamId: string;
  chatId: string;
  authorAgentId: string;
  generation: string;
  firstPosition: string;
  nextPosition: string;
  acknowledged: { generation: string; nextPosition: string } | null;
  /**
   * `active`: a coordinator holds the stream; `connected`: it is active and a connection that
   * made or used the claim is open (false for an abandoned claim, and after a daemon restart
   * until the token is used again).
   */
  writer: { epoch: string; claimedAt: string | null; active: boolean; connected: boolean };
}

/** A JWKS entry as `keys.list` returns it. */
export interface PublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: 'ES256';
  use: 'sig';
  status: 'active' | 'retired';
  createdAt: string;
}

/** A JSON Web Key Set of daemon signing keys. */
export interface Jwks {
  keys: PublicJwk[];
}

/** One delivered batch of one stream (a `streams.read` result). */
export interface ReadBatch {
  batchId: string;
  streamId: string;
  generation: string;
  fromPosition: string;
  nextPosition: string;
  records: StoredRecord[];
  sealed: boolean;
}

/** A `chats.batch` notification. */
export interface ChatBatchNotification {
  subscriptionId: string;
  batchId: string;
  streamId: string;
  generation: string;
  fromPosition: string;
  nextPosition: string;
  records: StoredRecord[];
  cursor: string;
}

/** A `chats.break` notification; the subscription has ended. */
export interface ChatBreakNotification {
  subscriptionId: string;
  reason: ContinuityReason;
  streamId: string;
  expected: unknown;
  actual: unknown;
}

/**
 * `chats.error` params: the subscription ended for a reason that is not a continuity break
 * (stored data failed its check, or a daemon bug). `error` is shaped like a JSON-RPC error
 * object, `data.type` included. A person has to look: nothing more will be delivered.
 */
export interface ChatErrorNotification {
  subscriptionId: string;
  error: { code: number; message: string; data: { type: string; [key: string]: unknown } };
}

/**
 * A `chats.opened` notification of a `chats.watch` subscription: `chats.open` created a chat
 * that includes the watching agent (opened by either agent or the admin).
 */
export interface ChatOpenedNotification {
  subscriptionId: string;
  /** The chat as `chats.get` returns it in `chat`. */
  chat: Chat;
}

/** One PII redaction summary entry of an append result. */
export interface Redaction {
  recordIndex: number;
  kind: string;
  count: number;
}

/** The result of `streams.append`. */
export interface AppendResult {
  streamId: string;
  generation: string;
  operationId: string;
  firstPosition: string;
  nextPosition: string;
  records: StoredRecord[];
  duplicate: boolean;
  redactions: Redaction[];
}

/** A checkpoint signature: ES256 over the checkpoint payload, by the daemon key `kid`. */
export interface CheckpointSignature {
  kid: string;
  alg: 'ES256';
  value: string;
}

/**
 * `streams.checkpoint`: the daemon's signed statement that positions `firstPosition` ..
 * `nextPosition - 1` of `generation` of `streamId` held exactly `recordCount` records whose
 * canonical bytes hash to `chainDigest`, as of `createdAt` (docs/protocol.md §5.9).
 */
export interface Checkpoint {
  type: 'yello.checkpoint.v1';
  streamId: string;
  chatId: string;
  authorAgentId: string;
  generation: string;
  firstPosition: string;
  nextPosition: string;
  recordCount: string;
  chainDigest: string;
  createdAt: string;
  signature: CheckpointSignature;
}

/** One problem `yello doctor` found, with where it is. */
export interface DoctorProblem {
  /** `checksum`, `record`, `head`, `operation`, `index` or `directory`. */
  kind: string;
  key: string | null;
  streamId: string | null;
  generation: string | null;
  position: string | null;
  detail: string;
}

/** A stream generation the daemon cannot vouch for from `fromPosition` on (`daemon.status`, `daemon.check`). */
export interface CorruptStream {
  streamId: string;
  /** null: the head itself is unreadable or missing. */
  generation: string | null;
  fromPosition: string;
  detail: string;
  detectedAt: string;
}

/** The result of `daemon.check` (`yello doctor`). */
export interface DoctorReport {
  checkedAt: string;
  counts: { values: number; agents: number; chats: number; streams: number; records: number; messages: number; operations: number };
  problems: DoctorProblem[];
  /** Corruption marks after the check, including the ones it added. */
  corruptStreams: CorruptStream[];
}
