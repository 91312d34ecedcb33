// What an inbox lists: a chat's unread count, newest activity and preview, read with plain calls.
// `Inbox.list()` adds what its following knows (a chat it could not follow says why);
// `Inbox.listOnce()` reads the same once, following only the chats where a break could hide.

import { peerOf, streamSides } from '../shared/chat-peers.js';
import type { Chat, StreamState } from '../shared/types.js';
import { isUnreadMessage, nothingAfterReceipt, unreadFrom } from '../shared/unread.js';
import { Conversation } from './conversation.js';
import type { InboxEntry } from './inbox.js';
import { allPages, LIST_PAGE } from './list-pages.js';
import { mapLimited } from './map-limited.js';
import type { YelloClient } from './yello-client.js';
import { byCodeUnits } from '../shared/text-order.js';

/** Characters of a chat's newest message that `Inbox.list()` shows. */
export const PREVIEW_CHARS = 120;

/** Every chat of the agent (`chats.list`, all pages). */
export function allChats(client: YelloClient): Promise<Chat[]> {
  return allPages(
    (cursor) => client.call('chats.list', { ...cursor, limit: LIST_PAGE }),
    (p) => p.chats,
  );
}

/** Messages of the peer stream's current generation after the agent's latest receipt of it (src/shared/unread.ts). */
export async function unreadMessages(client: YelloClient, peer: StreamState): Promise<number> {
  const start = unreadFrom(peer);
  const end = BigInt(peer.nextPosition);
  let from = start;
  let count = 0;
  while (from < end) {
    const page = await client.call('streams.read', { streamId: peer.streamId, generation: peer.generation, fromPosition: from.toString() });
    if (page.records.length === 0) break;
    count += page.records.filter((r) => isUnreadMessage(r, start)).length;
    from = BigInt(page.nextPosition);
  }
  return count;
}

/** When the newest message of a chat (either direction) was signed and its content, or null. */
export async function newestMessage(client: YelloClient, chatId: string): Promise<{ createdAt: string; content: string } | null> {
  try {
    const page = await client.call('chats.history', { chatId, limit: 1 });
    const record = page.entries.at(-1);
    if (record?.wrapper.type !== 'chat.message') return null;
    return { createdAt: record.wrapper.message.signature.createdAt, content: record.wrapper.message.content };
  } catch {
    return null; // a chat whose history cannot be read (a break, corrupt data) shows no preview
  }
}

/**
 * The entry of `chat` for agent `agentId`, its peer stream as `chats.get` gives it now; `failure`
 * is why reading the chat stopped (null: it can be read). The one place an entry is made.
 */
export async function entryOf(
  client: YelloClient,
  chat: Chat,
  agentId: string,
  peer: StreamState | undefined,
  state: { followed: boolean; failure: Error | null },
): Promise<InboxEntry> {
  const peerInfo = peerOf(chat, agentId);
  const [unread, newest] = await Promise.all([peer ? unreadMessages(client, peer) : 0, newestMessage(client, chat.id)]);
  return {
    chatId: chat.id,
    peer: { agentId: peerInfo.id, username: peerInfo.username, displayName: peerInfo.name },
    unreadMessages: unread,
    lastActivityAt: newest?.createdAt ?? null,
    preview: newest ? newest.content.slice(0, PREVIEW_CHARS) : null,
    followed: state.followed && state.failure === null,
    failure: state.failure,
  };
}

/** Newest activity first; two in the same millisecond (or none) in chat id order, so the list is stable. */
export function byActivity(entries: InboxEntry[]): InboxEntry[] {
  return entries.sort((a, b) => byCodeUnits(b.lastActivityAt ?? '', a.lastActivityAt ?? '') || byCodeUnits(a.chatId, b.chatId));
}

/**
 * Why a Conversation of the chat from the agent's receipt would stop for a person, or null:
 * nothing after the receipt needs no look; otherwise the chat is opened as `Inbox.open` opens it
 * (a break behind the receipt refuses the start) and closed again.
 */
async function failureOf(client: YelloClient, chat: Chat, peer: StreamState | undefined): Promise<Error | null> {
  if (!peer || nothingAfterReceipt(peer)) return null;
  let conversation: Conversation;
  try {
    conversation = await Conversation.open(client, { chatId: chat.id, start: 'acknowledged' });
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
  const failure = conversation.failure;
  await conversation.close();
  return failure;
}

/** Chats `listOnce` reads at once: each may hold one of the connection's 64 subscriptions meanwhile. */
const LIST_ONCE_PARALLEL = 16;

/** Every chat of the agent read once, as `Inbox.list()` reports them (see `Inbox.listOnce`). */
export async function listOnce(client: YelloClient): Promise<InboxEntry[]> {
  const agentId = client.session.agentId ?? '';
  const chats = await allChats(client);
  const entries = await mapLimited(chats, LIST_ONCE_PARALLEL, async (chat) => {
    const { streams } = await client.call('chats.get', { chatId: chat.id });
    const { peer } = streamSides(streams, agentId);
    const failure = await failureOf(client, chat, peer);
    return entryOf(client, chat, agentId, peer, { followed: failure === null, failure });
  });
  return byActivity(entries);
}
