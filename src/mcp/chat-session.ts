import {
  ContinuityBreakError,
  Coordinator,
  CoordinatorPausedError,
  FencedError,
  MemoryCursorStore,
  YelloClientError,
  type AppendResult,
  type Chat,
  type OperationInfo,
  type PeerBatch,
  type ReadBatch,
  type StreamState,
} from '../client/index.js';
import { continuityBreakError, fencedError } from '../client/errors.js';
import type { DaemonLink } from './daemon-link.js';
import type { McpLog } from './log.js';
import type { SessionState, SessionView } from './tool-schemas.js';
import { ToolFailure } from './tool-errors.js';

/** Options of a {@link ChatSession}. */
export interface ChatSessionOptions {
  token: string;
  socketPath: string;
  link: DaemonLink;
  /** Take the stream over from a live coordinator (the server's `--replace`). */
  replace: boolean;
  /** Start at the peer stream's retained start when the last receipt cannot be continued exactly. */
  resumeAfterBreak: boolean;
  callTimeoutMs?: number;
  /** How long a tool waits for a reconnecting coordinator, or for an uncertain append to be settled. */
  settleMs: number;
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
  log: McpLog;
  /** The peer wrote messages: a live batch of the peer stream with at least one message reached the coordinator. */
  onPeerWrote(info: { chatId: string; generation: string; nextPosition: string; messages: number }): void;
  /** The session stopped for good (fenced, continuity break, subscription error). */
  onStopped(info: { chatId: string; error: Error }): void;
}

/** What the agent was shown last and has not acknowledged, and where the next presentation starts. */
interface Position {
  generation: string;
  position: string;
}

/** An append whose outcome is unknown, and what it carried. */
interface PendingAppend {
  operationId: string;
  kind: 'send' | 'acknowledge' | 'reply';
  batch: ReadBatch | null;
}

/** Settles with the outcome of `p` unless `ms` pass first; then fails with `timeout()` (p keeps running). */
async function within<T>(p: Promise<T>, ms: number, timeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(() => {
            reject(timeout());
          }, ms)),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const big = (s: string) => BigInt(s);

/** The state of `streamId` among a chat's streams (`chats.get` returns both of the chat's). */
export function streamIn(streams: readonly StreamState[], streamId: string): StreamState {
  const stream = streams.find((s) => s.streamId === streamId);
  if (!stream) throw new Error(`chats.get returned no stream ${streamId}`);
  return stream;
}

/** A presented read batch in the shape the coordinator acknowledges. */
function asPeerBatch(b: ReadBatch): PeerBatch {
  return {
    subscriptionId: '',
    cursor: '',
    batchId: b.batchId,
    streamId: b.streamId,
    generation: b.generation,
    fromPosition: b.fromPosition,
    nextPosition: b.nextPosition,
    records: b.records,
  };
}

/**
 * One agent in one chat behind the MCP tools: a {@link Coordinator} holds the claim on the
 * agent's stream, follows the chat (for fencing, breaks, reconnects and "the peer wrote"), and
 * makes every append; this class turns that into pull-style presentation. `read_new` reads the
 * peer stream with `streams.read` from the last acknowledged position (its batch id is what the
 * receipt names) after checking that the claim and both generations are still current; the batch
 * is presented again until `acknowledge` (or `send` with `acknowledge`) appends its receipt.
 * Nothing is acknowledged implicitly and nothing of unknown outcome is resent.
 */
export class ChatSession {
  readonly chatId: string;
  readonly chat: Chat;
  readonly agentId: string;
  readonly streamId: string;
  readonly peerStreamId: string;
  readonly #opts: ChatSessionOptions;
  readonly #coordinator: Coordinator;
  #ownGeneration = '';
  #next: Position = { generation: '1', position: '0' };
  #presented: ReadBatch | null = null;
  /** The peer stream's end as the live follow last reported it. */
  #available: Position | null = null;
  #waiters = new Set<() => void>();
  #terminal: Error | null = null;
  #pending: PendingAppend | null = null;
  #resolving: Promise<{ committed: boolean; operation: OperationInfo }> | null = null;
  #lock: Promise<unknown> = Promise.resolve();

