import type { MethodName } from './schemas.js';
import type {
  Agent, AppendResult, Chat, Checkpoint, ChatBatchNotification, ChatBreakNotification, ChatErrorNotification, CorruptStream, DoctorReport, Jwks, ReadBatch, Role, StoredRecord, StreamState,
} from './types.js';

/** Who may call a method. Finer checks (participant, author) happen in the handler. */
export type Access = 'public' | 'authenticated' | 'agent' | 'admin';

/** One RPC method: both ends, the CLI and the API document read this table. */
export interface MethodDescriptor {
  access: Access;
  summary: string;
  result: string;
}

/** Descriptor of every method (params live in `paramSchemas`, keyed alike). */
export const methods: Record<MethodName, MethodDescriptor> = {
  'session.hello': { access: 'public', summary: 'Authenticate this connection with an agent or admin token.', result: '{role, agentId?, protocol, daemon: {version}, limits, signing: {kid, alg}}' },
  'daemon.status': { access: 'authenticated', summary: 'Version, uptime, counts, storage state, active kid and corrupt streams.', result: '{version, uptimeMs, counts, storage, commits, kid, policy, integrity}' },
  'daemon.check': { access: 'admin', summary: 'Scan the whole store (yello doctor): checksums, heads against records, signatures, operations, indexes; marks damaged streams corrupt unless mark is false.', result: 'DoctorReport' },
  'keys.list': { access: 'authenticated', summary: 'The JWKS of every signing key, active and retired.', result: 'Jwks' },
  'keys.rotate': { access: 'admin', summary: 'Generate a new signing key; new records are signed with it.', result: '{kid}' },
  'agents.create': { access: 'admin', summary: 'Create an agent; its token is returned once and stored only as a hash.', result: '{agent, token}' },
  'agents.list': { access: 'authenticated', summary: 'List agents.', result: '{agents}' },
  'agents.get': { access: 'authenticated', summary: 'One agent by id or username.', result: '{agent}' },
  'agents.rotateToken': { access: 'admin', summary: 'Issue a new token; the old one stops working at once.', result: '{token}' },
  'agents.disable': { access: 'admin', summary: 'Disable an agent: its token stops working, its chats stay readable by the peer.', result: '{agent}' },
  'agents.setPolicy': { access: 'admin', summary: 'Set the outbound PII policy of an agent.', result: '{agent}' },
  'grants.add': { access: 'admin', summary: 'Let agentId open a chat with and send to peerAgentId.', result: '{grant}' },
  'grants.remove': { access: 'admin', summary: 'Revoke a grant; applies to the next append.', result: '{removed}' },
  'grants.list': { access: 'authenticated', summary: 'List grants (agents see their own).', result: '{grants}' },
  'chats.open': { access: 'authenticated', summary: 'Create or find the chat of a pair (race-free).', result: '{chat, created}' },
  'chats.get': { access: 'authenticated', summary: 'A chat and its two stream states.', result: '{chat, streams}' },
  'chats.list': { access: 'authenticated', summary: "The caller's chats (all for admin).", result: '{chats, nextCursor}' },
  'chats.permissions': { access: 'authenticated', summary: 'Current permission and grant state of a chat.', result: '{chatId, policy, participants}' },
  'chats.history': { access: 'authenticated', summary: 'Snapshot-paged transcript of both directions.', result: '{entries, nextCursor, liveCursor}' },
  'chats.follow': { access: 'authenticated', summary: 'Subscribe to chats.batch notifications from a compound cursor.', result: '{subscriptionId, cursor}' },
  'chats.unfollow': { access: 'authenticated', summary: 'End a subscription of this connection.', result: '{subscriptionId, ended}' },
  'streams.get': { access: 'authenticated', summary: 'State of one directional stream.', result: 'StreamState' },
  'streams.claim': { access: 'agent', summary: 'Become the coordinator of your outbound stream (appends a writer fence).', result: '{streamId, generation, epoch, coordinatorToken, nextPosition}' },
  'streams.release': { access: 'authenticated', summary: 'Release the writer claim.', result: 'StreamState' },
  'streams.append': { access: 'agent', summary: 'Append 1–64 records atomically at expectedPosition, fenced by the coordinator token.', result: 'AppendResult' },
  'streams.read': { access: 'authenticated', summary: 'Read records from a position with exact continuity.', result: 'ReadBatch' },
  'streams.checkpoint': { access: 'authenticated', summary: 'A daemon-signed checkpoint (record count and chain digest) of a range of one stream generation, for exports.', result: 'Checkpoint' },
  'streams.trim': { access: 'admin', summary: 'Drop records below beforePosition.', result: '{firstPosition}' },
  'streams.reset': { access: 'admin', summary: 'Start generation n+1 at position 0; seals the old one.', result: 'StreamState' },
  'operations.get': { access: 'authenticated', summary: 'Whether an operation committed, and where.', result: '{state, generation?, firstPosition?, nextPosition?, committedAt?, requestDigest?}' },
  'operations.list': { access: 'authenticated', summary: 'Committed operations of a stream, oldest first.', result: '{operations, nextCursor}' },
  'rpc.discover': { access: 'public', summary: 'The OpenRPC document of this API.', result: 'OpenRPC document' },
};

