import { randomUUID } from 'node:crypto';
import type { ChatBatchNotification, ChatBreakNotification, ChatErrorNotification, AppendResult, StreamState } from '../shared/types.js';
import type { ParamsIn } from '../shared/methods.js';
import type { OperationInfo } from '../shared/results.js';
import type { CursorStore } from './cursor-store.js';
import {
  ConnectionLostError, ContinuityBreakError, CoordinatorPausedError, FencedError, LineTooLargeError, StorageFailureError, TimeoutError,
  YelloClientError, continuityBreakError, fencedError, remoteError,
} from './errors.js';
import { YelloClient } from './yello-client.js';
import { Listeners, type Listener } from './listeners.js';

/** Lifecycle states; `needs-intervention` and `fenced` are terminal until a human acts. */
export type CoordinatorState = 'idle' | 'starting' | 'running' | 'reconnecting' | 'paused' | 'fenced' | 'needs-intervention' | 'stopped';

/** A peer batch handed to the native adapter. */
export type PeerBatch = ChatBatchNotification;

/** The agent runtime the coordinator feeds. */
export interface NativeAdapter {
  /** Show one peer batch to the agent. Resolve once it has it; acknowledging is a separate, explicit step. */
  present(batch: PeerBatch): Promise<void> | void;
  /**
   * Told when an append's outcome became unknown (connection lost, timeout, or a synced write
   * that failed in the daemon): the coordinator is paused and sends nothing until
   * `resolveUncertain()` settles `operationId`. Nothing is resent by itself.
   */
  uncertain?(info: { operationId: string; error: Error }): Promise<void> | void;
  /** Told how an append of unknown outcome ended, so the agent's own view can be corrected. */
  resolved?(outcome: UncertainOutcome): Promise<void> | void;
}

/** What `resolveUncertain()` found. */
export interface UncertainOutcome {
  operationId: string;
  committed: boolean;
  operation: OperationInfo;
}

/** Options of a {@link Coordinator}. */
export interface CoordinatorOptions {
  token: string;
  chatId: string;
  adapter: NativeAdapter;
  cursorStore: CursorStore;
  socketPath?: string;
  /**
   * Where to start when `cursorStore` holds no cursor for the chat. `'acknowledged'` (default):
   * the peer stream from where this agent's own latest receipt left off, so every message not
   * yet acknowledged is presented, including those sent before the first start. `'end'`: the
   * current ends, presenting only what arrives later.
   */
  start?: 'acknowledged' | 'end';
  /** Take the stream over from a live coordinator. Never done unless asked. */
  replace?: boolean;
  reason?: string;
  /** Per-call timeout; an append that times out pauses the coordinator. Default 10 s. */
  callTimeoutMs?: number;
  /** Cap on one line from the daemon (see `ConnectOptions.maxInboundLineBytes`). */
  maxInboundLineBytes?: number;
  /** See `ConnectOptions.verifySocket`; default true. */
  verifySocket?: boolean;
  /** Reconnect backoff. */
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
}

/** Observable coordinator events. */
export interface CoordinatorEvents {
  state: { state: CoordinatorState; previous: CoordinatorState; error?: Error; operationId?: string };
  presented: PeerBatch;
  error: Error;
}


/**
 * Drives one agent in one chat (docs/protocol.md §8): claims the outbound stream, follows the chat
 * from a stored compound cursor, presents peer batches to the native adapter after checking
 * that it still owns its stream and both generations are current, and appends messages and
 * receipts with fencing. It never resends an append of unknown outcome and never skips.
 */
export class Coordinator {
  readonly #opts: CoordinatorOptions;
  #client: YelloClient | null = null;
  #state: CoordinatorState = 'idle';
  readonly #listeners = new Listeners<CoordinatorEvents>();
  #agentId = '';
  #streamId = '';
  #peerStreamId = '';
  #token = '';
  #epoch = '';
  #generation = '';
  #nextPosition = '';
  #subscriptionId = '';
  #queue: PeerBatch[] = [];
  #processing: Promise<void> = Promise.resolve();
  #appendChain: Promise<unknown> = Promise.resolve();
  #uncertain: { operationId: string } | null = null;
  #reconnecting = false;
  /** Notifications received while a chats.follow call is in flight. */
  #early: Array<{ kind: 'batch'; n: ChatBatchNotification } | { kind: 'break'; n: ChatBreakNotification } | { kind: 'error'; n: ChatErrorNotification }> | null = null;
  #terminal: Error | null = null;
  #stopped!: Promise<void>;
  #resolveStopped!: () => void;
  #rejectStopped!: (err: Error) => void;

