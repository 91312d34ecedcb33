import type { ChatBatchNotification, ChatBreakNotification, ChatErrorNotification, StreamState } from '../shared/types.js';
import type { CoordinatorOptions, PeerBatch } from './coordinator-types.js';
import { ConnectionLostError, TimeoutError, YelloClientError, continuityBreakError, fencedError, remoteError } from './errors.js';
import type { YelloClient } from './yello-client.js';

/** What a coordinator holds of its outbound stream, as the feed checks it. */
export interface OwnedStream {
  streamId: string;
  peerStreamId: string;
  epoch: string;
  generation: string;
}

/** What a {@link PeerFeed} needs from its coordinator. */
export interface FeedHost {
  readonly options: Pick<CoordinatorOptions, 'chatId' | 'cursorStore' | 'adapter' | 'start'>;
  /** The connection in use, if any. */
  client(): YelloClient | null;
  /** Stopped, or stopped for a human: present nothing more. */
  stopped(): boolean;
  own(): OwnedStream;
  /** Stop for a human with this error. */
  fail(err: Error): void;
  presented(batch: PeerBatch): void;
}

/** A notification that arrived while a chats.follow call was in flight. */
type Early =
  { kind: 'batch'; n: ChatBatchNotification } | { kind: 'break'; n: ChatBreakNotification } | { kind: 'error'; n: ChatErrorNotification };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The reading side of a Coordinator: follows the chat from the stored cursor, and presents
 * peer batches one at a time, in order, each after checking that the coordinator still owns
 * its stream and both generations are the ones read. The cursor is saved only after a batch
 * was presented, so a reconnect re-delivers from there: nothing is skipped.
 */
export class PeerFeed {
  readonly #host: FeedHost;
  #subscriptionId = '';
  #early: Early[] | null = null;
  #queue: PeerBatch[] = [];
  #processing: Promise<void> = Promise.resolve();

  constructor(host: FeedHost) {
    this.#host = host;
  }

  /** The subscription of the current connection ('' when none). */
  get subscriptionId(): string {
    return this.#subscriptionId;
  }

  /** The connection is gone: forget its subscription and what it queued (re-delivered from the cursor). */
  reset(): void {
    this.#queue = [];
    this.#subscriptionId = '';
  }

  /** Resolves when what is being presented is done (and its cursor saved). */
  settled(): Promise<void> {
    return this.#processing.catch(() => {});
  }

  /** `chats.follow` from the stored cursor (or, with none, per the `start` option). */
  async follow(client: YelloClient): Promise<void> {
    const { chatId, cursorStore, start } = this.#host.options;
    const cursor = await cursorStore.load(chatId);
    // Batches can arrive in the same read as the follow's answer, before we know the
    // subscription id: hold them instead of dropping them, then replay the ones that are ours.
    this.#early = [];
    let res;
    try {
      // 'end' is the daemon's default: leave it out rather than send it.
      const from = cursor ? { cursor } : start === 'end' ? {} : { from: 'acknowledged' as const };
      res = await client.call('chats.follow', { chatId, ...from });
    } finally {
      const early = this.#early;
      this.#early = null;
      if (res) {
        this.#subscriptionId = res.subscriptionId;
        // Queued ahead of every batch, so a batch's later cursor is never overwritten by it.
        const initial = res.cursor;
        if (!cursor) this.#processing = this.#processing.then(() => cursorStore.save(chatId, initial));
        for (const e of early) {
          if (e.kind === 'batch') this.onBatch(e.n);
          else if (e.kind === 'break') this.onBreak(e.n);
          else this.onError(e.n);
        }
      }
    }
  }

