// The reads of the PostgreSQL directory tables, once each, decoded against the one key table
// (row-codec.ts `RowKey`): the whole tables at open (and after a reconnect or a recovery), one row
// after a notice, and the pages read from the tables. A row whose body fails its check is told as
// damaged, never as a different value.

import type { PageRequest } from '../port/directory-port.js';
import type { AgentRow, ChatRow, GrantRow, StreamMeta } from '../port/values.js';
import { decodeRow, RowKey, tryDecodeRow } from './row-codec.js';
import { selectHeadsOfChat, type Scope } from './stream-statements.js';

export const grantKey = (agentId: string, peerAgentId: string) => `${agentId}\n${peerAgentId}`;
export const pairKey = (a: string, b: string) => `${a}\n${b}`;

/** The directory tables, decoded (what the caches are replaced with). */
export interface DirectoryTables {
  agents: Map<string, AgentRow>;
  usernames: Map<string, string>;
  tokens: Map<string, string>;
  /** By `grantKey`. */
  grants: Map<string, GrantRow>;
  chats: Map<string, ChatRow>;
  /** By `pairKey`. */
  pairs: Map<string, string>;
  damagedAgents: Set<string>;
  damaged: { tokenIndex: string[]; grants: string[] };
}

type Body = { body: string };

export async function loadTables(sql: Scope): Promise<DirectoryTables> {
  const [agents, usernames, tokens, grants, chats, pairs] = await Promise.all([
    sql<Array<{ agent_id: string } & Body>>`select agent_id, body from agents`,
    sql<Array<{ username: string } & Body>>`select username, body from usernames`,
    sql<Array<{ token_hash: string } & Body>>`select token_hash, body from tokens`,
    sql<Array<{ agent_id: string; peer_agent_id: string } & Body>>`select agent_id, peer_agent_id, body from grants`,
    sql<Array<{ chat_id: string } & Body>>`select chat_id, body from chats`,
    sql<Array<{ a: string; b: string } & Body>>`select a, b, body from pairs`,
  ]);
  const t: DirectoryTables = {
    agents: new Map(),
    usernames: new Map(),
    tokens: new Map(),
    grants: new Map(),
    chats: new Map(),
    pairs: new Map(),
    damagedAgents: new Set(),
    damaged: { tokenIndex: [], grants: [] },
  };
  for (const r of agents) {
    const row = tryDecodeRow<AgentRow>(RowKey.agent(r.agent_id), r.body);
    if (row) t.agents.set(r.agent_id, row);
    else t.damagedAgents.add(r.agent_id);
  }
  for (const r of usernames) {
    const id = tryDecodeRow<string>(RowKey.username(r.username), r.body);
    if (id !== undefined) t.usernames.set(r.username, id);
  }
  for (const r of tokens) {
    const key = RowKey.token(r.token_hash);
    const id = tryDecodeRow<string>(key, r.body);
    if (id !== undefined) t.tokens.set(r.token_hash, id);
    else t.damaged.tokenIndex.push(key);
  }
  for (const r of grants) {
    const key = RowKey.grant(r.agent_id, r.peer_agent_id);
    const grant = tryDecodeRow<GrantRow>(key, r.body);
    if (grant) t.grants.set(grantKey(r.agent_id, r.peer_agent_id), grant);
    else t.damaged.grants.push(key);
  }
  for (const r of chats) {
    const row = tryDecodeRow<ChatRow>(RowKey.chat(r.chat_id), r.body);
    if (row) t.chats.set(r.chat_id, row);
  }
  for (const r of pairs) {
    const chatId = tryDecodeRow<string>(RowKey.pair(r.a, r.b), r.body);
    if (chatId !== undefined) t.pairs.set(pairKey(r.a, r.b), chatId);
  }
  return t;
}

