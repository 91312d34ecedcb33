// The directory half of the storage port on PostgreSQL (issue 24): agents, usernames, the token
// index, grants, chats (one per pair), memberships. The rows are read from memory, synchronously,
// as the port says (directory-cache.ts). They are kept current from this daemon's own commits and
// from the other daemons': each transaction ends with `pg_notify('yello_directory', <row>)`, and
// a notice reloads that one row (a LISTEN reconnect reloads everything: notices are a wake-up,
// not the data).
//
// Writes are admitted by the kernel (port/directory-kernel.ts), committed by the group-commit
// engine (pg-group-commit.ts), each under a savepoint (directory-writes.ts).
//
// Reloads run on the same chain as commits, after them: a reload never reads the tables before
// this daemon's own earlier commit settled, so the cache never goes back to an older row. This
// file says when the cache is reloaded; what a reload reads and caches is directory-reloads.ts.

import type { Logger } from 'pino';
import { DirectoryKernel } from '../port/directory-kernel.js';
import type { DirectoryChange, DirectoryOutcome, DirectoryRows, PageRequest } from '../port/directory-port.js';
import { StoreGate } from '../port/gate.js';
import type { AgentRow, ChatRow, GrantRow, StreamMeta } from '../port/values.js';
import type { Sql } from './connection.js';
import { DirectoryCache } from './directory-cache.js';
import { DirectoryReloads } from './directory-reloads.js';
import { agentsPage, chatIdsPage, grantsPage, selectAgents } from './directory-rows.js';
import {
  DIRECTORY_CHANNEL,
  transactWrites,
  writeOf,
  type DirectoryNotice,
  type DirectoryWrite,
  type WriteCaches,
} from './directory-writes.js';
import { PgGroupCommit } from './pg-group-commit.js';
import { PG_WAITS, retryUntilDone, type PgWaits } from './retry.js';
import { SessionChecks } from './session-checks.js';
import type { PostgresStreams } from './stream-store.js';

export { DIRECTORY_CHANNEL, type DirectoryNotice };

export interface PostgresDirectoryOptions {
  log?: Logger;
  /** The store's gate, shared with its streams (a failed commit of either half makes the store read-only). */
  gate?: StoreGate;
  /** Called when a chat this daemon did not know becomes known (its own or another daemon's), with its heads. */
  onChat?: (heads: readonly StreamMeta[]) => void;
  /** Called when the database did not answer a session check in time, and when it answered one (the store logs a loss once). */
  onUnreachable?: (err: unknown) => void;
  onReachable?: () => void;
  waits?: PgWaits;
}

export class PostgresDirectory extends DirectoryKernel {
  readonly #sql: Sql;
  readonly #sessions: SessionChecks;
  readonly #log: Logger | undefined;
  /** Committed state (this daemon's commits and what notices reloaded). */
  readonly #cache = new DirectoryCache();
  readonly #commits: PgGroupCommit<DirectoryWrite, DirectoryOutcome>;
  #unlisten: (() => Promise<void>) | undefined;
  readonly #reloads: DirectoryReloads;

