import type { Chat, ChatOpenedNotification } from '../shared/types.js';
import { Backoff } from '../shared/backoff.js';
import { ConnectionPool } from './connection-pool.js';
import type { Conversation, ConversationStart } from './conversation.js';
import { ConnectionLostError, YelloClientError } from './errors.js';
import { InboxChats } from './inbox-chats.js';
import { allChats, byActivity, entryOf, listOnce } from './inbox-list.js';
import type { MessageBatch } from './message-batch.js';
import { Waiters } from './wait-queue.js';
import type { YelloClient } from './yello-client.js';
import { streamSides } from '../shared/chat-peers.js';

/** One chat of an agent's inbox, as {@link Inbox.list} reports it. */
export interface InboxEntry {
  chatId: string;
  peer: { agentId: string; username: string; displayName: string };
  /** Messages of the peer's current generation after this agent's latest receipt. */
  unreadMessages: number;
  /** When the newest message of the chat (either direction) was signed, or null. */
  lastActivityAt: string | null;
  /** The start of that newest message, or null. */
  preview: string | null;
  /** Whether the inbox follows the chat now; when not, `failure` says why. */
  followed: boolean;
  /**
   * Why the inbox does not follow this chat: reading it stopped for a person (a continuity
   * break, say), or it got no connection to follow it on (`NotFollowedError`, tried again by
   * itself); null while it is followed.
   */
  failure: Error | null;
}

/** What {@link Inbox.wait} returns: a message batch of one chat. */
export interface InboxBatch {
  chatId: string;
  batch: MessageBatch;
}

/** Options of {@link Inbox.open}. */
export interface InboxOptions {
  /** Where each chat's Conversation starts; default `'acknowledged'` (every unread message). */
  start?: ConversationStart;
  /**
   * The connections to follow chats on, made from the same client (to hear their
   * notifications, say, with `connections.on`); the caller closes it. Default: a pool of the
   * inbox's own, closed with it.
   */
  connections?: ConnectionPool;
}

/**
 * Waiting across all of an agent's chats (docs/protocol.md §8), chats opened later included
 * (`chats.watch`): one {@link Conversation} per chat, and `wait()` for the next message batch of
 * any of them. Like a Conversation it wakes only on a message or a break, and reads never
 * write. Every chat is followed, however many: a connection holds 64 subscriptions (the watch
 * is one of the client's), so the conversations are spread over as many connections of the
 * agent as they need ({@link ConnectionPool}). A chat it gets no connection for is reported,
 * never skipped silently: `list()` shows it not followed with a `NotFollowedError`, `wait()`
 * throws that once, and it is tried again (at `list()`, after a reconnect, on a backoff).
 */
export class Inbox {
  readonly #client: YelloClient;
  readonly #pool: ConnectionPool;
  readonly #ownPool: boolean;
  readonly #chats: InboxChats;
  readonly #entries: InboxChats['entries'];
  readonly #offs: (() => void)[] = [];
  /** Woken when the set of chats changes (one added, one failed to open, watching failed). */
  readonly #changes = new Waiters();
  #watchId: string | null = null;
  /** Why watching for new chats stopped after a reconnect (thrown once by `wait()`), or null. */
  #watchFailure: Error | null = null;
  #watchFailureReported = false;
  #early: ChatOpenedNotification[] | null = null;
  #turn = 0;
  #closed = false;

