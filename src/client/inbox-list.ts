import type { StreamState } from '../shared/types.js';
import { isUnreadMessage, unreadFrom } from '../shared/unread.js';
import type { YelloClient } from './yello-client.js';

/** Characters of a chat's newest message that `Inbox.list()` shows. */
export const PREVIEW_CHARS = 120;

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
