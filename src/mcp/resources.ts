import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { ID_PATTERN } from '../shared/ids.js';
import type { AgentSessions } from './agent-sessions.js';
import { transcriptLines, transcriptMessage } from './present.js';
import { RPC_ERROR } from './request-gate.js';
import { describeError } from './tool-errors.js';
import type { TranscriptMessage } from './tool-schemas.js';
import { peerOf } from '../shared/chat-peers.js';

const RESOURCE_NOT_FOUND = RPC_ERROR.RESOURCE_NOT_FOUND;

/** The URI template of a chat's transcript resource. */
export const TRANSCRIPT_TEMPLATE = 'yello://chats/{chatId}/transcript';
/** Messages in one read of the transcript resource (the newest); the history tool pages further. */
export const TRANSCRIPT_MESSAGES = 100;

/**
 * The agent's inbox as a resource: subscribing to it brings `notifications/resources/updated`
 * for it whenever a peer writes a message in any chat (and when a chat appears), whatever the
 * logging level.
 */
export const INBOX_URI = 'yello://inbox';

/** The transcript URI of a chat. */
export function transcriptUri(chatId: string): string {
  return `yello://chats/${chatId}/transcript`;
}

/** The chatId of a transcript URI, or null. */
export function chatIdOfUri(uri: string): string | null {
  const id = /^yello:\/\/chats\/([^/]+)\/transcript$/.exec(uri)?.[1];
  return id !== undefined && ID_PATTERN.test(id) ? id : null;
}

function asMcpError(err: unknown, agent: AgentSessions, chatId: string): McpError {
  const info = describeError(err, { chatId, socketPath: agent.link.socketPath });
  const internal = info.type === 'CONNECTION_LOST' || info.type === 'TIMEOUT' || info.type === 'INTERNAL';
  // MCP (resources, "Error Handling"): a resource that does not exist is -32002.
  const code = info.type === 'NOT_FOUND' ? RESOURCE_NOT_FOUND : internal ? ErrorCode.InternalError : ErrorCode.InvalidParams;
  return new McpError(code, `${info.type}: ${info.message}. ${info.action}`, { 'yello/error': info });
}

/**
 * `yello://chats/{chatId}/transcript`: the newest messages of a chat as text, listed for every
 * chat of the agent. Subscribing starts the chat's session (as `open_chat` does) so that the
 * server hears the peer and sends `notifications/resources/updated` when it writes.
 */
export function registerTranscriptResource(server: McpServer, agent: AgentSessions, subscriptions: Set<string>): void {
  const template = new ResourceTemplate(TRANSCRIPT_TEMPLATE, {
    list: async () => {
      const { agentId } = await agent.hello();
      const { chats } = await agent.link.call('chats.list', { limit: 500 });
      return {
        resources: chats.map((c) => {
          const peer = peerOf(c, agentId);
          return {
            uri: transcriptUri(c.id),
            name: `chat with ${peer.username}`,
            description: `Transcript of ${c.id} with ${peer.name} (${peer.id})`,
            mimeType: 'text/plain',
          };
        }),
      };
    },
  });
  server.registerResource(
    'transcript',
    template,
    {
      title: 'Chat transcript',
      description: `The newest ${TRANSCRIPT_MESSAGES} messages of a chat, oldest first. Reading it acknowledges nothing.`,
      mimeType: 'text/plain',
    },
    async (uri, variables) => {
      const chatId = String(variables.chatId ?? '');
      if (!ID_PATTERN.test(chatId)) throw new McpError(ErrorCode.InvalidParams, `not a chat id: ${chatId}`);
      try {
        const r = await agent.link.call('chats.history', { chatId, limit: TRANSCRIPT_MESSAGES, direction: 'backward' });
        const chat = agent.existing(chatId)?.chat ?? (await agent.link.call('chats.get', { chatId })).chat;
        const messages = r.entries.map(transcriptMessage).filter((m): m is TranscriptMessage => m !== null);
        const text =
          (r.nextCursor ? `(older messages: the history tool with chatId ${chatId})\n` : '') + transcriptLines(messages, chat).join('\n');
        return { contents: [{ uri: uri.href, mimeType: 'text/plain', text }] };
      } catch (err) {
        throw asMcpError(err, agent, chatId);
      }
    },
  );

  server.registerResource(
    'inbox',
    INBOX_URI,
    {
      title: 'Inbox',
      description:
        'Every chat with its unread message count, newest activity first. Subscribe to it to be told (resources/updated) whenever a peer writes in any chat.',
      mimeType: 'text/plain',
    },
    async (uri) => {
      try {
        const entries = await (await agent.inbox()).list();
        const lines = entries.map(
          (e) =>
            `${e.chatId} with ${e.peer.username} (${e.peer.displayName}): ${e.unreadMessages} unread, last activity ${e.lastActivityAt ?? 'none'}`,
        );
        return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: lines.length ? lines.join('\n') : 'No chats yet.' }] };
      } catch (err) {
        throw asMcpError(err, agent, '');
      }
    },
  );

  server.server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    if (request.params.uri === INBOX_URI) {
      try {
        await agent.inbox();
      } catch (err) {
        throw asMcpError(err, agent, '');
      }
      subscriptions.add(INBOX_URI);
      return {};
    }
    const chatId = chatIdOfUri(request.params.uri);
    if (!chatId)
      throw new McpError(
        ErrorCode.InvalidParams,
        `not a yello transcript URI: ${request.params.uri} (expected ${TRANSCRIPT_TEMPLATE}, or ${INBOX_URI})`,
      );
    try {
      const session = await agent.session(chatId);
      session.assertUsable();
    } catch (err) {
      throw asMcpError(err, agent, chatId);
    }
    subscriptions.add(request.params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    subscriptions.delete(request.params.uri);
    return {};
  });
}
