// The directory half of the storage port on PostgreSQL (issue 24): agents, usernames, the token
// index, grants, chats (one per pair), memberships. Every RPC authenticates against an agent row
// and every append checks a grant, so the tables are loaded whole at open and read from memory,
// synchronously, as the port says. They are kept current from this daemon's own commits and from
// the other daemons': each transaction ends with `pg_notify('yello_directory', <row>)`, and a
// notice reloads that one row (a LISTEN reconnect reloads everything: notices are a wake-up, not
// the data).
//
// Writes are admitted synchronously against the admitted state (a username or a pair is taken
// in the call that admits it, so two writes of this daemon never both take one), then committed
// with the others of the same turn in one transaction, each under a savepoint: a unique key
// another daemon took first (usernames_pkey, pairs_pkey) rolls back that write alone and comes
// back `duplicate` with the holder; the constraint, not the cache, is what makes a second row
// impossible. A transaction without a verdict is `unknown` for all its writes and turns the
// whole store read-only, as in the streams half.
//
// Reloads run on the same chain as commits, after them: a reload never reads the tables before
// this daemon's own earlier commit settled, so the cache never goes back to an older row.

import type { Logger } from 'pino';
import { errors } from '../../../shared/errors.js';
import { DirectoryKernel } from '../port/directory-kernel.js';
import type { DirectoryChange, DirectoryOutcome, DirectoryRows, PageRequest } from '../port/directory-port.js';
import { StoreGate, writeFailed } from '../port/gate.js';
import { GroupCommit } from '../port/group-commit.js';
import type { AgentRow, ChatRow, GrantRow, StreamMeta } from '../port/values.js';
import type { Sql } from './connection.js';
import { decodeRow, encodeRow, RowKey, tryDecodeRow } from './row-codec.js';
import { chainSettled, commitUnanswered, retryUntilDone } from './retry.js';
import { SessionChecks } from './session-checks.js';
import type { PostgresStreams } from './stream-store.js';

/** The channel of `pg_notify` at the end of every directory commit. */
export const DIRECTORY_CHANNEL = 'yello_directory';

/** What a directory notice names: the row to reload. */
export type DirectoryNotice =
  { kind: 'agent'; agentId: string } | { kind: 'grant'; agentId: string; peerAgentId: string } | { kind: 'chat'; chatId: string };

type TxSql = Parameters<Parameters<Sql['begin']>[1]>[0];

interface Write {
  /** The statements, inside the write's savepoint; the database's error rolls back this write alone. */
  apply(tx: TxSql): Promise<void>;
  /** A unique violation of `constraint`: the holder, when this write may lose that key. */
  holder?(tx: TxSql, constraint: string): Promise<string | undefined>;
  notice: DirectoryNotice;
  /** Update the caches and drop the admitted state; runs once, with the outcome. */
  settle(outcome: DirectoryOutcome): void | Promise<void>;
  resolve(outcome: DirectoryOutcome): void;
}

const grantKey = (agentId: string, peerAgentId: string) => `${agentId}\n${peerAgentId}`;
const pairKey = (a: string, b: string) => `${a}\n${b}`;

export interface PostgresDirectoryOptions {
  log?: Logger;
  /** The store's gate, shared with its streams (a failed commit of either half makes the store read-only). */
  gate?: StoreGate;
  /** Called when a chat this daemon did not know becomes known (its own or another daemon's), with its heads. */
  onChat?: (heads: readonly StreamMeta[]) => void;
  /** Called when the database did not answer a session check in time, and when it answered one (the store logs a loss once). */
  onUnreachable?: (err: unknown) => void;
  onReachable?: () => void;
}

export class PostgresDirectory extends DirectoryKernel {
  readonly #sql: Sql;
  readonly #sessions: SessionChecks;
  readonly #streams: PostgresStreams;
  readonly #log: Logger | undefined;
  readonly #onChat: ((heads: readonly StreamMeta[]) => void) | undefined;

