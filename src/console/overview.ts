// The overview: what the daemon says about itself, its agents and its chats, composed from the
// admin methods of docs/protocol.md §6, with everything that needs a person first.

import type { Agent, Chat, StoredRecord, StreamState, YelloClient } from '../client/index.js';
import type { DaemonStatus, Grant } from '../shared/results.js';
import type { Jwks } from '../shared/types.js';
import type { QuotaWatch } from './quota-watch.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';
import { peerOf, selfOf } from '../shared/chat-peers.js';
import { isUnreadMessage, unreadFrom } from '../shared/unread.js';

/** Reads counting unread messages stop here; the count then says "at least". */
const UNREAD_SCAN_LIMIT = 1000;
/** At most this many chats are summarized (each costs a few reads); the rest are counted. */
export const OVERVIEW_CHAT_LIMIT = 500;
/** At most this many grants are listed; `yello grants list` shows them all. */
export const OVERVIEW_GRANT_LIMIT = 1000;

/** One direction of a chat, as the overview shows it. */
export interface StreamSummary {
  state: StreamState;
  /** Messages of this stream's current generation its reader has not acknowledged. */
  unread: number;
  /** Whether the count stopped at the scan limit. */
  unreadAtLeast: boolean;
  /** Newest time found among the stream's last records (a message's or a fence's), or null. */
  lastActivityAt: string | null;
}

export interface ChatSummary {
  chat: Chat;
  streams: [StreamSummary, StreamSummary];
  lastActivityAt: string | null;
}

export interface AgentSummaryRow {
  agent: Agent;
  /** Some stream it authors has a writer attached to an open connection. */
  connected: boolean;
  /** Streams it authors that a coordinator holds. */
  writers: number;
  lastActivityAt: string | null;
}

/** Something a person has to look at, with what to do about it. */
export interface Attention {
  kind: 'read-only' | 'corrupt' | 'wal-loss' | 'break' | 'trimmed-unread' | 'quota';
  what: string;
  todo: string;
  /** The chat it concerns, to link to. */
  chatId?: string;
  streamId?: string;
}

export interface Overview {
  status: DaemonStatus;
  keys: Jwks;
  agents: AgentSummaryRow[];
  chats: ChatSummary[];
  moreChats: boolean;
  grants: Grant[];
  moreGrants: boolean;
  attention: Attention[];
}

/** The time a record carries: a message's signature time, a fence's claim time; receipts carry none. */
export function recordTime(r: StoredRecord): string | null {
  const w = r.wrapper;
  if (w.type === 'chat.message') return w.message.signature.createdAt;
  if (w.type === 'chat.writer-fence') return w.fence.claimedAt;
  return null;
}

const later = (a: string | null, b: string | null): string | null => (a === null ? b : b === null ? a : a > b ? a : b);

async function summarizeStream(c: YelloClient, s: StreamState): Promise<StreamSummary> {
  const next = BigInt(s.nextPosition);
  let unread = 0;
  let atLeast = false;
  let last: string | null = null;
  if (s.corruptFrom !== undefined) return { state: s, unread: 0, unreadAtLeast: false, lastActivityAt: null };
  const unreadStart = unreadFrom(s);
  const tailFrom = next - 20n > BigInt(s.firstPosition) ? next - 20n : BigInt(s.firstPosition);
  const from = unreadStart < tailFrom ? unreadStart : tailFrom;
  let pos = from;
  let scanned = 0;
  while (pos < next) {
    const b = await c.call('streams.read', { streamId: s.streamId, generation: s.generation, fromPosition: pos.toString(), limit: 500 });
    if (b.records.length === 0) break;
    for (const r of b.records) {
      last = later(last, recordTime(r));
      if (isUnreadMessage(r, unreadStart)) unread++;
    }
    scanned += b.records.length;
    pos = BigInt(b.nextPosition);
    if (scanned >= UNREAD_SCAN_LIMIT) {
      atLeast = pos < next;
      break;
    }
  }
  if (s.writer.claimedAt) last = later(last, s.writer.claimedAt);
  return { state: s, unread, unreadAtLeast: atLeast, lastActivityAt: last };
}

/** What needs a person in one stream, judged from its state. */
function streamAttention(chat: Chat, s: StreamState): Attention[] {
  const out: Attention[] = [];
  const author = selfOf(chat, s.authorAgentId);
  const reader = peerOf(chat, s.authorAgentId);
  const base = { chatId: chat.id, streamId: s.streamId };
  // A claim with no connection (the CLI keeps one between commands; a crashed holder leaves
  // one) is no alarm: the agent's tools take it over by themselves (replace "if-abandoned").
  // The chats table says "kept", and the chat page offers the release.
  if (s.generation !== '1' && (s.acknowledged === null || s.acknowledged.generation !== s.generation)) {
    out.push({
      ...base,
      kind: 'break',
      what: `${author.username}'s stream was reset (now generation ${s.generation}); ${reader.username} has not acknowledged anything of it yet`,
      todo: `${reader.username} finishes the sealed generation (yello chats export ${chat.id} shows it), then starts the new one: yello chats read ${chat.id} --from generation-start --ack`,
    });
  }
  const ack = s.acknowledged && s.acknowledged.generation === s.generation ? BigInt(s.acknowledged.nextPosition) : 0n;
  if (BigInt(s.firstPosition) > ack && BigInt(s.firstPosition) > 0n) {
    out.push({
      ...base,
      kind: 'trimmed-unread',
      what: `${author.username}'s stream was trimmed to position ${s.firstPosition}, past what ${reader.username} acknowledged (${ack.toString()})`,
      todo: `${reader.username} cannot read the trimmed messages; it goes on with yello chats read ${chat.id} --from generation-start --ack`,
    });
  }
  return out;
}

