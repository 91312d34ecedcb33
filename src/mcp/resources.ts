import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { ID_PATTERN } from '../shared/ids.js';
import type { AgentSessions } from './agent-sessions.js';
import { transcriptLines, transcriptMessage } from './present.js';
import { RPC_ERROR } from './request-gate.js';
import { describeError } from './tool-errors.js';
import type { TranscriptMessage } from './tool-schemas.js';

const RESOURCE_NOT_FOUND = RPC_ERROR.RESOURCE_NOT_FOUND;

/** The URI template of a chat's transcript resource. */
export const TRANSCRIPT_TEMPLATE = 'yello://chats/{chatId}/transcript';
/** Messages in one read of the transcript resource (the newest); the history tool pages further. */
export const TRANSCRIPT_MESSAGES = 100;

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
          const peer = c.agentAId === agentId ? c.agentB : c.agentA;
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

  server.server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    const chatId = chatIdOfUri(request.params.uri);
    if (!chatId)
      throw new McpError(ErrorCode.InvalidParams, `not a yello transcript URI: ${request.params.uri} (expected ${TRANSCRIPT_TEMPLATE})`);
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
