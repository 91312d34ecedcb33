// How the PostgreSQL directory's cache (directory-cache.ts) follows what every daemon committed:
// the tables loaded whole (at open, after a LISTEN reconnect or a recovery), one row reloaded per
// notice, a chat another daemon created read with its heads, and the chats learned that way
// announced (`onChatsLearned`: what `chats.watch` on this daemon is told of). The directory
// (directory.ts) decides when; this is what a reload reads and where it puts it.
//
// Each reload runs on the commit chain (`after`), behind this daemon's own earlier commits, so
// the cache never goes back to an older row.

import type { Logger } from 'pino';
import type { ChatRow, StreamMeta } from '../port/values.js';
import type { Sql } from './connection.js';
import type { DirectoryCache } from './directory-cache.js';
import { loadTables, selectAgents, selectChat, selectGrant } from './directory-rows.js';
import type { DirectoryNotice } from './directory-writes.js';
import type { Scope } from './stream-statements.js';
import type { PostgresStreams } from './stream-store.js';

export interface DirectoryReloadsOptions {
  sql: Sql;
  /** The directory's committed state, which these reloads keep current. */
  cache: DirectoryCache;
  /** The streams half of the same store: it learns the heads of chats read here. */
  streams: PostgresStreams;
  log: Logger | undefined;
  /** Told of each chat newly cached, with its heads (the store's `onChat`). */
  onChat: ((heads: readonly StreamMeta[]) => void) | undefined;
  /** Runs `task` on the commit chain, after every group cut before it (pg-group-commit.ts). */
  after: (task: () => Promise<void>) => Promise<void>;
}

export class DirectoryReloads {
  readonly #sql: Sql;
  readonly #cache: DirectoryCache;
  readonly #streams: PostgresStreams;
  readonly #log: Logger | undefined;
  readonly #onChat: ((heads: readonly StreamMeta[]) => void) | undefined;
  readonly #after: (task: () => Promise<void>) => Promise<void>;
  /** Told of chats another daemon created, once this one has cached them (`onChatsLearned`). */
  readonly #chatsLearned: Array<(chatIds: readonly string[]) => void> = [];

  constructor(options: DirectoryReloadsOptions) {
    this.#sql = options.sql;
    this.#cache = options.cache;
    this.#streams = options.streams;
    this.#log = options.log;
    this.#onChat = options.onChat;
    this.#after = options.after;
  }

  /** See PostgresDirectory.onChatsLearned. */
  onChatsLearned(listener: (chatIds: readonly string[]) => void): void {
    this.#chatsLearned.push(listener);
  }

  #announce(chatIds: readonly string[]): void {
    if (chatIds.length === 0) return;
    for (const l of this.#chatsLearned) l(chatIds);
  }

  /** Every table, whole; the chats that were not cached before are announced. */
  async loadAll(): Promise<void> {
    this.#announce(this.#cache.replace(await loadTables(this.#sql)));
  }

  /** A `yello_directory` notice: reload the row it names. A payload that is not ours is ignored. */
  onNotify(payload: string): void {
    let n: DirectoryNotice;
    try {
      n = JSON.parse(payload) as DirectoryNotice;
    } catch {
      return;
    }
    this.afterCommits(() => this.reload(n), 'reloading a directory row after a notice failed');
  }

  /** Run `task` on the commit chain (after every group cut before it); log its failure. */
  afterCommits(task: () => Promise<void>, failure: string): void {
    this.#after(task).catch((err: unknown) => this.#log?.warn({ err: { message: (err as Error).message } }, failure));
  }

  async reload(n: DirectoryNotice): Promise<void> {
    switch (n.kind) {
      case 'agent':
        await this.reloadAgents({ ids: [n.agentId] });
        return;
      case 'grant': {
        const { grant, damaged } = await selectGrant(this.#sql, n.agentId, n.peerAgentId);
        this.#cache.setGrant(n.agentId, n.peerAgentId, grant, damaged);
        return;
      }
      case 'chat':
        await this.loadChat(this.#sql, n.chatId);
        return;
    }
  }

  async reloadAgents(which: Parameters<typeof selectAgents>[1]): Promise<void> {
    for (const { agentId, row } of await selectAgents(this.#sql, which))
      if (row) this.#cache.cacheAgent(row);
      else this.#cache.damagedAgent(agentId);
  }

  /** Read a committed chat and its heads into the caches (another daemon's chat). */
  async loadChat(sql: Scope, chatId: string): Promise<void> {
    if (this.#cache.chat(chatId)) return;
    const chat = await selectChat(sql, chatId);
    if (chat && this.cacheChat(chat.row, chat.heads)) this.#announce([chatId]);
  }

  /** Cache a committed chat and its heads; false when it was cached already. */
  cacheChat(row: ChatRow, heads: readonly StreamMeta[]): boolean {
    if (this.#cache.chat(row.id)) return false;
    this.#streams.learnHeads(heads);
    this.#cache.cacheChat(row);
    this.#onChat?.(heads);
    return true;
  }
}
