import { createRequire } from 'node:module';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { ConnectionLostError } from '../client/index.js';
import { AgentSessions } from './agent-sessions.js';
import { CHANNEL_CAPABILITY, CHANNEL_INSTRUCTIONS, CHANNEL_METHOD, type ChannelEvent } from './channel-events.js';
import { ChannelPresenter, type ChannelPacing } from './channel-presenter.js';
import { INSTRUCTIONS } from './instructions.js';
import type { McpLog } from './log.js';
import { gatedTransport, RequestGate } from './request-gate.js';
import { chatIdOfUri, INBOX_URI, registerTranscriptResource, TRANSCRIPT_TEMPLATE, transcriptUri } from './resources.js';
import { toolInputs } from './tool-schemas.js';
import { describeError, type ToolErrorInfo } from './tool-errors.js';
import { registerTools, toolError } from './tools.js';

/** What `yello mcp` resolves from its command line and environment. */
export interface McpServerOptions {
  token: string;
  socketPath: string;
  replace: boolean;
  resumeAfterBreak: boolean;
  callTimeoutMs?: number;
  logLevel: string;
  /** `--channel`: also push each new peer batch into a Claude Code session (docs/mcp.md, "Channel"). */
  channel?: boolean;
}

/** Options of {@link createMcpServer}: those of `yello mcp` with a logger instead of a level. */
export interface CreateMcpServerOptions extends Omit<McpServerOptions, 'logLevel'> {
  log: McpLog;
  /** How long tools wait through a reconnect before failing (default 15 s). */
  settleMs?: number;
  /** The daemon connections' reconnect backoff (the client library's). */
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
  /** The channel's coalescing and size bound (defaults in channel-presenter.ts). */
  channelPacing?: Partial<ChannelPacing>;
}

/** One agent's MCP server, not yet connected to a transport. */
export interface YelloMcpServer {
  readonly mcp: McpServer;
  readonly agent: AgentSessions;
  /** Why every tool answers BAD_TOKEN (a token the daemon refused, or the admin token), or null. */
  readonly setupFailure: ToolErrorInfo | null;
  /** Connect to `transport`, then follow the inbox (and, with `channel`, start pushing). */
  connect(transport: Transport): Promise<void>;
  /** Stop pushing, stop every chat session (releasing its claim), close the connections and the transport. */
  close(): Promise<void>;
}

