import { makeStreamId } from '../shared/ids.js';
import type { ChatBatchNotification, ChatBreakNotification, ChatErrorNotification, StoredRecord, WriterFence } from '../shared/types.js';
import { Backoff } from '../shared/backoff.js';
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
import { isAfter, toMessageBatch, type MessageBatch } from './message-batch.js';
import type { YelloClient } from './yello-client.js';
import { peerIdOf } from '../shared/chat-peers.js';

/** Where a {@link Conversation} without a saved cursor starts (the one resume policy, docs/protocol.md §8). */
export type ConversationStart = 'acknowledged' | 'end' | 'generation-start';

/** Options of {@link Conversation.open}. */
export interface ConversationOptions {
  chatId: string;
  /**
   * `'acknowledged'` (default): the peer stream after this agent's latest receipt; unread
   * messages behind a reset or a trim are a `ContinuityBreakError`, never skipped.
   * `'end'`: only what arrives later. `'generation-start'`: a person's explicit act after a
   * break, the peer stream's current generation from position `"0"`.
   */
  start?: ConversationStart;
  /** A saved compound cursor (`cursor`, or a batch's): wins over `start`. */
  cursor?: string;
}

/** A position of a stream generation: where a receipt reaches. */
export interface Acknowledged {
  generation: string;
  nextPosition: string;
}

/** Events of a {@link Conversation}: state changes, never batches. */
export interface ConversationEvents {
  /** The peer's receipts of this agent's stream moved forward. */
  'peer-acknowledged': Acknowledged;
  /** The peer's stream got a new writer (a claim's fence). */
  'peer-writer': WriterFence;
  /** This agent's own stream was claimed by someone else (see {@link Conversation.expectWriter}). */
  replaced: FencedError;
  /** Reading stopped for a person: a `ContinuityBreakError`, or the `chats.error` (corrupt data). */
  break: Error;
}