  private constructor(sql: Sql, streams: PostgresStreams, options: PostgresDirectoryOptions) {
    super(options.gate ?? new StoreGate('reconnect'));
    this.#sql = sql;
    this.#sessions = new SessionChecks(
      sql,
      (err) => options.onUnreachable?.(err),
      () => options.onReachable?.(),
      () => this.gate.closing,
      (options.waits ?? PG_WAITS).answerDeadlineMs,
    );
    this.#log = options.log;
    this.#commits = new PgGroupCommit<DirectoryWrite, DirectoryOutcome>({
      half: 'directory',
      gate: this.gate,
      log: options.log,
      deadline: false,
      waits: options.waits ?? PG_WAITS,
      transact: (group) => transactWrites(sql, group),
      unknown: (error) => ({ status: 'unknown', error }),
      settle: (w, outcome) => {
        try {
          w.settle(outcome);
        } finally {
          w.resolve(outcome);
        }
      },
    });
    this.#reloads = new DirectoryReloads({
      sql,
      cache: this.#cache,
      streams,
      log: options.log,
      onChat: options.onChat,
      after: (task) => this.#commits.after(task),
    });
  }

  /**
   * Load the directory tables whole and listen for other daemons' commits. `streams` is the
   * streams half of the same store: it learns the heads of new chats, and its read-only state is
   * the store's.
   */
  static async open(sql: Sql, streams: PostgresStreams, options: PostgresDirectoryOptions = {}): Promise<PostgresDirectory> {
    const d = new PostgresDirectory(sql, streams, options);
    await d.#loadAll();
    const listening = await sql.listen(
      DIRECTORY_CHANNEL,
      (payload) => {
        d.#reloads.onNotify(payload);
      },
      // Called again after every reconnect of the LISTEN connection: what was notified while it
      // was down is lost, so everything is reloaded (chats created meanwhile are announced), and
      // retried while the database does not answer: until then this daemon's directory is old.
      () => {
        if (d.#unlisten) d.#reloadAfterReconnect();
      },
    );
    d.#unlisten = () => listening.unlisten();
    return d;
  }

  /** Group commits and the writes in them, since open. */
  get stats(): { batches: number; writes: number } {
    return this.#commits.stats;
  }

  // ---- loading ------------------------------------------------------------------------------

  #reloadAfterReconnect(): void {
    void retryUntilDone({
      stopped: () => this.gate.closing,
      // The reload of a recovery: on the commit chain, after every commit admitted before it.
      attempt: () => this.recover(),
      failed: (err, attempt) =>
        // The code only: a server's message may quote data.
        this.#log?.warn(
          { err: { code: (err as { code?: string }).code }, attempt },
          'reloading the directory after a LISTEN reconnect failed; retrying',
        ),
    });
  }

  /**
   * Called with the ids of chats another daemon created, once this one has them cached: from its
   * notice, from a page of `chatIds`, from a create-or-find it won, or from the reload after a
   * LISTEN reconnect or a recovery (what `chats.watch` on this daemon is told of). Chats this
   * daemon created are not passed: their creator announces them.
   */
  onChatsLearned(listener: (chatIds: readonly string[]) => void): void {
    this.#reloads.onChatsLearned(listener);
  }

  #loadAll(): Promise<void> {
    return this.#reloads.loadAll();
  }

  /**
   * Read the agent row and the grant a denied change relied on again (stream-store.ts
   * `onDenied`): the database refused what this daemon's rows still allowed, so they are older
   * than its. On the commit chain, as a notice's reload.
   */
  reloadDenied(agentId: string, peerAgentId: string): void {
    const reloads = this.#reloads;
    reloads.afterCommits(() => reloads.reload({ kind: 'agent', agentId }), 'reloading an agent row after a denied commit failed');
    reloads.afterCommits(() => reloads.reload({ kind: 'grant', agentId, peerAgentId }), 'reloading a grant after a denied commit failed');
  }

  // ---- committed reads ------------------------------------------------------------------------

  protected _agent(agentId: string): AgentRow | undefined {
    return this.#cache.agent(agentId);
  }

  protected _agentIdByUsername(username: string): string | undefined {
    return this.#cache.agentIdByUsername(username);
  }

  protected _agentIdByToken(tokenHash: string): string | undefined {
    return this.#cache.agentIdByToken(tokenHash);
  }

  /** From the table (every daemon's agents, committed), in id order (bytewise, as on LevelDB). */
  protected _agents(page: PageRequest<string>): Promise<AgentRow[]> {
    return agentsPage(this.#sql, page);
  }

  protected _grant(agentId: string, peerAgentId: string): GrantRow | undefined {
    return this.#cache.grant(agentId, peerAgentId);
  }

  protected _grants(agentId: string | undefined, page: PageRequest<[agentId: string, peerAgentId: string]>): Promise<GrantRow[]> {
    return grantsPage(this.#sql, agentId, page);
  }

  protected _chat(chatId: string): ChatRow | undefined {
    return this.#cache.chat(chatId);
  }

  protected _chatOfPair(agentAId: string, agentBId: string): string | undefined {
    return this.#cache.chatOfPair(agentAId, agentBId);
  }

  /** From the tables (every daemon's chats), in chat id order; chats not cached yet are loaded first. */
  protected async _chatIds(agentId: string | undefined, page: PageRequest<string>): Promise<string[]> {
    const ids = await chatIdsPage(this.#sql, agentId, page);
    // A chat another daemon created whose notice has not arrived yet: cache it now, so that the
    // synchronous chat() of the caller finds every id of the page.
    for (const id of ids) if (!this.#cache.chat(id)) await this.#reloads.loadChat(this.#sql, id);
    return ids;
  }

  /** Token-index and grant rows whose body failed its check (directory-cache.ts). */
  protected _damaged(): Promise<{ tokenIndex: string[]; grants: string[] }> {
    return Promise.resolve(this.#cache.damaged());
  }

  // ---- writes ---------------------------------------------------------------------------------

  /** The statements of an admitted write, queued for the next group's transaction. */
  protected _enqueue(change: DirectoryChange): Promise<DirectoryOutcome> {
    let resolve!: (o: DirectoryOutcome) => void;
    const done = new Promise<DirectoryOutcome>((r) => (resolve = r));
    this.#commits.push({ ...writeOf(change, this.#caches), resolve });
    return done;
  }

  /** What a write updates once settled (directory-writes.ts). */
  readonly #caches: WriteCaches = {
    creating: (kind, delta, pair) => {
      this.#cache.creating(kind, delta, pair);
    },
    cacheAgent: (row) => {
      this.#cache.cacheAgent(row);
    },
    reloadAgentIn: async (tx, agentId) => {
      for (const { row } of await selectAgents(tx, { ids: [agentId] }))
        if (row && !this.#cache.hasAgent(agentId)) this.#cache.cacheAgent(row);
    },
    cacheGrant: (agentId, peerAgentId, grant) => {
      this.#cache.setGrant(agentId, peerAgentId, grant);
    },
    loadChat: (tx, chatId) => this.#reloads.loadChat(tx, chatId),
    cacheChat: (row, heads) => {
      this.#reloads.cacheChat(row, heads);
    },
  };

  confirmSession(agentId: string, tokenHash: string): Promise<boolean> {
    this.gate.assertOpen();
    return this.#sessions.valid(agentId, tokenHash).then((valid) => {
      // The rows here still allowed it (the caller checked them first): read the agent again.
      if (!valid)
        this.#reloads.afterCommits(
          () => this.#reloads.reload({ kind: 'agent', agentId }),
          'reloading an agent row after a refused session failed',
        );
      return valid;
    });
  }

  /** On the commit chain, after this daemon's earlier commits: a reload never goes back to an older row. */
  reload(rows: DirectoryRows): Promise<void> {
    this.gate.assertOpen();
    return this.#commits.after(async () => {
      const names = [...(rows.agents ?? [])];
      const tokens = [...(rows.tokens ?? [])];
      const reloads = this.#reloads;
      if (names.length > 0 || tokens.length > 0) await reloads.reloadAgents({ ids: names, usernames: names, tokens });
      for (const [agentId, peerAgentId] of rows.grants ?? []) await reloads.reload({ kind: 'grant', agentId, peerAgentId });
      for (const chatId of rows.chats ?? []) await reloads.loadChat(this.#sql, chatId);
    });
  }

  // ---- counts, lifecycle ----------------------------------------------------------------------

  /** Agents and chats as admitted (committed plus creations in flight). */
  counts(): { agents: number; chats: number } {
    return this.#cache.counts();
  }

  /** Called after each directory transaction with its number of writes and the seconds it took. */
  onCommit(listener: (writes: number, seconds: number) => void): void {
    this.#commits.onCommit((group, _outcomes, seconds) => {
      listener(group.length, seconds);
    });
  }

  /** After an unknown outcome, once the database answers: reload every table (the store recovers writes). */
  async recover(): Promise<void> {
    await this.#commits.settledForRecovery();
    await this.#commits.after(() => this.#loadAll());
  }

  /** Wait for admitted writes to settle and stop listening; the pool is the caller's to end. */
  async close(): Promise<void> {
    this.gate.close();
    await this.#commits.drained();
    await this.#commits.settled;
    const unlisten = this.#unlisten;
    this.#unlisten = undefined;
    await unlisten?.().catch(() => {});
  }
}
