import type { AppendResult } from '../shared/types.js';
import { ChatWriter } from './chat-writer.js';
import { Conversation } from './conversation.js';
import type { CoordinatorEvents, CoordinatorOptions, CoordinatorState, PeerBatch, UncertainOutcome } from './coordinator-types.js';
import { ContinuityBreakError, FencedError, YelloClientError } from './errors.js';
import { Listeners, type Listener } from './listeners.js';
import { isOutcomeUnknown } from './uncertain.js';
import { YelloClient } from './yello-client.js';

/** What a coordinator is doing; `state` adds `reconnecting` and `paused` from its client and writer. */
type Phase = 'idle' | 'starting' | 'running' | 'fenced' | 'needs-intervention' | 'stopped';

/**
 * Drives one agent in one chat (docs/protocol.md §8), as a {@link Conversation} (reading) and a
 * {@link ChatWriter} (writing) on one connection: presents each peer batch that holds a message
 * to the native adapter, one at a time, saving the cursor after each; appends messages and
 * receipts only when asked. It claims the agent's stream on its first write, never resends an
 * append of unknown outcome, never skips, and rides through connection losses and daemon restarts.
 */
export class Coordinator {
  readonly #opts: CoordinatorOptions;
  readonly #listeners = new Listeners<CoordinatorEvents>();
  #phase: Phase = 'idle';
  #state: CoordinatorState = 'idle';
  #failure: Error | null = null;
  #client: YelloClient | null = null;
  #conversation: Conversation | null = null;
  #writer: ChatWriter | null = null;
  #loop: Promise<void> = Promise.resolve();
  readonly #stopped: Promise<void>;
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
  /** The agent this coordinator speaks for ('' before `start()`). */
  get agentId(): string {
    return this.#conversation?.agentId ?? '';
  }
  /** This coordinator's outbound stream ('' before `start()`). */
  get streamId(): string {
    return this.#conversation?.ownStreamId ?? '';
  }
  get peerStreamId(): string {
    return this.#conversation?.peerStreamId ?? '';
  }
  /** The epoch of its claim: '' until the first write claims the stream. */
  get epoch(): string {
    return this.#writer?.epoch ?? '';
  }
  /** The operationId of an append of unknown outcome, while paused (and after a stop, until settled). */
  get uncertainOperationId(): string | null {
    return this.#writer?.uncertainOperationId ?? null;
  }
  /** The reading side, once started (its `peerAcknowledged`, `cursor`, events). */
  get conversation(): Conversation | null {
    return this.#conversation;
  }
  /** Resolves on `stop()`, rejects with `FencedError` or `ContinuityBreakError` when it had to stop. */
  get done(): Promise<void> {
    return this.#stopped;
  }

  /** Listen to an event; returns a function that removes the listener. */
  on<E extends keyof CoordinatorEvents>(event: E, listener: Listener<CoordinatorEvents[E]>): () => void {
    return this.#listeners.on(event, listener);
  }

  /** The public state follows the phase, the connection and the writer's pause; listeners hear of changes. */
  #update(detail: { error?: Error; operationId?: string } = {}): void {
    const previous = this.#state;
    const paused = this.#writer?.state === 'paused';
    let state: CoordinatorState = this.#phase;
    if (this.#phase === 'running') state = paused ? 'paused' : this.#client?.connected === false ? 'reconnecting' : 'running';
    this.#state = state;
    if (state !== previous) this.#listeners.emit('state', { state, previous, ...detail });
  }