/** The result of `session.hello`. */
export interface HelloResult {
  role: Role;
  /** The agent of an agent session; null for admin. */
  agentId: string | null;
  protocol: 'yello.chat.v1';
  daemon: { version: string };
  limits: { maxAppendRequestBytes: number; maxLineBytes: number };
  signing: { kid: string; alg: 'ES256' };
}

/** Operation state as `operations.get` reports it; fields an uncommitted operation lacks are null (§4). */
export interface OperationInfo {
  operationId: string;
  state: 'committed' | 'pending' | 'unknown';
  generation: string | null;
  firstPosition: string | null;
  nextPosition: string | null;
  committedAt: string | null;
  requestDigest: string | null;
}

/** A grant. */
export interface Grant {
  agentId: string;
  peerAgentId: string;
  grantedAt: string;
}

/** Result types keyed by method name, for typed clients. */
export interface MethodResults {
  'session.hello': HelloResult;
  'daemon.status': {
    version: string;
    uptimeMs: number;
    counts: { agents: number; chats: number; streams: number; records: number };
    storage: 'ok' | 'read-only';
    /** Synced batches written since start, the writes grouped into them, and log checkpoints. */
    commits: { batches: number; writes: number; checkpoints: number };
    kid: string;
    policy: 'grants' | 'open';
    /** Streams the daemon cannot vouch for (see `yello doctor`), and write-ahead-log losses found at startup. */
    integrity: {
      corruptStreams: CorruptStream[];
      walIncidents: Array<{ detectedAt: string; bytes: number; streams: number; guardDamaged: boolean }>;
    };
  };
  'daemon.check': DoctorReport;
  'keys.list': Jwks;
  'keys.rotate': { kid: string };
  'agents.create': { agent: Agent; token: string };
  'agents.list': { agents: Agent[] };
  'agents.get': { agent: Agent };
  'agents.rotateToken': { token: string };
  'agents.disable': { agent: Agent };
  'agents.setPolicy': { agent: Agent };
  'grants.add': { grant: Grant };
  'grants.remove': { removed: boolean };
  'grants.list': { grants: Grant[] };
  'chats.open': { chat: Chat; created: boolean };
  'chats.get': { chat: Chat; streams: [StreamState, StreamState] };
  'chats.list': { chats: Chat[]; nextCursor: string | null };
  'chats.permissions': {
    chatId: string;
    policy: 'grants' | 'open';
    participants: Array<{ agentId: string; canRead: boolean; canSend: boolean; canClaim: boolean; grant: { grantedAt: string } | null }>;
  };
  'chats.history': { entries: StoredRecord[]; nextCursor: string | null; liveCursor: string };
  'chats.follow': { subscriptionId: string; cursor: string };
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

/** Notifications the daemon pushes. */
export interface NotificationParams {
  'chats.batch': ChatBatchNotification;
  'chats.break': ChatBreakNotification;
  'chats.error': ChatErrorNotification;
}