  // Committed state (this daemon's commits and what notices reloaded).
  #agents = new Map<string, AgentRow>();
  #usernames = new Map<string, string>();
  #tokens = new Map<string, string>();
  #grants = new Map<string, GrantRow>();
  #chats = new Map<string, ChatRow>();
  #pairs = new Map<string, string>();
  /** Agent rows whose body fails its check: reading them throws CORRUPT, never "no such agent". */
  #damagedAgents = new Set<string>();
  #damaged: { tokenIndex: string[]; grants: string[] } = { tokenIndex: [], grants: [] };

  /** Creations admitted and not settled yet (counted as admitted). */
  #creatingAgents = 0;
  #creatingChats = 0;
  /** Chats this daemon is creating, by pair: a reload does not announce them (their creator does). */
  readonly #creatingPairs = new Set<string>();

  readonly #groups = new GroupCommit<Write>((group) => this.#commitGroup(group));
  #unlisten: (() => Promise<void>) | undefined;
  /** Told of chats another daemon created, once this one has cached them (`onChatsLearned`). */
  readonly #chatsLearned: Array<(chatIds: readonly string[]) => void> = [];
  /** Whether the tables were loaded once (the first load announces nothing: nobody listens yet). */
  #loaded = false;
  /** Group commits and the writes in them, since open. */
  readonly stats = { batches: 0, writes: 0 };
  readonly #commitListeners: Array<(writes: number, seconds: number) => void> = [];

