import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { Chat, MessageBatch } from '../client/index.js';
import { makeStreamId } from '../shared/ids.js';
import type { AgentSessions } from './agent-sessions.js';
import type { McpLog } from './log.js';
import { batchLines, presentRecord, transcriptLines, transcriptMessage } from './present.js';
import { describeError, type ToolErrorInfo } from './tool-errors.js';
import { toolInputs, toolOutputs, type ToolInput, type ToolName, type ToolOutput, type TranscriptMessage } from './tool-schemas.js';

/** `read_new` without `waitMs` does not wait. */
export const READ_DEFAULTS = { waitMs: 0 } as const;

/** One tool: what the model is told, and how it runs. */
interface ToolSpec<T extends ToolName> {
  title: string;
  description: string;
  annotations: ToolAnnotations;
  run(input: ToolInput<T>): Promise<{ text: string; structured: ToolOutput<T> }>;
}

/** A tool error result: the agent reads `type: message` and what to do; `_meta` carries the same for programs. */
export function toolError(err: unknown, context: { chatId?: string; socketPath: string }): CallToolResult {
  return toolErrorResult(describeError(err, context));
}

function toolErrorResult(info: ToolErrorInfo): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: `${info.type}: ${info.message}\nWhat to do: ${info.action}` }],
    _meta: { 'yello/error': info },
  };
}

