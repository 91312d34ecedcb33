import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import { errors, YelloError } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import type { ChatBatchNotification, ChatBreakNotification, ChatErrorNotification, StoredRecord } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import type { ChatReader } from './chat-reader.js';
import type { Cursor } from './follow-start.js';
import type { ConnectionHandle } from '../rpc/rpc-server.js';
import type { StreamStore } from './stream-store.js';
import { errorMessage, errorStack } from '../runtime/error-fields.js';

/** Records per pushed batch when catching up from storage. */
const CATCH_UP_BATCH = 500;
/** Bytes of stored records per pushed batch when catching up (always at least one record). */
export const CATCH_UP_BYTES = 1_048_576;

/** One `chats.follow`: where it stands on each of its chat's two streams, and what it still owes. */
export interface Subscription {
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

/**
 * What a subscriber is told, and when: each stream's cursor moves forward from storage while
 * behind (`#drain`), one catch-up read per connection at a time, paused while the connection is
 * congested; a batch committed at the cursor goes out as it is (`deliver`); a subscription that
 * cannot go on ends with `chats.break` or `chats.error` (`stop`). Which subscriptions exist and
 * which commits reach them is the registry's (subscriptions.ts).
 */
export class SubscriptionPump {
  readonly #streams: StreamStore;
  readonly #reader: ChatReader;
  readonly #log: Logger;
  /** Takes a subscription out of the registry (subscriptions.ts): nothing reaches it after. */
  readonly #end: (sub: Subscription) => void;
  /**
   * Connections with a catch-up read in progress, and the subscriptions waiting for their turn:
   * one catch-up read per connection at a time, so 64 subscriptions of one client hold one
   * batch in memory, not 64.
   */
  readonly #reading = new Map<ConnectionHandle, Set<Subscription>>();

  constructor(streams: StreamStore, reader: ChatReader, log: Logger, end: (sub: Subscription) => void) {
    this.#streams = streams;
    this.#reader = reader;
    this.#log = log;
    this.#end = end;
  }

  /** The opaque cursor a client resumes from: both streams where the subscription stands now. */
  cursorOf(sub: Subscription): string {
    const streams: Record<string, { generation: number; position: number }> = {};
    for (const [id, c] of sub.cursors) streams[id] = { ...c };
    return this.#reader.liveCursor({ chatId: sub.chatId, streams });
  }

  /**
   * End a subscription that cannot go on: a continuity break becomes `chats.break` (one of the
   * three reasons of §6); anything else — corrupt data, a bug — becomes `chats.error` with the
   * error as an RPC error would carry it, logged with a correlation id when it is not ours.
   */
  stop(sub: Subscription, err: unknown): void {
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

  deliver(sub: Subscription, streamId: string, c: Cursor, records: StoredRecord[], nextPosition: number): void {
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
      cursor: this.cursorOf(sub),
    };
    sub.connection.notify('chats.batch', params);
  }

  /** Deliver everything committed past each cursor, pausing while the connection is congested. */
  pump(sub: Subscription): void {
    if (!sub.started || sub.pumping || sub.ended) return;
    sub.pumping = true;
    this.#drain(sub)
      .catch((err: unknown) => {
        this.stop(sub, err);
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
        for (const s of waiting) this.pump(s);
      });
    }
  }

  async #drain(sub: Subscription): Promise<void> {
    while (!sub.ended && sub.dirty.size > 0) {
      if (sub.connection.congested) {
        // Resume on drain; the dirty set keeps what is owed.
        sub.connection.onDrain(() => {
          this.pump(sub);
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
          this.pump(sub);
        });
        return;
      }
      this.deliver(sub, streamId, c, records, c.position + records.length);
    }
  }
}

/** A subscription's cursor on one of its two streams (it is indexed under exactly those). */
export function cursorFor(sub: Subscription, streamId: string): Cursor {
  const c = sub.cursors.get(streamId);
  if (!c) throw new Error(`subscription ${sub.id} has no cursor on stream ${streamId}`);
  return c;
}