const QUOTA_FLAGS: Record<string, string> = {
  appendRate: '--quota-append-records / --quota-append-bytes',
  storedBytes: '--quota-stored-bytes',
  claimRate: '--quota-claims-per-minute',
};

/** Gather the overview; `quotas` (one per console) tells which quotas refused lately. */
export async function gatherOverview(c: YelloClient, quotas?: QuotaWatch): Promise<Overview> {
  const [status, keys] = await Promise.all([c.call('daemon.status', {}), c.call('keys.list', {})]);
  const agents = await allPages(
    (cursor) => c.call('agents.list', { ...cursor, limit: LIST_PAGE }),
    (p) => p.agents,
  );
  const found = await allPages(
    (cursor) => c.call('chats.list', { ...cursor, limit: LIST_PAGE }),
    (p) => p.chats,
    OVERVIEW_CHAT_LIMIT + 1,
  );
  const chats = { items: found.slice(0, OVERVIEW_CHAT_LIMIT), more: found.length > OVERVIEW_CHAT_LIMIT };
  const grants = await allPages(
    (cursor) => c.call('grants.list', { ...cursor, limit: LIST_PAGE }),
    (p) => p.grants,
    OVERVIEW_GRANT_LIMIT + 1,
  );
  const attention: Attention[] = [];
  if (status.storage === 'read-only')
    attention.push({
      kind: 'read-only',
      what: 'the daemon is read-only after a failed write: every write is refused',
      todo: 'free disk space or fix the filesystem, then restart the daemon (yello daemon); appends whose outcome was unknown are answered by operations.get after the restart',
    });
  for (const m of status.integrity.corruptStreams)
    attention.push({
      kind: 'corrupt',
      streamId: m.streamId,
      chatId: m.streamId.split(':')[0],
      what: `${m.streamId} generation ${m.generation ?? '(head lost)'} is damaged from position ${m.fromPosition}: ${m.detail}`,
      todo: `export what verifies (yello chats export ${m.streamId.split(':')[0] ?? ''}), run yello doctor, then reset the stream: yello streams reset ${m.streamId} --reason "corrupt"`,
    });
  for (const w of status.integrity.walIncidents)
    attention.push({
      kind: 'wal-loss',
      what: `LevelDB dropped ${w.bytes} bytes of its write-ahead log at startup (${w.detectedAt}); ${w.streams} stream generations were marked`,
      todo: 'see the corrupt streams above; check the disk',
    });
  for (const q of (await quotas?.look(c)) ?? [])
    attention.push({
      kind: 'quota',
      what: `the ${q.quota} quota refused ${q.count} call${q.count === 1 ? '' : 's'} ${q.sinceStart ? 'since the daemon started' : 'in the last 10 minutes'}`,
      todo: `an agent is writing faster or storing more than the daemon allows: its tool shows RATE_LIMITED or QUOTA_EXCEEDED (the daemon log's rate-limited lines name the agent); slow it down, trim its streams, or raise ${QUOTA_FLAGS[q.quota] ?? 'the quota'} (docs/security.md "Quotas")`,
    });
  const rows: ChatSummary[] = [];
  const byAgent = new Map<string, { connected: boolean; writers: number; last: string | null }>();
  for (const chat of chats.items) {
    const { streams } = await c.call('chats.get', { chatId: chat.id });
    const summaries = [await summarizeStream(c, streams[0]), await summarizeStream(c, streams[1])] as [StreamSummary, StreamSummary];
    for (const s of summaries) {
      const a = byAgent.get(s.state.authorAgentId) ?? { connected: false, writers: 0, last: null };
      a.connected ||= s.state.writer.connected;
      if (s.state.writer.active) a.writers++;
      a.last = later(a.last, s.lastActivityAt);
      byAgent.set(s.state.authorAgentId, a);
      attention.push(...streamAttention(chat, s.state));
    }
    rows.push({ chat, streams: summaries, lastActivityAt: later(summaries[0].lastActivityAt, summaries[1].lastActivityAt) });
  }
  rows.sort((x, y) => (y.lastActivityAt ?? '').localeCompare(x.lastActivityAt ?? ''));
  return {
    status,
    keys,
    agents: agents.map((agent) => {
      const a = byAgent.get(agent.id);
      return { agent, connected: a?.connected ?? false, writers: a?.writers ?? 0, lastActivityAt: a?.last ?? null };
    }),
    chats: rows,
    moreChats: chats.more,
    grants: grants.slice(0, OVERVIEW_GRANT_LIMIT),
    moreGrants: grants.length > OVERVIEW_GRANT_LIMIT,
    attention,
  };
}