type Notification =
  { kind: 'batch'; n: ChatBatchNotification } | { kind: 'break'; n: ChatBreakNotification } | { kind: 'error'; n: ChatErrorNotification };

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
  #subscriptionId: string | null = null;
  /** Notifications that arrived while a chats.follow was in flight (before its subscription id was known). */
  #early: Notification[] | null = null;
  #cursor = '';
  #queue: Queued[] = [];
  #pending: MessageBatch[] = [];
  /** This agent's latest receipt of the peer stream. */
  #acknowledged: Acknowledged | null;
  #peerAcknowledged: Acknowledged | null;
  #peerEpoch = -1n;
  /** The epoch of this agent's writer, once it claimed; a newer fence in the own stream means it was replaced. */
  #writerEpoch: bigint | null = null;
  #ownFenceEpoch = -1n;
  #failure: Error | null = null;
  #closed = false;
  readonly #waiters = new Set<() => void>();

  private constructor(
    client: YelloClient,
    ids: { chatId: string; agentId: string; peerAgentId: string },
    state: { acknowledged: Acknowledged | null; peerAcknowledged: Acknowledged | null },
  ) {
    this.#client = client;
    this.chatId = ids.chatId;
    this.agentId = ids.agentId;
    this.peerAgentId = ids.peerAgentId;
    this.ownStreamId = makeStreamId(ids.chatId, ids.agentId);
    this.peerStreamId = makeStreamId(ids.chatId, ids.peerAgentId);
    this.#acknowledged = state.acknowledged;
    this.#peerAcknowledged = state.peerAcknowledged;
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
    const own = streams.find((s) => s.authorAgentId === agentId);
    const peer = streams.find((s) => s.authorAgentId === peerAgentId);
    const conversation = new Conversation(
      client,
      { chatId: chat.id, agentId, peerAgentId },
      { acknowledged: peer?.acknowledged ?? null, peerAcknowledged: own?.acknowledged ?? null },
    );
    conversation.#listen();
    try {
      await conversation.#follow(options.cursor ? { cursor: options.cursor } : { from: options.start ?? 'acknowledged' });
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

  /** The peer's latest receipt of this agent's stream, or null. */
  get peerAcknowledged(): Acknowledged | null {
    return this.#peerAcknowledged;
  }

  /** This agent's latest receipt of the peer stream, as far as this conversation saw it. */
  get acknowledged(): Acknowledged | null {
    return this.#acknowledged;
  }

  /** Batches returned by `next()` that no receipt covers yet, oldest first. */
  pending(): MessageBatch[] {
    return [...this.#pending];
  }

  /** Message batches that arrived and were not returned yet (the unread backlog this connection holds). */
  get queued(): number {
    return this.#queue.length;
  }

  /** Why reading stopped for a person, or null. */
  get failure(): Error | null {
    return this.#failure;
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
    const deadline = options.waitMs === undefined ? Infinity : Date.now() + options.waitMs;
    for (;;) {
      options.signal?.throwIfAborted();
      const item = this.#queue.shift();
      if (item) {
        this.#cursor = item.cursorAfter;
        this.#pending.push(item.batch);
        return item.batch;
      }
      if (this.#failure) throw this.#failure;
      if (this.#closed) return null;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await this.#wait(left, options.signal);
    }
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
    if (this.#queue.length > 0 || this.#failure || this.#closed) return Promise.resolve();
    return this.#wait(ms, signal);
  }

  /**
   * Tell the conversation the epoch of this agent's writer (ChatWriter does, after claiming):
   * from then on a fence of a newer epoch in the own stream is `replaced`. Null: no writer.
   */
  expectWriter(epoch: string | null): void {
    this.#writerEpoch = epoch === null ? null : BigInt(epoch);
    if (this.#writerEpoch !== null && this.#ownFenceEpoch > this.#writerEpoch) this.#replaced(this.#ownFenceEpoch.toString());
  }

  /** Records of the own stream this agent just appended (ChatWriter hands its answers over, ahead of their notification). */
  observeOwn(records: readonly StoredRecord[]): void {
    for (const r of records) {
      if (r.wrapper.type === 'chat.receipt' && r.wrapper.receipt.peerStreamId === this.peerStreamId) {
        const ack = { generation: r.wrapper.receipt.peerGeneration, nextPosition: r.wrapper.receipt.nextPosition };
        if (!this.#acknowledged || isAfter(ack, this.#acknowledged)) this.#acknowledged = ack;
      } else if (r.wrapper.type === 'chat.writer-fence') {
        const epoch = BigInt(r.wrapper.fence.epoch);
        if (epoch > this.#ownFenceEpoch) this.#ownFenceEpoch = epoch;
        if (this.#writerEpoch !== null && epoch > this.#writerEpoch) this.#replaced(r.wrapper.fence.epoch);
      }
    }
    const acked = this.#acknowledged;
    if (acked) this.#pending = this.#pending.filter((b) => isAfter({ generation: b.generation, nextPosition: b.nextPosition }, acked));
  }

  /** Stop following; a waiting `next()` returns null. The client stays open (it is the caller's). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake();
    const subscriptionId = this.#subscriptionId;
    this.#detach();
    if (subscriptionId && this.#client.connected) await this.#client.call('chats.unfollow', { subscriptionId }).catch(() => {});
  }

  // ---- following ------------------------------------------------------------------------

  #listen(): void {
    const c = this.#client;
    this.#offs.push(
      c.on('chats.batch', (n) => {
        this.#onNotification({ kind: 'batch', n });
      }),
      c.on('chats.break', (n) => {
        this.#onNotification({ kind: 'break', n });
      }),
      c.on('chats.error', (n) => {
        this.#onNotification({ kind: 'error', n });
      }),
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
    this.#subscriptionId = null;
  }

  /** One `chats.follow`; the notifications that come with its answer are held, then replayed. */
  async #follow(start: { cursor: string } | { from: ConversationStart }): Promise<void> {
    this.#early = [];
    let answer: { subscriptionId: string; cursor: string } | undefined;
    try {
      answer = await this.#client.call('chats.follow', { chatId: this.chatId, ...start });
    } finally {
      const early = this.#early;
      this.#early = null;
      if (answer) {
        this.#subscriptionId = answer.subscriptionId;
        // Nothing is queued while a follow is in flight, so its starting cursor is where we are.
        this.#cursor = answer.cursor;
        for (const e of early) this.#onNotification(e);
      }
    }
  }

  /** After a reconnect: follow again from the cursor, riding through a daemon that is still stopping or starting. */
  async #refollow(): Promise<void> {
    const backoff = new Backoff({ minDelayMs: 50, maxDelayMs: 2000, jitter: true });
    while (!this.#closed && !this.#failure && this.#subscriptionId === null && this.#client.connected) {
      try {
        await this.#follow({ cursor: this.#cursor });
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
    if (this.#closed || this.#failure) return;
    this.#subscriptionId = null;
    // Not returned yet, so the follow from the cursor delivers them again.
    this.#queue = [];
    // Following again would bring the same over-size line again, forever: a person raises the cap.
    if (err instanceof LineTooLargeError || !this.#client.reconnecting) this.#fail(err);
  }

  #onNotification(e: Notification): void {
    if (this.#early) {
      this.#early.push(e);
      return;
    }
    if (e.n.subscriptionId !== this.#subscriptionId || this.#closed || this.#failure) return;
    if (e.kind === 'break') {
      const b = e.n;
      this.#fail(
        continuityBreakError(b.reason, b.streamId, b.expected, b.actual, `reading ${this.chatId} stopped: ${b.reason} on ${b.streamId}`),
      );
    } else if (e.kind === 'error') {
      this.#fail(remoteError(e.n.error));
    } else if (e.n.streamId === this.ownStreamId) {
      this.observeOwn(e.n.records);
      this.#advance(e.n.cursor);
    } else {
      this.#onPeerBatch(e.n);
    }
  }

  #onPeerBatch(n: ChatBatchNotification): void {
    for (const r of n.records) {
      if (r.wrapper.type === 'chat.receipt' && r.wrapper.receipt.peerStreamId === this.ownStreamId) {
        const ack = { generation: r.wrapper.receipt.peerGeneration, nextPosition: r.wrapper.receipt.nextPosition };
        if (!this.#peerAcknowledged || isAfter(ack, this.#peerAcknowledged)) {
          this.#peerAcknowledged = ack;
          this.#listeners.emit('peer-acknowledged', ack);
        }
      } else if (r.wrapper.type === 'chat.writer-fence' && BigInt(r.wrapper.fence.epoch) > this.#peerEpoch) {
        this.#peerEpoch = BigInt(r.wrapper.fence.epoch);
        this.#listeners.emit('peer-writer', r.wrapper.fence);
      }
    }
    const batch = toMessageBatch(this.chatId, n);
    if (!batch) {
      this.#advance(n.cursor);
      return;
    }
    this.#queue.push({ batch, cursorAfter: n.cursor });
    this.#wake();
  }

  /** A state-only batch was absorbed: the cursor moves past it (after the message batches still queued). */
  #advance(cursor: string): void {
    const last = this.#queue.at(-1);
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
    if (this.#failure || this.#closed) return;
    this.#failure = err;
    const subscriptionId = this.#subscriptionId;
    this.#subscriptionId = null;
    if (subscriptionId && this.#client.connected) void this.#client.call('chats.unfollow', { subscriptionId }).catch(() => {});
    if (err instanceof FencedError) this.#listeners.emit('replaced', err);
    else this.#listeners.emit('break', err);
    this.#wake();
  }

  // ---- waiting --------------------------------------------------------------------------

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  #wait(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const settle = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        signal?.removeEventListener('abort', aborted);
      };
      const done = () => {
        settle();
        resolve();
      };
      // Not through done(): a promise resolved first ignores the reject after it.
      const aborted = () => {
        settle();
        reject(signal?.reason as Error);
      };
      // setTimeout takes at most 2^31-1 ms; longer (or Infinity) waits have no timer at all.
      const timer = ms < 2 ** 31 ? setTimeout(done, ms) : undefined;
      this.#waiters.add(done);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }
}
