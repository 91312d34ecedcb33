import type { Grant } from '../../shared/results.js';
import type { Agent, Chat, PiiMode } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import { splitStreamId } from '../../shared/ids.js';
import type { StorePort } from '../store/port/store-port.js';
import { Agents } from './agents.js';
import { Chats, type ChatRow } from './chats.js';
import { Grants, type ChatPolicy } from './grants.js';
import { Sessions } from './sessions.js';

export type { ChatRow } from './chats.js';

/**
 * Who exists, who may talk to whom, and which pair shares which chat: the directory's API,
 * routing each call to sessions.ts (tokens to callers), agents.ts, grants.ts (and what they
 * permit) or chats.ts. Every mutation is admitted synchronously (so uniqueness checks cannot
 * race) and answered only once durable.
 */
export class Directory {
  readonly policy: ChatPolicy;
  readonly #sessions: Sessions;
  readonly #agents: Agents;
  readonly #grants: Grants;
  readonly #chats: Chats;
  readonly #store: StorePort;

  constructor(store: StorePort, codec: TokenCodec, adminToken: string, policy: ChatPolicy) {
    this.policy = policy;
    this.#store = store;
    this.#agents = new Agents(store, codec);
    this.#sessions = new Sessions(store, this.#agents, adminToken);
    this.#grants = new Grants(store, this.#agents, policy, codec);
    this.#chats = new Chats(store, codec, this.#agents, this.#grants);
  }

  // ---- sessions (sessions.ts) -----------------------------------------------------------

  /** Map a token to a caller, or null. */
  authenticate(token: string): Caller | null {
    return this.#sessions.authenticate(token);
  }

  /** `authenticate`, an unknown token confirmed against a shared store first. */
  authenticateConfirmed(token: string): Promise<Caller | null> {
    return this.#sessions.authenticateConfirmed(token);
  }

  /** Whether a session's token is still its agent's current one, and the agent enabled (a promise: confirmed against a shared store). */
  stillValid(caller: Caller): boolean | (() => Promise<boolean>) {
    return this.#sessions.stillValid(caller);
  }

  /**
   * A refusal decided on this daemon's rows that another daemon's write, unheard here yet, may
   * have made wrong (NOT_FOUND of an agent, chat or stream): read what it names again from a
   * shared store. True when it was read again (decide again); false where memory is the store.
   */
  async confirmRefusal(kind: string, id: string): Promise<boolean> {
    const directory = this.#store.directory;
    if (!directory.reload) return false;
    if (kind === 'agent') await directory.reload({ agents: [id] });
    else if (kind === 'chat') await directory.reload({ chats: [id] });
    else if (kind === 'stream') {
      const chatId = splitStreamId(id)?.chatId;
      if (chatId !== undefined) await directory.reload({ chats: [chatId] });
      await this.#store.streams.reloadHead?.(id);
    } else return false;
    return true;
  }

  // ---- agents (agents.ts) ---------------------------------------------------------------

  agent(agentId: string): Agent {
    return this.#agents.get(agentId);
  }

  agentByUsername(username: string): Agent {
    return this.#agents.byUsername(username);
  }

  createAgent(username: string, name: string, image: string | undefined): Promise<{ agent: Agent; token: string }> {
    return this.#agents.create(username, name, image);
  }

  listAgents(cursor: string | undefined, limit: number): Promise<{ agents: Agent[]; nextCursor: string | null }> {
    return this.#agents.list(cursor, limit);
  }

  rotateToken(agentId: string): Promise<{ token: string }> {
    return this.#agents.rotateToken(agentId);
  }

  disableAgent(agentId: string): Promise<Agent> {
    return this.#agents.disable(agentId);
  }

  setPolicy(agentId: string, pii: PiiMode): Promise<Agent> {
    return this.#agents.setPolicy(agentId, pii);
  }

  /** The sender's PII mode at admission time. */
  piiMode(agentId: string): PiiMode {
    return this.#agents.piiMode(agentId);
  }

  // ---- grants (grants.ts) ---------------------------------------------------------------

  addGrant(agentId: string, peerAgentId: string): Promise<Grant> {
    return this.#grants.add(agentId, peerAgentId);
  }

  removeGrant(agentId: string, peerAgentId: string): Promise<boolean> {
    return this.#grants.remove(agentId, peerAgentId);
  }

  /**
   * Startup: read the token index and the grants whole and remember keys that fail their
   * checksum (sessions.ts, grants.ts checkDamage); returns them, for the log.
   */
  async checkDamage(): Promise<{ tokenIndex: string[]; grants: string[] }> {
    return { tokenIndex: await this.#sessions.checkDamage(), grants: await this.#grants.checkDamage() };
  }

  /** A damaged token-index key, if any: an unknown token may then be a valid one. */
  get tokenIndexDamage(): string | null {
    return this.#sessions.indexDamage;
  }

  listGrants(
    agentId: string | undefined,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ grants: Grant[]; nextCursor: string | null }> {
    return this.#grants.list(agentId, cursor, limit);
  }

  /** Whether `agentId` may open a chat with, or send to, `peerAgentId` now. */
  maySend(agentId: string, peerAgentId: string): boolean {
    return this.#grants.maySend(agentId, peerAgentId);
  }

  /** Whether a grant missing here was made through another daemon of a shared store (grants.ts `appeared`). */
  grantAppeared(agentId: string, peerAgentId: string): Promise<boolean> {
    return this.#grants.appeared(agentId, peerAgentId);
  }

  /** `chats.permissions`. */
  permissions(chat: Chat) {
    return this.#grants.permissions(chat);
  }

  // ---- chats (chats.ts) -----------------------------------------------------------------

  /** Create-or-find the chat of a pair. */
  openChat(caller: Caller, first: string, second: string): Promise<{ chat: Chat; created: boolean }> {
    return this.#chats.open(caller, first, second);
  }

  /** The stored chat row (committed), without expanding its agents. */
  chatRow(chatId: string): ChatRow | undefined {
    return this.#chats.row(chatId);
  }

  /** A committed chat, expanded, or NOT_FOUND. */
  chat(chatId: string): Chat {
    return this.#chats.get(chatId);
  }

  /** The chat if the caller may read it: participants and admin. */
  readableChat(caller: Caller, chatId: string): Chat {
    return this.#chats.readable(caller, chatId);
  }

  listChats(caller: Caller, cursor: string | undefined, limit: number): Promise<{ chats: Chat[]; nextCursor: string | null }> {
    return this.#chats.list(caller, cursor, limit);
  }
}
