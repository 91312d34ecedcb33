import {
  ConnectionPool,
  Inbox,
  InvalidParamsError,
  NotFoundError,
  type Agent,
  type Chat,
  type HelloResult,
  type MessageBatch,
  type YelloClient,
} from '../client/index.js';
import { PeerHead } from '../client/peer-head.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';
import { ChatSession, type ChatSessionOptions } from './chat-session.js';
import { DaemonLink } from './daemon-link.js';
import type { McpLog } from './log.js';
import { ToolFailure } from './tool-errors.js';
import { peerIdOf } from '../shared/chat-peers.js';

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
  /** The peer wrote messages in a chat: a batch of its stream with at least one message arrived. */
  onPeerWrote(info: { chatId: string; generation: string; nextPosition: string; messages: number }): void;
  /** A chat of this agent appeared (opened by the peer, or by this agent). */
  onChatOpened?(chat: Chat): void;
  onStopped: ChatSessionOptions['onStopped'];
}

/** Pushed batches kept per chat: far more than an agent is shown before it acknowledges. */
const PUSHED_KEPT = 1024;

/** An agent this one may open a chat with. */
export interface Peer {
  agent: Agent;
  /** Their chat, if one exists already. */
  chatId: string | null;
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
  /** One per chat, watching the peer stream from before the inbox follows it. */
  readonly #heads = new Map<string, PeerHead>();
  /** Per chat, the writer epochs this server's sessions claimed. */
  readonly #epochs = new Map<string, Set<string>>();
  /** Per chat, the batches the channel pushed (the newest {@link PUSHED_KEPT}), for acknowledging by batchId. */
  readonly #pushed = new Map<string, Map<string, MessageBatch>>();
  /** The connections the inbox follows chats on (the link's client and more): the heads hear them all. */
  #pool: ConnectionPool | null = null;
  #inbox: Promise<Inbox> | null = null;
  #offOpened: (() => void) | null = null;
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

  /**
   * An agent by id (`agt_…`), username (any case, with or without a leading `@`) or display name
   * (any case, if exactly one agent has it). Several matches are AMBIGUOUS, none NOT_FOUND; both
   * say how to find the right one.
   */
  async resolveAgent(ref: string): Promise<Agent> {
    const name = ref.trim().replace(/^@/, '');
    for (const params of [{ agentId: name }, { username: name }]) {
      if ('agentId' in params && !name.startsWith('agt_')) continue;
      try {
        return (await this.link.call('agents.get', params)).agent;
      } catch (err) {
        if (!(err instanceof NotFoundError) && !(err instanceof InvalidParamsError)) throw err;
      }
    }
    const wanted = name.toLowerCase();
    const agents = (await this.#allAgents()).filter((a) => !a.disabled);
    const byUsername = agents.filter((a) => a.username.toLowerCase() === wanted);
    const matches = byUsername.length > 0 ? byUsername : agents.filter((a) => a.name.trim().toLowerCase() === wanted);
    const [only, ...others] = matches;
    if (only && others.length === 0) return only;
    if (only)
      throw new ToolFailure(
        'AMBIGUOUS',
        `${matches.length} agents are called ${JSON.stringify(ref)}: ${matches.map((a) => `${a.username} (${a.id})`).join(', ')}`,
        'Name the agent by its username or agent id (list_peers shows them).',
        { peer: ref, candidates: matches.map((a) => a.id) },
      );
    throw new ToolFailure(
      'NOT_FOUND',
      `no agent has the id, username or display name ${JSON.stringify(ref)}`,
      'Call list_peers: it lists the agents you may open a chat with, by username and display name.',
      { kind: 'agent', id: ref },
    );
  }

  #allChats(): Promise<Chat[]> {
    return allPages(
      (c) => this.link.call('chats.list', { limit: LIST_PAGE, ...c }),
      (p) => p.chats,
    );
  }

