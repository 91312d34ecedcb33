import { errors } from '../../shared/errors.js';
import { makeStreamId } from '../../shared/ids.js';
import type { Grant } from '../../shared/results.js';
import type { Agent, AgentSummary, Chat, PiiMode } from '../../shared/types.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { Caller } from '../caller.js';
import type { Counters } from '../store/counters.js';
import { K, prefixEnd } from '../store/key-layout.js';
import type { Storage, WriteOp } from '../store/storage.js';
import { hashToken, newToken, randomId, safeEqual } from '../crypto/tokens.js';
import { newStreamMeta, streamMetaOp } from '../store/stream-meta.js';

/** An agent row as stored: the public agent plus its token hash. */
interface AgentRow extends Agent {
  tokenHash: string;
}

/** A chat row as stored; the expanded agents are joined on read. */
export interface ChatRow {
  id: string;
  agentAId: string;
  agentBId: string;
  createdAt: string;
}

const AGENT_TOKEN_PREFIX = 'yello_agt_';

/**
 * Agents, grants and chats: who exists, who may talk to whom, and which pair shares which
 * chat. Every mutation is admitted synchronously (so uniqueness checks cannot race) and
 * answered only once durable.
 */
export class Directory {
  readonly #storage: Storage;
  readonly #counters: Counters;
  readonly #adminToken: string;
  readonly policy: 'grants' | 'open';

  readonly #codec: TokenCodec;
  /** Committed agent rows by id (filled on read, refreshed on commit). */
  readonly #agents = new Map<string, AgentRow>();
  /** Committed grants (null: known absent) by key. */
  readonly #grants = new Map<string, Grant | null>();

  constructor(storage: Storage, counters: Counters, codec: TokenCodec, adminToken: string, policy: 'grants' | 'open') {
    this.#storage = storage;
    this.#codec = codec;
    this.#counters = counters;
    this.#adminToken = adminToken;
    this.policy = policy;
  }

  // ---- sessions -------------------------------------------------------------------------

  /** Map a token to a caller, or null. Agent tokens are looked up by hash. */
  authenticate(token: string): Caller | null {
    if (safeEqual(token, this.#adminToken)) return { role: 'admin' };
    const tokenHash = hashToken(token);
    const agentId = this.#storage.get<string>(K.token(tokenHash));
    if (agentId === undefined) return null;
    const agent = this.#agentRow(agentId, false);
    if (!agent || agent.disabled || agent.tokenHash !== tokenHash) return null;
    return { role: 'agent', agentId, tokenHash };
  }

  /** A session stays valid only while its token is the agent's current one and it is enabled. */
  stillValid(caller: Caller): boolean {
    if (caller.role === 'admin') return true;
    const agent = this.#agentRow(caller.agentId, false);
    return !!agent && !agent.disabled && agent.tokenHash === caller.tokenHash;
  }

  // ---- agents ---------------------------------------------------------------------------

  /**
   * An agent row. Committed rows are cached (every RPC checks its session against one); the
   * cache is refreshed when a write of the row commits. `admitted` reads see a pending write.
   */
  #agentRow(agentId: string, admitted = true): AgentRow | undefined {
    const key = K.agent(agentId);
    if (admitted && this.#storage.hasPending(key)) return this.#storage.getAdmitted<AgentRow>(key);
    const cached = this.#agents.get(agentId);
    if (cached) return cached;
    const row = this.#storage.get<AgentRow>(key);
    if (row === undefined) return undefined;
    this.#agents.set(agentId, row);
    return row;
  }

  /** The public agent, or NOT_FOUND. */
  agent(agentId: string): Agent {
    const row = this.#agentRow(agentId, false);
    if (!row) throw errors.notFound('agent', agentId);
    return publicAgent(row);
  }

  agentByUsername(username: string): Agent {
    const id = this.#storage.get<string>(K.username(username));
    if (id === undefined) throw errors.notFound('agent', username);
    return this.agent(id);
  }

  async createAgent(username: string, name: string, image: string | undefined): Promise<{ agent: Agent; token: string }> {
    this.#storage.assertWritable();
    if (this.#storage.getAdmitted(K.username(username)) !== undefined) {
      throw errors.invalidParams('username', `username "${username}" is already taken`);
    }
    const token = newToken(AGENT_TOKEN_PREFIX);
    const row: AgentRow = {
      id: randomId('agt_'), username, name, image: image ?? null, disabled: false, pii: 'redact',
      createdAt: new Date().toISOString(), tokenHash: hashToken(token),
    };
    this.#counters.agents++;
    await this.#storage.write([
      put(K.agent(row.id), row),
      { type: 'put', key: K.username(username), value: row.id },
      { type: 'put', key: K.token(row.tokenHash), value: row.id },
      this.#counters.op(),
    ]);
    return { agent: publicAgent(row), token };
  }

  async listAgents(): Promise<Agent[]> {
    const out: Agent[] = [];
    for await (const { value } of this.#storage.entries<AgentRow>({ gte: K.agentsPrefix, lt: prefixEnd(K.agentsPrefix) })) {
      out.push(publicAgent(value));
    }
    return out;
  }

