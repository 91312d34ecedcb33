import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import { errors, YelloError } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import { MAX_SUBSCRIPTIONS_PER_CONNECTION } from '../../shared/limits.js';
import type {
  Chat,
  ChatBatchNotification,
  ChatBreakNotification,
  ChatErrorNotification,
  ChatOpenedNotification,
  StoredRecord,
} from '../../shared/types.js';
import type { Caller } from '../caller.js';
import type { ChatReader } from './chat-reader.js';
import { startCursors, type Cursor } from './follow-start.js';
import { chatStreamIds } from '../directory/chats.js';
import type { Directory } from '../directory/directory.js';
import type { CorruptMark, Integrity } from '../store/integrity.js';
import type { FollowRequest } from '../requests.js';
import type { ConnectionHandle } from '../rpc/rpc-server.js';
import type { CommittedRange } from './heads.js';
import type { StreamStore } from './stream-store.js';
import { randomId } from '../crypto/tokens.js';
import { errorMessage, errorStack } from '../runtime/error-fields.js';

export { MAX_SUBSCRIPTIONS_PER_CONNECTION };
/** Records per pushed batch when catching up from storage. */
const CATCH_UP_BATCH = 500;
/** Bytes of stored records per pushed batch when catching up (always at least one record). */
export const CATCH_UP_BYTES = 1_048_576;

interface Subscription {
  id: string;
  chatId: string;
  caller: Caller;
  connection: ConnectionHandle;
  streamIds: [string, string];
  cursors: Map<string, Cursor>;
  /** Streams with committed records not yet delivered. */
  dirty: Set<string>;
  pumping: boolean;
  started: boolean;
  ended: boolean;
}

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
 */
export class Subscriptions {
  readonly #streams: StreamStore;
  readonly #reader: ChatReader;
  readonly #directory: Directory;
  readonly #log: Logger;
  readonly #byStream = new Map<string, Set<Subscription>>();
  readonly #byId = new Map<string, Subscription>();
  /** `chats.watch` subscriptions, by id; they share the ids, the cap and `chats.unfollow`. */
  readonly #watches = new Map<string, Watch>();
  /**
   * Connections with a catch-up read in progress, and the subscriptions waiting for their turn:
   * one catch-up read per connection at a time, so 64 subscriptions of one client hold one
   * batch in memory, not 64.
   */
  readonly #reading = new Map<ConnectionHandle, Set<Subscription>>();