/** Agent rows by id, username or token hash: each decoded, or its id when it fails its check. */
export async function selectAgents(
  sql: Scope,
  which: { ids?: readonly string[]; usernames?: readonly string[]; tokens?: readonly string[] },
): Promise<Array<{ agentId: string; row: AgentRow | undefined }>> {
  const [ids, names, tokens] = [[...(which.ids ?? [])], [...(which.usernames ?? [])], [...(which.tokens ?? [])]];
  const found = await sql<Array<{ agent_id: string } & Body>>`
    select agent_id, body from agents where agent_id = any(${ids}::text[])
      or agent_id in (select agent_id from usernames where username = any(${names}::text[]))
      or agent_id in (select agent_id from tokens where token_hash = any(${tokens}::text[]))`;
  return found.map((r) => ({ agentId: r.agent_id, row: tryDecodeRow<AgentRow>(RowKey.agent(r.agent_id), r.body) }));
}

/** One grant: absent, decoded, or damaged (its body fails its check). */
export async function selectGrant(sql: Scope, agentId: string, peerAgentId: string): Promise<{ grant?: GrantRow; damaged: boolean }> {
  const [r] = await sql<Body[]>`select body from grants where agent_id = ${agentId} and peer_agent_id = ${peerAgentId}`;
  const grant = r ? tryDecodeRow<GrantRow>(RowKey.grant(agentId, peerAgentId), r.body) : undefined;
  return grant ? { grant, damaged: false } : { damaged: r !== undefined };
}

/** A committed chat and its heads (those whose bodies check out), or undefined. */
export async function selectChat(sql: Scope, chatId: string): Promise<{ row: ChatRow; heads: StreamMeta[] } | undefined> {
  const [[r], heads] = await Promise.all([sql<Body[]>`select body from chats where chat_id = ${chatId}`, selectHeadsOfChat(sql, chatId)]);
  const row = r ? tryDecodeRow<ChatRow>(RowKey.chat(chatId), r.body) : undefined;
  if (!row) return undefined;
  const metas: StreamMeta[] = [];
  for (const h of heads) {
    const meta = tryDecodeRow<StreamMeta>(RowKey.head(h.stream_id), h.meta);
    if (meta) metas.push(meta);
  }
  return { row, heads: metas };
}

/** Every daemon's agents, committed, in id order (bytewise, as on LevelDB). */
export async function agentsPage(sql: Scope, page: PageRequest<string>): Promise<AgentRow[]> {
  const rows = await sql<Array<{ agent_id: string } & Body>>`
    select agent_id, body from agents where agent_id collate "C" > ${page.after ?? ''} order by agent_id collate "C" limit ${page.limit}`;
  return rows.map((r) => decodeRow<AgentRow>(RowKey.agent(r.agent_id), r.body));
}

export async function grantsPage(
  sql: Scope,
  agentId: string | undefined,
  page: PageRequest<[agentId: string, peerAgentId: string]>,
): Promise<GrantRow[]> {
  const [a, b] = page.after ?? ['', ''];
  const rows = await sql<Array<{ agent_id: string; peer_agent_id: string } & Body>>`
    select agent_id, peer_agent_id, body from grants
    where (agent_id collate "C", peer_agent_id collate "C") > (${a}, ${b})
      ${agentId === undefined ? sql`` : sql`and agent_id = ${agentId}`}
    order by agent_id collate "C", peer_agent_id collate "C" limit ${page.limit}`;
  return rows.map((r) => decodeRow<GrantRow>(RowKey.grant(r.agent_id, r.peer_agent_id), r.body));
}

/** Chat ids in id order: every chat, or an agent's. */
export async function chatIdsPage(sql: Scope, agentId: string | undefined, page: PageRequest<string>): Promise<string[]> {
  const after = page.after ?? '';
  const rows =
    agentId === undefined
      ? await sql<{ chat_id: string }[]>`
          select chat_id from chats where chat_id collate "C" > ${after} order by chat_id collate "C" limit ${page.limit}`
      : await sql<{ chat_id: string }[]>`
          select chat_id from members where agent_id = ${agentId} and chat_id collate "C" > ${after}
          order by chat_id collate "C" limit ${page.limit}`;
  return rows.map((r) => r.chat_id);
}
