import { MAX_SUBSCRIPTIONS_PER_CONNECTION } from '../shared/limits.js';
import { ConnectionLostError, RateLimitedError } from './errors.js';
import { Listeners, type Listener } from './listeners.js';
import type { ClientEvents, YelloClient } from './yello-client.js';

/** The notifications a {@link ConnectionPool} passes on from every one of its connections. */
export type PoolEvents = Pick<ClientEvents, 'chats.batch' | 'chats.break' | 'chats.error'>;

interface Link {
  client: YelloClient;
  /** Subscriptions taken on it through the pool. */
  used: number;
  /** The daemon refused a follow on it for room: it holds subscriptions the pool did not count. */
  full: boolean;
  offs: (() => void)[];
}

/**
 * The connections one agent follows chats on: the client it was made from, and as many more as
 * the subscriptions need (the daemon allows {@link MAX_SUBSCRIPTIONS_PER_CONNECTION} per
 * connection, docs/protocol.md §3.2), dialled with `client.dialAgain({reconnect: true})` so that
 * they reconnect as the client does. `take()` hands out a connection with room for one more
 * subscription; `on()` hears the notifications of all of them, those dialled later included
 * (a reader that must see every batch of a chat, wherever it is followed). `close()` closes the
 * connections it dialled, never the client it was given.
 */
export class ConnectionPool {
  /** The client the pool was made from: its first connection. */
  readonly client: YelloClient;
  readonly #links: Link[] = [];
  readonly #listeners = new Listeners<PoolEvents>();
  #dialing: Promise<void> | null = null;
  #closed = false;

  constructor(client: YelloClient) {
    this.client = client;
    this.#links.push(this.#wire(client));
  }

  /** How many connections the pool has (the client's included). */
  get size(): number {
    return this.#links.length;
  }

  /** Listen to a notification on every connection of the pool; returns a function that removes the listener. */
  on<E extends keyof PoolEvents>(event: E, listener: Listener<PoolEvents[E]>): () => void {
    return this.#listeners.on(event, listener);
  }

  /**
   * A connected connection with room for one more subscription, that room counted as taken
   * (give it back with `give()` if the subscription is not made). Dials another connection when
   * every one is full (or down); rejects with the dial's error when the daemon refuses it (a
   * session limit of the agent, say) or cannot be reached.
   */
  async take(): Promise<YelloClient> {
    for (;;) {
      if (this.#closed) throw new ConnectionLostError('the connection pool is closed', false);
      const link = this.#links.find((l) => !l.full && l.used < MAX_SUBSCRIPTIONS_PER_CONNECTION && l.client.connected);
      if (link) {
        link.used++;
        return link.client;
      }
      this.#dialing ??= this.#dial().finally(() => {
        this.#dialing = null;
      });
      await this.#dialing;
    }
  }

  /** Count a subscription made on `client` outside `take()` (the inbox's watch on the client). */
  taken(client: YelloClient): void {
    const link = this.#links.find((l) => l.client === client);
    if (link) link.used++;
  }

  /** The subscription counted by `take()` on `client` was not made, or ended. */
  give(client: YelloClient): void {
    const link = this.#links.find((l) => l.client === client);
    if (link && link.used > 0) link.used--;
  }

  /**
   * `err`, a follow's refusal on `client`, says the connection has no room (RATE_LIMITED): it
   * holds subscriptions the pool did not count, so nothing more is placed on it. True if so.
   */
  refusedForRoom(client: YelloClient, err: unknown): boolean {
    if (!(err instanceof RateLimitedError)) return false;
    const link = this.#links.find((l) => l.client === client);
    if (link) link.full = true;
    return true;
  }

  async #dial(): Promise<void> {
    const client = await this.client.dialAgain({ reconnect: true });
    if (this.#closed) {
      client.close();
      return;
    }
    this.#links.push(this.#wire(client));
  }

  #wire(client: YelloClient): Link {
    const offs = [
      client.on('chats.batch', (p) => {
        this.#listeners.emit('chats.batch', p);
      }),
      client.on('chats.break', (p) => {
        this.#listeners.emit('chats.break', p);
      }),
      client.on('chats.error', (p) => {
        this.#listeners.emit('chats.error', p);
      }),
    ];
    return { client, used: 0, full: false, offs };
  }

  /** Close the connections the pool dialled (not its client) and stop passing notifications on. */
  close(): void {
    this.#closed = true;
    for (const link of this.#links.splice(0)) {
      for (const off of link.offs) off();
      if (link.client !== this.client) link.client.close();
    }
  }
}
