import { z } from 'zod';
import { appendMessageSchema, appendReceiptSchema, id, paramSchemas } from '../shared/schemas.js';

/**
 * Input and output schemas of the MCP tools (docs/mcp.md). Inputs reuse the protocol's own zod
 * schemas wherever a tool parameter is a protocol parameter, so the MCP server accepts exactly
 * what the daemon would and its JSON schemas cannot drift from docs/api.md.
 */

const history = paramSchemas['chats.history'].shape;
const read = paramSchemas['streams.read'].shape;
/** Optional like the protocol's own optional params: `null` means unset. */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

const chatId = history.chatId.describe('the chat (chat_…), from list_chats or open_chat');

/** Input schema of every tool, keyed by tool name. */
export const toolInputs = {
  whoami: z.strictObject({}),
  list_chats: z.strictObject({
    cursor: paramSchemas['chats.list'].shape.cursor.describe('nextCursor of the previous page'),
    limit: paramSchemas['chats.list'].shape.limit.describe('chats per page (1–500, default 100)'),
  }),
  open_chat: z.strictObject({
    peer: id().describe('the other agent: its agent id (agt_…) or its username'),
  }),
  read_new: z.strictObject({
    chatId,
    waitMs: read.waitMs.describe(
      'when nothing is new, wait up to this long for the peer to write a message (0–30000, default 0); only a message (or a break) ends the wait',
    ),
  }),
  acknowledge: z.strictObject({
    chatId,
    batchId: appendReceiptSchema.shape.batchId.describe('the batchId that read_new presented'),
  }),
  send: z.strictObject({
    chatId,
    text: appendMessageSchema.shape.content.describe('the message text'),
    messageId: optional(appendMessageSchema.shape.messageId).describe(
      'your own id for this message; sending the same id twice is refused as a duplicate (default: random)',
    ),
    acknowledge: optional(z.boolean()).describe('also acknowledge the batch read_new presented, in the same atomic append as the message'),
    batchId: optional(appendReceiptSchema.shape.batchId).describe(
      'with acknowledge: the presented batchId, checked before anything is written',
    ),
  }),
  history: z.strictObject({
    chatId,
    cursor: history.cursor.describe('nextCursor of the previous page (keeps its snapshot and direction)'),
    limit: history.limit.describe('messages per page (1–500, default 50)'),
    direction: history.direction.describe('backward (default: newest first) or forward (from the oldest retained)'),
  }),
  permissions: z.strictObject({ chatId: paramSchemas['chats.permissions'].shape.chatId.describe('the chat') }),
  operation_status: z.strictObject({
    chatId,
    operationId: optional(paramSchemas['operations.get'].shape.operationId).describe(
      'an operation of your stream in this chat; default: the send whose outcome is unknown',
    ),
  }),
} as const;

/** Every tool name. */
export type ToolName = keyof typeof toolInputs;
/** Validated input of a tool. */
export type ToolInput<T extends ToolName> = z.output<(typeof toolInputs)[T]>;

const agentRef = z.object({ agentId: z.string(), username: z.string(), name: z.string() });
/** One record of a presented batch, reduced to what an agent reads. */
export const presentedRecord = z.object({
  position: z.string().describe('position in the peer stream'),
  type: z
    .enum(['message', 'receipt', 'fence'])
    .describe('message; receipt: the peer acknowledged your messages; fence: the peer started a new writer session'),
  authorAgentId: z.string(),
  createdAt: z.string().nullable().describe('message: its signed timestamp; fence: when the stream was claimed; receipt: null'),
  content: z.string().nullable().describe("message text (after the sender's PII policy); null for receipts and fences"),
  acknowledgedBefore: z.string().nullable().describe('receipt: the peer has processed your messages before this position of your stream'),
});
const transcriptMessage = z.object({
  streamId: z.string(),
  generation: z.string(),
  position: z.string(),
  fromAgentId: z.string(),
  toAgentId: z.string(),
  createdAt: z.string(),
  content: z.string(),
});
const sessionState = z.enum(['starting', 'running', 'reconnecting', 'paused', 'fenced', 'needs-intervention', 'stopped']);
const sessionView = z.object({
  state: sessionState,
  streamId: z.string(),
  peerStreamId: z.string(),
  epoch: z.string().nullable().describe("the writer epoch of this server's claim; null until the first send or acknowledge claims"),
  next: z
    .object({ generation: z.string(), position: z.string() })
    .describe('where the next presentation starts in the peer stream (after your last receipt)'),
  presentedBatchId: z.string().nullable().describe('the batch presented and not yet acknowledged'),
  uncertainOperationId: z.string().nullable().describe('while paused: the append whose outcome is unknown (see operation_status)'),
});
const acknowledgedView = z.object({ streamId: z.string(), generation: z.string(), nextPosition: z.string() });