  constructor(options: CoordinatorOptions) {
    this.#opts = { callTimeoutMs: 10_000, ...options };
    this.#stopped = new Promise((res, rej) => {
      this.#resolveStopped = res;
      this.#rejectStopped = rej;
    });
    this.#stopped.catch(() => {});
  }

  get state(): CoordinatorState {
    return this.#state;
  }
  /** The agent this coordinator speaks for. */
  get agentId(): string {
    return this.#agentId;
  }
  /** This coordinator's outbound stream. */
  get streamId(): string {
    return this.#streamId;
  }
  get peerStreamId(): string {
    return this.#peerStreamId;
  }
  get epoch(): string {
    return this.#epoch;
  }
  /** The operationId of an append of unknown outcome, while paused. */
  get uncertainOperationId(): string | null {
    return this.#uncertain?.operationId ?? null;
  }
  /** Resolves on `stop()`, rejects with `FencedError` or `ContinuityBreakError` when it had to stop. */
  get done(): Promise<void> {
    return this.#stopped;
  }

  /** Listen to an event; returns a function that removes the listener. */
  on<E extends keyof CoordinatorEvents>(event: E, listener: Listener<CoordinatorEvents[E]>): () => void {
    return this.#listeners.on(event, listener);
  }

  #setState(state: CoordinatorState, extra: { error?: Error; operationId?: string } = {}): void {
    if (state === this.#state) return;
    const previous = this.#state;
    this.#state = state;
    this.#listeners.emit('state', { state, previous, ...extra });
  }

  // ---- lifecycle ------------------------------------------------------------------------

  /** Connect, claim the outbound stream, and follow the chat from the stored cursor. */
  async start(): Promise<void> {
    if (this.#state !== 'idle') throw new YelloClientError('BAD_STATE', `start() in state ${this.#state}`);
    this.#setState('starting');
    try {
      const client = await this.#connect();
      const agentId = client.session.agentId;
      if (client.session.role !== 'agent' || !agentId) throw new YelloClientError('BAD_TOKEN', 'a coordinator needs an agent token');
      this.#agentId = agentId;
      const { chat } = await client.call('chats.get', { chatId: this.#opts.chatId });
      const peer = chat.agentAId === agentId ? chat.agentBId : chat.agentAId;
      this.#streamId = `${chat.id}:${agentId}`;
      this.#peerStreamId = `${chat.id}:${peer}`;
      const claim = await client.call('streams.claim', {
        streamId: this.#streamId,
        replace: this.#opts.replace === true,
        ...(this.#opts.reason !== undefined ? { reason: this.#opts.reason } : {}),
      });
      this.#token = claim.coordinatorToken;
      this.#epoch = claim.epoch;
      this.#generation = claim.generation;
      this.#nextPosition = claim.nextPosition;
      await this.#follow(client);
      // Something that arrived with the follow's answer (a break, a line over the cap) may
      // already have stopped it: terminal states are never overwritten.
      if (!this.#isTerminal()) this.#setState('running');
    } catch (err) {
      if (this.#token && this.#client?.connected) {
        // Do not leave a claim behind that would make the next start WRITER_ACTIVE.
        await this.#client.call('streams.release', { streamId: this.#streamId, coordinatorToken: this.#token }).catch(() => {});
      }
      if (err instanceof ContinuityBreakError || err instanceof FencedError) {
        this.#fail(err);
        throw err;
      }
      this.#client?.close();
      this.#setState('stopped', { error: err as Error });
      throw err;
    }
  }

  /** Stop following, release the stream (unless fenced), close the connection. */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    if (this.#state === 'stopped') return;
    const client = this.#client;
    const wasOwner = this.#state !== 'fenced';
    this.#setState('stopped');
    await this.#processing.catch(() => {});
    if (client?.connected) {
      if (this.#subscriptionId) await client.call('chats.unfollow', { subscriptionId: this.#subscriptionId }).catch(() => {});
      if (wasOwner && options.release !== false && this.#token) {
        await client.call('streams.release', { streamId: this.#streamId, coordinatorToken: this.#token }).catch(() => {});
      }
      client.close();
    }
    if (this.#terminal) this.#rejectStopped(this.#terminal);
    else this.#resolveStopped();
  }

  async #connect(): Promise<YelloClient> {
    const client = await YelloClient.connect({
      token: this.#opts.token,
      callTimeoutMs: this.#opts.callTimeoutMs,
      clientName: 'yello-coordinator',
      ...(this.#opts.socketPath !== undefined ? { socketPath: this.#opts.socketPath } : {}),
      ...(this.#opts.maxInboundLineBytes !== undefined ? { maxInboundLineBytes: this.#opts.maxInboundLineBytes } : {}),
      ...(this.#opts.verifySocket !== undefined ? { verifySocket: this.#opts.verifySocket } : {}),
    });
    this.#client = client;
    client.on('chats.batch', (b) => this.#onBatch(b));
    client.on('chats.break', (b) => this.#onBreak(b));
    client.on('chats.error', (e) => this.#onSubscriptionError(e));
    client.on('disconnected', (err) => {
      if (this.#client !== client) return;
      // Re-following would bring the same over-size line again, forever: a human raises the cap.
      if (err instanceof LineTooLargeError) this.#fail(err);
      else void this.#reconnectLoop();
    });
    return client;
  }

  async #follow(client: YelloClient): Promise<void> {
    const cursor = await this.#opts.cursorStore.load(this.#opts.chatId);
    // Batches can arrive in the same read as the follow's answer, before we know the
    // subscription id: hold them instead of dropping them, then replay the ones that are ours.
    this.#early = [];
    let res;
    try {
      // 'end' is the daemon's default: leave it out rather than send it.
      const start = cursor ? { cursor } : this.#opts.start === 'end' ? {} : { from: 'acknowledged' as const };
      res = await client.call('chats.follow', { chatId: this.#opts.chatId, ...start });
    } finally {
      const early = this.#early;
      this.#early = null;
      if (res) {
        this.#subscriptionId = res.subscriptionId;
        // Queued ahead of every batch, so a batch's later cursor is never overwritten by it.
        const initial = res.cursor;
        if (!cursor) this.#processing = this.#processing.then(() => this.#opts.cursorStore.save(this.#opts.chatId, initial));
        for (const e of early ?? []) {
          if (e.kind === 'batch') this.#onBatch(e.n);
          else if (e.kind === 'break') this.#onBreak(e.n);
          else this.#onSubscriptionError(e.n);
        }
      }
    }
  }

  /** After a loss: dial again with backoff, check ownership, re-follow from the saved cursor. */
  async #reconnectLoop(): Promise<void> {
    if (this.#isTerminal() || this.#reconnecting) return;
    this.#reconnecting = true;
    try {
      await this.#reconnectAttempts();
    } finally {
      this.#reconnecting = false;
    }
  }

  async #reconnectAttempts(): Promise<void> {
    const wasPaused = this.#state === 'paused';
    if (!wasPaused) this.#setState('reconnecting');
    this.#queue = [];
    this.#subscriptionId = '';
    const min = this.#opts.reconnect?.minDelayMs ?? 50;
    const max = this.#opts.reconnect?.maxDelayMs ?? 2000;
    for (let attempt = 0; !this.#isTerminal(); attempt++) {
      await new Promise((r) => setTimeout(r, Math.min(max, min * 2 ** attempt)));
      if (this.#isTerminal()) return;
      let client: YelloClient;
      try {
        // Whatever was being presented finishes (and saves its cursor) before we re-follow.
        await this.#processing.catch(() => {});
        client = await this.#connect();
        if (this.#isTerminal()) {
          client.close();
          return;
        }
      } catch (err) {
        if (err instanceof ConnectionLostError) continue;
        this.#fail(err as Error);
        return;
      }
      try {
        await this.#checkOwnership(client);
        await this.#follow(client);
        if (this.#isTerminal()) {
          client.close();
          return;
        }
        this.#setState(this.#uncertain ? 'paused' : 'running');
        return;
      } catch (err) {
        if (err instanceof ConnectionLostError) continue;
        this.#fail(err as Error);
        return;
      }
    }
  }

  #isTerminal(): boolean {
    return this.#state === 'stopped' || this.#state === 'fenced' || this.#state === 'needs-intervention';
  }

  /** Terminal failure: fenced, or a continuity break that needs a human. */
  #fail(err: Error): void {
    if (this.#isTerminal()) return;
    this.#terminal = err;
    this.#setState(err instanceof FencedError ? 'fenced' : 'needs-intervention', { error: err });
    this.#listeners.emit('error', err);
    const client = this.#client;
    if (client?.connected && this.#subscriptionId) void client.call('chats.unfollow', { subscriptionId: this.#subscriptionId }).catch(() => {});
    // Let an append already on the wire get its real answer (FENCED, say) before closing,
    // rather than turning it into an outcome-unknown connection loss.
    void this.#appendChain.finally(() => client?.close());
    this.#rejectStopped(err);
  }

  // ---- reading --------------------------------------------------------------------------

  #onBatch(batch: ChatBatchNotification): void {
    if (this.#early) {
      this.#early.push({ kind: 'batch', n: batch });
      return;
    }
    if (batch.subscriptionId !== this.#subscriptionId || this.#isTerminal()) return;
    this.#queue.push(batch);
    this.#processing = this.#processing.then(() => this.#drain()).catch((err: Error) => this.#fail(err));
  }

  /** The daemon ended the subscription with an error (corrupt data, say): a person must look. */
  #onSubscriptionError(e: ChatErrorNotification): void {
    if (this.#early) {
      this.#early.push({ kind: 'error', n: e });
      return;
    }
    if (e.subscriptionId !== this.#subscriptionId) return;
    this.#fail(remoteError(e.error));
  }

  #onBreak(b: ChatBreakNotification): void {
    if (this.#early) {
      this.#early.push({ kind: 'break', n: b });
      return;
    }
    if (b.subscriptionId !== this.#subscriptionId) return;
    this.#fail(continuityBreakError(b.reason, b.streamId, b.expected, b.actual, `subscription ended: ${b.reason} on ${b.streamId}`));
  }

  async #drain(): Promise<void> {
    for (;;) {
      if (this.#isTerminal()) return;
      const own = this.#queue[0]?.streamId === this.#streamId ? this.#queue.shift() : undefined;
      if (own) {
        // A fence with a newer epoch in our own stream: we were replaced.
        for (const r of own.records) {
          if (r.wrapper.type === 'chat.writer-fence' && BigInt(r.wrapper.fence.epoch) > BigInt(this.#epoch || '0')) {
            this.#fail(fencedError(this.#streamId, r.wrapper.fence.epoch, `replaced by epoch ${r.wrapper.fence.epoch}`));
            return;
          }
        }
        await this.#opts.cursorStore.save(this.#opts.chatId, own.cursor);
        continue;
      }
      const batch = this.#queue.shift();
      if (!batch) return;
      const client = this.#client;
      if (!client) return;
      try {
        await this.#checkOwnership(client, batch);
      } catch (err) {
        if (err instanceof TimeoutError && this.#client === client && client.connected) {
          this.#queue.unshift(batch); // not presented: check again, never skip it
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        if (err instanceof ConnectionLostError || err instanceof TimeoutError) return; // the reconnect re-delivers from the saved cursor
        this.#fail(err as Error);
        return;
      }
      try {
        await this.#opts.adapter.present(batch);
      } catch (err) {
        this.#fail(new YelloClientError('ADAPTER_FAILED', `the adapter failed to present batch ${batch.fromPosition}..${batch.nextPosition}: ${(err as Error).message}`, { cause: err }));
        return;
      }
      await this.#opts.cursorStore.save(this.#opts.chatId, batch.cursor);
      this.#listeners.emit('presented', batch);
    }
  }

  /** Our token is still current and both generations are the ones we read. */
  async #checkOwnership(client: YelloClient, batch?: PeerBatch): Promise<void> {
    const { streams } = await client.call('chats.get', { chatId: this.#opts.chatId });
    const own = streams.find((s: StreamState) => s.streamId === this.#streamId)!;
    const peer = streams.find((s: StreamState) => s.streamId === this.#peerStreamId)!;
    if (own.writer.epoch !== this.#epoch || !own.writer.active) {
      throw fencedError(this.#streamId, own.writer.epoch, `stream ${this.#streamId} is now held by epoch ${own.writer.epoch}`);
    }
    if (own.generation !== this.#generation) {
      throw continuityBreakError('GENERATION_CHANGED', own.streamId, this.#generation, own.generation, 'own stream generation changed');
    }
    if (batch && peer.generation !== batch.generation) {
      throw continuityBreakError('GENERATION_CHANGED', peer.streamId, batch.generation, peer.generation, 'peer stream generation changed');
    }
  }

  // ---- writing --------------------------------------------------------------------------

  /** Send a message. Never acknowledges anything. */
  send(text: string, options: { messageId?: string } = {}): Promise<AppendResult> {
    return this.#append([{ type: 'chat.message', messageId: options.messageId ?? randomUUID(), content: text }]);
  }

  /** Acknowledge a presented peer batch (appends a receipt). */
  ack(batch: PeerBatch): Promise<AppendResult> {
    return this.#append([receiptFor(batch)]);
  }

  /** Reply and acknowledge `ack` in one atomic append. */
  reply(text: string, options: { ack: PeerBatch; messageId?: string }): Promise<AppendResult> {
    return this.#append([{ type: 'chat.message', messageId: options.messageId ?? randomUUID(), content: text }, receiptFor(options.ack)]);
  }

  #append(records: ParamsIn<'streams.append'>['records']): Promise<AppendResult> {
    const run = async (): Promise<AppendResult> => {
      if (this.#terminal) throw this.#terminal;
      if (this.#uncertain) throw new CoordinatorPausedError(this.#uncertain.operationId);
      if (this.#state !== 'running') throw new YelloClientError('BAD_STATE', `cannot append in state ${this.#state}`, { transient: this.#state === 'reconnecting' });
      const client = this.#client!;
      const operationId = `op-${randomUUID()}`;
      try {
        const result = await client.call('streams.append', {
          streamId: this.#streamId, coordinatorToken: this.#token, generation: this.#generation,
          expectedPosition: this.#nextPosition, operationId, records,
        });
        this.#nextPosition = result.nextPosition;
        return result;
      } catch (err) {
        if (isOutcomeUnknown(err)) {
          this.#uncertain = { operationId };
          this.#setState('paused', { error: err as Error, operationId });
          await this.#opts.adapter.uncertain?.({ operationId, error: err as Error });
        } else if (err instanceof FencedError) {
          this.#fail(err);
        }
        throw err;
      }
    };
    const p = this.#appendChain.then(run, run);
    this.#appendChain = p.catch(() => {});
    return p;
  }

  /**
   * After an append of unknown outcome: ask the daemon (`operations.get`) whether it committed,
   * tell the adapter, and resume. Nothing is resent; an uncommitted message is the caller's to
   * send again if it still wants to.
   */
  async resolveUncertain(): Promise<UncertainOutcome> {
    const pending = this.#uncertain;
    if (!pending) throw new YelloClientError('BAD_STATE', 'no append of unknown outcome');
    for (;;) {
      if (this.#state === 'stopped' || this.#state === 'needs-intervention' || this.#state === 'fenced') throw this.#terminal ?? new YelloClientError('BAD_STATE', `coordinator is ${this.#state}`);
      const client = this.#client;
      if (!client?.connected) {
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      let operation: OperationInfo;
      try {
        operation = await client.call('operations.get', { streamId: this.#streamId, operationId: pending.operationId });
      } catch (err) {
        if (err instanceof ConnectionLostError || err instanceof TimeoutError) continue;
        throw err;
      }
      if (operation.state === 'pending') {
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      const state = await client.call('streams.get', { streamId: this.#streamId });
      if (state.writer.epoch !== this.#epoch || !state.writer.active) {
        const err = fencedError(this.#streamId, state.writer.epoch, 'replaced while paused');
        this.#fail(err);
        throw err;
      }
      const outcome: UncertainOutcome = { operationId: pending.operationId, committed: operation.state === 'committed', operation };
      this.#nextPosition = state.nextPosition;
      await this.#opts.adapter.resolved?.(outcome);
      this.#uncertain = null;
      this.#setState('running');
      return outcome;
    }
  }
}

/**
 * Whether an append's failure leaves its outcome unknown: the connection died or timed out
 * after the request was written, or the daemon's synced write failed (it may be on disk).
 */
function isOutcomeUnknown(err: unknown): boolean {
  if (err instanceof ConnectionLostError) return err.outcomeUnknown;
  if (err instanceof TimeoutError) return true;
  return err instanceof StorageFailureError && err.data.outcome === 'unknown';
}

function receiptFor(batch: PeerBatch) {
  return { type: 'chat.receipt' as const, peerStreamId: batch.streamId, peerGeneration: batch.generation, nextPosition: batch.nextPosition, batchId: batch.batchId };
}
