import { makeStreamId } from '../shared/ids.js';
import type { ChatBatchNotification, StoredRecord } from '../shared/types.js';
import { Backoff } from '../shared/backoff.js';
import { peerIdOf, streamSides } from '../shared/chat-peers.js';
import { followChat, type ChatFollow } from './chat-follow.js';
import { ConversationState, type Acknowledged } from './conversation-state.js';
import {
  ConnectionLostError,
  LineTooLargeError,
  YelloClientError,
  FencedError,
  continuityBreakError,
  fencedError,
  remoteError,
} from './errors.js';
import { Listeners, type Listener } from './listeners.js';
import { toMessageBatch, type MessageBatch } from './message-batch.js';
import { WaitQueue } from './wait-queue.js';
import type { ConversationEvents, ConversationOptions, ConversationStart } from './conversation-types.js';
import type { YelloClient } from './yello-client.js';

export type { Acknowledged, ConversationEvents, ConversationOptions, ConversationStart };

/** A message batch not yet returned, and the cursor after it and after the state-only batches that followed. */
interface Queued {
  batch: MessageBatch;
  cursorAfter: string;
}

/**
 * One agent's reading side of one chat (docs/protocol.md §8): follows both streams with the one
 * resume policy and hands out the batches of the peer stream that hold a message, in order,
 * pull (`next()`) or push (`for await`). The peer's receipts and writer fences are absorbed as
 * state (`peerAcknowledged`, `peer-writer`); they never wake a reader. Reading never writes.
 *
 * It rides through connection losses and daemon restarts when its client reconnects
 * (`reconnect` option): it follows again from its cursor, so nothing is skipped or repeated.
 */
export class Conversation {
  /** The chat. */
  readonly chatId: string;
  /** The agent this conversation reads for. */
  readonly agentId: string;
  readonly peerAgentId: string;
  /** The peer's stream: what is read. */
  readonly peerStreamId: string;
  /** This agent's stream: absorbed for its receipts and fences. */
  readonly ownStreamId: string;
  readonly #client: YelloClient;
  readonly #listeners = new Listeners<ConversationEvents>();
  readonly #offs: (() => void)[] = [];
  readonly #state: ConversationState;
  /** The running `chats.follow`, or null while there is none (before it is answered, after a loss). */
  #follow: ChatFollow | null = null;
  #cursor = '';
  /** Message batches not returned yet; it fails with why reading stopped, and ends on close. */
  readonly #queue = new WaitQueue<Queued>();

  private constructor(
    client: YelloClient,
    ids: { chatId: string; agentId: string; peerAgentId: string },
    start: { acknowledged: Acknowledged | null; peerAcknowledged: Acknowledged | null },
  ) {
    this.#client = client;
    this.chatId = ids.chatId;
    this.agentId = ids.agentId;
    this.peerAgentId = ids.peerAgentId;
    this.ownStreamId = makeStreamId(ids.chatId, ids.agentId);
    this.peerStreamId = makeStreamId(ids.chatId, ids.peerAgentId);
    this.#state = new ConversationState(this, start);
  }

  /**
   * Open the chat for reading: follow it from `cursor`, else per `start`. Throws
   * `ContinuityBreakError` when the start cannot be exact (unread messages behind a reset or a
   * trim), `BAD_TOKEN` for a client that is not an agent's.
   */
  static async open(client: YelloClient, options: ConversationOptions): Promise<Conversation> {
    const agentId = client.session.agentId;
    if (client.session.role !== 'agent' || !agentId) throw new YelloClientError('BAD_TOKEN', 'a conversation needs an agent token');
    const { chat, streams } = await client.call('chats.get', { chatId: options.chatId });
    const peerAgentId = peerIdOf(chat, agentId);
    const { own, peer } = streamSides(streams, agentId);
    const conversation = new Conversation(
      client,
      { chatId: chat.id, agentId, peerAgentId },
      { acknowledged: peer?.acknowledged ?? null, peerAcknowledged: own?.acknowledged ?? null },
    );
    conversation.#listen();
    try {
      await conversation.#followFrom(options.cursor ? { cursor: options.cursor } : { from: options.start ?? 'acknowledged' });
    } catch (err) {
      conversation.#detach();
      throw err;
    }
    return conversation;
  }