  async #updateAgent(agentId: string, change: (row: AgentRow) => WriteOp[]): Promise<AgentRow> {
    this.#storage.assertWritable();
    const current = this.#agentRow(agentId);
    if (!current) throw errors.notFound('agent', agentId);
    const row = { ...current };
    const extra = change(row);
    await this.#storage.write([put(K.agent(agentId), row), ...extra]);
    this.#agents.set(agentId, row);
    return row;
  }

  async rotateToken(agentId: string): Promise<{ token: string }> {
    const token = newToken(AGENT_TOKEN_PREFIX);
    await this.#updateAgent(agentId, (row) => {
      const old = row.tokenHash;
      row.tokenHash = hashToken(token);
      return [{ type: 'del', key: K.token(old) }, { type: 'put', key: K.token(row.tokenHash), value: agentId }];
    });
    return { token };
  }

  async disableAgent(agentId: string): Promise<Agent> {
    return publicAgent(await this.#updateAgent(agentId, (row) => {
      row.disabled = true;
      return [];
    }));
  }

  async setPolicy(agentId: string, pii: PiiMode): Promise<Agent> {
    return publicAgent(await this.#updateAgent(agentId, (row) => {
      row.pii = pii;
      return [];
    }));
  }

  /** The sender's PII mode at admission time. */
  piiMode(agentId: string): PiiMode {
    return this.#agentRow(agentId)?.pii ?? 'redact';
  }

  // ---- grants ---------------------------------------------------------------------------

  async addGrant(agentId: string, peerAgentId: string): Promise<Grant> {
    this.#storage.assertWritable();
    this.#requireAgent(agentId);
    this.#requireAgent(peerAgentId);
    if (agentId === peerAgentId) throw errors.invalidParams('peerAgentId', 'an agent cannot be granted a chat with itself');
    const existing = this.#storage.getAdmitted<Grant>(K.grant(agentId, peerAgentId));
    if (existing !== undefined) {
      await this.#storage.durable(K.grant(agentId, peerAgentId));
      return existing;
    }
    const grant: Grant = { agentId, peerAgentId, grantedAt: new Date().toISOString() };
    await this.#storage.write([put(K.grant(agentId, peerAgentId), grant)]);
    this.#grants.set(K.grant(agentId, peerAgentId), grant);
    return grant;
  }

  async removeGrant(agentId: string, peerAgentId: string): Promise<boolean> {
    this.#storage.assertWritable();
    this.#requireAgent(agentId);
    this.#requireAgent(peerAgentId);
    if (this.#storage.getAdmitted(K.grant(agentId, peerAgentId)) === undefined) return false;
    await this.#storage.write([{ type: 'del', key: K.grant(agentId, peerAgentId) }]);
    this.#grants.set(K.grant(agentId, peerAgentId), null);
    return true;
  }

  async listGrants(agentId: string | undefined): Promise<Grant[]> {
    const prefix = K.grantsPrefix(agentId);
    const out: Grant[] = [];
    for await (const { value } of this.#storage.entries<Grant>({ gte: prefix, lt: prefixEnd(prefix) })) out.push(value);
    return out;
  }

  /** The grant letting `agentId` talk to `peerAgentId` (admitted state: revocation applies to the next append). */
  grant(agentId: string, peerAgentId: string): Grant | null {
    const key = K.grant(agentId, peerAgentId);
    if (!this.#storage.hasPending(key)) {
      const cached = this.#grants.get(key);
      if (cached !== undefined) return cached;
    }
    const grant = this.#storage.getAdmitted<Grant>(key) ?? null;
    if (!this.#storage.hasPending(key)) this.#grants.set(key, grant);
    return grant;
  }

  /** Whether `agentId` may open a chat with, or send to, `peerAgentId` now. */
  maySend(agentId: string, peerAgentId: string): boolean {
    return this.policy === 'open' || this.grant(agentId, peerAgentId) !== null;
  }

  #requireAgent(agentId: string): AgentRow {
    const row = this.#agentRow(agentId);
    if (!row) throw errors.notFound('agent', agentId);
    return row;
  }

  // ---- chats ----------------------------------------------------------------------------

  /** Create-or-find the chat of a pair. Race-free: the pair key is checked and admitted synchronously. */
  async openChat(caller: Caller, first: string, second: string): Promise<{ chat: Chat; created: boolean }> {
    this.#storage.assertWritable();
    if (first === second) throw errors.invalidParams(caller.role === 'agent' ? 'peerAgentId' : 'agentBId', 'a chat joins two different agents');
    const a = this.#requireAgent(first);
    const b = this.#requireAgent(second);
    if (caller.role === 'agent') {
      if (b.disabled) throw errors.permissionDenied('PEER_DISABLED', `agent ${b.id} is disabled`);
      if (!this.maySend(a.id, b.id)) throw errors.permissionDenied('NO_GRANT', `no grant lets ${a.id} chat with ${b.id}`);
    }
    const [agentAId, agentBId] = a.id < b.id ? [a.id, b.id] : [b.id, a.id];
    const pairKey = K.pair(agentAId, agentBId);
    const existing = this.#storage.getAdmitted<string>(pairKey);
    if (existing !== undefined) {
      await this.#storage.durable(pairKey);
      return { chat: this.chat(existing), created: false };
    }
    const row: ChatRow = { id: randomId('chat_'), agentAId, agentBId, createdAt: new Date().toISOString() };
    const metaA = newStreamMeta(row.id, agentAId, agentBId, row.createdAt);
    const metaB = newStreamMeta(row.id, agentBId, agentAId, row.createdAt);
    this.#counters.chats++;
    this.#counters.streams += 2;
    await this.#storage.write([
      put(K.chat(row.id), row),
      { type: 'put', key: pairKey, value: row.id },
      { type: 'put', key: K.member(agentAId, row.id), value: '' },
      { type: 'put', key: K.member(agentBId, row.id), value: '' },
      streamMetaOp(metaA),
      streamMetaOp(metaB),
      this.#counters.op(),
    ], [metaA, metaB].map((m) => ({ streamId: m.streamId, generation: m.generation, position: 0 })));
    return { chat: this.#expand(row), created: true };
  }

  /** The stored chat row (committed), without expanding its agents. */
  chatRow(chatId: string): ChatRow | undefined {
    return this.#chatRow(chatId);
  }

  #chatRow(chatId: string): ChatRow | undefined {
    return this.#storage.get<ChatRow>(K.chat(chatId));
  }

  /** A committed chat, expanded, or NOT_FOUND. */
  chat(chatId: string): Chat {
    const row = this.#chatRow(chatId);
    if (!row) throw errors.notFound('chat', chatId);
    return this.#expand(row);
  }

  /** The chat if the caller may read it: participants and admin. Others get NOT_FOUND or PERMISSION_DENIED. */
  readableChat(caller: Caller, chatId: string): Chat {
    const chat = this.chat(chatId);
    if (caller.role === 'agent' && chat.agentAId !== caller.agentId && chat.agentBId !== caller.agentId) {
      throw errors.permissionDenied('NOT_PARTICIPANT', `agent ${caller.agentId} is not a participant of ${chatId}`);
    }
    return chat;
  }

  async listChats(caller: Caller, cursor: string | undefined, limit: number): Promise<{ chats: Chat[]; nextCursor: string | null }> {
    const prefix = caller.role === 'admin' ? K.chatsPrefix : K.membersPrefix(caller.agentId);
    const ids: string[] = [];
    let gt: string | undefined;
    if (cursor !== undefined) {
      const after = this.#codec.open<string>('chats', cursor);
      if (typeof after !== 'string') throw errors.invalidParams('cursor', 'not a chats.list cursor issued by this daemon');
      gt = prefix + after;
    }
    const range = gt === undefined ? { gte: prefix, lt: prefixEnd(prefix), limit: limit + 1 } : { gt, lt: prefixEnd(prefix), limit: limit + 1 };
    // Values are read too: their checksum covers the key, so a damaged key is caught here.
    for await (const { key } of this.#storage.entries<unknown>(range)) ids.push(key.slice(prefix.length));
    const more = ids.length > limit;
    const page = ids.slice(0, limit);
    const last = page[page.length - 1];
    return { chats: page.map((id) => this.chat(id)), nextCursor: more && last !== undefined ? this.#codec.seal('chats', last) : null };
  }

  #expand(row: ChatRow): Chat {
    return { ...row, agentA: this.#summary(row.agentAId), agentB: this.#summary(row.agentBId) };
  }

  #summary(agentId: string): AgentSummary {
    const row = this.#agentRow(agentId, false);
    return { id: agentId, name: row?.name ?? agentId, username: row?.username ?? agentId, image: row?.image ?? null };
  }

  /** `chats.permissions`. */
  permissions(chat: Chat) {
    const participant = (agentId: string, peerId: string) => {
      const row = this.#agentRow(agentId, false);
      const enabled = !!row && !row.disabled;
      const grant = this.grant(agentId, peerId);
      const canSend = enabled && (this.policy === 'open' || grant !== null);
      return { agentId, canRead: enabled, canSend, canClaim: enabled, grant: grant ? { grantedAt: grant.grantedAt } : null };
    };
    return {
      chatId: chat.id,
      policy: this.policy,
      participants: [participant(chat.agentAId, chat.agentBId), participant(chat.agentBId, chat.agentAId)],
    };
  }

  /** The peer of `agentId` in `chat`. */
  static peerOf(chat: { agentAId: string; agentBId: string }, agentId: string): string {
    return chat.agentAId === agentId ? chat.agentBId : chat.agentAId;
  }

  /** Both stream ids of a chat. */
  static streamIds(chat: { id: string; agentAId: string; agentBId: string }): [string, string] {
    return [makeStreamId(chat.id, chat.agentAId), makeStreamId(chat.id, chat.agentBId)];
  }
}

function publicAgent(row: AgentRow): Agent {
  return { id: row.id, username: row.username, name: row.name, image: row.image, disabled: row.disabled, pii: row.pii, createdAt: row.createdAt };
}

function put(key: string, value: unknown): WriteOp {
  return { type: 'put', key, value };
}