  /** A `chats.batch`: queued for presentation, if it is of this subscription. */
  onBatch(batch: ChatBatchNotification): void {
    if (this.#early) {
      this.#early.push({ kind: 'batch', n: batch });
      return;
    }
    if (batch.subscriptionId !== this.#subscriptionId || this.#host.stopped()) return;
    this.#queue.push(batch);
    this.#processing = this.#processing
      .then(() => this.#drain())
      .catch((err: unknown) => {
        this.#host.fail(err as Error);
      });
  }

  /** A `chats.break`: the read cannot continue exactly; a person must intervene. */
  onBreak(b: ChatBreakNotification): void {
    if (this.#early) {
      this.#early.push({ kind: 'break', n: b });
      return;
    }
    if (b.subscriptionId !== this.#subscriptionId) return;
    this.#host.fail(continuityBreakError(b.reason, b.streamId, b.expected, b.actual, `subscription ended: ${b.reason} on ${b.streamId}`));
  }

  /** A `chats.error`: the daemon ended the subscription (corrupt data, say); a person must look. */
  onError(e: ChatErrorNotification): void {
    if (this.#early) {
      this.#early.push({ kind: 'error', n: e });
      return;
    }
    if (e.subscriptionId !== this.#subscriptionId) return;
    this.#host.fail(remoteError(e.error));
  }

  async #drain(): Promise<void> {
    const { chatId, cursorStore, adapter } = this.#host.options;
    for (;;) {
      if (this.#host.stopped()) return;
      const owned = this.#host.own();
      const own = this.#queue[0]?.streamId === owned.streamId ? this.#queue.shift() : undefined;
      if (own) {
        // A fence with a newer epoch in our own stream: we were replaced.
        for (const r of own.records) {
          if (r.wrapper.type === 'chat.writer-fence' && BigInt(r.wrapper.fence.epoch) > BigInt(owned.epoch || '0')) {
            this.#host.fail(fencedError(owned.streamId, r.wrapper.fence.epoch, `replaced by epoch ${r.wrapper.fence.epoch}`));
            return;
          }
        }
        await cursorStore.save(chatId, own.cursor);
        continue;
      }
      const batch = this.#queue.shift();
      if (!batch) return;
      const client = this.#host.client();
      if (!client) return;
      try {
        await checkOwnership(client, chatId, owned, batch);
      } catch (err) {
        if (err instanceof TimeoutError && this.#host.client() === client && client.connected) {
          this.#queue.unshift(batch); // not presented: check again, never skip it
          await sleep(100);
          continue;
        }
        if (err instanceof ConnectionLostError || err instanceof TimeoutError) return; // the reconnect re-delivers from the saved cursor
        this.#host.fail(err as Error);
        return;
      }
      try {
        await adapter.present(batch);
      } catch (err) {
        this.#host.fail(
          new YelloClientError(
            'ADAPTER_FAILED',
            `the adapter failed to present batch ${batch.fromPosition}..${batch.nextPosition}: ${(err as Error).message}`,
            { cause: err },
          ),
        );
        return;
      }
      await cursorStore.save(chatId, batch.cursor);
      this.#host.presented(batch);
    }
  }
}

/** The coordinator's token is still current and both generations are the ones it read (`batch`'s, for the peer). */
export async function checkOwnership(client: YelloClient, chatId: string, owned: OwnedStream, batch?: PeerBatch): Promise<void> {
  const { streams } = await client.call('chats.get', { chatId });
  const own = streams.find((s: StreamState) => s.streamId === owned.streamId);
  const peer = streams.find((s: StreamState) => s.streamId === owned.peerStreamId);
  if (!own || !peer) throw new Error(`chats.get ${chatId} did not list both streams of the chat`);
  if (own.writer.epoch !== owned.epoch || !own.writer.active) {
    throw fencedError(owned.streamId, own.writer.epoch, `stream ${owned.streamId} is now held by epoch ${own.writer.epoch}`);
  }
  if (own.generation !== owned.generation) {
    throw continuityBreakError('GENERATION_CHANGED', own.streamId, owned.generation, own.generation, 'own stream generation changed');
  }
  if (batch && peer.generation !== batch.generation) {
    throw continuityBreakError('GENERATION_CHANGED', peer.streamId, batch.generation, peer.generation, 'peer stream generation changed');
  }
}
