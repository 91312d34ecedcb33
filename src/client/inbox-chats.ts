import type { Chat } from '../shared/types.js';
import { Backoff } from '../shared/backoff.js';
import type { ConnectionPool } from './connection-pool.js';
import { Conversation, type ConversationStart } from './conversation.js';
import { ConnectionLostError, YelloClientError } from './errors.js';
import { NotFollowedError } from './inbox-errors.js';
import type { YelloClient } from './yello-client.js';

/** One chat of an inbox: its Conversation once followed, or why it is not. */
export interface InboxChat {
  chat: Chat;
  conversation: Conversation | null;
  failure: Error | null;
  /** The failure was thrown by `wait()` once already. */
  reported: boolean;
  /** Settles once the latest attempt to follow it settled. */
  opening: Promise<void>;
  /** An attempt to follow it is in flight. */
  busy: boolean;
}

/** Placements of one chat on connections that turned out full before it counts as not followed. */
const PLACEMENTS = 4;

/**
 * The chats an {@link Inbox} follows, each on a connection of its {@link ConnectionPool} with
 * room for it. A chat that gets no connection (the daemon refuses the agent another session,
 * say) keeps a {@link NotFollowedError} and is tried again: when it is added again (the inbox's
 * sync: `list()`, a reconnect) and on a backoff of its own until every such chat is followed.
 */
export class InboxChats {
  readonly entries = new Map<string, InboxChat>();
  readonly #pool: ConnectionPool;
  readonly #start: ConversationStart;
  /** Something changed that a waiting `wait()` must look at. */
  readonly #changed: () => void;
  #retryTimer: ReturnType<typeof setTimeout> | null = null;
  #retryBackoff = retryBackoff();
  #closed = false;

  constructor(pool: ConnectionPool, start: ConversationStart, changed: () => void) {
    this.#pool = pool;
    this.#start = start;
    this.#changed = changed;
  }

  #isClosed(): boolean {
    return this.#closed;
  }

  /** Follow `chat` (again, if it got no connection before); resolves once that attempt settled. */
  add(chat: Chat): Promise<void> {
    if (this.#closed) return Promise.resolve();
    let entry = this.entries.get(chat.id);
    if (!entry) {
      entry = { chat, conversation: null, failure: null, reported: false, opening: Promise.resolve(), busy: false };
      this.entries.set(chat.id, entry);
    } else if (entry.busy || !(entry.failure instanceof NotFollowedError)) return entry.opening;
    const attempt = entry;
    attempt.busy = true;
    attempt.opening = this.#open(attempt).finally(() => {
      attempt.busy = false;
    });
    return attempt.opening;
  }

  async #open(entry: InboxChat): Promise<void> {
    const { chat } = entry;
    for (let placement = 1; ; placement++) {
      let via: YelloClient;
      try {
        via = await this.#pool.take();
      } catch (err) {
        // The daemon is gone for now: the sync after the reconnect follows it. Anything else (a
        // session limit of the agent, say) is said, and tried again on a backoff.
        if (err instanceof ConnectionLostError) this.entries.delete(chat.id);
        else if (!this.#closed) this.#notFollowed(entry, err as Error);
        break;
      }
      try {
        const conversation = await Conversation.open(via, { chatId: chat.id, start: this.#start });
        // close() may have run while it opened (the field's narrowing cannot know).
        if (this.#isClosed()) {
          await conversation.close();
          return;
        }
        Object.assign(entry, { conversation, failure: null, reported: false });
        break;
      } catch (err) {
        this.#pool.give(via);
        // A connection holding subscriptions the pool did not count: the chat goes on another.
        if (this.#pool.refusedForRoom(via, err)) {
          if (placement < PLACEMENTS) continue;
          this.#notFollowed(entry, err as Error);
        }
        // Not followed for now (the connection went, the daemon is stopping): the next sync tries again.
        else if (err instanceof ConnectionLostError || (err instanceof YelloClientError && err.transient)) this.entries.delete(chat.id);
        else entry.failure = err as Error;
        break;
      }
    }
    this.#changed();
  }

  /** `entry` got no connection: said once (its first error stays while it lasts), tried again later. */
  #notFollowed(entry: InboxChat, cause: Error): void {
    if (!(entry.failure instanceof NotFollowedError))
      Object.assign(entry, { failure: new NotFollowedError(entry.chat.id, cause), reported: false });
    if (this.#retryTimer || this.#closed) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      void Promise.all(this.#waiting().map((e) => this.add(e.chat))).then(() => {
        if (this.#waiting().length === 0) this.#retryBackoff = retryBackoff();
      });
    }, this.#retryBackoff.next()?.delayMs ?? 30_000);
    // The retries alone never keep a process alive.
    this.#retryTimer.unref();
  }

  /** The chats waiting for a connection. */
  #waiting(): InboxChat[] {
    return [...this.entries.values()].filter((e) => e.failure instanceof NotFollowedError);
  }

  /** Stop following: no more attempts; every Conversation closed. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    await Promise.all([...this.entries.values()].flatMap((e) => (e.conversation ? [e.conversation.close()] : [])));
  }
}

function retryBackoff(): Backoff {
  return new Backoff({ minDelayMs: 1000, maxDelayMs: 30_000, jitter: true });
}
