import { z } from 'zod';
import { DECIMAL_PATTERN, ID_PATTERN, MESSAGE_ID_PATTERN } from './ids.js';
import { PII_MODES } from './types.js';

/**
 * Param schemas of every RPC method: the single source of validation (daemon), param types
 * (client, CLI) and the machine-readable API document. Optional params accept `null` as
 * "unset" (§4) and are normalised to `undefined` by the schema.
 */

const wellFormed = (s: string) => s.isWellFormed();
const WELL_FORMED = 'must be well-formed Unicode (no lone surrogates)';

/** Free text: any well-formed Unicode string. */
export const text = (max: number) => z.string().max(max).refine(wellFormed, WELL_FORMED);
/** A single-line label (names, reasons): no control line breaks. */
export const label = (max: number) =>
  text(max).refine((s) => !/[\r\n]/.test(s), 'must not contain a line break');
/** Agent, chat, operation ids and usernames. */
export const id = () => z.string().regex(ID_PATTERN, 'must match ^[A-Za-z0-9_-]{1,128}$');
/** A canonical decimal position/generation/epoch string. */
export const decimal = () =>
  z.string().regex(DECIMAL_PATTERN, 'must be a canonical decimal string such as "0" or "17" (no sign, no leading zeros)');
/** `chatId:authorAgentId`. */
export const streamIdSchema = () =>
  z.string().regex(/^[A-Za-z0-9_-]{1,128}:[A-Za-z0-9_-]{1,128}$/, 'must be chatId:authorAgentId');
const opt = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);
/** An opaque cursor string. */
const cursor = () => z.string().min(1).max(4096);
const limit = (max: number) => z.number().int().min(1).max(max);
const piiMode = z.enum(PII_MODES);

/** A message record of `streams.append`. */
export const appendMessageSchema = z.strictObject({
  type: z.literal('chat.message'),
  messageId: z.string().regex(MESSAGE_ID_PATTERN, 'must match ^[A-Za-z0-9_.:@/-]{1,256}$'),
  content: text(262_144),
});
/** A receipt record of `streams.append`. */
export const appendReceiptSchema = z.strictObject({
  type: z.literal('chat.receipt'),
  peerStreamId: streamIdSchema(),
  peerGeneration: decimal(),
  nextPosition: decimal(),
  batchId: z.string().min(1).max(1024),
});

/** Param schemas keyed by method name. */
export const paramSchemas = {
  'session.hello': z.strictObject({ token: z.string().min(1).max(1024), client: opt(z.unknown()) }),
  'daemon.status': z.strictObject({}),
  'daemon.check': z.strictObject({ mark: opt(z.boolean()) }),
  'keys.list': z.strictObject({}),
  'keys.rotate': z.strictObject({}),
  'agents.create': z.strictObject({ username: id(), name: label(256).min(1), image: opt(label(2048)) }),
  'agents.list': z.strictObject({}),
  'agents.get': z
    .strictObject({ agentId: opt(id()), username: opt(id()) })
    .refine((p) => (p.agentId === undefined) !== (p.username === undefined), 'give exactly one of agentId or username'),
  'agents.rotateToken': z.strictObject({ agentId: id() }),
  'agents.disable': z.strictObject({ agentId: id() }),
  'agents.setPolicy': z.strictObject({ agentId: id(), pii: piiMode }),
  'grants.add': z.strictObject({ agentId: id(), peerAgentId: id() }),
  'grants.remove': z.strictObject({ agentId: id(), peerAgentId: id() }),
  'grants.list': z.strictObject({ agentId: opt(id()) }),
  'chats.open': z
    .strictObject({ peerAgentId: opt(id()), agentAId: opt(id()), agentBId: opt(id()) })
    .refine(
      (p) => (p.peerAgentId !== undefined) !== (p.agentAId !== undefined && p.agentBId !== undefined) && (p.agentAId === undefined) === (p.agentBId === undefined),
      'give peerAgentId (agent) or both agentAId and agentBId (admin)',
    ),
  'chats.get': z.strictObject({ chatId: id() }),
  'chats.list': z.strictObject({ cursor: opt(cursor()), limit: opt(limit(500)) }),
  'chats.permissions': z.strictObject({ chatId: id() }),
  'chats.history': z.strictObject({
    chatId: id(),
    cursor: opt(cursor()),
    limit: opt(limit(500)),
    direction: opt(z.enum(['backward', 'forward'])),
  }),
  'chats.follow': z.strictObject({ chatId: id(), cursor: opt(cursor()), from: opt(z.enum(['end', 'acknowledged'])) }),
  'chats.unfollow': z.strictObject({ subscriptionId: z.string().min(1).max(128) }),
  'streams.get': z.strictObject({ streamId: streamIdSchema() }),
  'streams.claim': z.strictObject({ streamId: streamIdSchema(), replace: opt(z.boolean()), reason: opt(label(512)) }),
  'streams.release': z.strictObject({ streamId: streamIdSchema(), coordinatorToken: opt(z.string().min(1).max(256)) }),
  'streams.append': z.strictObject({
    streamId: streamIdSchema(),
    coordinatorToken: z.string().min(1).max(256),
    generation: decimal(),
    expectedPosition: decimal(),
    operationId: id(),
    records: z.array(z.discriminatedUnion('type', [appendMessageSchema, appendReceiptSchema])).min(1).max(64),
  }),
  'streams.read': z.strictObject({
    streamId: streamIdSchema(),
    generation: decimal(),
    fromPosition: decimal(),
    limit: opt(limit(1000)),
    maxBytes: opt(z.number().int().min(1).max(1_048_576)),
    waitMs: opt(z.number().int().min(0).max(30_000)),
  }),
  'streams.checkpoint': z.strictObject({
    streamId: streamIdSchema(),
    generation: decimal(),
    fromPosition: opt(decimal()),
    nextPosition: opt(decimal()),
  }),
  'streams.trim': z.strictObject({ streamId: streamIdSchema(), beforePosition: decimal(), force: opt(z.boolean()) }),
  'streams.reset': z.strictObject({ streamId: streamIdSchema(), reason: label(512).min(1) }),
  'operations.get': z.strictObject({ streamId: streamIdSchema(), operationId: id() }),
  'operations.list': z.strictObject({ streamId: streamIdSchema(), cursor: opt(cursor()), limit: opt(limit(500)) }),
  'rpc.discover': z.strictObject({}),
} as const;

/** Every RPC method name. */
export type MethodName = keyof typeof paramSchemas;
/** Params a caller sends for `M` (before normalisation). */
export type ParamsIn<M extends MethodName> = z.input<(typeof paramSchemas)[M]>;
/** Params after validation, as handlers see them. */
export type Params<M extends MethodName> = z.output<(typeof paramSchemas)[M]>;

/** Turn the first schema issue into INVALID_PARAMS details (`path`, `reason`). */
export function describeIssue(issue: z.core.$ZodIssue): { path: string; reason: string } {
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    return { path: path ? `${path}.${key}` : key, reason: 'unknown parameter' };
  }
  return { path, reason: issue.message };
}