  constructor(streams: StreamStore, reader: ChatReader, directory: Directory, integrity: Integrity, log: Logger) {
    this.#streams = streams;
    this.#reader = reader;
    this.#directory = directory;
    this.#log = log;
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
          this.#pump(sub);
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
      this.#pump(sub);
    });
    return { subscriptionId: sub.id, cursor: this.#cursorOf(sub) };
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

  #cursorOf(sub: Subscription): string {
    const streams: Record<string, { generation: number; position: number }> = {};
    for (const [id, c] of sub.cursors) streams[id] = { ...c };
    return this.#reader.liveCursor({ chatId: sub.chatId, streams });
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
        this.#deliver(sub, range.streamId, c, range.records, range.nextPosition);
      } else {
        sub.dirty.add(range.streamId);
        this.#pump(sub);
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
        this.#stop(sub, err);
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
          this.#stop(sub, err);
        }
      }
    }
  }

  /**
   * End a subscription that cannot go on: a continuity break becomes `chats.break` (one of the
   * three reasons of §6); anything else — corrupt data, a bug — becomes `chats.error` with the
   * error as an RPC error would carry it, logged with a correlation id when it is not ours.
   */
  #stop(sub: Subscription, err: unknown): void {
    if (sub.ended) return;
    this.#end(sub);
    if (err instanceof YelloError && err.type === 'CONTINUITY_BREAK') {
      const d = err.details as { reason: ChatBreakNotification['reason']; streamId: string; expected?: unknown; actual?: unknown };
      const params: ChatBreakNotification = {
        subscriptionId: sub.id,
        reason: d.reason,
        streamId: d.streamId,
        expected: d.expected ?? null,
        actual: d.actual ?? null,
      };
      sub.connection.notify('chats.break', params);
      return;
    }
    let e: YelloError;
    if (err instanceof YelloError) {
      e = err;
      this.#log.error({ sub: sub.id, type: e.type, reason: e.details.reason ?? null }, 'subscription ended by an error');
    } else {
      const correlationId = randomUUID();
      this.#log.error({ sub: sub.id, correlationId, err: { message: errorMessage(err), stack: errorStack(err) } }, 'subscription failed');
      e = errors.internal(correlationId);
    }
    const params: ChatErrorNotification = { subscriptionId: sub.id, error: { code: e.code, message: e.message, data: e.toData() } };
    sub.connection.notify('chats.error', params);
  }

  #deliver(sub: Subscription, streamId: string, c: Cursor, records: StoredRecord[], nextPosition: number): void {
    const from = c.position;
    c.position = nextPosition;
    const params: ChatBatchNotification = {
      subscriptionId: sub.id,
      batchId: this.#streams.batchId(sub.caller, streamId, c.generation, from, nextPosition),
      streamId,
      generation: formatDecimal(c.generation),
      fromPosition: formatDecimal(from),
      nextPosition: formatDecimal(nextPosition),
      records,
      cursor: this.#cursorOf(sub),
    };
    sub.connection.notify('chats.batch', params);
  }

  /** Deliver everything committed past each cursor, pausing while the connection is congested. */
  #pump(sub: Subscription): void {
    if (!sub.started || sub.pumping || sub.ended) return;
    sub.pumping = true;
    this.#drain(sub)
      .catch((err: unknown) => {
        this.#stop(sub, err);
      })
      .finally(() => {
        sub.pumping = false;
      });
  }

  /** The catch-up read of a connection is done: let those that waited for it try again. */
  #endTurn(connection: ConnectionHandle): void {
    const waiting = this.#reading.get(connection);
    this.#reading.delete(connection);
    // After this turn's delivery: the batch just read goes out before the next one is read.
    if (waiting && waiting.size > 0) {
      setImmediate(() => {
        for (const s of waiting) this.#pump(s);
      });
    }
  }

  async #drain(sub: Subscription): Promise<void> {
    while (!sub.ended && sub.dirty.size > 0) {
      if (sub.connection.congested) {
        // Resume on drain; the dirty set keeps what is owed.
        sub.connection.onDrain(() => {
          this.#pump(sub);
        });
        return;
      }
      const streamId = sub.dirty.values().next().value as string;
      const c = cursorFor(sub, streamId);
      const meta = this.#streams.checkContinuity(streamId, c.generation, c.position);
      const end = Math.min(meta.nextPosition, this.#streams.readLimit(streamId, c.generation));
      if (c.position >= end) {
        sub.dirty.delete(streamId);
        continue;
      }
      const waiting = this.#reading.get(sub.connection);
      if (waiting) {
        // Another subscription of this connection is reading: wait for its turn to end.
        waiting.add(sub);
        return;
      }
      this.#reading.set(sub.connection, new Set());
      let records: StoredRecord[];
      try {
        records = await this.#streams.range(streamId, c.generation, c.position, end, CATCH_UP_BATCH, CATCH_UP_BYTES);
      } finally {
        this.#endTurn(sub.connection);
      }
      // Both can have changed during the read; TypeScript keeps the loop's narrowing across the await.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- re-checked after an await (see above)
      if (sub.ended) return;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- re-checked after an await (see above)
      if (sub.connection.congested) {
        // Read while the connection had room, but it filled meanwhile (other subscriptions,
        // answers): drop what was read and read it again after drain, rather than queue it.
        sub.connection.onDrain(() => {
          this.#pump(sub);
        });
        return;
      }
      this.#deliver(sub, streamId, c, records, c.position + records.length);
    }
  }
}

/** A subscription's cursor on one of its two streams (it is indexed under exactly those). */
function cursorFor(sub: Subscription, streamId: string): Cursor {
  const c = sub.cursors.get(streamId);
  if (!c) throw new Error(`subscription ${sub.id} has no cursor on stream ${streamId}`);
  return c;
}
