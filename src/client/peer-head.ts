import type { Chat, ChatBatchNotification } from '../shared/types.js';
import type { Conversation, ConversationStart } from './conversation.js';
import type { Listener } from './listeners.js';
import { Waiters } from './wait-queue.js';
import type { YelloClient } from './yello-client.js';
import { makeStreamId } from '../shared/ids.js';
import { peerIdOf } from '../shared/chat-peers.js';
import { comparePlaces, type StreamPlace } from '../shared/positions.js';

/** Where a {@link PeerHead} hears batches: a client, or every connection of a `ConnectionPool`. */
export interface BatchSource {
  on(event: 'chats.batch', listener: Listener<ChatBatchNotification>): () => void;
}

type Position = StreamPlace;
const after = (a: Position, b: Position) => comparePlaces(a, b) > 0;

/**
 * What a {@link Conversation} of one chat has absorbed of the peer stream, observed from the
 * client's `chats.batch` notifications (it reads nothing itself): how far the follow got, so
 * that "nothing new" is only said once everything the peer stream held at the start has
 * arrived; which positions hold messages, for an unread count; and a callback per batch with
 * messages, for the MCP "peer-wrote" notification. Receipts and fences move the position and
 * nothing else.
 */
export class PeerHead {
  readonly #client: YelloClient;
  readonly #peerStreamId: string;
  readonly #off: () => void;
  #seen: Position | null = null;
  #target: Position | null = null;
  #start: Position = { generation: '1', position: '0' };
  #messages: Position[] = [];
  readonly #waiters = new Waiters();
  #onMessages: ((info: { generation: string; nextPosition: string; messages: number }) => void) | null = null;
  #conversation: Conversation | null = null;

  private constructor(client: YelloClient, peerStreamId: string, source: BatchSource) {
    this.#client = client;
    this.#peerStreamId = peerStreamId;
    this.#off = source.on('chats.batch', (b) => {
      if (b.streamId !== this.#peerStreamId) return;
      const messages = b.records.filter((r) => r.wrapper.type === 'chat.message');
      for (const m of messages) this.#messages.push({ generation: m.generation, position: m.position });
      const reached = { generation: b.generation, position: b.nextPosition };
      if (!this.#seen || after(reached, this.#seen)) this.#seen = reached;
      if (messages.length > 0) this.#onMessages?.({ generation: b.generation, nextPosition: b.nextPosition, messages: messages.length });
      this.#wake();
    });
  }

  /**
   * Start watching before the conversation follows, so that no batch is missed: on `source`,
   * the connection (or the pool of connections) the conversation will follow on; `client`
   * asks the stream's head.
   */
  static watch(client: YelloClient, chat: Chat, source: BatchSource = client): PeerHead {
    return new PeerHead(client, makeStreamId(chat.id, peerIdOf(chat, client.session.agentId ?? '')), source);
  }

  /**
   * The conversation is following from `from` (the `start` it was opened with; a cursor counts
   * as 'acknowledged'): the peer stream's head now is what must have arrived before the
   * conversation is caught up. It started after the agent's receipt (or at the current
   * generation's start when there is none in it), at the generation's start whatever was
   * acknowledged, or at the head.
   */
  async startedAt(conversation: Conversation, from: ConversationStart = 'acknowledged'): Promise<void> {
    this.#conversation = conversation;
    const head = await this.#client.call('streams.get', { streamId: this.#peerStreamId });
    this.#target = { generation: head.generation, position: head.nextPosition };
    const acked = conversation.acknowledged;
    this.#start =
      from === 'end'
        ? { ...this.#target }
        : from === 'acknowledged' && acked && acked.generation === head.generation
          ? { generation: acked.generation, position: acked.nextPosition }
          : { generation: head.generation, position: '0' };
    this.#wake();
  }

  /** Where reading started (the receipt, or the generation's start). */
  start(): Position {
    return { ...this.#start };
  }

  #isCaughtUp(): boolean {
    const t = this.#target;
    if (!t || this.#conversation?.failure) return true;
    if (!after(t, this.#start)) return true;
    return this.#seen !== null && !after(t, this.#seen);
  }

  /**
   * Resolves once the follow delivered what the peer stream held at the start (or after `ms`,
   * or on a failure); rejects with the signal's reason when `signal` aborts.
   */
  async caughtUp(ms: number, signal?: AbortSignal): Promise<void> {
    await this.#waiters.until(() => this.#isCaughtUp(), ms, signal);
  }

  /** Messages seen after `acknowledged` (in its generation or later). */
  messagesAfter(acknowledged: { generation: string; nextPosition: string } | null): number {
    const from = acknowledged ? { generation: acknowledged.generation, position: acknowledged.nextPosition } : null;
    return this.#messages.filter((m) => !from || !after(from, m)).length;
  }

  onMessages(listener: (info: { generation: string; nextPosition: string; messages: number }) => void): void {
    this.#onMessages = listener;
  }

  #wake(): void {
    this.#waiters.wake();
  }

  close(): void {
    this.#off();
    this.#wake();
  }
}
