import type { StreamState } from '../shared/types.js';
import type { YelloClient } from './yello-client.js';

/** Characters of a chat's newest message that `Inbox.list()` shows. */
export const PREVIEW_CHARS = 120;

/** Messages of the peer stream's current generation after the agent's latest receipt of it. */
export async function unreadMessages(client: YelloClient, peer: StreamState): Promise<number> {
  const ack = peer.acknowledged;
  let from = ack && ack.generation === peer.generation ? ack.nextPosition : peer.firstPosition;
  if (BigInt(from) < BigInt(peer.firstPosition)) from = peer.firstPosition;
  let count = 0;
  while (BigInt(from) < BigInt(peer.nextPosition)) {
    const page = await client.call('streams.read', { streamId: peer.streamId, generation: peer.generation, fromPosition: from });
    if (page.records.length === 0) break;
    count += page.records.filter((r) => r.wrapper.type === 'chat.message').length;
    from = page.nextPosition;
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
