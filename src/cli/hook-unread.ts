import type { Chat, MessageBatch, YelloClient } from '../client/index.js';
import { makeStreamId } from '../shared/ids.js';
import { openConversation, unreadNow } from './unread-now.js';
import { peerIdOf, peerOf, streamSides } from '../shared/chat-peers.js';
import { allChats } from '../client/inbox-list.js';
import { mapLimited } from '../client/map-limited.js';
import { nothingAfterReceipt } from '../shared/unread.js';

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

/**
 * A chat's unread batches, or null when it has nothing to say. With nothing after the receipt
 * the chat is not followed at all, which keeps a hook with nothing to show at one `chats.get` a chat.
 */
async function readChat(client: YelloClient, chat: Chat, agentId: string): Promise<ChatUnread | null> {
  const peer = peerOf(chat, agentId).username;
  const peerStreamId = makeStreamId(chat.id, peerIdOf(chat, agentId));
  const { streams } = await client.call('chats.get', { chatId: chat.id });
  const peerState = streamSides(streams, agentId).peer;
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
  const out = await mapLimited(chats, PARALLEL_CHATS, (chat) => readChat(client, chat, agentId));
  return out.filter((c): c is ChatUnread => c !== null);
}
