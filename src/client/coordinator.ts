import type { AppendResult } from '../shared/types.js';
import { Backoff } from './backoff.js';
import { clientOf, failureOf, isTerminal, stateOf, uncertainOf, type Phase } from './coordinator-phase.js';
import type { CoordinatorEvents, CoordinatorOptions, CoordinatorState, PeerBatch, UncertainOutcome } from './coordinator-types.js';
import {
  ConnectionLostError,
  ContinuityBreakError,
  CoordinatorPausedError,
  FencedError,
  LineTooLargeError,
  YelloClientError,
} from './errors.js';
import { Listeners, type Listener } from './listeners.js';
import { Outbox, type WritableStream } from './outbox.js';
import { PeerFeed, checkOwnership } from './peer-feed.js';
import { YelloClient } from './yello-client.js';

/** The outbound stream this coordinator claimed, and where its next append goes. */
interface Ownership extends WritableStream {
  agentId: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Drives one agent in one chat (docs/protocol.md §8): claims the outbound stream, follows the chat
 * from a stored compound cursor, presents peer batches to the native adapter after checking
 * that it still owns its stream and both generations are current, and appends messages and
 * receipts with fencing. It never resends an append of unknown outcome and never skips.
 *
 * A state machine: `#phase` (coordinator-phase.ts) says what it is doing, with the facts that
 * hold only then, and changes only through `#enter`, which emits the `state` event.
 */
export class Coordinator {
  readonly #opts: CoordinatorOptions;
  readonly #listeners = new Listeners<CoordinatorEvents>();
  #phase: Phase = { type: 'idle' };
  readonly #own: Ownership = { agentId: '', streamId: '', peerStreamId: '', token: '', epoch: '', generation: '', nextPosition: '' };
  readonly #feed: PeerFeed;
  readonly #outbox: Outbox;
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
    this.#feed = new PeerFeed({
      options: this.#opts,
      client: () => clientOf(this.#phase),
      stopped: () => isTerminal(this.#phase),
      own: () => this.#own,
      fail: (err) => {
        this.#fail(err);
      },
      presented: (batch) => {
        this.#listeners.emit('presented', batch);
      },
    });
    this.#outbox = new Outbox({
      adapter: this.#opts.adapter,
      own: () => this.#own,
      appendVia: () => this.#appendVia(),
      uncertain: () => uncertainOf(this.#phase),
      askVia: () => this.#askVia(),
      pause: (operationId, error) => {
        this.#pause(operationId, error);
      },
      resume: () => {
        this.#resume();
      },
      fail: (err) => {
        this.#fail(err);
      },
    });
  }

  get state(): CoordinatorState {
    return stateOf(this.#phase);
  }
  /** The agent this coordinator speaks for. */
  get agentId(): string {
    return this.#own.agentId;
  }
  /** This coordinator's outbound stream. */
  get streamId(): string {
    return this.#own.streamId;
  }
  get peerStreamId(): string {
    return this.#own.peerStreamId;
  }
  get epoch(): string {
    return this.#own.epoch;
  }
  /** The operationId of an append of unknown outcome, while paused. */
  get uncertainOperationId(): string | null {
    return uncertainOf(this.#phase);
  }
  /** Resolves on `stop()`, rejects with `FencedError` or `ContinuityBreakError` when it had to stop. */
  get done(): Promise<void> {
    return this.#stopped;
  }

  /** Listen to an event; returns a function that removes the listener. */
  on<E extends keyof CoordinatorEvents>(event: E, listener: Listener<CoordinatorEvents[E]>): () => void {
    return this.#listeners.on(event, listener);
  }

  /** Every phase change goes through here; listeners hear of changes of the public state. */
  #enter(next: Phase, detail: { error?: Error; operationId?: string } = {}): void {
    const previous = stateOf(this.#phase);
    this.#phase = next;
    const state = stateOf(next);
    if (state !== previous) this.#listeners.emit('state', { state, previous, ...detail });
  }

  /** The phase as it is now (after an await, not as a check before it narrowed it). */
  #now(): Phase {
    return this.#phase;
  }

  // ---- lifecycle ------------------------------------------------------------------------

  /** Connect, claim the outbound stream, and follow the chat from the stored cursor. */
  async start(): Promise<void> {
    if (this.#phase.type !== 'idle') throw new YelloClientError('BAD_STATE', `start() in state ${this.state}`);
    this.#enter({ type: 'starting', client: null });
    try {
      const client = await this.#connect();
      if (this.#now().type !== 'starting') {
        client.close(); // stopped while connecting
        return;
      }
      this.#enter({ type: 'starting', client });
      const agentId = client.session.agentId;
      if (client.session.role !== 'agent' || !agentId) throw new YelloClientError('BAD_TOKEN', 'a coordinator needs an agent token');
      this.#own.agentId = agentId;
      const { chat } = await client.call('chats.get', { chatId: this.#opts.chatId });
      const peer = chat.agentAId === agentId ? chat.agentBId : chat.agentAId;
      const streamId = `${chat.id}:${agentId}`;
      Object.assign(this.#own, { streamId, peerStreamId: `${chat.id}:${peer}` });
      const claim = await client.call('streams.claim', {
        streamId,
        replace: this.#opts.replace === true,
        ...(this.#opts.reason !== undefined ? { reason: this.#opts.reason } : {}),
      });
      Object.assign(this.#own, {
        token: claim.coordinatorToken,
        epoch: claim.epoch,
        generation: claim.generation,
        nextPosition: claim.nextPosition,
      });
      await this.#feed.follow(client);
      // Something that arrived with the follow's answer (a break, a line over the cap) may
      // already have stopped it: a terminal phase is never left.
      if (this.#now().type === 'starting') this.#enter({ type: 'running', client });
    } catch (err) {
      const client = clientOf(this.#phase);
      if (this.#own.token && client?.connected) {
        // Do not leave a claim behind that would make the next start WRITER_ACTIVE.
        await client.call('streams.release', { streamId: this.#own.streamId, coordinatorToken: this.#own.token }).catch(() => {});
      }
      if (err instanceof ContinuityBreakError || err instanceof FencedError) {
        this.#fail(err);
        throw err;
      }
      client?.close();
      this.#enter({ type: 'stopped', terminal: failureOf(this.#phase), operationId: null }, { error: err as Error });
      throw err;
    }
  }

  /** Stop following, release the stream (unless fenced), close the connection. */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    const from = this.#phase;
    if (from.type === 'stopped') return;
    const client = clientOf(from);
    this.#enter({ type: 'stopped', terminal: failureOf(from), operationId: uncertainOf(from) });
    await this.#feed.settled();
    if (client?.connected) {
      const subscriptionId = this.#feed.subscriptionId;
      if (subscriptionId) await client.call('chats.unfollow', { subscriptionId }).catch(() => {});
      if (from.type !== 'fenced' && options.release !== false && this.#own.token) {
        await client.call('streams.release', { streamId: this.#own.streamId, coordinatorToken: this.#own.token }).catch(() => {});
      }
      client.close();
    }
    const failure = failureOf(from);
    if (failure) this.#rejectStopped(failure);
    else this.#resolveStopped();
  }

  async #connect(): Promise<YelloClient> {
    const { token, callTimeoutMs, socketPath, maxInboundLineBytes, verifySocket } = this.#opts;
    const client = await YelloClient.connect({
      token,
      callTimeoutMs,
      socketPath,
      maxInboundLineBytes,
      verifySocket,
      clientName: 'yello-coordinator',
    });
    client.on('chats.batch', (b) => {
      this.#feed.onBatch(b);
    });
    client.on('chats.break', (b) => {
      this.#feed.onBreak(b);
    });
    client.on('chats.error', (e) => {
      this.#feed.onError(e);
    });
    client.on('disconnected', (err) => {
      if (clientOf(this.#phase) !== client) return;
      // Re-following would bring the same over-size line again, forever: a human raises the cap.
      if (err instanceof LineTooLargeError) this.#fail(err);
      else void this.#reconnect();
    });
    return client;
  }

  /** Terminal failure: fenced, or a continuity break (or anything unexpected) that needs a human. */
  #fail(err: Error): void {
    const from = this.#phase;
    if (isTerminal(from)) return;
    const client = clientOf(from);
    this.#enter(
      { type: err instanceof FencedError ? 'fenced' : 'needs-intervention', error: err, client, operationId: uncertainOf(from) },
      { error: err },
    );
    this.#listeners.emit('error', err);
    const subscriptionId = this.#feed.subscriptionId;
    if (client?.connected && subscriptionId) void client.call('chats.unfollow', { subscriptionId }).catch(() => {});
    // Let an append already on the wire get its real answer (FENCED, say) before closing,
    // rather than turning it into an outcome-unknown connection loss.
    void this.#outbox.settled().finally(() => client?.close());
    this.#rejectStopped(err);
  }

  // ---- reconnecting ---------------------------------------------------------------------

  /** After a loss: dial again with backoff, check ownership, re-follow from the saved cursor. */
  async #reconnect(): Promise<void> {
    const from = this.#phase;
    // Only a live coordinator reconnects; a loss while starting fails start() instead.
    if (from.type !== 'running' && from.type !== 'paused') return;
    this.#feed.reset();
    this.#enter({ type: 'reconnecting', attempt: 0, client: null, operationId: uncertainOf(from) });
    const backoff = new Backoff({
      minDelayMs: this.#opts.reconnect?.minDelayMs ?? 50,
      maxDelayMs: this.#opts.reconnect?.maxDelayMs ?? 2000,
    });
    for (let step = backoff.next(); step; step = backoff.next()) {
      await sleep(step.delayMs);
      const outcome = await this.#redial(step.attempt).catch((err: unknown) => {
        if (err instanceof ConnectionLostError) return 'again';
        this.#fail(err as Error);
        return 'done';
      });
      if (outcome === 'done') return;
    }
  }

  /** One attempt: connect, check ownership, re-follow; then running (or paused) again. */
  async #redial(attempt: number): Promise<'done' | 'again'> {
    const phase = this.#now();
    if (phase.type !== 'reconnecting') return 'done';
    this.#enter({ ...phase, attempt, client: null });
    // Whatever was being presented finishes (and saves its cursor) before we re-follow.
    await this.#feed.settled();
    const client = await this.#connect();
    const candidate = this.#now();
    if (candidate.type !== 'reconnecting') {
      client.close(); // stopped meanwhile
      return 'done';
    }
    this.#enter({ ...candidate, client });
    await checkOwnership(client, this.#opts.chatId, this.#own);
    await this.#feed.follow(client);
    const now = this.#now();
    if (now.type !== 'reconnecting') client.close();
    else this.#enter(now.operationId !== null ? { type: 'paused', client, operationId: now.operationId } : { type: 'running', client });
    return 'done';
  }

  // ---- writing ------------------------------------------------------------------------

  /** Send a message. Never acknowledges anything. */
  send(text: string, options: { messageId?: string } = {}): Promise<AppendResult> {
    return this.#outbox.send(text, { messageId: options.messageId });
  }

  /** Acknowledge a presented peer batch (appends a receipt). */
  ack(batch: PeerBatch): Promise<AppendResult> {
    return this.#outbox.ack(batch);
  }

  /** Reply and acknowledge `ack` in one atomic append. */
  reply(text: string, options: { ack: PeerBatch; messageId?: string }): Promise<AppendResult> {
    return this.#outbox.send(text, options);
  }

  /**
   * After an append of unknown outcome: ask the daemon (`operations.get`) whether it committed,
   * tell the adapter, and resume. Nothing is resent; an uncommitted message is the caller's to
   * send again if it still wants to.
   */
  resolveUncertain(): Promise<UncertainOutcome> {
    return this.#outbox.resolve();
  }

  /** Whether an append may go now: only while running, never past a failure or a pause. */
  #appendVia(): YelloClient {
    const phase = this.#phase;
    const failure = failureOf(phase);
    if (failure) throw failure;
    const pending = uncertainOf(phase);
    if (pending !== null) throw new CoordinatorPausedError(pending);
    if (phase.type !== 'running')
      throw new YelloClientError('BAD_STATE', `cannot append in state ${this.state}`, { transient: phase.type === 'reconnecting' });
    return phase.client;
  }

  /** While paused, the live connection to ask with (null while it reconnects); throws once stopped. */
  #askVia(): YelloClient | null {
    const phase = this.#phase;
    if (isTerminal(phase)) throw failureOf(phase) ?? new YelloClientError('BAD_STATE', `coordinator is ${this.state}`);
    return phase.type === 'paused' && phase.client.connected ? phase.client : null;
  }

  /** An append's outcome became unknown: nothing is sent until `resolveUncertain()` settles it. */
  #pause(operationId: string, error: Error): void {
    const p = this.#phase;
    // The connection may already be gone (reconnecting), or the coordinator stopped meanwhile:
    // the operation is recorded either way, and a terminal phase stays terminal.
    const next: Phase =
      p.type === 'running'
        ? { type: 'paused', client: p.client, operationId }
        : p.type === 'reconnecting' || isTerminal(p)
          ? { ...p, operationId }
          : p;
    this.#enter(next, { error, operationId });
  }

  /** The pause is settled: running again, or (if the connection went meanwhile) reconnecting. */
  #resume(): void {
    const p = this.#phase;
    if (p.type === 'paused') this.#enter({ type: 'running', client: p.client });
    else if (p.type === 'reconnecting') this.#enter({ ...p, operationId: null });
  }
}