  private constructor(client: YelloClient, options: InboxOptions) {
    this.#client = client;
    this.#pool = options.connections ?? new ConnectionPool(client);
    this.#ownPool = !options.connections;
    this.#chats = new InboxChats(this.#pool, options.start ?? 'acknowledged', () => {
      this.#wake();
    });
    this.#entries = this.#chats.entries;
  }

  /** Watch for new chats, then open a Conversation for every chat the agent is in. */
  static async open(client: YelloClient, options: InboxOptions = {}): Promise<Inbox> {
    if (client.session.role !== 'agent') throw new YelloClientError('BAD_TOKEN', 'an inbox needs an agent token');
    if (options.connections && options.connections.client !== client)
      throw new YelloClientError('BAD_STATE', 'the connections of an inbox must be made from its client');
    const inbox = new Inbox(client, options);
    inbox.#listen();
    try {
      await inbox.#watch();
      inbox.#pool.taken(client);
      await inbox.#sync();
    } catch (err) {
      await inbox.close();
      throw err;
    }
    return inbox;
  }

  /** The chats of the agent known so far (those not followed included: `list()` says which). */
  get chatIds(): string[] {
    return [...this.#entries.keys()];
  }

  /**
   * The chats known and not followed now, for a reason `list()` gives: no connection for them
   * (tried again by itself), or reading them stopped. A chat being opened right now is not one.
   */
  get unfollowed(): string[] {
    return [...this.#entries.values()].flatMap((e) => ((e.failure ?? e.conversation?.failure) ? [e.chat.id] : []));
  }

  /**
   * Follow `chat` now if it is not followed yet (a chat this agent just opened, whose
   * `chats.opened` may still be on its way): its Conversation once open, or null when following
   * it failed (`list()` reports why) or the inbox is closed.
   */
  async follow(chat: Chat): Promise<Conversation | null> {
    await this.#chats.add(chat);
    return this.#entries.get(chat.id)?.conversation ?? null;
  }

  /** The Conversation of a chat (to read on in it alone), or null. */
  conversation(chatId: string): Conversation | null {
    return this.#entries.get(chatId)?.conversation ?? null;
  }

  /**
   * The next message batch of any chat (chats take turns), null once `waitMs` passed (0: do
   * not wait; left out: as long as it takes) or the inbox was closed. A chat whose reading
   * stopped for a person (a continuity break, corrupt data) throws its error once; later waits
   * go on with the other chats. So does watching for new chats, when watching again after a
   * reconnect was refused for good (chats opened later are then not picked up). Rejects with the signal's reason when `signal` aborts.
   */
  async wait(options: { waitMs?: number; signal?: AbortSignal } = {}): Promise<InboxBatch | null> {
    const deadline = options.waitMs === undefined ? Infinity : Date.now() + options.waitMs;
    for (;;) {
      options.signal?.throwIfAborted();
      if (this.#watchFailure && !this.#watchFailureReported) {
        this.#watchFailureReported = true;
        throw this.#watchFailure;
      }
      const found = await this.#take();
      if (found) return found;
      if (this.#closed) return null;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await this.#waitAny(left, options.signal);
    }
  }

  /** A batch (or a failure, thrown) ready in some chat, starting after the chat that had the last turn. */
  async #take(): Promise<InboxBatch | null> {
    const entries = [...this.#entries.values()];
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[(this.#turn + i) % entries.length];
      if (!entry) continue;
      const conversation = entry.conversation;
      const failure = entry.failure ?? (conversation && conversation.queued === 0 ? conversation.failure : null);
      if (failure && !entry.reported) {
        entry.reported = true;
        this.#turn = (this.#turn + i + 1) % entries.length;
        throw failure;
      }
      if (!conversation || conversation.queued === 0) continue;
      const batch = await conversation.next({ waitMs: 0 });
      if (batch) {
        this.#turn = (this.#turn + i + 1) % entries.length;
        return { chatId: entry.chat.id, batch };
      }
    }
    return null;
  }

  /** Until a chat has something, the chats change, `ms` passed or `signal` aborted (then `wait()` throws). */
  async #waitAny(ms: number, signal?: AbortSignal): Promise<void> {
    // One signal ends the waits that lost the race (and follows the caller's).
    const stop = new AbortController();
    const abort = () => {
      stop.abort();
    };
    signal?.addEventListener('abort', abort, { once: true });
    // A chat that stopped (and was reported) would be "ready" at once, forever: only live ones are waited on.
    const live = [...this.#entries.values()].flatMap((e) => (e.conversation && !e.conversation.failure ? [e.conversation] : []));
    const waits = [this.#changes.wait(ms, stop.signal), ...live.map((c) => c.ready(ms, stop.signal))];
    try {
      await Promise.race(waits.map((w) => w.catch(() => {})));
    } finally {
      signal?.removeEventListener('abort', abort);
      stop.abort();
    }
  }

  #wake(): void {
    this.#changes.wake();
  }

  /**
   * Every chat of the agent, with its unread message count (the peer's current generation after
   * the agent's latest receipt), its last activity and a preview, newest activity first.
   */
  async list(): Promise<InboxEntry[]> {
    await this.#sync();
    const agentId = this.#client.session.agentId ?? '';
    const out = await Promise.all(
      [...this.#entries.values()].map(async (entry): Promise<InboxEntry> => {
        const { chat } = entry;
        const { streams } = await this.#client.call('chats.get', { chatId: chat.id });
        const failure = entry.failure ?? entry.conversation?.failure ?? null;
        return entryOf(this.#client, chat, agentId, streamSides(streams, agentId).peer, {
          followed: entry.conversation !== null,
          failure,
        });
      }),
    );
    return byActivity(out);
  }

  /**
   * The agent's chats as `list()` reports them, read once with `client`, without an inbox: no
   * watch and no follows, except of a chat with something after the agent's receipt, opened
   * and closed again to learn whether a break stops its reading (then `followed` is false and
   * `failure` says why). What a command that lists and exits needs (`yello inbox`).
   */
  static async listOnce(client: YelloClient): Promise<InboxEntry[]> {
    if (client.session.role !== 'agent') throw new YelloClientError('BAD_TOKEN', 'an inbox needs an agent token');
    return listOnce(client);
  }

  /** Stop watching and following; a waiting `wait()` returns null. The client stays open. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake();
    for (const off of this.#offs.splice(0)) off();
    const watchId = this.#watchId;
    this.#watchId = null;
    if (watchId && this.#client.connected) await this.#client.call('chats.unfollow', { subscriptionId: watchId }).catch(() => {});
    await this.#chats.close();
    if (this.#ownPool) this.#pool.close();
  }

  // ---- following ------------------------------------------------------------------------

  #listen(): void {
    this.#offs.push(
      this.#client.on('chats.opened', (n) => {
        if (this.#early) this.#early.push(n);
        else if (n.subscriptionId === this.#watchId) void this.#chats.add(n.chat);
      }),
      this.#client.on('disconnected', () => {
        this.#watchId = null;
      }),
      this.#client.on('reconnected', () => {
        // A refusal that waiting does not cure (the agent's token revoked, say) stops the watch:
        // `wait()` throws it once, as a chat's failure; it must not be an unhandled rejection.
        this.#rewatch().catch((err: unknown) => {
          this.#watchFailure = err instanceof Error ? err : new Error(String(err));
          this.#wake();
        });
      }),
    );
  }

  async #watch(): Promise<void> {
    this.#early = [];
    try {
      this.#watchId = (await this.#client.call('chats.watch', {})).subscriptionId;
    } finally {
      const early = this.#early;
      this.#early = null;
      for (const n of early) if (n.subscriptionId === this.#watchId) void this.#chats.add(n.chat);
    }
  }

  /** After a reconnect: watch again, and pick up the chats opened while the connection was down. */
  async #rewatch(): Promise<void> {
    const backoff = new Backoff({ minDelayMs: 50, maxDelayMs: 2000, jitter: true });
    while (!this.#closed && this.#watchId === null && this.#client.connected) {
      try {
        await this.#watch();
        await this.#sync();
        return;
      } catch (err) {
        if (err instanceof ConnectionLostError) return; // the next 'reconnected' tries again
        if (!(err instanceof YelloClientError && err.transient)) throw err;
        await new Promise((r) => setTimeout(r, backoff.next()?.delayMs ?? 2000));
      }
    }
  }

  /** Follow every chat of the agent not followed yet (`chats.list`). */
  async #sync(): Promise<void> {
    const chats = await allChats(this.#client);
    await Promise.all(chats.map((chat) => this.#chats.add(chat)));
  }
}