  #enter(phase: Phase, detail: { error?: Error; operationId?: string } = {}): void {
    this.#phase = phase;
    this.#update(detail);
  }

  /** A check after an await: `stop()` may have run meanwhile, which narrowing on the field would rule out. */
  #isStopped(): boolean {
    return this.#phase === 'stopped';
  }

  // ---- lifecycle ------------------------------------------------------------------------

  /** Connect and follow the chat from the stored cursor (or per option `start`). Claims nothing. */
  async start(): Promise<void> {
    if (this.#phase !== 'idle') throw new YelloClientError('BAD_STATE', `start() in state ${this.state}`);
    this.#enter('starting');
    const { token, chatId, callTimeoutMs, socketPath, maxInboundLineBytes, verifySocket, cursorStore } = this.#opts;
    try {
      const client = await YelloClient.connect({
        token,
        callTimeoutMs,
        socketPath,
        maxInboundLineBytes,
        verifySocket,
        clientName: 'yello-coordinator',
        reconnect: { minDelayMs: 50, maxDelayMs: 2000, ...this.#opts.reconnect },
      });
      this.#client = client;
      if (this.#isStopped()) {
        client.close(); // stopped while connecting
        return;
      }
      if (client.session.role !== 'agent') throw new YelloClientError('BAD_TOKEN', 'a coordinator needs an agent token');
      const cursor = await cursorStore.load(chatId);
      const conversation = await Conversation.open(client, {
        chatId,
        start: this.#opts.start ?? 'acknowledged',
        ...(cursor ? { cursor } : {}),
      });
      this.#conversation = conversation;
      if (!cursor) await cursorStore.save(chatId, conversation.cursor);
      this.#writer = this.#makeWriter(client, conversation);
      client.on('disconnected', () => {
        this.#update();
      });
      client.on('reconnected', () => {
        this.#update();
      });
      conversation.on('peer-acknowledged', (a) => {
        this.#listeners.emit('peer-acknowledged', a);
      });
      conversation.on('peer-writer', (f) => {
        this.#listeners.emit('peer-writer', f);
      });
      // Replaced: stop at once, also in the middle of a presentation (a break first presents what came before it).
      conversation.on('replaced', (err) => {
        this.#fail(err);
      });
      if (this.#isStopped()) {
        await conversation.close();
        client.close();
        return;
      }
      this.#enter('running');
      this.#loop = this.#present(conversation);
    } catch (err) {
      if (err instanceof ContinuityBreakError || err instanceof FencedError) {
        this.#fail(err);
        throw err;
      }
      this.#client?.close();
      if (!this.#isStopped()) this.#enter('stopped', { error: err as Error });
      this.#resolveStopped();
      throw err;
    }
  }

  #makeWriter(client: YelloClient, conversation: Conversation): ChatWriter {
    const writer = new ChatWriter(client, {
      chatId: this.#opts.chatId,
      replace: this.#opts.replace ?? 'if-abandoned',
      conversation,
      ...(this.#opts.reason !== undefined ? { reason: this.#opts.reason } : {}),
    });
    writer.on('uncertain', (u) => {
      this.#update({ error: u.error, operationId: u.operationId });
    });
    writer.on('unsettled', (u) => {
      this.#listeners.emit('unsettled', u);
    });
    writer.on('fenced', (err) => {
      this.#fail(err);
    });
    return writer;
  }

  /** One batch at a time: present it, then save the cursor after it. */
  async #present(conversation: Conversation): Promise<void> {
    const { adapter, cursorStore, chatId } = this.#opts;
    for (;;) {
      let batch: PeerBatch | null;
      try {
        batch = await conversation.next();
      } catch (err) {
        this.#fail(err as Error);
        return;
      }
      // Replaced or broken while it was queued: a coordinator that stopped for a person presents nothing more.
      if (!batch || this.#phase !== 'running' || conversation.failure) {
        if (conversation.failure) this.#fail(conversation.failure);
        return;
      }
      try {
        await adapter.present(batch);
      } catch (err) {
        const message = `the adapter failed to present batch ${batch.fromPosition}..${batch.nextPosition}: ${(err as Error).message}`;
        this.#fail(new YelloClientError('ADAPTER_FAILED', message, { cause: err }));
        return;
      }
      try {
        await cursorStore.save(chatId, conversation.cursor);
      } catch (err) {
        // Not saved: a later save covers it, and a restart before that shows the batch again (never skips it).
        this.#listeners.emit('error', err as Error);
      }
      this.#listeners.emit('presented', batch);
    }
  }

  /**
   * Stopped for a person: fenced, a continuity break, corrupt data, a failing adapter. It stops
   * reading and closes its connection (so its claim is abandoned, not held); `stop()` still
   * releases the claim.
   */
  #fail(err: Error): void {
    if (this.#phase === 'fenced' || this.#phase === 'needs-intervention' || this.#phase === 'stopped') return;
    this.#failure = err;
    this.#enter(err instanceof FencedError ? 'fenced' : 'needs-intervention', { error: err });
    this.#listeners.emit('error', err);
    this.#rejectStopped(err);
    const client = this.#client;
    void this.#conversation?.close();
    // Let an append already on the wire get its real answer before closing the connection.
    void (this.#writer?.settled() ?? Promise.resolve()).finally(() => client?.close());
  }

  /**
   * Stop reading, release the claim (unless fenced, or `release: false`), close the connection.
   * It releases also after a break or a stop for intervention, over a new connection if needed.
   */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    if (this.#phase === 'stopped') return;
    this.#enter('stopped');
    await this.#conversation?.close();
    await this.#loop;
    if (options.release !== false) await this.#writer?.release().catch(() => {});
    this.#client?.close();
    if (this.#failure) this.#rejectStopped(this.#failure);
    else this.#resolveStopped();
  }

  // ---- writing ------------------------------------------------------------------------

  /**
   * Claim the agent's stream now instead of at the first write (option `replace` decides a
   * takeover): from then on a claim by anyone else is a replacement, and the coordinator stops
   * presenting. For a coordinator whose agent appends through another process under the same
   * claim: it returns the token to hand over (see `yello attach`).
   */
  async claim(): Promise<{ epoch: string; coordinatorToken: string }> {
    if (this.#failure) throw this.#failure;
    const writer = this.#writer;
    if (this.#phase !== 'running' || !writer) throw new YelloClientError('BAD_STATE', `cannot claim in state ${this.state}`);
    return writer.claim();
  }

  /** Send a message. Never acknowledges anything. */
  send(text: string, options: { messageId?: string } = {}): Promise<AppendResult> {
    return this.#write((w) => w.send(text, options));
  }

  /** Acknowledge a presented peer batch (appends a receipt). */
  ack(batch: PeerBatch): Promise<AppendResult> {
    return this.#write((w) => w.ack(batch));
  }

  /** Reply and acknowledge `ack` in one atomic append. */
  reply(text: string, options: { ack: PeerBatch; messageId?: string }): Promise<AppendResult> {
    return this.#write((w) => w.send(text, options));
  }

  async #write(append: (writer: ChatWriter) => Promise<AppendResult>): Promise<AppendResult> {
    if (this.#failure) throw this.#failure;
    const writer = this.#writer;
    if (this.#phase !== 'running' || !writer) throw new YelloClientError('BAD_STATE', `cannot append in state ${this.state}`);
    try {
      return await append(writer);
    } catch (err) {
      if (isOutcomeUnknown(err) && writer.uncertainOperationId)
        await this.#opts.adapter.uncertain?.({ operationId: writer.uncertainOperationId, error: err as Error });
      throw err;
    }
  }

  /**
   * After an append of unknown outcome: ask the daemon (`operations.get`) whether it committed,
   * tell the adapter, and resume. Nothing is resent; an uncommitted message is the caller's to
   * send again if it still wants to.
   */
  async resolveUncertain(): Promise<UncertainOutcome> {
    const writer = this.#writer;
    if (!writer || writer.uncertainOperationId === null) throw new YelloClientError('BAD_STATE', 'no append of unknown outcome');
    if (this.#failure) throw this.#failure;
    const outcome = await writer.resolveUncertain();
    await this.#opts.adapter.resolved?.(outcome);
    this.#update();
    return outcome;
  }
}
