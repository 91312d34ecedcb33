import { z } from 'zod';
import { defineMethod, indexMethods, type ResultOf } from './method-descriptor.js';
import type { MethodName as PlainMethodName, MethodParams as PlainParams, MethodResults as PlainResults } from './method-types.js';
import type { BackupManifest, ChatPermissions, DaemonStatus, Grant, HelloResult, MetricsScrape, OperationInfo } from './results.js';
import {
  appendMessageSchema,
  appendReceiptSchema,
  cursor,
  decimal,
  id,
  label,
  limit,
  opt,
  piiMode,
  streamIdSchema,
} from './schema-parts.js';
import type { Agent, AppendResult, Chat, Checkpoint, DoctorReport, Jwks, ReadBatch, StoredRecord, StreamState } from './types.js';

/**
 * The method table: one descriptor per RPC method (params schema, access, docs, result type),
 * the single source of the daemon's dispatch and handler types, the client's typed calls and
 * the API document. Order is the API document's order.
 */
export const methods = indexMethods([
  defineMethod<HelloResult>()({
    name: 'session.hello',
    access: 'public',
    params: z.strictObject({ token: z.string().min(1).max(1024), client: opt(z.unknown()) }),
    summary: 'Authenticate this connection with an agent or admin token.',
    result: '{role, agentId?, protocol, daemon: {version}, limits, signing: {kid, alg}}',
  }),
  defineMethod<DaemonStatus>()({
    name: 'daemon.status',
    access: 'authenticated',
    params: z.strictObject({}),
    summary: 'Version, uptime, counts, storage state, active kid and corrupt streams.',
    result: '{version, uptimeMs, counts, storage, commits, kid, policy, integrity}',
  }),
  defineMethod<MetricsScrape>()({
    name: 'daemon.metrics',
    access: 'admin',
    params: z.strictObject({}),
    summary:
      "One Prometheus scrape (yello metrics): the text exposition of the daemon's counters, histograms and gauges; no ids, content or secrets.",
    result: '{contentType, text}',
  }),
  defineMethod<DoctorReport>()({
    name: 'daemon.check',
    access: 'admin',
    params: z.strictObject({ mark: opt(z.boolean()) }),
    summary:
      'Scan the whole store (yello doctor): checksums, heads against records, signatures, operations, indexes; marks damaged streams corrupt unless mark is false.',
    result: 'DoctorReport',
  }),
  defineMethod<BackupManifest>()({
    name: 'daemon.backup',
    access: 'admin',
    params: z.strictObject({ path: label(4096).min(1) }),
    summary:
      'Write a consistent copy of the store (one LevelDB snapshot), the signing keys, the admin token and the token secret to a new directory (yello backup); returns its manifest.',
    result: 'BackupManifest',
  }),
  defineMethod<Jwks>()({
    name: 'keys.list',
    access: 'authenticated',
    params: z.strictObject({}),
    summary: 'The JWKS of every signing key, active and retired.',
    result: 'Jwks',
  }),
  defineMethod<{ kid: string }>()({
    name: 'keys.rotate',
    access: 'admin',
    params: z.strictObject({}),
    summary: 'Generate a new signing key; new records are signed with it.',
    result: '{kid}',
  }),

  defineMethod<{ agent: Agent; token: string }>()({
    name: 'agents.create',
    access: 'admin',
    params: z.strictObject({ username: id(), name: label(256).min(1), image: opt(label(2048)) }),
    summary: 'Create an agent; its token is returned once and stored only as a hash.',
    result: '{agent, token}',
  }),
  defineMethod<{ agents: Agent[]; nextCursor: string | null }>()({
    name: 'agents.list',
    access: 'authenticated',
    params: z.strictObject({ cursor: opt(cursor()), limit: opt(limit(500)) }),
    summary: 'List agents, a page at a time.',
    result: '{agents, nextCursor}',
  }),
  defineMethod<{ agent: Agent }>()({
    name: 'agents.get',
    access: 'authenticated',
    params: z
      .strictObject({ agentId: opt(id()), username: opt(id()) })
      .refine((p) => (p.agentId === undefined) !== (p.username === undefined), 'give exactly one of agentId or username'),
    summary: 'One agent by id or username.',
    result: '{agent}',
  }),
  defineMethod<{ token: string }>()({
    name: 'agents.rotateToken',
    access: 'admin',
    params: z.strictObject({ agentId: id() }),
    summary: 'Issue a new token; the old one stops working at once.',
    result: '{token}',
  }),
  defineMethod<{ agent: Agent }>()({
    name: 'agents.disable',
    access: 'admin',
    params: z.strictObject({ agentId: id() }),
    summary: 'Disable an agent: its token stops working, its chats stay readable by the peer.',
    result: '{agent}',
  }),
  defineMethod<{ agent: Agent }>()({
    name: 'agents.setPolicy',
    access: 'admin',
    params: z.strictObject({ agentId: id(), pii: piiMode() }),
    summary: 'Set the outbound PII policy of an agent.',
    result: '{agent}',
  }),

  defineMethod<{ grant: Grant }>()({
    name: 'grants.add',
    access: 'admin',
    params: z.strictObject({ agentId: id(), peerAgentId: id() }),
    summary: 'Let agentId open a chat with and send to peerAgentId.',
    result: '{grant}',
  }),
  defineMethod<{ removed: boolean }>()({
    name: 'grants.remove',
    access: 'admin',
    params: z.strictObject({ agentId: id(), peerAgentId: id() }),
    summary: 'Revoke a grant; applies to the next append.',
    result: '{removed}',
  }),
  defineMethod<{ grants: Grant[]; nextCursor: string | null }>()({
    name: 'grants.list',
    access: 'authenticated',
    params: z.strictObject({ agentId: opt(id()), cursor: opt(cursor()), limit: opt(limit(500)) }),
    summary: 'List grants (agents see their own), a page at a time.',
    result: '{grants, nextCursor}',
  }),

  defineMethod<{ chat: Chat; created: boolean }>()({
    name: 'chats.open',
    access: 'authenticated',
    params: z
      .strictObject({ peerAgentId: opt(id()), agentAId: opt(id()), agentBId: opt(id()) })
      .refine(
        (p) =>
          (p.peerAgentId !== undefined) !== (p.agentAId !== undefined && p.agentBId !== undefined) &&
          (p.agentAId === undefined) === (p.agentBId === undefined),
        'give peerAgentId (agent) or both agentAId and agentBId (admin)',
      ),
    summary: 'Create or find the chat of a pair (race-free).',
    result: '{chat, created}',
  }),
  defineMethod<{ chat: Chat; streams: [StreamState, StreamState] }>()({
    name: 'chats.get',
    access: 'authenticated',
    params: z.strictObject({ chatId: id() }),
    summary: 'A chat and its two stream states.',
    result: '{chat, streams}',
  }),
  defineMethod<{ chats: Chat[]; nextCursor: string | null }>()({
    name: 'chats.list',
    access: 'authenticated',
    params: z.strictObject({ cursor: opt(cursor()), limit: opt(limit(500)) }),
    summary: "The caller's chats (all for admin).",
    result: '{chats, nextCursor}',
  }),
  defineMethod<ChatPermissions>()({
    name: 'chats.permissions',
    access: 'authenticated',
    params: z.strictObject({ chatId: id() }),
    summary: 'Current permission and grant state of a chat.',
    result: '{chatId, policy, participants}',
  }),
  defineMethod<{ entries: StoredRecord[]; nextCursor: string | null; liveCursor: string }>()({
    name: 'chats.history',
    access: 'authenticated',
    params: z.strictObject({
      chatId: id(),
      cursor: opt(cursor()),
      limit: opt(limit(500)),
      direction: opt(z.enum(['backward', 'forward'])),
    }),
    summary: 'Snapshot-paged transcript of both directions.',
    result: '{entries, nextCursor, liveCursor}',
  }),
  defineMethod<{ subscriptionId: string; cursor: string }>()({
    name: 'chats.follow',
    access: 'authenticated',
    params: z.strictObject({ chatId: id(), cursor: opt(cursor()), from: opt(z.enum(['end', 'acknowledged', 'generation-start'])) }),
    summary:
      "Subscribe to chats.batch notifications from a compound cursor, the current ends, (agents) where their own last receipt left off, or (agents) the start of the peer stream's current generation.",
    result: '{subscriptionId, cursor}',
  }),
  defineMethod<{ subscriptionId: string }>()({
    name: 'chats.watch',
    access: 'agent',
    params: z.strictObject({}),
    summary: 'Subscribe to chats.opened notifications: every chat created later that includes the caller.',
    result: '{subscriptionId}',
  }),
  defineMethod<{ subscriptionId: string; ended: boolean }>()({
    name: 'chats.unfollow',
    access: 'authenticated',
    params: z.strictObject({ subscriptionId: z.string().min(1).max(128) }),
    summary: 'End a subscription of this connection.',
    result: '{subscriptionId, ended}',
  }),

  defineMethod<StreamState>()({
    name: 'streams.get',
    access: 'authenticated',
    params: z.strictObject({ streamId: streamIdSchema() }),
    summary: 'State of one directional stream.',
    result: 'StreamState',
  }),
  defineMethod<{ streamId: string; generation: string; epoch: string; coordinatorToken: string; nextPosition: string }>()({
    name: 'streams.claim',
    access: 'agent',
    params: z.strictObject({
      streamId: streamIdSchema(),
      replace: opt(z.union([z.boolean(), z.literal('if-abandoned')])),
      reason: opt(label(512)),
    }),
    summary:
      'Become the coordinator of your outbound stream (appends a writer fence); replace: true displaces any holder, "if-abandoned" only one without an open connection.',
    result: '{streamId, generation, epoch, coordinatorToken, nextPosition}',
  }),
  defineMethod<StreamState>()({
    name: 'streams.release',
    access: 'authenticated',
    params: z.strictObject({ streamId: streamIdSchema(), coordinatorToken: opt(z.string().min(1).max(256)) }),
    summary: 'Release the writer claim.',
    result: 'StreamState',
  }),
  defineMethod<AppendResult>()({
    name: 'streams.append',
    access: 'agent',
    params: z.strictObject({
      streamId: streamIdSchema(),
      coordinatorToken: z.string().min(1).max(256),
      generation: decimal(),
      expectedPosition: decimal(),
      operationId: id(),
      records: z
        .array(z.discriminatedUnion('type', [appendMessageSchema, appendReceiptSchema]))
        .min(1)
        .max(64),
    }),
    summary: 'Append 1–64 records atomically at expectedPosition, fenced by the coordinator token.',
    result: 'AppendResult',
  }),
  defineMethod<ReadBatch>()({
    name: 'streams.read',
    access: 'authenticated',
    params: z.strictObject({
      streamId: streamIdSchema(),
      generation: decimal(),
      fromPosition: decimal(),
      limit: opt(limit(1000)),
      maxBytes: opt(z.number().int().min(1).max(1_048_576)),
      waitMs: opt(z.number().int().min(0).max(30_000)),
    }),
    summary: 'Read records from a position with exact continuity.',
    result: 'ReadBatch',
  }),
  defineMethod<Checkpoint>()({
    name: 'streams.checkpoint',
    access: 'authenticated',
    params: z.strictObject({
      streamId: streamIdSchema(),
      generation: decimal(),
      fromPosition: opt(decimal()),
      nextPosition: opt(decimal()),
    }),
    summary: 'A daemon-signed checkpoint (record count and chain digest) of a range of one stream generation, for exports.',
    result: 'Checkpoint',
  }),
  defineMethod<{ firstPosition: string }>()({
    name: 'streams.trim',
    access: 'admin',
    params: z.strictObject({ streamId: streamIdSchema(), beforePosition: decimal(), force: opt(z.boolean()) }),
    summary: 'Drop records below beforePosition.',
    result: '{firstPosition}',
  }),
  defineMethod<StreamState>()({
    name: 'streams.reset',
    access: 'admin',
    params: z.strictObject({ streamId: streamIdSchema(), reason: label(512).min(1) }),
    summary: 'Start generation n+1 at position 0; seals the old one.',
    result: 'StreamState',
  }),

  defineMethod<OperationInfo>()({
    name: 'operations.get',
    access: 'authenticated',
    params: z.strictObject({ streamId: streamIdSchema(), operationId: id() }),
    summary: 'Whether an operation committed, and where.',
    result: '{state, generation?, firstPosition?, nextPosition?, committedAt?, requestDigest?}',
  }),
  defineMethod<{ operations: OperationInfo[]; nextCursor: string | null }>()({
    name: 'operations.list',
    access: 'authenticated',
    params: z.strictObject({ streamId: streamIdSchema(), cursor: opt(cursor()), limit: opt(limit(500)) }),
    summary: 'Committed operations of a stream, oldest first.',
    result: '{operations, nextCursor}',
  }),
  defineMethod<Record<string, unknown>>()({
    name: 'rpc.discover',
    access: 'public',
    params: z.strictObject({}),
    summary: 'The OpenRPC document of this API.',
    result: 'OpenRPC document',
  }),
]);

