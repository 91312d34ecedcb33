// The client's modules one by one, not its index: `yello hook` runs at every turn of an agent
// and loads only what it uses (the index brings the Coordinator, the writer and the verifier).
import type { Chat, MessageBatch, YelloClient } from '../client/index.js';
import { Conversation, type ConversationStart } from '../client/conversation.js';
import { ContinuityBreakError } from '../client/errors.js';
import { PeerHead } from '../client/peer-head.js';
import { breakError } from './break-advice.js';

/**
 * Open the agent's conversation of `chatId` at `start` (a break is exit 3 with the way out),
 * and the observer of its peer stream that says when the backlog has arrived.
 */
export async function openConversation(
  client: YelloClient,
  chat: Chat,
  start: { cursor: string } | { start: ConversationStart },
): Promise<{ conversation: Conversation; head: PeerHead }> {
  const head = PeerHead.watch(client, chat);
  try {
    const conversation = await Conversation.open(client, { chatId: chat.id, ...start });
    await head.startedAt(conversation, 'start' in start ? start.start : 'acknowledged');
    return { conversation, head };
  } catch (err) {
    head.close();
    if (err instanceof ContinuityBreakError) throw breakError(err, chat.id);
    throw err;
  }
}

/** Every message batch unread now: what the peer stream held when reading started, then nothing more. */
export async function unreadNow(conversation: Conversation, head: PeerHead): Promise<MessageBatch[]> {
  await head.caughtUp(30_000);
  const batches: MessageBatch[] = [];
  for (let b = await conversation.next({ waitMs: 0 }); b; b = await conversation.next({ waitMs: 0 })) batches.push(b);
  return batches;
}