const peerOf = (chat: Chat, me: string) => (chat.agentAId === me ? chat.agentB : chat.agentA);
const agentRef = (a: { id: string; username: string; name: string }) => ({ agentId: a.id, username: a.username, name: a.name });
const batchView = (b: MessageBatch) => ({
  batchId: b.batchId,
  streamId: b.streamId,
  generation: b.generation,
  fromPosition: b.fromPosition,
  nextPosition: b.nextPosition,
  records: b.records.map(presentRecord),
});
const defined = <T extends Record<string, unknown>>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/** Register every tool of docs/mcp.md on `server`. */
export function registerTools(server: McpServer, agent: AgentSessions, log: McpLog): void {
  const register = <T extends ToolName>(name: T, spec: ToolSpec<T>) => {
    server.registerTool(
      name,
      {
        title: spec.title,
        description: spec.description,
        inputSchema: toolInputs[name],
        outputSchema: toolOutputs[name],
        annotations: spec.annotations,
      },
      (async (input: ToolInput<T>): Promise<CallToolResult> => {
        const chatId = (input as { chatId?: string }).chatId;
        try {
          const { text, structured } = await spec.run(input);
          return { content: [{ type: 'text', text }], structuredContent: structured };
        } catch (err) {
          const info = describeError(err, { ...(chatId ? { chatId } : {}), socketPath: agent.link.socketPath });
          log.warn({ tool: name, chatId, type: info.type }, 'tool failed');
          return toolErrorResult(info);
        }
      }) as never,
    );
  };

  register('whoami', {
    title: 'Who am I',
    description:
      'Who this server speaks for (agent id, username, name), the daemon it talks to, and the chats this server has opened with their state.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run() {
      const hello = await agent.hello();
      const me = await agent.me();
      const sessions = agent.all().map((s) => ({ chatId: s.chatId, state: s.state }));
      const structured = {
        agentId: me.id,
        username: me.username,
        name: me.name,
        socket: agent.link.socketPath,
        daemon: { version: hello.daemon.version, protocol: hello.protocol, kid: hello.signing.kid },
        sessions,
      };
      const open = sessions.length ? sessions.map((s) => `${s.chatId} (${s.state})`).join(', ') : 'none yet';
      return {
        text: `You are ${me.username} (${me.name}, ${me.id}) on yellod ${hello.daemon.version} at ${agent.link.socketPath}. Chats opened by this server: ${open}.`,
        structured,
      };
    },
  });

  register('list_chats', {
    title: 'List chats',
    description:
      'Your chats, ordered by chat id, one page at a time: the other agent of each, and whether this server has a session for it.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(input) {
      const { agentId } = await agent.hello();
      const r = await agent.link.call('chats.list', defined({ cursor: input.cursor, limit: input.limit }));
      const chats = r.chats.map((c) => ({
        chatId: c.id,
        peer: agentRef(peerOf(c, agentId)),
        createdAt: c.createdAt,
        session: agent.existing(c.id)?.state ?? null,
      }));
      const lines = chats.map(
        (c) => `${c.chatId} with ${c.peer.username} (${c.peer.name}, ${c.peer.agentId})${c.session ? `, session ${c.session}` : ''}`,
      );
      const text =
        (lines.length ? lines.join('\n') : 'You have no chats yet: open_chat starts one.') +
        (r.nextCursor ? `\nMore: call list_chats with cursor ${r.nextCursor}` : '');
      return { text, structured: { chats, nextCursor: r.nextCursor } };
    },
  });

  register('open_chat', {
    title: 'Open a chat',
    description:
      "Open (or find) your chat with another agent, named by agent id or username, and start this server's session for it. Writes nothing: your first send or acknowledge makes this server the one writer for you in that chat. Reports how many messages wait since your last receipt. Reads and acknowledges nothing.",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    async run(input) {
      const peer = await agent.resolveAgent(input.peer);
      const { chat, created } = await agent.link.call('chats.open', { peerAgentId: peer.id });
      const session = await agent.session(chat.id);
      session.assertUsable();
      const unreadMessages = await session.unreadMessages();
      const text = `Chat ${chat.id} with ${peer.username} (${created ? 'created' : 'existing'}). ${unreadMessages === 0 ? 'No message waits since your last receipt.' : `${unreadMessages} message(s) wait since your last receipt: call read_new.`}`;
      return { text, structured: { chatId: chat.id, created, peer: agentRef(peer), session: session.view(), unreadMessages } };
    },
  });

  register('read_new', {
    title: 'Read new messages',
    description:
      'Show the next batch of messages from the other agent that you have not acknowledged, starting after your last receipt. The same batch (same batchId) is shown again until you acknowledge it with acknowledge, or with send and acknowledge: true. Reading never acknowledges and never writes. To wait for the other agent, call it with waitMs: only a message ends the wait (their receipts never do), so a loop of read_new {waitMs} and acknowledge writes nothing while nobody speaks.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(input) {
      const session = await agent.session(input.chatId);
      const r = await session.readNew({ waitMs: input.waitMs ?? READ_DEFAULTS.waitMs });
      const peer = peerOf(session.chat, session.agentId).username;
      if (!r.batch)
        return {
          text: `Nothing new from ${peer} in chat ${input.chatId}.`,
          structured: { chatId: input.chatId, batch: null, repeated: false, more: false },
        };
      const text = [
        `Chat ${input.chatId}, from ${peer}, positions ${r.batch.fromPosition}..${r.batch.nextPosition} of ${r.batch.streamId}${r.repeated ? ' (shown before, not acknowledged yet)' : ''}:`,
        ...batchLines(r.batch, session.chat),
        `batchId: ${r.batch.batchId}`,
        `When you have processed it: acknowledge {chatId, batchId}, or reply with send {chatId, text, acknowledge: true}.${r.more ? ' More messages follow after this batch.' : ''}`,
      ].join('\n');
      return { text, structured: { chatId: input.chatId, batch: batchView(r.batch), repeated: r.repeated, more: r.more } };
    },
  });

  register('acknowledge', {
    title: 'Acknowledge',
    description:
      'Acknowledge the batch read_new presented (appends a receipt to your stream): the other agent then knows you have processed everything up to its end. Acknowledge only what you have processed.',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    async run(input) {
      const session = await agent.session(input.chatId);
      const { result, batch } = await session.acknowledge(input.batchId);
      const acknowledged = { streamId: batch.streamId, generation: batch.generation, nextPosition: batch.nextPosition };
      return {
        text: `Acknowledged ${peerOf(session.chat, session.agentId).username}'s records before position ${batch.nextPosition} (receipt at position ${result.firstPosition} of ${result.streamId}, operation ${result.operationId}).`,
        structured: { chatId: input.chatId, acknowledged, operationId: result.operationId, receiptPosition: result.firstPosition },
      };
    },
  });

  register('send', {
    title: 'Send a message',
    description:
      'Send a message to the other agent of a chat. With acknowledge: true the message and the receipt of the batch read_new presented are appended atomically (both or neither). If the outcome is unknown (OUTCOME_UNKNOWN), do not send again: call operation_status.',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    async run(input) {
      const session = await agent.session(input.chatId);
      const { result, acknowledged } = await session.send(
        defined({ text: input.text, messageId: input.messageId, acknowledge: input.acknowledge, batchId: input.batchId }) as {
          text: string;
        },
      );
      const ack = acknowledged
        ? { streamId: acknowledged.streamId, generation: acknowledged.generation, nextPosition: acknowledged.nextPosition }
        : null;
      const redacted = result.redactions.map((r) => `${r.count} × ${r.kind}`).join(', ');
      const text =
        `Sent to ${peerOf(session.chat, session.agentId).username} at position ${result.firstPosition} of ${result.streamId} (operation ${result.operationId})` +
        (ack ? `, acknowledging their records before position ${ack.nextPosition} in the same append` : '') +
        (redacted ? `. Your PII policy redacted: ${redacted}` : '') +
        '.';
      return {
        text,
        structured: {
          chatId: input.chatId,
          streamId: result.streamId,
          generation: result.generation,
          operationId: result.operationId,
          position: result.firstPosition,
          nextPosition: result.nextPosition,
          redactions: result.redactions,
          acknowledged: ack,
        },
      };
    },
  });

  register('history', {
    title: 'Chat history',
    description:
      'The transcript of a chat (messages of both agents as stored and signed), one page at a time: backward (newest first, the default) or forward. Pages keep the snapshot of the first call. Reading history acknowledges nothing.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(input) {
      const r = await agent.link.call(
        'chats.history',
        defined({ chatId: input.chatId, cursor: input.cursor, limit: input.limit, direction: input.direction }) as { chatId: string },
      );
      const chat = agent.existing(input.chatId)?.chat ?? (await agent.link.call('chats.get', { chatId: input.chatId })).chat;
      const messages = r.entries.map(transcriptMessage).filter((m): m is TranscriptMessage => m !== null);
      const text =
        (messages.length ? transcriptLines(messages, chat).join('\n') : 'No messages on this page.') +
        (r.nextCursor ? `\nMore: call history with cursor ${r.nextCursor}` : '');
      return { text, structured: { chatId: input.chatId, messages, nextCursor: r.nextCursor } };
    },
  });

  register('permissions', {
    title: 'Chat permissions',
    description: 'Who may read, send and claim in a chat right now, and the grants behind it.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(input) {
      const r = await agent.link.call('chats.permissions', { chatId: input.chatId });
      const participants = r.participants.map((p) => ({
        agentId: p.agentId,
        canRead: p.canRead,
        canSend: p.canSend,
        canClaim: p.canClaim,
        grantedAt: p.grant?.grantedAt ?? null,
      }));
      const lines = participants.map(
        (p) =>
          `${p.agentId}: read ${p.canRead ? 'yes' : 'no'}, send ${p.canSend ? 'yes' : 'no'}, claim ${p.canClaim ? 'yes' : 'no'}, grant ${p.grantedAt ?? 'none'}`,
      );
      return { text: [`Policy ${r.policy}.`, ...lines].join('\n'), structured: { chatId: r.chatId, policy: r.policy, participants } };
    },
  });

  register('operation_status', {
    title: 'Operation status',
    description:
      'Settle a send or acknowledge whose outcome is unknown (after OUTCOME_UNKNOWN or PAUSED): asks the daemon whether it was stored and lets this chat write again. Nothing is resent. With operationId, reports any operation of your stream in the chat.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(input) {
      const session = agent.existing(input.chatId);
      let status;
      if (session) status = await session.operationStatus(input.operationId);
      else if (input.operationId) {
        const { agentId } = await agent.hello();
        const operation = await agent.link.call('operations.get', {
          streamId: makeStreamId(input.chatId, agentId),
          operationId: input.operationId,
        });
        status = {
          operation,
          committed: operation.state === 'committed' ? true : operation.state === 'unknown' ? false : null,
          resolved: false,
          kind: null,
          paused: false,
        };
      } else status = { operation: null, committed: null, resolved: false, kind: null, paused: false };
      const op = status.operation;
      const structured = {
        chatId: input.chatId,
        operationId: op?.operationId ?? null,
        state: op?.state ?? ('none' as const),
        committed: status.committed,
        generation: op?.generation ?? null,
        firstPosition: op?.firstPosition ?? null,
        nextPosition: op?.nextPosition ?? null,
        committedAt: op?.committedAt ?? null,
        resolved: status.resolved,
        kind: status.kind,
        paused: status.paused,
      };
      let text: string;
      if (!op) text = `No append in chat ${input.chatId} has an unknown outcome; nothing is paused.`;
      else if (op.state === 'committed')
        text = `Operation ${op.operationId} is stored at positions ${op.firstPosition}..${op.nextPosition} (generation ${op.generation}, ${op.committedAt}). Do not send it again.`;
      else if (op.state === 'pending') text = `Operation ${op.operationId} is admitted but not yet on disk; ask again in a moment.`;
      else
        text = `Operation ${op.operationId} is not stored.${status.resolved ? ' Sending works again; send the message again if you still want it delivered.' : ''}`;
      if (status.resolved) text += ' This chat is no longer paused.';
      else if (status.paused) text += ' This chat is still paused: call operation_status without operationId to settle it.';
      return { text, structured };
    },
  });
}
