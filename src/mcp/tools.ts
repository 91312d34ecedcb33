import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AgentSessions } from './agent-sessions.js';
import type { McpLog } from './log.js';
import { agentRef, toolRegistrar, type ToolSpec } from './tool-kit.js';
import { historyTool, listChatsTool, readNewTool, waitForMessageTool } from './tools-reading.js';
import { acknowledgeTool, operationStatusTool, sendTool } from './tools-writing.js';

export { READ_DEFAULTS, toolError } from './tool-kit.js';

/** The `whoami` tool. */
export function whoamiTool(agent: AgentSessions): ToolSpec<'whoami'> {
  return {
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
  };
}

/** The `list_peers` tool. */
export function listPeersTool(agent: AgentSessions): ToolSpec<'list_peers'> {
  return {
    title: 'List peers',
    description:
      'The agents you may open a chat with (under the daemon policy grants: those you hold a grant to; under open: every other agent), by username and display name, with your chat with each if it exists. open_chat takes any of these names.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run() {
      const { policy, peers } = await agent.peers();
      const list = peers.map((p) => ({ agentId: p.agent.id, username: p.agent.username, name: p.agent.name, chatId: p.chatId }));
      const lines = list.map((p) => `${p.username} (${p.name}, ${p.agentId})${p.chatId ? `: chat ${p.chatId}` : ': no chat yet'}`);
      const text = lines.length
        ? [`Policy ${policy}. You may talk to:`, ...lines].join('\n')
        : policy === 'grants'
          ? 'Policy grants, and you hold no grant: a person must run `yello grants add <you> <peer>` before you can open a chat.'
          : 'There is no other agent on this daemon yet.';
      return { text, structured: { policy, peers: list } };
    },
  };
}

/** The `open_chat` tool. */
export function openChatTool(agent: AgentSessions): ToolSpec<'open_chat'> {
  return {
    title: 'Open a chat',
    description:
      "Open (or find) your chat with another agent, named by agent id, username (any case, with or without @) or display name, and start this server's session for it. Writes nothing: your first send or acknowledge makes this server the one writer for you in that chat. Reports how many messages wait since your last receipt. Reads and acknowledges nothing.",
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
  };
}

/** The `permissions` tool. */
export function permissionsTool(agent: AgentSessions): ToolSpec<'permissions'> {
  return {
    title: 'Chat permissions',
    description:
      'Who may read, send and claim in a chat right now (each participant by username, display name and agent id), and the grants behind it.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    async run(input) {
      const r = await agent.link.call('chats.permissions', { chatId: input.chatId });
      const { chat } = await agent.link.call('chats.get', { chatId: input.chatId });
      const named = (agentId: string) => (agentId === chat.agentAId ? chat.agentA : chat.agentB);
      const participants = r.participants.map((p) => ({
        agentId: p.agentId,
        username: named(p.agentId).username,
        name: named(p.agentId).name,
        canRead: p.canRead,
        canSend: p.canSend,
        canClaim: p.canClaim,
        grantedAt: p.grant?.grantedAt ?? null,
      }));
      const lines = participants.map(
        (p) =>
          `${p.username} (${p.name}, ${p.agentId}): read ${p.canRead ? 'yes' : 'no'}, send ${p.canSend ? 'yes' : 'no'}, claim ${p.canClaim ? 'yes' : 'no'}, grant ${p.grantedAt ?? 'none'}`,
      );
      return { text: [`Policy ${r.policy}.`, ...lines].join('\n'), structured: { chatId: r.chatId, policy: r.policy, participants } };
    },
  };
}

/** Register every tool of docs/mcp.md on `server`, in the order tools/list lists them. */
export function registerTools(server: McpServer, agent: AgentSessions, log: McpLog): void {
  const register = toolRegistrar(server, agent, log);
  register('whoami', whoamiTool(agent));
  register('list_chats', listChatsTool(agent));
  register('list_peers', listPeersTool(agent));
  register('open_chat', openChatTool(agent));
  register('read_new', readNewTool(agent));
  register('wait_for_message', waitForMessageTool(agent));
  register('acknowledge', acknowledgeTool(agent));
  register('send', sendTool(agent));
  register('history', historyTool(agent));
  register('permissions', permissionsTool(agent));
  register('operation_status', operationStatusTool(agent));
}
