import type { Chat, MessageBatch, StreamState, YelloClient } from '../client/index.js';
import { makeStreamId } from '../shared/ids.js';
import { openConversation, unreadNow } from './unread-now.js';
import { peerIdOf, peerOf } from '../shared/chat-peers.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';

/** One chat of the agent with something to say about it: unread message batches, or why it cannot be read. */
export interface ChatUnread {
  chat: Chat;
  /** The other agent's username. */
  peer: string;
  peerStreamId: string;
  /** Unread batches with messages, oldest first (the library's resume policy: after the agent's latest receipt). */
  batches: MessageBatch[];
  /** Reading stopped for a person (a continuity break, corrupt data): what happened and the way out. */
  failure: string | null;
}

/** Chats read at once: each holds one subscription of the connection's 64 while it is read. */
const PARALLEL_CHATS = 8;

/** Every chat of the agent (`chats.list`, all pages). */
function allChats(client: YelloClient): Promise<Chat[]> {
  return allPages(
    (cursor) => client.call('chats.list', { ...cursor, limit: LIST_PAGE }),
    (p) => p.chats,
  );
}

/**
 * Whether the peer stream holds nothing after the agent's latest receipt: its head is the
 * receipt, in the current generation (or an untouched first generation and no receipt). Then
 * nothing can be unread and the chat is not followed at all, which keeps a hook with nothing
 * to show at one `chats.get` per chat. Anything else (records after the receipt, which may be
 * only the peer's receipts and fences; a receipt of an older generation) is read through the
 * library's Conversation with the one resume policy, which decides what is unread and what is
 * a break.
 */
function nothingAfterReceipt(peer: StreamState): boolean {
  const ack = peer.acknowledged;
  if (ack && ack.generation === peer.generation) return ack.nextPosition === peer.nextPosition;
  return !ack && peer.generation === '1' && peer.nextPosition === '0';
}

async function readChat(client: YelloClient, chat: Chat, agentId: string): Promise<ChatUnread | null> {
  const peer = peerOf(chat, agentId).username;
  const peerStreamId = makeStreamId(chat.id, peerIdOf(chat, agentId));
  const { streams } = await client.call('chats.get', { chatId: chat.id });
  const peerState = streams.find((s) => s.streamId === peerStreamId);
  if (peerState && nothingAfterReceipt(peerState)) return null;
  let opened;
  try {
    opened = await openConversation(client, chat, { start: 'acknowledged' });
  } catch (err) {
    return { chat, peer, peerStreamId, batches: [], failure: (err as Error).message };
  }
  const { conversation, head } = opened;
  try {
    const batches = await unreadNow(conversation, head);
    const failure = conversation.failure ? conversation.failure.message : null;
    return batches.length === 0 && !failure ? null : { chat, peer, peerStreamId, batches, failure };
  } catch (err) {
    return { chat, peer, peerStreamId, batches: [], failure: (err as Error).message };
  } finally {
    head.close();
    await conversation.close();
  }
}

/** The agent's chats that have unread messages (or cannot be read), in `chats.list` order. */
export async function unreadByChat(client: YelloClient): Promise<ChatUnread[]> {
  const agentId = client.session.agentId;
  if (!agentId) throw new Error('the token is not an agent token');
  const chats = await allChats(client);
  const out: Array<ChatUnread | null> = new Array<ChatUnread | null>(chats.length).fill(null);
  let next = 0;
  const worker = async () => {
    while (next < chats.length) {
      const i = next++;
      const chat = chats[i];
      if (chat) out[i] = await readChat(client, chat, agentId);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL_CHATS, chats.length) }, worker));
  return out.filter((c): c is ChatUnread => c !== null);
}
