import type { Chat, ChatOpenedNotification, StreamState } from '../shared/types.js';
import { Backoff } from '../shared/backoff.js';
import { Conversation, type ConversationStart } from './conversation.js';
import { ConnectionLostError, YelloClientError } from './errors.js';
import type { MessageBatch } from './message-batch.js';
import { Waiters } from './wait-queue.js';
import type { YelloClient } from './yello-client.js';
import { peerOf } from '../shared/chat-peers.js';
import { isUnreadMessage, unreadFrom } from '../shared/unread.js';
import { allPages, LIST_PAGE } from './list-pages.js';

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
  /** Why reading this chat stopped for a person (a continuity break, say), or null. */
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
}

const PREVIEW_CHARS = 120;

interface Entry {
  chat: Chat;
  conversation: Conversation | null;
  failure: Error | null;
  /** The failure was thrown by `wait()` once already. */
  reported: boolean;
  /** Settles once the Conversation is open (or failed to open). */
  opening: Promise<void>;
}

/**
 * Waiting across all of an agent's chats (docs/protocol.md §8), chats opened later included
 * (`chats.watch`): one {@link Conversation} per chat on the agent's client, and `wait()` for the
 * next message batch of any of them. Like a Conversation it wakes only on a message or a break,
 * and reads never write. All chats share the client's connection, so up to 63 chats (64
 * subscriptions per connection, one for the watch).
 */
export class Inbox {
  readonly #client: YelloClient;
  readonly #start: ConversationStart;
  readonly #entries = new Map<string, Entry>();
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
    this.#start = options.start ?? 'acknowledged';
  }

  /** Watch for new chats, then open a Conversation for every chat the agent is in. */
  static async open(client: YelloClient, options: InboxOptions = {}): Promise<Inbox> {
    if (client.session.role !== 'agent') throw new YelloClientError('BAD_TOKEN', 'an inbox needs an agent token');
    const inbox = new Inbox(client, options);
    inbox.#listen();
    try {
      await inbox.#watch();
      await inbox.#sync();
    } catch (err) {
      await inbox.close();
      throw err;
    }
    return inbox;
  }

  #isClosed(): boolean {
    return this.#closed;
  }

  /** The chats followed so far. */
  get chatIds(): string[] {
    return [...this.#entries.keys()];
  }

  /**
   * Follow `chat` now if it is not followed yet (a chat this agent just opened, whose
   * `chats.opened` may still be on its way): its Conversation once open, or null when following
   * it failed (`list()` reports why) or the inbox is closed.
   */
  async follow(chat: Chat): Promise<Conversation | null> {
    await this.#add(chat);
    await this.#entries.get(chat.id)?.opening;
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
        const peerInfo = peerOf(chat, agentId);
        const { streams } = await this.#client.call('chats.get', { chatId: chat.id });
        const peer = streams.find((s) => s.authorAgentId === peerInfo.id);
        const newest = await this.#newestMessage(chat.id);
        return {
          chatId: chat.id,
          peer: { agentId: peerInfo.id, username: peerInfo.username, displayName: peerInfo.name },
          unreadMessages: peer ? await this.#unread(peer) : 0,
          lastActivityAt: newest?.createdAt ?? null,
          preview: newest ? newest.content.slice(0, PREVIEW_CHARS) : null,
          failure: entry.failure ?? entry.conversation?.failure ?? null,
        };
      }),
    );
    return out.sort((a, b) => (b.lastActivityAt ?? '').localeCompare(a.lastActivityAt ?? ''));
  }

  /** Messages of the peer stream's current generation after the agent's latest receipt of it (src/shared/unread.ts). */
  async #unread(peer: StreamState): Promise<number> {
    const start = unreadFrom(peer);
    const end = BigInt(peer.nextPosition);
    let from = start;
    let count = 0;
    while (from < end) {
      const page = await this.#client.call('streams.read', {
        streamId: peer.streamId,
        generation: peer.generation,
        fromPosition: from.toString(),
      });
      if (page.records.length === 0) break;
      count += page.records.filter((r) => isUnreadMessage(r, start)).length;
      from = BigInt(page.nextPosition);
    }
    return count;
  }

  async #newestMessage(chatId: string): Promise<{ createdAt: string; content: string } | null> {
    try {
      const page = await this.#client.call('chats.history', { chatId, limit: 1 });
      const record = page.entries.at(-1);
      if (record?.wrapper.type !== 'chat.message') return null;
      return { createdAt: record.wrapper.message.signature.createdAt, content: record.wrapper.message.content };
    } catch {
      return null; // a chat whose history cannot be read (a break, corrupt data) shows no preview
    }
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
    await Promise.all([...this.#entries.values()].flatMap((e) => (e.conversation ? [e.conversation.close()] : [])));
  }

  // ---- following ------------------------------------------------------------------------

  #listen(): void {
    this.#offs.push(
      this.#client.on('chats.opened', (n) => {
        if (this.#early) this.#early.push(n);
        else if (n.subscriptionId === this.#watchId) void this.#add(n.chat);
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
      for (const n of early) if (n.subscriptionId === this.#watchId) void this.#add(n.chat);
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
    const chats = await allPages(
      (cursor) => this.#client.call('chats.list', { ...cursor, limit: LIST_PAGE }),
      (p) => p.chats,
    );
    await Promise.all(chats.map((chat) => this.#add(chat)));
  }

  async #add(chat: Chat): Promise<void> {
    if (this.#entries.has(chat.id) || this.#closed) return;
    const entry: Entry = { chat, conversation: null, failure: null, reported: false, opening: Promise.resolve() };
    this.#entries.set(chat.id, entry);
    entry.opening = this.#open(entry);
    await entry.opening;
  }

  async #open(entry: Entry): Promise<void> {
    const { chat } = entry;
    try {
      const conversation = await Conversation.open(this.#client, { chatId: chat.id, start: this.#start });
      // close() may have run while it opened (the field's narrowing cannot know).
      if (this.#isClosed()) {
        await conversation.close();
        return;
      }
      entry.conversation = conversation;
    } catch (err) {
      // Not followed for now (the connection went, the daemon is stopping): the next sync tries again.
      if (err instanceof ConnectionLostError || (err instanceof YelloClientError && err.transient)) this.#entries.delete(chat.id);
      else entry.failure = err as Error;
    }
    this.#wake();
  }
}