  /** The compound cursor after every batch returned by `next()` and every state batch after it: save it to resume. */
  get cursor(): string {
    return this.#cursor;
  }

  /** The epoch of the newest claim of this agent's own stream this conversation saw (its writer fence), or null. */
  get ownWriterEpoch(): string | null {
    return this.#state.ownWriterEpoch;
  }

  /** The peer's latest receipt of this agent's stream, or null. */
  get peerAcknowledged(): Acknowledged | null {
    return this.#state.peerAcknowledged;
  }

  /** This agent's latest receipt of the peer stream, as far as this conversation saw it. */
  get acknowledged(): Acknowledged | null {
    return this.#state.acknowledged;
  }

  /**
   * Batches returned by `next()` that no receipt covers yet, oldest first: what was handed to
   * the agent and is still to be acknowledged (a receipt seen in the own stream, or appended by
   * the ChatWriter told of this conversation, removes those it covers).
   */
  pending(): MessageBatch[] {
    return [...this.#state.pending];
  }

  /** Message batches that arrived and were not returned yet (the unread backlog this connection holds). */
  get queued(): number {
    return this.#queue.length;
  }

  /** Why reading stopped for a person, or null. */
  get failure(): Error | null {
    return this.#queue.failure;
  }

  /** Listen to an event; returns a function that removes the listener. */
  on<E extends keyof ConversationEvents>(event: E, listener: Listener<ConversationEvents[E]>): () => void {
    return this.#listeners.on(event, listener);
  }

  /**
   * The next batch holding at least one message, after the last one returned; null once
   * `waitMs` passed (0: do not wait; left out: wait until one comes) or the conversation was
   * closed. Receipts and fences never end the wait. Batches that arrived before a failure are
   * returned first; then it throws the failure (`ContinuityBreakError`, `FencedError` when the
   * own stream was claimed by someone else, the `chats.error`'s error). Rejects with the
   * signal's reason when `signal` aborts.
   */
  async next(options: { waitMs?: number; signal?: AbortSignal } = {}): Promise<MessageBatch | null> {
    const item = await this.#queue.next(options);
    if (!item) return null;
    this.#cursor = item.cursorAfter;
    this.#state.handedOut(item.batch);
    return item.batch;
  }

  /** Every message batch, waiting as long as it takes; ends when closed, throws what `next()` throws. */
  async *[Symbol.asyncIterator](): AsyncGenerator<MessageBatch, void, undefined> {
    for (;;) {
      const batch = await this.next();
      if (!batch) return;
      yield batch;
    }
  }

  /**
   * Resolves as soon as something is there to return (or to throw), or after `ms`; never
   * consumes. What an Inbox waits with.
   */
  ready(ms: number, signal?: AbortSignal): Promise<void> {
    return this.#queue.ready(ms, signal);
  }

  /**
   * Tell the conversation the epoch of this agent's writer (ChatWriter does, after claiming):
   * from then on a fence of a newer epoch in the own stream is `replaced`. Null: no writer.
   */
  expectWriter(epoch: string | null): void {
    const replacedBy = this.#state.expectWriter(epoch);
    if (replacedBy !== null) this.#replaced(replacedBy);
  }

  /** Records of the own stream this agent just appended (ChatWriter hands its answers over, ahead of their notification). */
  observeOwn(records: readonly StoredRecord[]): void {
    const replacedBy = this.#state.observeOwn(records);
    if (replacedBy !== null) this.#replaced(replacedBy);
  }

  /**
   * This agent's receipt of the peer stream reached `acknowledged` by an append whose answer was
   * lost (ChatWriter learns it from `operations.get`), ahead of its notification.
   */
  observeReceipt(acknowledged: Acknowledged): void {
    this.#state.receipt(acknowledged);
  }

  /** Stop following; a waiting `next()` returns null. The client stays open (it is the caller's). */
  async close(): Promise<void> {
    if (this.#queue.ended) return;
    this.#queue.end();
    const follow = this.#follow;
    this.#detach();
    await follow?.unfollow();
  }

  // ---- following ------------------------------------------------------------------------

  #listen(): void {
    const c = this.#client;
    this.#offs.push(
      c.on('disconnected', (err) => {
        this.#onDisconnected(err);
      }),
      c.on('reconnected', () => {
        void this.#refollow();
      }),
    );
  }

