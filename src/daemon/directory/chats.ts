import { errors } from '../../shared/errors.js';
import { makeStreamId } from '../../shared/ids.js';
import type { Chat } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import { randomId } from '../crypto/tokens.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { StorePort } from '../store/port/store-port.js';
import { outcomeOf } from '../store/port/stream-port.js';
import type { ChatRow } from '../store/port/values.js';
import { newStreamMeta } from '../store/stream-meta.js';
import { settled, type Agents } from './agents.js';
import type { Grants } from './grants.js';

export type { ChatRow } from '../store/port/values.js';

const CHATS_CURSOR_KIND = 'chats';

/**
 * Chats: one per pair of agents, created with both of its stream heads in one batch. The pair
 * key is checked and admitted synchronously, so two opens of one pair cannot both create it.
 */
export class Chats {
  readonly #store: StorePort;
  readonly #codec: TokenCodec;
  readonly #agents: Agents;
  readonly #grants: Grants;

  constructor(store: StorePort, codec: TokenCodec, agents: Agents, grants: Grants) {
    this.#store = store;
    this.#codec = codec;
    this.#agents = agents;
    this.#grants = grants;
  }

  /** Create-or-find the chat of a pair. Race-free: the pair is checked and admitted synchronously. */
  async open(caller: Caller, first: string, second: string): Promise<{ chat: Chat; created: boolean }> {
    this.#store.assertWritable();
    if (first === second)
      throw errors.invalidParams(caller.role === 'agent' ? 'peerAgentId' : 'agentBId', 'a chat joins two different agents');
    const a = this.#agents.require(first);
    const b = this.#agents.require(second);
    if (caller.role === 'agent') {
      if (b.disabled) throw errors.permissionDenied('PEER_DISABLED', `agent ${b.id} is disabled`);
      // A grant made through another daemon may not have been heard here: confirmed first.
      if (!this.#grants.maySend(a.id, b.id) && !(await this.#grants.appeared(a.id, b.id)))
        throw errors.permissionDenied('NO_GRANT', `no grant lets ${a.id} chat with ${b.id}`);
    }
    const [agentAId, agentBId] = a.id < b.id ? [a.id, b.id] : [b.id, a.id];
    const directory = this.#store.directory;
    const existing = directory.chatOfPair(agentAId, agentBId, 'admitted');
    if (existing !== undefined) return this.#found(agentAId, agentBId, existing);
    const row: ChatRow = { id: randomId('chat_'), agentAId, agentBId, createdAt: new Date().toISOString() };
    const metaA = newStreamMeta(row.id, agentAId, agentBId, row.createdAt);
    const metaB = newStreamMeta(row.id, agentBId, agentAId, row.createdAt);
    const outcome = await outcomeOf(directory.createChat(row, [metaA, metaB]));
    // Another daemon created the pair's chat first: that one is the chat.
    if (outcome.status === 'duplicate') return this.#found(agentAId, agentBId, outcome.existing);
    settled(outcome);
    return { chat: this.#expand(row), created: true };
  }

  /** The pair's existing chat, once durable (create-or-find answers only what a crash cannot undo). */
  async #found(agentAId: string, agentBId: string, chatId: string): Promise<{ chat: Chat; created: false }> {
    await this.#store.directory.pairDurable(agentAId, agentBId);
    return { chat: this.get(chatId), created: false };
  }

  /** The stored chat row (committed), without expanding its agents. */
  row(chatId: string): ChatRow | undefined {
    return this.#store.directory.chat(chatId);
  }

  /** A committed chat, expanded, or NOT_FOUND. */
  get(chatId: string): Chat {
    const row = this.row(chatId);
    if (!row) throw errors.notFound('chat', chatId);
    return this.#expand(row);
  }

  /** The chat if the caller may read it: participants and admin. Others get NOT_FOUND or PERMISSION_DENIED. */
  readable(caller: Caller, chatId: string): Chat {
    const chat = this.get(chatId);
    if (caller.role === 'agent' && chat.agentAId !== caller.agentId && chat.agentBId !== caller.agentId) {
      throw errors.permissionDenied('NOT_PARTICIPANT', `agent ${caller.agentId} is not a participant of ${chatId}`);
    }
    return chat;
  }

  /** `chats.list`: the admin sees every chat, an agent its own; `cursor` continues after the last one. */
  async list(caller: Caller, cursor: string | undefined, limit: number): Promise<{ chats: Chat[]; nextCursor: string | null }> {
    let after: string | undefined;
    if (cursor !== undefined) {
      const opened = this.#codec.open(CHATS_CURSOR_KIND, cursor);
      if (typeof opened !== 'string') throw errors.invalidParams('cursor', 'not a chats.list cursor issued by this deployment');
      after = opened;
    }
    const member = caller.role === 'admin' ? undefined : caller.agentId;
    const ids = await this.#store.directory.chatIds(member, { ...(after !== undefined ? { after } : {}), limit: limit + 1 });
    const more = ids.length > limit;
    const page = ids.slice(0, limit);
    const last = page[page.length - 1];
    return {
      chats: page.map((id) => this.get(id)),
      nextCursor: more && last !== undefined ? this.#codec.seal(CHATS_CURSOR_KIND, last) : null,
    };
  }

  #expand(row: ChatRow): Chat {
    return { ...row, agentA: this.#agents.summary(row.agentAId), agentB: this.#agents.summary(row.agentBId) };
  }
}

/** Both stream ids of a chat: agent A's, then agent B's. */
export function chatStreamIds(chat: { id: string; agentAId: string; agentBId: string }): [string, string] {
  return [makeStreamId(chat.id, chat.agentAId), makeStreamId(chat.id, chat.agentBId)];
}
