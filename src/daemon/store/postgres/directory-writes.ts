// What each kind of directory write does on PostgreSQL (an exhaustive switch: a new kind does not
// compile until it is written here), and the transaction of a group of them: each write under a
// savepoint, so a unique key another daemon took first (usernames_pkey, pairs_pkey) rolls back
// that write alone and comes back `duplicate` with the holder; the constraint, not the cache, is
// what makes a second row impossible. The transaction ends with one notice per write committed.

import type { DirectoryChange, DirectoryOutcome } from '../port/directory-port.js';
import type { AgentRow, ChatRow, GrantRow, StreamMeta } from '../port/values.js';
import type { Sql } from './connection.js';
import { encodeRow, RowKey } from './row-codec.js';
import { insertHead, type Scope } from './stream-statements.js';

/** The channel of `pg_notify` at the end of every directory commit. */
export const DIRECTORY_CHANNEL = 'yello_directory';

/** What a directory notice names: the row to reload. */
export type DirectoryNotice =
  { kind: 'agent'; agentId: string } | { kind: 'grant'; agentId: string; peerAgentId: string } | { kind: 'chat'; chatId: string };

export interface DirectoryWrite {
  /** The statements, inside the write's savepoint; the database's error rolls back this write alone. */
  apply(tx: Scope): Promise<void>;
  /** A unique violation of `constraint`: the holder, when this write may lose that key. */
  holder?(tx: Scope, constraint: string): Promise<string | undefined>;
  notice: DirectoryNotice;
  /** Update the caches and drop the admitted state; runs once, with the outcome. */
  settle(outcome: DirectoryOutcome): void;
  resolve(outcome: DirectoryOutcome): void;
}

/** The directory's caches, as a write updates them. */
export interface WriteCaches {
  /** A create of an agent (+1) or a chat (with its pair) is out, or settled (-1): counted, and a reload keeps its pair. */
  creating(kind: 'agent' | 'chat', delta: 1 | -1, pair?: readonly [string, string]): void;
  cacheAgent(row: AgentRow): void;
  /** Cache the agent holding a username another daemon took first (so it can be looked up at once). */
  reloadAgentIn(tx: Scope, agentId: string): Promise<void>;
  cacheGrant(agentId: string, peerAgentId: string, grant: GrantRow | undefined): void;
  /** The winner's chat of a pair, cached now: create-or-find answers it at once. */
  loadChat(tx: Scope, chatId: string): Promise<void>;
  cacheChat(row: ChatRow, heads: readonly StreamMeta[]): void;
}

const insertToken = (tx: Scope, row: AgentRow) =>
  tx`insert into tokens (token_hash, agent_id, body) values (${row.tokenHash}, ${row.id}, ${encodeRow(RowKey.token(row.tokenHash), row.id)})`;

/** What a write does in its savepoint, who holds a unique key it lost, and what it caches once settled. */
export function writeOf(change: DirectoryChange, caches: WriteCaches): Omit<DirectoryWrite, 'resolve'> {
  switch (change.kind) {
    case 'createAgent': {
      const { row } = change;
      caches.creating('agent', 1);
      return {
        notice: { kind: 'agent', agentId: row.id },
        apply: async (tx) => {
          await tx`insert into agents (agent_id, body) values (${row.id}, ${encodeRow(RowKey.agent(row.id), row)})`;
          await tx`insert into usernames (username, agent_id, body)
            values (${row.username}, ${row.id}, ${encodeRow(RowKey.username(row.username), row.id)})`;
          await insertToken(tx, row);
        },
        holder: async (tx, constraint) => {
          if (constraint !== 'usernames_pkey') return undefined;
          const [r] = await tx<{ agent_id: string }[]>`select agent_id from usernames where username = ${row.username}`;
          if (r) await caches.reloadAgentIn(tx, r.agent_id);
          return r?.agent_id;
        },
        settle: (outcome) => {
          caches.creating('agent', -1);
          if (outcome.status === 'ok') caches.cacheAgent(row);
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
            await insertToken(tx, row);
          }
        },
        settle: (outcome) => {
          if (outcome.status === 'ok') caches.cacheAgent(row);
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
          if (outcome.status === 'ok') caches.cacheGrant(grant.agentId, grant.peerAgentId, grant);
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
          if (outcome.status === 'ok') caches.cacheGrant(agentId, peerAgentId, undefined);
        },
      };
    }
    case 'createChat': {
      const { row, heads } = change;
      const pair = [row.agentAId, row.agentBId] as const;
      caches.creating('chat', 1, pair);
      return {
        notice: { kind: 'chat', chatId: row.id },
        apply: async (tx) => {
          await tx`insert into chats (chat_id, body) values (${row.id}, ${encodeRow(RowKey.chat(row.id), row)})`;
          // The pair's primary key is what makes a second chat per pair impossible, whichever daemon tries.
          await tx`insert into pairs (a, b, chat_id, body)
            values (${row.agentAId}, ${row.agentBId}, ${row.id}, ${encodeRow(RowKey.pair(row.agentAId, row.agentBId), row.id)})`;
          for (const agentId of pair)
            await tx`insert into members (agent_id, chat_id, body) values (${agentId}, ${row.id}, ${encodeRow(RowKey.member(agentId, row.id), '')})`;
          for (const h of heads) await insertHead(tx, h);
        },
        holder: async (tx, constraint) => {
          if (constraint !== 'pairs_pkey') return undefined;
          const [r] = await tx<{ chat_id: string }[]>`select chat_id from pairs where a = ${row.agentAId} and b = ${row.agentBId}`;
          if (r) await caches.loadChat(tx, r.chat_id);
          return r?.chat_id;
        },
        settle: (outcome) => {
          caches.creating('chat', -1, pair);
          if (outcome.status === 'ok') caches.cacheChat(row, heads);
        },
      };
    }
  }
}

/** A group's transaction: an outcome per write; throws without a verdict (or for an error no write can lose to). */
export function transactWrites(sql: Sql, group: readonly DirectoryWrite[]): Promise<DirectoryOutcome[]> {
  return sql.begin(async (tx) => {
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
}