  private constructor(sql: Sql, streams: PostgresStreams, options: PostgresDirectoryOptions) {
    super(options.gate ?? new StoreGate('reconnect'));
    this.#sql = sql;
    this.#sessions = new SessionChecks(
      sql,
      (err) => options.onUnreachable?.(err),
      () => options.onReachable?.(),
    );
    this.#streams = streams;
    this.#log = options.log;
    this.#onChat = options.onChat;
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
        d.#onNotify(payload);
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
    this.#chatsLearned.push(listener);
  }

  #announce(chatIds: readonly string[]): void {
    if (chatIds.length === 0) return;
    for (const l of this.#chatsLearned) l(chatIds);
  }

  async #loadAll(): Promise<void> {
    const [agents, usernames, tokens, grants, chats, pairs] = await Promise.all([
      this.#sql<{ agent_id: string; body: string }[]>`select agent_id, body from agents`,
      this.#sql<{ username: string; body: string }[]>`select username, body from usernames`,
      this.#sql<{ token_hash: string; body: string }[]>`select token_hash, body from tokens`,
      this.#sql<{ agent_id: string; peer_agent_id: string; body: string }[]>`select agent_id, peer_agent_id, body from grants`,
      this.#sql<{ chat_id: string; body: string }[]>`select chat_id, body from chats`,
      this.#sql<{ a: string; b: string; body: string }[]>`select a, b, body from pairs`,
    ]);
    const next = {
      agents: new Map<string, AgentRow>(),
      usernames: new Map<string, string>(),
      tokens: new Map<string, string>(),
      grants: new Map<string, GrantRow>(),
      chats: new Map<string, ChatRow>(),
      pairs: new Map<string, string>(),
      damagedAgents: new Set<string>(),
      damaged: { tokenIndex: [] as string[], grants: [] as string[] },
    };
    for (const r of agents) {
      const row = tryDecodeRow<AgentRow>(RowKey.agent(r.agent_id), r.body);
      if (row) next.agents.set(r.agent_id, row);
      else next.damagedAgents.add(r.agent_id);
    }
    for (const r of usernames) {
      const id = tryDecodeRow<string>(RowKey.username(r.username), r.body);
      if (id !== undefined) next.usernames.set(r.username, id);
    }
    for (const r of tokens) {
      const key = RowKey.token(r.token_hash);
      const id = tryDecodeRow<string>(key, r.body);
      if (id !== undefined) next.tokens.set(r.token_hash, id);
      else next.damaged.tokenIndex.push(key);
    }
    for (const r of grants) {
      const key = RowKey.grant(r.agent_id, r.peer_agent_id);
      const grant = tryDecodeRow<GrantRow>(key, r.body);
      if (grant) next.grants.set(grantKey(r.agent_id, r.peer_agent_id), grant);
      else next.damaged.grants.push(key);
    }
    for (const r of chats) {
      const row = tryDecodeRow<ChatRow>(RowKey.chat(r.chat_id), r.body);
      if (row) next.chats.set(r.chat_id, row);
    }
    for (const r of pairs) {
      const chatId = tryDecodeRow<string>(RowKey.pair(r.a, r.b), r.body);
      if (chatId !== undefined) next.pairs.set(pairKey(r.a, r.b), chatId);
    }
    this.#agents = next.agents;
    this.#usernames = next.usernames;
    this.#tokens = next.tokens;
    this.#grants = next.grants;
    // Chats that were not cached before this load, unless this daemon is creating them itself.
    const learned = this.#loaded
      ? [...next.chats.values()]
          .filter((c) => !this.#chats.has(c.id) && !this.#creatingPairs.has(pairKey(c.agentAId, c.agentBId)))
          .map((c) => c.id)
      : [];
    this.#chats = next.chats;
    this.#pairs = next.pairs;
    this.#damagedAgents = next.damagedAgents;
    this.#damaged = next.damaged;
    this.#loaded = true;
    this.#announce(learned);
  }

  #onNotify(payload: string): void {
    let n: DirectoryNotice;
    try {
      n = JSON.parse(payload) as DirectoryNotice;
    } catch {
      return;
    }
    this.#afterCommits(() => this.#reload(n), 'reloading a directory row after a notice failed');
  }

  /** Run `task` on the commit chain (after every group cut before it); log its failure. */
  #afterCommits(task: () => Promise<void>, failure: string): void {
    this.#groups.after(task).catch((err: unknown) => this.#log?.warn({ err: { message: (err as Error).message } }, failure));
  }

  async #reload(n: DirectoryNotice): Promise<void> {
    switch (n.kind) {
      case 'agent': {
        const [r] = await this.#sql<{ body: string }[]>`select body from agents where agent_id = ${n.agentId}`;
        if (!r) return;
        const row = tryDecodeRow<AgentRow>(RowKey.agent(n.agentId), r.body);
        if (row) this.#cacheAgent(row);
        else this.#damagedAgents.add(n.agentId);
        return;
      }
      case 'grant': {
        const [r] = await this.#sql<{ body: string }[]>`
          select body from grants where agent_id = ${n.agentId} and peer_agent_id = ${n.peerAgentId}`;
        const key = grantKey(n.agentId, n.peerAgentId);
        const grant = r ? tryDecodeRow<GrantRow>(RowKey.grant(n.agentId, n.peerAgentId), r.body) : undefined;
        if (grant) this.#grants.set(key, grant);
        else this.#grants.delete(key);
        if (r && !grant) this.#damaged.grants.push(RowKey.grant(n.agentId, n.peerAgentId));
        return;
      }
      case 'chat':
        await this.#loadChat(this.#sql, n.chatId);
        return;
    }
  }

  /** Read a committed chat and its heads into the caches (another daemon's chat). */
  async #loadChat(sql: Sql | TxSql, chatId: string): Promise<void> {
    if (this.#chats.has(chatId)) return;
    const [[r], heads] = await Promise.all([
      sql<{ body: string }[]>`select body from chats where chat_id = ${chatId}`,
      sql<{ stream_id: string; meta: string }[]>`select stream_id, meta from heads where chat_id = ${chatId}`,
    ]);
    const row = r ? tryDecodeRow<ChatRow>(RowKey.chat(chatId), r.body) : undefined;
    if (!row) return;
    const metas: StreamMeta[] = [];
    for (const h of heads) {
      const meta = tryDecodeRow<StreamMeta>(RowKey.head(h.stream_id), h.meta);
      if (meta) metas.push(meta);
    }
    if (this.#cacheChat(row, metas)) this.#announce([chatId]);
  }

  #cacheAgent(row: AgentRow): void {
    const previous = this.#agents.get(row.id);
    this.#agents.set(row.id, row);
    this.#damagedAgents.delete(row.id);
    this.#usernames.set(row.username, row.id);
    if (previous && previous.tokenHash !== row.tokenHash && this.#tokens.get(previous.tokenHash) === row.id)
      this.#tokens.delete(previous.tokenHash);
    // As in the table: a disabled agent's token is in no index.
    if (row.disabled) this.#tokens.delete(row.tokenHash);
    else this.#tokens.set(row.tokenHash, row.id);
  }

  /**
   * Read the agent row and the grant a denied change relied on again (stream-store.ts
   * `onDenied`): the database refused what this daemon's rows still allowed, so they are older
   * than its. On the commit chain, as a notice's reload.
   */
  reloadDenied(agentId: string, peerAgentId: string): void {
    this.#afterCommits(() => this.#reload({ kind: 'agent', agentId }), 'reloading an agent row after a denied commit failed');
    this.#afterCommits(() => this.#reload({ kind: 'grant', agentId, peerAgentId }), 'reloading a grant after a denied commit failed');
  }

  /** Cache a committed chat and its heads; false when it was cached already. */
  #cacheChat(row: ChatRow, heads: readonly StreamMeta[]): boolean {
    if (this.#chats.has(row.id)) return false;
    this.#streams.learnHeads(heads);
    this.#chats.set(row.id, row);
    this.#pairs.set(pairKey(row.agentAId, row.agentBId), row.id);
    this.#onChat?.(heads);
    return true;
  }

  // ---- committed reads ------------------------------------------------------------------------

  protected _agent(agentId: string): AgentRow | undefined {
    const row = this.#agents.get(agentId);
    if (!row && this.#damagedAgents.has(agentId))
      throw errors.corrupt({
        key: RowKey.agent(agentId),
        streamId: null,
        generation: null,
        fromPosition: null,
        detail: 'a PostgreSQL row fails its checksum',
      });
    return row;
  }

  protected _agentIdByUsername(username: string): string | undefined {
    return this.#usernames.get(username);
  }

  protected _agentIdByToken(tokenHash: string): string | undefined {
    return this.#tokens.get(tokenHash);
  }

  /** From the table (every daemon's agents, committed), in id order (bytewise, as on LevelDB). */
  protected async _agents(page: PageRequest<string>): Promise<AgentRow[]> {
    const after = page.after ?? '';
    const rows = await this.#sql<{ agent_id: string; body: string }[]>`
      select agent_id, body from agents where agent_id collate "C" > ${after} order by agent_id collate "C" limit ${page.limit}`;
    return rows.map((r) => decodeRow<AgentRow>(RowKey.agent(r.agent_id), r.body));
  }

  protected _grant(agentId: string, peerAgentId: string): GrantRow | undefined {
    return this.#grants.get(grantKey(agentId, peerAgentId));
  }

  protected async _grants(agentId: string | undefined, page: PageRequest<[agentId: string, peerAgentId: string]>): Promise<GrantRow[]> {
    const [a, b] = page.after ?? ['', ''];
    const rows = await this.#sql<{ agent_id: string; peer_agent_id: string; body: string }[]>`
      select agent_id, peer_agent_id, body from grants
      where (agent_id collate "C", peer_agent_id collate "C") > (${a}, ${b})
        ${agentId === undefined ? this.#sql`` : this.#sql`and agent_id = ${agentId}`}
      order by agent_id collate "C", peer_agent_id collate "C" limit ${page.limit}`;
    return rows.map((r) => decodeRow<GrantRow>(RowKey.grant(r.agent_id, r.peer_agent_id), r.body));
  }

  protected _chat(chatId: string): ChatRow | undefined {
    return this.#chats.get(chatId);
  }

  protected _chatOfPair(agentAId: string, agentBId: string): string | undefined {
    return this.#pairs.get(pairKey(agentAId, agentBId));
  }

  /** From the tables (every daemon's chats), in chat id order; chats not cached yet are loaded first. */
  protected async _chatIds(agentId: string | undefined, page: PageRequest<string>): Promise<string[]> {
    const after = page.after ?? '';
    const rows =
      agentId === undefined
        ? await this.#sql<{ chat_id: string }[]>`
            select chat_id from chats where chat_id collate "C" > ${after} order by chat_id collate "C" limit ${page.limit}`
        : await this.#sql<{ chat_id: string }[]>`
            select chat_id from members where agent_id = ${agentId} and chat_id collate "C" > ${after}
            order by chat_id collate "C" limit ${page.limit}`;
    // A chat another daemon created whose notice has not arrived yet: cache it now, so that the
    // synchronous chat() of the caller finds every id of the page.
    for (const r of rows) if (!this.#chats.has(r.chat_id)) await this.#loadChat(this.#sql, r.chat_id);
    return rows.map((r) => r.chat_id);
  }

  // ---- writes ---------------------------------------------------------------------------------

  /** The statements of an admitted write, queued for the next group's transaction. */
  protected _enqueue(change: DirectoryChange): Promise<DirectoryOutcome> {
    let resolve!: (o: DirectoryOutcome) => void;
    const done = new Promise<DirectoryOutcome>((r) => (resolve = r));
    this.#groups.push({ ...this.#write(change), resolve });
    return done;
  }

  /** What a write does in its savepoint, who holds a unique key it lost, and what it caches once settled. */
  #write(change: DirectoryChange): Omit<Write, 'resolve'> {
    switch (change.kind) {
      case 'createAgent': {
        const { row } = change;
        this.#creatingAgents++;
        return {
          notice: { kind: 'agent', agentId: row.id },
          apply: async (tx) => {
            await tx`insert into agents (agent_id, body) values (${row.id}, ${encodeRow(RowKey.agent(row.id), row)})`;
            await tx`insert into usernames (username, agent_id, body)
              values (${row.username}, ${row.id}, ${encodeRow(RowKey.username(row.username), row.id)})`;
            await tx`insert into tokens (token_hash, agent_id, body)
              values (${row.tokenHash}, ${row.id}, ${encodeRow(RowKey.token(row.tokenHash), row.id)})`;
          },
          holder: async (tx, constraint) => {
            if (constraint !== 'usernames_pkey') return undefined;
            const [r] = await tx<{ agent_id: string }[]>`select agent_id from usernames where username = ${row.username}`;
            if (r) await this.#reloadAgentIn(tx, r.agent_id);
            return r?.agent_id;
          },
          settle: (outcome) => {
            this.#creatingAgents--;
            if (outcome.status === 'ok') this.#cacheAgent(row);
          },
        };
      }
      case 'updateAgent': {
        const { row, previous } = change;
        return {
          notice: { kind: 'agent', agentId: row.id },
          apply: async (tx) => {
            await tx`update agents set body = ${encodeRow(RowKey.agent(row.id), row)} where agent_id = ${row.id}`;
            // A disabled agent has no token row: the commits of every daemon check the session's
            // token row in their transaction (group-statement.ts), so this is what refuses them.
            if (row.disabled) await tx`delete from tokens where agent_id = ${row.id}`;
            else if (row.tokenHash !== previous.tokenHash) {
              await tx`delete from tokens where token_hash = ${previous.tokenHash}`;
              await tx`insert into tokens (token_hash, agent_id, body)
                values (${row.tokenHash}, ${row.id}, ${encodeRow(RowKey.token(row.tokenHash), row.id)})`;
            }
          },
          settle: (outcome) => {
            if (outcome.status === 'ok') this.#cacheAgent(row);
          },
        };
      }
      case 'putGrant': {
        const { grant } = change;
        return {
          notice: { kind: 'grant', agentId: grant.agentId, peerAgentId: grant.peerAgentId },
          apply: async (tx) => {
            await tx`insert into grants (agent_id, peer_agent_id, body)
              values (${grant.agentId}, ${grant.peerAgentId}, ${encodeRow(RowKey.grant(grant.agentId, grant.peerAgentId), grant)})
              on conflict (agent_id, peer_agent_id) do update set body = excluded.body`;
          },
          settle: (outcome) => {
            if (outcome.status === 'ok') this.#grants.set(grantKey(grant.agentId, grant.peerAgentId), grant);
          },
        };
      }
      case 'deleteGrant': {
        const { agentId, peerAgentId } = change;
        return {
          notice: { kind: 'grant', agentId, peerAgentId },
          apply: async (tx) => {
            await tx`delete from grants where agent_id = ${agentId} and peer_agent_id = ${peerAgentId}`;
          },
          settle: (outcome) => {
            if (outcome.status === 'ok') this.#grants.delete(grantKey(agentId, peerAgentId));
          },
        };
      }
      case 'createChat': {
        const { row, heads } = change;
        const key = pairKey(row.agentAId, row.agentBId);
        this.#creatingChats++;
        this.#creatingPairs.add(key);
        return {
          notice: { kind: 'chat', chatId: row.id },
          apply: async (tx) => {
            await tx`insert into chats (chat_id, body) values (${row.id}, ${encodeRow(RowKey.chat(row.id), row)})`;
            // The pair's primary key is what makes a second chat per pair impossible, whichever daemon tries.
            await tx`insert into pairs (a, b, chat_id, body)
              values (${row.agentAId}, ${row.agentBId}, ${row.id}, ${encodeRow(RowKey.pair(row.agentAId, row.agentBId), row.id)})`;
            for (const agentId of [row.agentAId, row.agentBId])
              await tx`insert into members (agent_id, chat_id, body)
                values (${agentId}, ${row.id}, ${encodeRow(RowKey.member(agentId, row.id), '')})`;
            for (const h of heads)
              await tx`
                insert into heads (stream_id, chat_id, author, peer, generation, first_position, next_position, writer_epoch, meta)
                values (${h.streamId}, ${h.chatId}, ${h.authorAgentId}, ${h.peerAgentId}, ${h.generation}, ${h.firstPosition},
                        ${h.nextPosition}, ${h.writer.epoch}, ${encodeRow(RowKey.head(h.streamId), h)})`;
          },
          holder: async (tx, constraint) => {
            if (constraint !== 'pairs_pkey') return undefined;
            const [r] = await tx<{ chat_id: string }[]>`select chat_id from pairs where a = ${row.agentAId} and b = ${row.agentBId}`;
            // The winner's chat, cached now: create-or-find answers it at once.
            if (r) await this.#loadChat(tx, r.chat_id);
            return r?.chat_id;
          },
          settle: (outcome) => {
            this.#creatingChats--;
            this.#creatingPairs.delete(key);
            if (outcome.status === 'ok') this.#cacheChat(row, heads);
          },
        };
      }
    }
  }

  /** Cache the agent holding a username another daemon took first (so it can be looked up at once). */
  async #reloadAgentIn(tx: TxSql, agentId: string): Promise<void> {
    const [r] = await tx<{ body: string }[]>`select body from agents where agent_id = ${agentId}`;
    const row = r ? tryDecodeRow<AgentRow>(RowKey.agent(agentId), r.body) : undefined;
    if (row && !this.#agents.has(agentId)) this.#cacheAgent(row);
  }

  // ---- what another daemon may have changed unheard ---------------------------------------------

  confirmSession(agentId: string, tokenHash: string): Promise<boolean> {
    this.gate.assertOpen();
    return this.#sessions.valid(agentId, tokenHash).then((valid) => {
      // The rows here still allowed it (the caller checked them first): read the agent again.
      if (!valid)
        this.#afterCommits(() => this.#reload({ kind: 'agent', agentId }), 'reloading an agent row after a refused session failed');
      return valid;
    });
  }

  /** On the commit chain, after this daemon's earlier commits: a reload never goes back to an older row. */
  reload(rows: DirectoryRows): Promise<void> {
    this.gate.assertOpen();
    return this.#groups.after(async () => {
      const names = [...(rows.agents ?? [])];
      const tokens = [...(rows.tokens ?? [])];
      if (names.length > 0 || tokens.length > 0) {
        const found = await this.#sql<{ agent_id: string; body: string }[]>`
          select agent_id, body from agents where agent_id = any(${names}::text[])
            or agent_id in (select agent_id from usernames where username = any(${names}::text[]))
            or agent_id in (select agent_id from tokens where token_hash = any(${tokens}::text[]))`;
        for (const r of found) {
          const row = tryDecodeRow<AgentRow>(RowKey.agent(r.agent_id), r.body);
          if (row) this.#cacheAgent(row);
          else this.#damagedAgents.add(r.agent_id);
        }
      }
      for (const [agentId, peerAgentId] of rows.grants ?? []) await this.#reload({ kind: 'grant', agentId, peerAgentId });
      for (const chatId of rows.chats ?? []) await this.#loadChat(this.#sql, chatId);
    });
  }

  // ---- damage -------------------------------------------------------------------------------

  /**
   * Token-index and grant rows whose body failed its check when the tables were loaded. A row is
   * found by its primary key columns, and its checksum is bound to them: a changed key column (a
   * damaged page the server did not catch, a hand edit) makes the row fail its check instead of
   * answering another lookup, so an absent token or grant is definite only while this is empty,
   * as on LevelDB.
   */
  protected _damaged(): Promise<{ tokenIndex: string[]; grants: string[] }> {
    return Promise.resolve({ tokenIndex: [...this.#damaged.tokenIndex], grants: [...this.#damaged.grants] });
  }

  // ---- counts, lifecycle ----------------------------------------------------------------------

  /** Agents and chats as admitted (committed plus creations in flight). */
  counts(): { agents: number; chats: number } {
    return { agents: this.#agents.size + this.#creatingAgents, chats: this.#chats.size + this.#creatingChats };
  }

  /** Called after each directory transaction with its number of writes and the seconds it took. */
  onCommit(listener: (writes: number, seconds: number) => void): void {
    this.#commitListeners.push(listener);
  }

  /** After an unknown outcome, once the database answers: reload every table (the store recovers writes). */
  async recover(): Promise<void> {
    // As the streams half: a directory commit still waiting (a lock, a synchronous standby not
    // back) must not hold the recovery silently; it is retried.
    if (!(await chainSettled(this.#groups.settled))) throw commitUnanswered('directory');
    await this.#groups.after(() => this.#loadAll());
  }

  /** Wait for admitted writes to settle and stop listening; the pool is the caller's to end. */
  async close(): Promise<void> {
    this.gate.close();
    await this.#groups.drained();
    await this.#groups.settled;
    const unlisten = this.#unlisten;
    this.#unlisten = undefined;
    await unlisten?.().catch(() => {});
  }

  // ---- commits ------------------------------------------------------------------------------

  async #commitGroup(group: Write[]): Promise<void> {
    const started = performance.now();
    let outcomes: DirectoryOutcome[];
    try {
      outcomes = await this.#sql.begin(async (tx) => {
        const out: DirectoryOutcome[] = [];
        for (const w of group) {
          try {
            await tx.savepoint((sp) => w.apply(sp));
            out.push({ status: 'ok' });
          } catch (err) {
            const pg = err as { code?: string; constraint_name?: string };
            const holder = pg.code === '23505' && w.holder ? await w.holder(tx, pg.constraint_name ?? '') : undefined;
            if (holder === undefined) throw err;
            out.push({ status: 'duplicate', existing: holder });
          }
        }
        const notices = group.filter((_, i) => out[i]?.status === 'ok').map((w) => JSON.stringify(w.notice));
        await Promise.all(notices.map((n) => tx`select pg_notify(${DIRECTORY_CHANNEL}, ${n})`));
        return out;
      });
    } catch (err) {
      // No verdict from the database: the transaction may or may not have committed.
      const error = writeFailed(`the commit to PostgreSQL failed: ${(err as Error).message}`);
      this.#log?.error(
        { err: { message: (err as Error).message, code: (err as { code?: string }).code } },
        'a PostgreSQL directory commit failed; its outcome is unknown; the store is read-only',
      );
      this.gate.fail();
      outcomes = group.map(() => ({ status: 'unknown', error }));
    }
    this.stats.batches++;
    this.stats.writes += group.length;
    const seconds = (performance.now() - started) / 1000;
    for (const [i, w] of group.entries()) {
      const outcome = outcomes[i] ?? { status: 'unknown', error: new Error('no outcome') };
      try {
        await w.settle(outcome);
      } finally {
        w.resolve(outcome);
      }
    }
    for (const l of this.#commitListeners) l(group.length, seconds);
  }
}
