import type { Logger } from 'pino';
import { errors } from '../../shared/errors.js';
import { MAX_SUBSCRIPTIONS_PER_CONNECTION } from '../../shared/limits.js';
import type { Chat, ChatOpenedNotification } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import type { ChatReader } from './chat-reader.js';
import { startCursors } from './follow-start.js';
import { chatStreamIds } from '../directory/chats.js';
import type { Directory } from '../directory/directory.js';
import type { CorruptMark, Integrity } from '../store/integrity.js';
import type { FollowRequest } from '../requests.js';
import type { ConnectionHandle } from '../rpc/rpc-server.js';
import type { CommittedRange } from './heads.js';
import type { StreamStore } from './stream-store.js';
import { cursorFor, SubscriptionPump, type Subscription } from './subscription-pump.js';
import { randomId } from '../crypto/tokens.js';

export { MAX_SUBSCRIPTIONS_PER_CONNECTION };

/** A `chats.watch` of one connection: told of every new chat that includes `agentId`. */
interface Watch {
  id: string;
  agentId: string;
  connection: ConnectionHandle;
}

/**
 * `chats.follow`: pushes `chats.batch` as records commit. One pump per subscription moves each
 * stream's cursor forward, from storage while behind and straight from the commit while
 * current, so the catch-up/live seam has neither a gap nor a duplicate. A congested
 * connection pauses its pump until `drain`: nothing is dropped, nothing grows without bound,
 * and no other connection waits for it.
 *
 * This is the registry: which subscriptions and watches exist, the cap per connection, and which
 * commits, breaks and corruption marks reach which subscription. How a subscription is caught
 * up and what it is told is the pump's (subscription-pump.ts).
 */
export class Subscriptions {
  readonly #streams: StreamStore;
  readonly #reader: ChatReader;
  readonly #directory: Directory;
  readonly #byStream = new Map<string, Set<Subscription>>();
  readonly #byId = new Map<string, Subscription>();
  /** `chats.watch` subscriptions, by id; they share the ids, the cap and `chats.unfollow`. */
  readonly #watches = new Map<string, Watch>();
  readonly #pump: SubscriptionPump;