/** Every RPC method name. */
export type MethodName = keyof typeof methods;
/** The descriptor of `M`. */
export type MethodOf<M extends MethodName> = (typeof methods)[M];
/** Params a caller sends for `M` (before normalisation). */
export type ParamsIn<M extends MethodName> = z.input<MethodOf<M>['params']>;
/** Params after validation, as handlers see them. */
export type Params<M extends MethodName> = z.output<MethodOf<M>['params']>;
/** What `M` answers: the type a handler must return and a client call resolves to. */
export type Result<M extends MethodName> = ResultOf<MethodOf<M>>;
/** Result types keyed by method name. */
export type MethodResults = { [M in MethodName]: Result<M> };

// The exact type equality test (each side's assignability alone would let optional and
// required params pass as the same).
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type MustBeNever<T extends never> = T;
type Both = MethodName & PlainMethodName;
/** Methods whose params or result differ from the zod-free types of method-types.ts (none). */
type TypeDrift = {
  [M in Both]: Same<ParamsIn<M>, PlainParams[M]> extends true ? (Same<Result<M>, PlainResults[M]> extends true ? never : M) : M;
}[Both];
/**
 * Compile-time proof that method-types.ts (what the client and its declarations use) names the
 * methods of this table and says what their params and results are: a drift fails the build,
 * naming the method.
 */
export type PlainTypesMatch = MustBeNever<TypeDrift>;
/** The same proof for the method names. */
export type PlainNamesMatch = MustBeNever<Same<MethodName, PlainMethodName> extends true ? never : 'the method names differ'>;