/** Output schema (`structuredContent`) of every tool. */
export const toolOutputs = {
  whoami: z.object({
    agentId: z.string(),
    username: z.string(),
    name: z.string(),
    socket: z.string(),
    daemon: z.object({ version: z.string(), protocol: z.string(), kid: z.string() }),
    sessions: z.array(z.object({ chatId: z.string(), state: sessionState })),
  }),
  list_chats: z.object({
    chats: z.array(z.object({ chatId: z.string(), peer: agentRef, createdAt: z.string(), session: sessionState.nullable() })),
    nextCursor: z.string().nullable(),
  }),
  open_chat: z.object({
    chatId: z.string(),
    created: z.boolean().describe('the chat did not exist before'),
    peer: agentRef,
    session: sessionView,
    unreadMessages: z.number().describe('messages of the peer after your last receipt'),
  }),
  read_new: z.object({
    chatId: z.string(),
    batch: z
      .object({
        batchId: z.string(),
        streamId: z.string(),
        generation: z.string(),
        fromPosition: z.string(),
        nextPosition: z.string(),
        records: z.array(presentedRecord),
      })
      .nullable()
      .describe('the presented batch; null when nothing is new'),
    repeated: z.boolean().describe('the same batch as before: it has not been acknowledged yet'),
    more: z.boolean().describe('more batches with messages are waiting after this one'),
  }),
  acknowledge: z.object({
    chatId: z.string(),
    acknowledged: acknowledgedView.describe('the peer stream is acknowledged before nextPosition'),
    operationId: z.string(),
    receiptPosition: z.string().describe('position of the receipt in your stream'),
  }),
  send: z.object({
    chatId: z.string(),
    streamId: z.string(),
    generation: z.string(),
    operationId: z.string(),
    position: z.string().describe('position of the message in your stream'),
    nextPosition: z.string(),
    redactions: z
      .array(z.object({ recordIndex: z.number(), kind: z.string(), count: z.number() }))
      .describe('what your outbound PII policy replaced'),
    acknowledged: acknowledgedView.nullable().describe('with acknowledge: the receipt appended in the same operation'),
  }),
  history: z.object({ chatId: z.string(), messages: z.array(transcriptMessage), nextCursor: z.string().nullable() }),
  permissions: z.object({
    chatId: z.string(),
    policy: z.enum(['grants', 'open']),
    participants: z.array(
      z.object({
        agentId: z.string(),
        canRead: z.boolean(),
        canSend: z.boolean(),
        canClaim: z.boolean(),
        grantedAt: z.string().nullable(),
      }),
    ),
  }),
  operation_status: z.object({
    chatId: z.string(),
    operationId: z.string().nullable(),
    state: z
      .enum(['committed', 'pending', 'unknown', 'none'])
      .describe('committed: stored; unknown: not stored; pending: ask again; none: nothing asked about and nothing paused'),
    committed: z.boolean().nullable().describe('whether the operation is stored (null while pending or none)'),
    generation: z.string().nullable(),
    firstPosition: z.string().nullable(),
    nextPosition: z.string().nullable(),
    committedAt: z.string().nullable(),
    resolved: z.boolean().describe('this call settled the paused append: appending works again'),
    kind: z.enum(['send', 'acknowledge', 'reply']).nullable().describe('what the settled append carried: a message, a receipt, or both'),
    paused: z.boolean().describe('the chat is still paused on an append of unknown outcome'),
  }),
} as const satisfies Record<ToolName, z.ZodObject>;

/** The structured result of a tool. */
export type ToolOutput<T extends ToolName> = z.output<(typeof toolOutputs)[T]>;
/** A chat session's view as tools report it. */
export type SessionView = z.output<typeof sessionView>;
/** A session state. */
export type SessionState = z.output<typeof sessionState>;
/** One presented record. */
export type PresentedRecord = z.output<typeof presentedRecord>;
/** One transcript message. */
export type TranscriptMessage = z.output<typeof transcriptMessage>;