  constructor(streams: StreamStore, reader: ChatReader, directory: Directory, integrity: Integrity, log: Logger) {
    this.#streams = streams;
    this.#reader = reader;
    this.#directory = directory;
    this.#pump = new SubscriptionPump(streams, reader, log, (sub) => {
      this.#end(sub);
    });
    streams.listen({
      committed: (range) => {
        this.#onCommitted(range);
      },
      discontinuity: (streamId) => {
        this.#onDiscontinuity(streamId);
      },
      moved: (streamId) => {
        // The records are in the store, not at hand: the pump reads them from each cursor.
        for (const sub of this.#byStream.get(streamId) ?? []) {
          sub.dirty.add(streamId);
          this.#pump.pump(sub);
        }
      },
    });
    integrity.onMark((mark) => {
      this.#onMarked(mark);
    });
  }

  get count(): number {
    return this.#byId.size + this.#watches.size;
  }

  async follow(caller: Caller, p: FollowRequest, connection: ConnectionHandle): Promise<{ subscriptionId: string; cursor: string }> {
    const chat = this.#directory.readableChat(caller, p.chatId);
    const streamIds = chatStreamIds(chat);
    this.#assertRoom(connection);
    // The resume policy may read a sealed generation; the cap is checked again after it.
    const cursors = await startCursors(this.#streams, this.#reader, caller, chat.id, streamIds, p);
    this.#assertRoom(connection);
    const sub: Subscription = {
      id: randomId('sub_'),
      chatId: chat.id,
      caller,
      connection,
      streamIds,
      cursors,
      dirty: new Set(streamIds),
      pumping: false,
      started: false,
      ended: false,
    };
    this.#byId.set(sub.id, sub);
    for (const id of streamIds) {
      let set = this.#byStream.get(id);
      if (!set) this.#byStream.set(id, (set = new Set()));
      set.add(sub);
    }
    connection.onClose(() => {
      this.#end(sub);
    });
    // Deliveries start after the response to chats.follow has been written.
    setImmediate(() => {
      sub.started = true;
      this.#pump.pump(sub);
    });
    return { subscriptionId: sub.id, cursor: this.#pump.cursorOf(sub) };
  }

  /** RATE_LIMITED when the connection holds MAX_SUBSCRIPTIONS_PER_CONNECTION already (follows and watches). */
  #assertRoom(connection: ConnectionHandle): void {
    let owned = 0;
    for (const s of this.#byId.values()) if (s.connection === connection) owned++;
    for (const w of this.#watches.values()) if (w.connection === connection) owned++;
    if (owned >= MAX_SUBSCRIPTIONS_PER_CONNECTION)
      throw errors.rateLimited(1000, `subscriptions on this connection (max ${MAX_SUBSCRIPTIONS_PER_CONNECTION})`);
  }

  /** `chats.watch`: push `chats.opened` to this connection for every new chat of the agent. */
  watch(agentId: string, connection: ConnectionHandle): { subscriptionId: string } {
    this.#assertRoom(connection);
    const watch: Watch = { id: randomId('sub_'), agentId, connection };
    this.#watches.set(watch.id, watch);
    connection.onClose(() => {
      this.#watches.delete(watch.id);
    });
    return { subscriptionId: watch.id };
  }

  /** A chat was created (by `chats.open`): tell the watches of both of its agents. */
  opened(chat: Chat): void {
    for (const w of this.#watches.values()) {
      if (w.agentId !== chat.agentAId && w.agentId !== chat.agentBId) continue;
      const params: ChatOpenedNotification = { subscriptionId: w.id, chat };
      w.connection.notify('chats.opened', params);
    }
  }

  unfollow(subscriptionId: string, connection: ConnectionHandle): { subscriptionId: string; ended: boolean } {
    const watch = this.#watches.get(subscriptionId);
    if (watch && watch.connection === connection) {
      this.#watches.delete(subscriptionId);
      return { subscriptionId, ended: true };
    }
    const sub = this.#byId.get(subscriptionId);
    if (!sub || sub.connection !== connection) throw errors.notFound('subscription', subscriptionId);
    this.#end(sub);
    return { subscriptionId, ended: true };
  }

  /** End every subscription and watch (shutdown). */
  endAll(): void {
    for (const sub of [...this.#byId.values()]) this.#end(sub);
    this.#watches.clear();
  }

  #end(sub: Subscription): void {
    if (sub.ended) return;
    sub.ended = true;
    this.#byId.delete(sub.id);
    for (const id of sub.streamIds) {
      const set = this.#byStream.get(id);
      set?.delete(sub);
      if (set && set.size === 0) this.#byStream.delete(id);
    }
  }

  #onCommitted(range: CommittedRange): void {
    const subs = this.#byStream.get(range.streamId);
    if (!subs) return;
    for (const sub of subs) {
      const c = cursorFor(sub, range.streamId);
      // Fast path: the subscriber is exactly at the seam and nothing is queued before it.
      if (
        sub.started &&
        !sub.pumping &&
        sub.dirty.size === 0 &&
        c.generation === range.generation &&
        c.position === range.fromPosition &&
        !sub.connection.congested
      ) {
        this.#pump.deliver(sub, range.streamId, c, range.records, range.nextPosition);
      } else {
        sub.dirty.add(range.streamId);
        this.#pump.pump(sub);
      }
    }
  }

  #onDiscontinuity(streamId: string): void {
    const subs = this.#byStream.get(streamId);
    if (!subs) return;
    for (const sub of [...subs]) {
      const c = cursorFor(sub, streamId);
      try {
        this.#streams.checkContinuity(streamId, c.generation, c.position);
      } catch (err) {
        this.#pump.stop(sub, err);
      }
    }
  }

  /** A stream turned corrupt: followers at or past the mark cannot be told what comes next. */
  #onMarked(mark: CorruptMark): void {
    const subs = this.#byStream.get(mark.streamId);
    if (!subs) return;
    for (const sub of [...subs]) {
      const c = cursorFor(sub, mark.streamId);
      if (mark.generation === null || (mark.generation === c.generation && c.position >= mark.fromPosition)) {
        try {
          this.#streams.assertReadable(mark.streamId, c.generation, c.position);
        } catch (err) {
          this.#pump.stop(sub, err);
        }
      }
    }
  }
}