  #detach(): void {
    for (const off of this.#offs.splice(0)) off();
    this.#follow?.close();
    this.#follow = null;
  }

  /** One `chats.follow` (the one follow primitive holds what comes with its answer, then hands it on). */
  async #followFrom(start: { cursor: string } | { from: ConversationStart }): Promise<void> {
    const follow = await followChat(
      this.#client,
      { chatId: this.chatId, ...start },
      {
        // Nothing is queued while a follow is in flight, so its starting cursor is where we are.
        answered: (answer) => {
          this.#cursor = answer.cursor;
        },
        batch: (n) => {
          this.#onBatch(n);
        },
        break: (b) => {
          this.#fail(
            continuityBreakError(
              b.reason,
              b.streamId,
              b.expected,
              b.actual,
              `reading ${this.chatId} stopped: ${b.reason} on ${b.streamId}`,
            ),
          );
        },
        error: (e) => {
          this.#fail(remoteError(e.error));
        },
      },
    );
    // Closed or stopped while the follow was in flight: it is not wanted.
    if (this.#queue.over) void follow.unfollow();
    else this.#follow = follow;
  }

  /** After a reconnect: follow again from the cursor, riding through a daemon that is still stopping or starting. */
  async #refollow(): Promise<void> {
    const backoff = new Backoff({ minDelayMs: 50, maxDelayMs: 2000, jitter: true });
    while (!this.#queue.over && this.#follow === null && this.#client.connected) {
      try {
        await this.#followFrom({ cursor: this.#cursor });
        return;
      } catch (err) {
        if (err instanceof ConnectionLostError) return; // the next 'reconnected' tries again
        if (!(err instanceof YelloClientError && err.transient)) {
          this.#fail(err as Error);
          return;
        }
        const step = backoff.next();
        await new Promise((r) => setTimeout(r, step?.delayMs ?? 2000));
      }
    }
  }

  #onDisconnected(err: Error): void {
    if (this.#queue.over) return;
    this.#follow?.close();
    this.#follow = null;
    // Not returned yet, so the follow from the cursor delivers them again.
    this.#queue.clear();
    // Following again would bring the same over-size line again, forever: a person raises the cap.
    if (err instanceof LineTooLargeError || !this.#client.reconnecting) this.#fail(err);
  }

  #onBatch(n: ChatBatchNotification): void {
    if (this.#queue.over) return;
    if (n.streamId === this.ownStreamId) {
      this.observeOwn(n.records);
      this.#advance(n.cursor);
      return;
    }
    for (const news of this.#state.observePeer(n.records)) {
      if (news.acknowledged) this.#listeners.emit('peer-acknowledged', news.acknowledged);
      if (news.writer) this.#listeners.emit('peer-writer', news.writer);
    }
    const batch = toMessageBatch(this.chatId, n);
    if (batch) this.#queue.push({ batch, cursorAfter: n.cursor });
    else this.#advance(n.cursor);
  }

  /** A state-only batch was absorbed: the cursor moves past it (after the message batches still queued). */
  #advance(cursor: string): void {
    const last = this.#queue.last();
    if (last) last.cursorAfter = cursor;
    else this.#cursor = cursor;
  }

  #replaced(epoch: string): void {
    this.#fail(
      fencedError(
        this.ownStreamId,
        epoch,
        `stream ${this.ownStreamId} was claimed by epoch ${epoch}: another writer speaks for this agent`,
      ),
    );
  }

  #fail(err: Error): void {
    if (this.#queue.over) return;
    this.#queue.fail(err);
    const follow = this.#follow;
    this.#follow = null;
    void follow?.unfollow();
    if (err instanceof FencedError) this.#listeners.emit('replaced', err);
    else this.#listeners.emit('break', err);
  }
}
