import type { Agent, HelloResult, YelloClient } from '../client/index.js';
import { ChatSession, type ChatSessionOptions } from './chat-session.js';
import { DaemonLink } from './daemon-link.js';
import type { McpLog } from './log.js';
import { ToolFailure } from './tool-errors.js';

/** Options of {@link AgentSessions}: one agent, one daemon. */
export interface AgentSessionsOptions {
  token: string;
  socketPath: string;
  replace: boolean;
  resumeAfterBreak: boolean;
  callTimeoutMs?: number;
  /** How long tools wait through a reconnect before failing (default 15 s). */
  settleMs?: number;
  /** The connection's reconnect backoff (the client library's). */
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
  log: McpLog;
  onPeerWrote: ChatSessionOptions['onPeerWrote'];
  onStopped: ChatSessionOptions['onStopped'];
}

/**
 * Everything one `yello mcp` knows: its one connection to the daemon and one
 * {@link ChatSession} per chat the agent has used, opened on first use (reading only: the
 * claim comes with the first write). A session that stopped for good (fenced, continuity
 * break) stays in the map, so the chat keeps answering its error instead of silently claiming
 * again; a session that failed to open is not kept.
 */
export class AgentSessions {
  readonly link: DaemonLink;
  readonly #opts: AgentSessionsOptions;
  readonly #sessions = new Map<string, ChatSession>();
  readonly #starting = new Map<string, Promise<ChatSession>>();
  #closed = false;

  constructor(options: AgentSessionsOptions) {
    this.#opts = options;
    this.link = new DaemonLink({
      socketPath: options.socketPath,
      token: options.token,
      retryForMs: options.settleMs ?? 15_000,
      ...(options.reconnect ? { reconnect: options.reconnect } : {}),
      ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
    });
  }

  /** The hello of the server's connection; refuses an admin token. */
  async hello(): Promise<HelloResult & { agentId: string }> {
    const client: YelloClient = await this.link.client();
    const s = client.session;
    if (s.role !== 'agent' || !s.agentId) {
      throw new ToolFailure(
        'BAD_TOKEN',
        'yello mcp acts as an agent, but its token is the admin token',
        'Start it with an agent token file (yello agents add … --token-out FILE).',
      );
    }
    return { ...s, agentId: s.agentId };
  }

  /** This agent's own record. */
  async me(): Promise<Agent> {
    const { agentId } = await this.hello();
    return (await this.link.call('agents.get', { agentId })).agent;
  }

  /** An agent by id (`agt_…`) or username. */
  async resolveAgent(ref: string): Promise<Agent> {
    if (ref.startsWith('agt_')) {
      try {
        return (await this.link.call('agents.get', { agentId: ref })).agent;
      } catch {
        /* maybe a username that starts with agt_ */
      }
    }
    return (await this.link.call('agents.get', { username: ref })).agent;
  }

  /** The session of `chatId` if this server has one. */
  existing(chatId: string): ChatSession | undefined {
    return this.#sessions.get(chatId);
  }

  /** Every session, in the order they were created. */
  all(): ChatSession[] {
    return [...this.#sessions.values()];
  }

  /** The session of `chatId`, opened (follow from the last receipt; nothing is written) on first use. */
  async session(chatId: string): Promise<ChatSession> {
    if (this.#closed) throw new ToolFailure('STOPPED', 'the MCP server is shutting down', 'Start it again.');
    const known = this.#sessions.get(chatId);
    if (known) return known;
    let starting = this.#starting.get(chatId);
    if (!starting) {
      starting = this.#start(chatId).finally(() => this.#starting.delete(chatId));
      this.#starting.set(chatId, starting);
    }
    return starting;
  }

  async #start(chatId: string): Promise<ChatSession> {
    await this.hello();
    const session = await ChatSession.start(
      {
        client: await this.link.client(),
        replace: this.#opts.replace,
        resumeAfterBreak: this.#opts.resumeAfterBreak,
        settleMs: this.#opts.settleMs ?? 15_000,
        log: this.#opts.log,
        onPeerWrote: this.#opts.onPeerWrote,
        onStopped: this.#opts.onStopped,
      },
      chatId,
    );
    if (this.#closed) {
      await session.stop();
      throw new ToolFailure('STOPPED', 'the MCP server is shutting down', 'Start it again.');
    }
    this.#sessions.set(chatId, session);
    return session;
  }

  /** Stop every session (releasing its claim) and close the connection. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#starting.values()]);
    await Promise.allSettled(this.all().map((s) => s.stop()));
    this.link.close();
  }
}