  #allAgents(): Promise<Agent[]> {
    return allPages(
      (c) => this.link.call('agents.list', { limit: LIST_PAGE, ...c }),
      (p) => p.agents,
    );
  }

  /**
   * The agents this one may open a chat with: under policy `open` every other enabled agent,
   * under `grants` those it holds a grant to (docs/protocol.md §6.4); with their chat, if any.
   */
  async peers(): Promise<{ policy: 'open' | 'grants'; peers: Peer[] }> {
    const { agentId } = await this.hello();
    const { policy } = await this.link.call('daemon.status', {});
    let candidates: Agent[];
    if (policy === 'open') candidates = (await this.#allAgents()).filter((a) => a.id !== agentId);
    else {
      const grants = await allPages(
        (c) => this.link.call('grants.list', { agentId, limit: LIST_PAGE, ...c }),
        (p) => p.grants,
      );
      const granted = new Set(grants.map((g) => g.peerAgentId));
      candidates = (await this.#allAgents()).filter((a) => granted.has(a.id));
    }
    const chats = new Map<string, string>();
    for (const c of await this.#allChats()) chats.set(peerIdOf(c, agentId), c.id);
    const peers = candidates
      .filter((a) => !a.disabled)
      .map((agent) => ({ agent, chatId: chats.get(agent.id) ?? null }))
      .sort((a, b) => a.agent.username.localeCompare(b.agent.username));
    return { policy, peers };
  }

  /**
   * The agent's inbox (the library's one reader across all its chats, chats opened later
   * included), opened on first use. Every session reads through its conversations.
   */
  inbox(): Promise<Inbox> {
    this.#inbox ??= this.#openInbox().catch((err: unknown) => {
      this.#inbox = null;
      throw err;
    });
    return this.#inbox;
  }

  async #openInbox(): Promise<Inbox> {
    await this.hello();
    const client = await this.link.client();
    const pool = (this.#pool ??= new ConnectionPool(client));
    // The heads watch before the inbox follows, so that they see every batch of the catch-up.
    this.#offOpened ??= client.on('chats.opened', (n) => {
      const fresh = !this.#heads.has(n.chat.id);
      this.#head(client, n.chat);
      if (fresh) this.#opts.onChatOpened?.(n.chat);
    });
    for (const chat of await this.#allChats()) this.#head(client, chat);
    const inbox = await Inbox.open(client, { connections: pool });
    if (this.#closed) {
      await inbox.close();
      throw new ToolFailure('STOPPED', 'the MCP server is shutting down', 'Start it again.');
    }
    return inbox;
  }

  #head(client: YelloClient, chat: Chat): PeerHead {
    let head = this.#heads.get(chat.id);
    if (!head) {
      // Wherever the inbox follows the chat, the pool passes its batches on.
      head = PeerHead.watch(client, chat, this.#pool ?? client);
      head.onMessages((info) => {
        this.#opts.onPeerWrote({ chatId: chat.id, ...info });
      });
      this.#heads.set(chat.id, head);
    }
    return head;
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
    const inbox = await this.inbox();
    const client = await this.link.client();
    const { chat } = await this.link.call('chats.get', { chatId });
    const head = this.#head(client, chat);
    const session = await ChatSession.start(
      {
        client,
        replace: this.#opts.replace,
        resumeAfterBreak: this.#opts.resumeAfterBreak,
        settleMs: this.#opts.settleMs ?? 15_000,
        log: this.#opts.log,
        onStopped: this.#opts.onStopped,
        onClaimed: ({ epoch }) => {
          this.#epochs.set(chatId, (this.#epochs.get(chatId) ?? new Set()).add(epoch));
        },
        pushedBatch: (id, batchId) => this.#pushed.get(id)?.get(batchId),
      },
      chat,
      await inbox.follow(chat),
      head,
    );
    if (this.#closed) {
      await session.stop();
      throw new ToolFailure('STOPPED', 'the MCP server is shutting down', 'Start it again.');
    }
    this.#sessions.set(chatId, session);
    return session;
  }

  // ---- for the channel ------------------------------------------------------------------

  /** The writer epochs this server's session of `chatId` claimed (none before its first write). */
  ownEpochs(chatId: string): ReadonlySet<string> {
    return this.#epochs.get(chatId) ?? new Set();
  }

  /** Resolves once the session of `chatId` (starting or started) has the answers of every append it handed out. */
  async writesSettled(chatId: string): Promise<void> {
    const session = this.#sessions.get(chatId) ?? (await this.#starting.get(chatId)?.catch(() => undefined));
    await session?.settled().catch(() => {});
  }

  /** The channel pushed `batches` of `chatId`: acknowledge and send find them by batchId. */
  notePushed(chatId: string, batches: readonly MessageBatch[]): void {
    const kept = this.#pushed.get(chatId) ?? new Map<string, MessageBatch>();
    this.#pushed.set(chatId, kept);
    for (const b of batches) kept.set(b.batchId, b);
    for (const id of kept.keys()) {
      if (kept.size <= PUSHED_KEPT) break;
      kept.delete(id);
    }
  }

  /** Stop every session (releasing its claim) and close the connection. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#starting.values()]);
    await Promise.allSettled(this.all().map((s) => s.stop()));
    const inbox = await this.#inbox?.catch(() => null);
    await inbox?.close().catch(() => {});
    this.#offOpened?.();
    for (const head of this.#heads.values()) head.close();
    this.#pool?.close();
    this.link.close();
  }
}
