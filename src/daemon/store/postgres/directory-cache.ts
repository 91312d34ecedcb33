// The committed directory rows of a PostgreSQL store, in memory: every RPC authenticates against
// an agent row and every append checks a grant, synchronously, as the port says. Loaded whole at
// open (directory-rows.ts), kept current from this daemon's commits and from the notices of the
// others' (directory.ts); creations in flight are counted, and their pairs kept, so that a reload
// neither undercounts nor announces a chat this daemon is creating itself.

import { errors } from '../../../shared/errors.js';
import type { AgentRow, ChatRow, GrantRow } from '../port/values.js';
import { grantKey, pairKey, type DirectoryTables } from './directory-rows.js';
import { RowKey } from './row-codec.js';

const empty = (): DirectoryTables => ({
  agents: new Map(),
  usernames: new Map(),
  tokens: new Map(),
  grants: new Map(),
  chats: new Map(),
  pairs: new Map(),
  damagedAgents: new Set(),
  damaged: { tokenIndex: [], grants: [] },
});

export class DirectoryCache {
  #t: DirectoryTables = empty();
  /** Whether the tables were loaded once (the first load learns nothing: nobody listens yet). */
  #loaded = false;
  /** Creations admitted and not settled yet (counted as admitted). */
  #creatingAgents = 0;
  #creatingChats = 0;
  /** Chats this daemon is creating, by pair: a reload does not announce them (their creator does). */
  readonly #creatingPairs = new Set<string>();

  /** Replace every row with the tables as loaded; returns the chats not cached before (none at the first load), but those this daemon is creating. */
  replace(next: DirectoryTables): string[] {
    const learned = this.#loaded
      ? [...next.chats.values()]
          .filter((c) => !this.#t.chats.has(c.id) && !this.#creatingPairs.has(pairKey(c.agentAId, c.agentBId)))
          .map((c) => c.id)
      : [];
    this.#t = next;
    this.#loaded = true;
    return learned;
  }

  /** A creation admitted (+1) or settled (-1). */
  creating(kind: 'agent' | 'chat', delta: 1 | -1, pair?: readonly [string, string]): void {
    if (kind === 'agent') this.#creatingAgents += delta;
    else {
      this.#creatingChats += delta;
      if (pair && delta > 0) this.#creatingPairs.add(pairKey(...pair));
      else if (pair) this.#creatingPairs.delete(pairKey(...pair));
    }
  }

  /** Agents and chats as admitted (committed plus creations in flight). */
  counts(): { agents: number; chats: number } {
    return { agents: this.#t.agents.size + this.#creatingAgents, chats: this.#t.chats.size + this.#creatingChats };
  }

  // ---- agents -----------------------------------------------------------------------------------

  /** An agent row; CORRUPT when its row failed its check (never "no such agent"). */
  agent(agentId: string): AgentRow | undefined {
    const row = this.#t.agents.get(agentId);
    if (!row && this.#t.damagedAgents.has(agentId))
      throw errors.corrupt({
        key: RowKey.agent(agentId),
        streamId: null,
        generation: null,
        fromPosition: null,
        detail: 'a PostgreSQL row fails its checksum',
      });
    return row;
  }

  hasAgent(agentId: string): boolean {
    return this.#t.agents.has(agentId);
  }

  agentIdByUsername(username: string): string | undefined {
    return this.#t.usernames.get(username);
  }

  agentIdByToken(tokenHash: string): string | undefined {
    return this.#t.tokens.get(tokenHash);
  }

  cacheAgent(row: AgentRow): void {
    const t = this.#t;
    const previous = t.agents.get(row.id);
    t.agents.set(row.id, row);
    t.damagedAgents.delete(row.id);
    t.usernames.set(row.username, row.id);
    if (previous && previous.tokenHash !== row.tokenHash && t.tokens.get(previous.tokenHash) === row.id)
      t.tokens.delete(previous.tokenHash);
    // As in the table: a disabled agent's token is in no index.
    if (row.disabled) t.tokens.delete(row.tokenHash);
    else t.tokens.set(row.tokenHash, row.id);
  }

  /** An agent row read again failed its check. */
  damagedAgent(agentId: string): void {
    this.#t.damagedAgents.add(agentId);
  }

  // ---- grants -----------------------------------------------------------------------------------

  grant(agentId: string, peerAgentId: string): GrantRow | undefined {
    return this.#t.grants.get(grantKey(agentId, peerAgentId));
  }

  /** The grant as committed (undefined: none); `damaged`: its row failed its check when read again. */
  setGrant(agentId: string, peerAgentId: string, grant: GrantRow | undefined, damaged = false): void {
    const key = grantKey(agentId, peerAgentId);
    if (grant) this.#t.grants.set(key, grant);
    else this.#t.grants.delete(key);
    if (damaged) this.#t.damaged.grants.push(RowKey.grant(agentId, peerAgentId));
  }

  // ---- chats ------------------------------------------------------------------------------------

  chat(chatId: string): ChatRow | undefined {
    return this.#t.chats.get(chatId);
  }

  chatOfPair(agentAId: string, agentBId: string): string | undefined {
    return this.#t.pairs.get(pairKey(agentAId, agentBId));
  }

  /** Cache a committed chat; false when it was cached already. */
  cacheChat(row: ChatRow): boolean {
    if (this.#t.chats.has(row.id)) return false;
    this.#t.chats.set(row.id, row);
    this.#t.pairs.set(pairKey(row.agentAId, row.agentBId), row.id);
    return true;
  }

  /**
   * Token-index and grant rows whose body failed its check. A row is found by its primary key
   * columns, and its checksum is bound to them: a changed key column (a damaged page the server
   * did not catch, a hand edit) makes the row fail its check instead of answering another lookup,
   * so an absent token or grant is definite only while this is empty, as on LevelDB.
   */
  damaged(): { tokenIndex: string[]; grants: string[] } {
    return { tokenIndex: [...this.#t.damaged.tokenIndex], grants: [...this.#t.damaged.grants] };
  }
}