  private constructor(opts: ChatSessionOptions, chat: Chat, agentId: string) {
    this.#opts = opts;
    this.chat = chat;
    this.chatId = chat.id;
    this.agentId = agentId;
    const peer = chat.agentAId === agentId ? chat.agentBId : chat.agentAId;
    this.streamId = `${chat.id}:${agentId}`;
    this.peerStreamId = `${chat.id}:${peer}`;
    this.#coordinator = new Coordinator({
      token: opts.token,
      chatId: chat.id,
      socketPath: opts.socketPath,
      replace: opts.replace,
      reason: 'yello mcp',
      cursorStore: new MemoryCursorStore(),
      // The session reads from its own start position (#startPosition); the follow only wakes it.
      // After a break a person chose to pass, the daemon's resume policy would refuse it again.
      ...(opts.resumeAfterBreak ? { start: 'end' as const } : {}),
      ...(opts.callTimeoutMs !== undefined ? { callTimeoutMs: opts.callTimeoutMs } : {}),
      ...(opts.reconnect ? { reconnect: opts.reconnect } : {}),
      adapter: {
        present: (batch) => {
          this.#onLiveBatch(batch);
        },
      },
    });
    this.#coordinator.on('state', (e) => {
      if ((e.state === 'fenced' || e.state === 'needs-intervention') && !this.#terminal) {
        this.#terminal = e.error instanceof FencedError || e.error instanceof ContinuityBreakError ? e.error : this.#stoppedBy(e.error);
        this.#wake();
        this.#opts.onStopped({ chatId: this.chatId, error: this.#terminal });
      }
    });
  }

  /** A session ended by something other than a fence or a break: `chats.error` (stored data failed its check, a daemon bug). */
  #stoppedBy(error: Error | undefined): ToolFailure {
    const type = (error as YelloClientError | undefined)?.type ?? 'UNKNOWN';
    return new ToolFailure(
      'CHAT_STOPPED',
      `the daemon stopped delivering chat ${this.chatId} (${type}: ${error?.message ?? 'no detail'}); this server presents and sends nothing more in it`,
      "A person must look before the agent goes on: `yello status` (its integrity section) and the daemon's log. Then restart `yello mcp` (with --replace if the old claim is still held).",
      { ...((error as { data?: Record<string, unknown> } | undefined)?.data ?? {}), chatId: this.chatId, cause: type },
      { cause: error },
    );
  }

  /** Claim the agent's stream in `chatId` and find where presentation starts (the last receipt). */
  static async start(opts: ChatSessionOptions, chatId: string, agentId: string): Promise<ChatSession> {
    const { chat } = await opts.link.call('chats.get', { chatId });
    const session = new ChatSession(opts, chat, agentId);
    await session.#start();
    return session;
  }

  async #start(): Promise<void> {
    await this.#coordinator.start();
    try {
      const { streams } = await this.#opts.link.call('chats.get', { chatId: this.chatId });
      this.#ownGeneration = streamIn(streams, this.streamId).generation;
      this.#next = await this.#startPosition(streamIn(streams, this.peerStreamId));
      this.#opts.log.info({ chatId: this.chatId, epoch: this.#coordinator.epoch, next: this.#next }, 'chat session started');
    } catch (err) {
      // Release the claim: a failed start must not leave the next attempt WRITER_ACTIVE.
      await this.#coordinator.stop();
      throw err;
    }
  }

  /**
   * The agent's last receipt (`acknowledged` of the peer stream) when it is in the current
   * generation and still retained. A receipt in an older generation continues exactly only if
   * nothing after it was sealed away unread; otherwise it is a continuity break, unless a
   * person started the server with `--resume-after-break`.
   */
  async #startPosition(peer: StreamState): Promise<Position> {
    const ack = peer.acknowledged ?? { generation: '1', nextPosition: '0' };
    const breakAt = (reason: 'GENERATION_CHANGED' | 'PREFIX_UNAVAILABLE', expected: string, actual: string): Position => {
      const err = continuityBreakError(
        reason,
        peer.streamId,
        expected,
        actual,
        `cannot continue ${peer.streamId} from the last receipt (generation ${ack.generation}, position ${ack.nextPosition})`,
      );
      if (!this.#opts.resumeAfterBreak) throw err;
      this.#opts.log.warn(
        { chatId: this.chatId, reason, expected, actual, from: peer.firstPosition },
        'resuming after a continuity break (--resume-after-break)',
      );
      return { generation: peer.generation, position: peer.firstPosition };
    };
    if (ack.generation === peer.generation) {
      if (big(ack.nextPosition) < big(peer.firstPosition)) return breakAt('PREFIX_UNAVAILABLE', ack.nextPosition, peer.firstPosition);
      return { generation: peer.generation, position: ack.nextPosition };
    }
    for (let g = big(ack.generation); g < big(peer.generation); g++) {
      const fromPosition = g === big(ack.generation) ? ack.nextPosition : '0';
      let unread: boolean;
      try {
        const b = await this.#opts.link.call('streams.read', { streamId: peer.streamId, generation: g.toString(), fromPosition, limit: 1 });
        unread = b.records.length > 0;
      } catch (err) {
        if (!(err instanceof ContinuityBreakError)) throw err;
        unread = true;
      }
      if (unread) return breakAt('GENERATION_CHANGED', ack.generation, peer.generation);
    }
    if (peer.firstPosition !== '0') return breakAt('PREFIX_UNAVAILABLE', '0', peer.firstPosition);
    return { generation: peer.generation, position: '0' };
  }

  // ---- state ----------------------------------------------------------------------------

  get state(): SessionState {
    if (this.#terminal) return this.#terminal instanceof FencedError ? 'fenced' : 'needs-intervention';
    const s = this.#coordinator.state;
    return s === 'idle' ? 'starting' : s;
  }

  view(): SessionView {
    return {
      state: this.state,
      streamId: this.streamId,
      peerStreamId: this.peerStreamId,
      epoch: this.#coordinator.epoch,
      next: { ...this.#next },
      presentedBatchId: this.#presented?.batchId ?? null,
      uncertainOperationId: this.#coordinator.uncertainOperationId,
    };
  }

  /** Records of the peer stream not yet acknowledged (of every type), as far as `peer` says. */
  pendingRecords(peer: StreamState): number {
    if (peer.generation !== this.#next.generation) return 0;
    const n = big(peer.nextPosition) - big(this.#next.position);
    return n > 0n ? Number(n) : 0;
  }

  /** Throws the reason this session stopped (fenced, break, shutdown), if it did. */
  assertUsable(): void {
    if (this.#terminal) throw this.#terminal;
    if (this.#coordinator.state === 'stopped')
      throw new ToolFailure(
        'STOPPED',
        `the session of chat ${this.chatId} has stopped (the server is shutting down)`,
        'Start the MCP server again.',
        { chatId: this.chatId },
      );
  }

  /** Stop for good: a fence or break found by this class rather than by the coordinator. */
  async #fail(err: Error): Promise<never> {
    if (!this.#terminal) {
      this.#terminal = err;
      this.#wake();
      this.#opts.onStopped({ chatId: this.chatId, error: err });
      // Release the claim unless someone else holds it now, so a person's restart is not WRITER_ACTIVE.
      await this.#coordinator.stop({ release: !(err instanceof FencedError) }).catch(() => {});
    }
    throw this.#terminal;
  }

  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#lock.then(fn, fn);
    this.#lock = p.catch(() => {});
    return p;
  }

  // ---- reading --------------------------------------------------------------------------

  #onLiveBatch(batch: PeerBatch): void {
    if (batch.streamId !== this.peerStreamId) return;
    this.#available = { generation: batch.generation, position: batch.nextPosition };
    this.#wake();
    // Fences and receipts still get presented (a receipt must cover a contiguous range) but are no news.
    const messages = batch.records.filter((r) => r.wrapper.type === 'chat.message').length;
    if (messages > 0)
      this.#opts.onPeerWrote({ chatId: this.chatId, generation: batch.generation, nextPosition: batch.nextPosition, messages });
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  #hasUnread(): boolean {
    const a = this.#available;
    return a !== null && a.generation === this.#next.generation && big(a.position) > big(this.#next.position);
  }

  /** Wait until the live follow reports something after the next position, the session stops, or `ms` pass. */
  async #waitForPeer(ms: number): Promise<void> {
    if (this.#hasUnread() || this.#terminal) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      const check = () => {
        if (this.#hasUnread() || this.#terminal) done();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(check);
    });
  }

  /** The claim is still ours and both generations are the ones we present from; returns the peer stream's state. */
  async #check(): Promise<StreamState> {
    const { streams } = await this.#opts.link.call('chats.get', { chatId: this.chatId });
    this.assertUsable();
    const own = streamIn(streams, this.streamId);
    const peer = streamIn(streams, this.peerStreamId);
    if (own.writer.epoch !== this.#coordinator.epoch || !own.writer.active) {
      return this.#fail(fencedError(this.streamId, own.writer.epoch, `stream ${this.streamId} is now held by epoch ${own.writer.epoch}`));
    }
    if (own.generation !== this.#ownGeneration) {
      return this.#fail(continuityBreakError('GENERATION_CHANGED', own.streamId, this.#ownGeneration, own.generation, 'own stream reset'));
    }
    if (peer.generation !== this.#next.generation) {
      return this.#fail(
        continuityBreakError('GENERATION_CHANGED', peer.streamId, this.#next.generation, peer.generation, 'peer stream reset'),
      );
    }
    return peer;
  }

  /**
   * Present the next unacknowledged batch of the peer stream: the same batch again while it is
   * not acknowledged, else a new read from the last acknowledged position. With `waitMs`, waits
   * for the peer when there is nothing new.
   */
  async readNew(options: {
    limit: number;
    maxBytes: number;
    waitMs: number;
  }): Promise<{ batch: ReadBatch | null; repeated: boolean; more: boolean }> {
    const first = await this.#exclusive(() => this.#presentNext(options));
    if (first.batch || options.waitMs <= 0) return first;
    await this.#waitForPeer(options.waitMs);
    return this.#exclusive(() => this.#presentNext(options));
  }

  async #presentNext(options: { limit: number; maxBytes: number }): Promise<{ batch: ReadBatch | null; repeated: boolean; more: boolean }> {
    this.assertUsable();
    const peer = await this.#check();
    if (this.#presented)
      return { batch: this.#presented, repeated: true, more: big(peer.nextPosition) > big(this.#presented.nextPosition) };
    if (big(peer.nextPosition) <= big(this.#next.position)) return { batch: null, repeated: false, more: false };
    let batch: ReadBatch;
    try {
      batch = await this.#opts.link.call('streams.read', {
        streamId: this.peerStreamId,
        generation: this.#next.generation,
        fromPosition: this.#next.position,
        limit: options.limit,
        maxBytes: options.maxBytes,
      });
    } catch (err) {
      if (err instanceof ContinuityBreakError) return this.#fail(err);
      throw err;
    }
    if (batch.sealed) {
      return this.#fail(continuityBreakError('GENERATION_CHANGED', this.peerStreamId, this.#next.generation, null, 'peer stream reset'));
    }
    if (batch.records.length === 0) return { batch: null, repeated: false, more: false };
    this.#presented = batch;
    return { batch, repeated: false, more: big(peer.nextPosition) > big(batch.nextPosition) };
  }

  #requirePresented(batchId: string | undefined): ReadBatch {
    const presented = this.#presented;
    if (!presented) {
      throw new ToolFailure(
        'NOTHING_PRESENTED',
        `nothing is presented in chat ${this.chatId}, so there is nothing to acknowledge`,
        'Call read_new first, then acknowledge the batchId it returns.',
        { chatId: this.chatId },
      );
    }
    if (batchId !== undefined && batchId !== presented.batchId) {
      throw new ToolFailure(
        'NOT_PRESENTED',
        `batch ${batchId} is not the batch presented in chat ${this.chatId} (that one covers positions ${presented.fromPosition}..${presented.nextPosition} and has batchId ${presented.batchId}); nothing was written`,
        'Acknowledge the batchId that read_new returned last (call read_new again to see it).',
        { chatId: this.chatId, presentedBatchId: presented.batchId },
      );
    }
    return presented;
  }

  #advance(batch: ReadBatch): void {
    if (this.#presented !== batch) return;
    this.#next = { generation: batch.generation, position: batch.nextPosition };
    this.#presented = null;
  }

  // ---- writing --------------------------------------------------------------------------

  /** Wait (nothing written yet) while the coordinator reconnects after a loss or a daemon restart. */
  async #whenWritable(): Promise<void> {
    const deadline = Date.now() + this.#opts.settleMs;
    while (this.#coordinator.state === 'reconnecting' && !this.#terminal && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
  }

  async #append(kind: PendingAppend['kind'], batch: ReadBatch | null, run: () => Promise<AppendResult>): Promise<AppendResult> {
    this.assertUsable();
    await this.#whenWritable();
    try {
      return await run();
    } catch (err) {
      const operationId = this.#coordinator.uncertainOperationId;
      if (operationId && !(err instanceof CoordinatorPausedError) && !this.#terminal) {
        this.#pending = { operationId, kind, batch };
        const type = err instanceof YelloClientError ? err.type : null;
        const what = kind === 'acknowledge' ? 'receipt' : kind === 'reply' ? 'message and its receipt' : 'message';
        throw new ToolFailure(
          'OUTCOME_UNKNOWN',
          `the ${what} (operation ${operationId}) went to the daemon but no answer came (${type ?? 'ERROR'}: ${(err as Error).message}); it may or may not be stored`,
          `Do not send it again. Call operation_status with chatId ${this.chatId}: it settles the outcome once the daemon answers. Until then every append in this chat is refused.`,
          { chatId: this.chatId, operationId, cause: type },
          { cause: err },
        );
      }
      throw err;
    }
  }

  /** Receipt for the presented batch. */
  acknowledge(batchId: string): Promise<{ result: AppendResult; batch: ReadBatch }> {
    return this.#exclusive(async () => {
      this.assertUsable();
      const batch = this.#requirePresented(batchId);
      const result = await this.#append('acknowledge', batch, () => this.#coordinator.ack(asPeerBatch(batch)));
      this.#advance(batch);
      return { result, batch };
    });
  }

  /** A message; with `acknowledge`, the message and the receipt of the presented batch in one atomic append. */
  async send(input: {
    text: string;
    messageId?: string;
    acknowledge?: boolean;
    batchId?: string;
  }): Promise<{ result: AppendResult; acknowledged: ReadBatch | null }> {
    const options = input.messageId !== undefined ? { messageId: input.messageId } : {};
    if (input.acknowledge) {
      return this.#exclusive(async () => {
        this.assertUsable();
        const batch = this.#requirePresented(input.batchId);
        const result = await this.#append('reply', batch, () =>
          this.#coordinator.reply(input.text, { ack: asPeerBatch(batch), ...options }),
        );
        this.#advance(batch);
        return { result, acknowledged: batch };
      });
    }
    if (input.batchId !== undefined) {
      throw new ToolFailure(
        'INVALID_PARAMS',
        'batchId is only used together with acknowledge: true; nothing was sent',
        'Pass acknowledge: true to reply and acknowledge, or leave batchId out.',
        { path: 'batchId' },
      );
    }
    const result = await this.#append('send', null, () => this.#coordinator.send(input.text, options));
    return { result, acknowledged: null };
  }

  /**
   * Settle the append of unknown outcome (the coordinator asks `operations.get`; nothing is
   * resent), or report any operation of the agent's stream in this chat.
   */
  async operationStatus(operationId: string | undefined): Promise<{
    operation: OperationInfo | null;
    committed: boolean | null;
    resolved: boolean;
    kind: PendingAppend['kind'] | null;
    paused: boolean;
  }> {
    const pending = this.#coordinator.uncertainOperationId;
    if (pending && !this.#terminal && (operationId === undefined || operationId === pending)) {
      this.#resolving ??= this.#untilVisible(pending)
        .then(() => this.#coordinator.resolveUncertain())
        .finally(() => {
          this.#resolving = null;
        });
      const outcome = await within(
        this.#resolving,
        this.#opts.settleMs,
        () =>
          new ToolFailure(
            'TIMEOUT',
            `the daemon has not answered about operation ${pending} within ${this.#opts.settleMs} ms; its outcome is still unknown`,
            'Call operation_status again in a moment (the daemon may be restarting or stopped). Appends in this chat stay refused until it is settled.',
            { chatId: this.chatId, operationId: pending },
          ),
      );
      const settled = this.#pending?.operationId === pending ? this.#pending : null;
      this.#pending = null;
      const batch = settled?.batch;
      if (outcome.committed && batch)
        await this.#exclusive(() => {
          this.#advance(batch);
          return Promise.resolve();
        });
      this.#opts.log.info({ chatId: this.chatId, operationId: pending, committed: outcome.committed }, 'append of unknown outcome settled');
      return { operation: outcome.operation, committed: outcome.committed, resolved: true, kind: settled?.kind ?? null, paused: false };
    }
    const id = operationId ?? pending ?? null;
    if (id === null) return { operation: null, committed: null, resolved: false, kind: null, paused: false };
    const operation = await this.#opts.link.call('operations.get', { streamId: this.streamId, operationId: id });
    return {
      operation,
      committed: operation.state === 'committed' ? true : operation.state === 'unknown' ? false : null,
      resolved: false,
      kind: this.#pending?.operationId === id ? this.#pending.kind : null,
      paused: this.#coordinator.uncertainOperationId !== null && !this.#terminal,
    };
  }

  /**
   * Wait until a committed operation also shows in the stream's head. The daemon can answer
   * `operations.get` "committed" a moment before `streams.get` moves its head (the record is in
   * LevelDB before the commit's callback runs); `resolveUncertain()` takes its next position
   * from `streams.get`, and a stale one would make the next append POSITION_MISMATCH.
   */
  async #untilVisible(operationId: string): Promise<void> {
    for (;;) {
      const op = await this.#opts.link.call('operations.get', { streamId: this.streamId, operationId });
      if (op.state === 'unknown') return;
      if (op.state === 'committed') {
        if (op.nextPosition === null) throw new Error(`operations.get reported ${operationId} committed without a nextPosition`);
        const head = await this.#opts.link.call('streams.get', { streamId: this.streamId });
        if (head.generation !== op.generation || big(head.nextPosition) >= big(op.nextPosition)) return;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Stop following and release the claim (unless fenced). */
  async stop(): Promise<void> {
    this.#wake();
    await this.#coordinator.stop({ release: !(this.#terminal instanceof FencedError) }).catch(() => {});
  }
}