function packageVersion(): string {
  try {
    return (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

/**
 * Build the MCP server of one agent: its {@link AgentSessions} (one daemon connection, a chat
 * session per chat), the tools, the resources, the notifications, and with `channel` the
 * {@link ChannelPresenter}. It says hello to the daemon first: a daemon not running yet is no
 * error (tools connect on use), a refused or admin token makes every tool answer BAD_TOKEN.
 * Any transport will do: `runMcpServer` gives it stdio, tests an in-memory pair.
 */
export async function createMcpServer(options: CreateMcpServerOptions): Promise<YelloMcpServer> {
  const { log } = options;
  const subscriptions = new Set<string>();
  let mcp: McpServer | null = null;
  const notify = (params: Parameters<McpServer['server']['sendLoggingMessage']>[0]) => {
    if (mcp?.isConnected())
      void mcp.server.sendLoggingMessage(params).catch((err: unknown) => {
        log.debug({ err: err instanceof Error ? err.message : String(err) }, 'logging notification not sent');
      });
  };
  const agent = new AgentSessions({
    token: options.token,
    socketPath: options.socketPath,
    replace: options.replace,
    resumeAfterBreak: options.resumeAfterBreak,
    log,
    ...(options.settleMs !== undefined ? { settleMs: options.settleMs } : {}),
    ...(options.reconnect ? { reconnect: options.reconnect } : {}),
    ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
    onPeerWrote: ({ chatId, generation, nextPosition, messages }) => {
      const uri = transcriptUri(chatId);
      // Resource updates are the message events that no logging level silences.
      for (const updated of [uri, INBOX_URI])
        if (subscriptions.has(updated) && mcp?.isConnected()) void mcp.server.sendResourceUpdated({ uri: updated }).catch(() => {});
      notify({
        level: 'info',
        logger: 'yello',
        data: { event: 'peer-wrote', chatId, uri, messages, generation, nextPosition, hint: `call read_new with chatId ${chatId}` },
      });
    },
    onChatOpened: () => {
      if (!mcp?.isConnected()) return;
      void mcp.server.sendResourceListChanged().catch(() => {});
      if (subscriptions.has(INBOX_URI)) void mcp.server.sendResourceUpdated({ uri: INBOX_URI }).catch(() => {});
    },
    onStopped: ({ chatId, error }) => {
      const info = describeError(error, { chatId, socketPath: options.socketPath });
      log.warn({ chatId, type: info.type }, 'chat session stopped; a person must act');
      notify({
        level: 'error',
        logger: 'yello',
        data: { event: 'chat-stopped', chatId, type: info.type, message: info.message, action: info.action },
      });
    },
  });

  let setupFailure: unknown = null;
  try {
    const hello = await agent.hello();
    log.info({ agentId: hello.agentId, socket: options.socketPath, daemon: hello.daemon.version }, 'yello mcp connected');
  } catch (err) {
    if (err instanceof ConnectionLostError) {
      // The daemon may start after its clients (systemd ordering, a laptop waking up): tools retry.
      log.warn({ socket: options.socketPath, err: err.message }, 'daemon not reachable yet; tools will connect on use');
    } else {
      // A refused or admin token: serve anyway, so the model hears what is wrong from every tool
      // (an exit before initialize shows it nothing).
      log.warn({ socket: options.socketPath }, 'token refused; serving so that every tool says what to do');
      setupFailure = err;
    }
  }

  const server = new McpServer(
    { name: 'yello', version: packageVersion() },
    {
      capabilities: {
        tools: {},
        resources: { subscribe: true, listChanged: true },
        logging: {},
        // Only the channel itself: never 'claude/channel/permission' (docs/security.md, "Channel").
        ...(options.channel ? { experimental: { [CHANNEL_CAPABILITY]: {} } } : {}),
      },
      instructions: options.channel ? `${INSTRUCTIONS} ${CHANNEL_INSTRUCTIONS}` : INSTRUCTIONS,
    },
  );
  mcp = server;
  registerTools(server, agent, log);
  registerTranscriptResource(server, agent, subscriptions);
  if (setupFailure !== null) {
    // Replaces the SDK's tools/call handler: no tool can work with this token, also those that
    // would answer without asking the daemon. Unknown tools are still refused first (the gate, in connect).
    const failure = setupFailure;
    server.server.setRequestHandler(CallToolRequestSchema, () => toolError(failure, { socketPath: options.socketPath }));
  }

  const presenter =
    options.channel && setupFailure === null
      ? new ChannelPresenter({
          token: options.token,
          socketPath: options.socketPath,
          agent,
          log,
          resumeAfterBreak: options.resumeAfterBreak,
          ...(options.reconnect ? { reconnect: options.reconnect } : {}),
          ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
          ...(options.channelPacing ? { pacing: options.channelPacing } : {}),
          push: async (event: ChannelEvent) => {
            if (!server.isConnected()) throw new Error('the MCP client is not connected');
            // A notification of Claude Code's own, outside the SDK's ServerNotification union.
            await server.server.notification({ method: CHANNEL_METHOD, params: event } as never);
          },
        })
      : null;

  let closed: Promise<void> | null = null;
  return {
    mcp: server,
    agent,
    setupFailure: setupFailure === null ? null : describeError(setupFailure, { socketPath: options.socketPath }),
    async connect(transport: Transport): Promise<void> {
      // What the SDK would ignore or answer wrongly is answered as the specification says, on
      // any transport (request-gate.ts); one gate per connection, as it tracks initialize.
      const gate = new RequestGate({
        toolNames: () => Object.keys(toolInputs),
        isResourceUri: (uri) => uri === INBOX_URI || chatIdOfUri(uri) !== null,
        resourceTemplate: TRANSCRIPT_TEMPLATE,
      });
      await server.connect(gatedTransport(transport, gate));
      // The inbox watches for new chats from the start, so that resources/list_changed comes when a peer opens one.
      agent.inbox().catch((err: unknown) => {
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'inbox not open yet; tools open it on use');
      });
      presenter?.start();
    },
    close(): Promise<void> {
      closed ??= (async () => {
        await presenter?.close();
        await agent.close();
        await server.close().catch(() => {});
      })();
      return closed;
    },
  };
}
