import {
  ChatWriter,
  ContinuityBreakError,
  Conversation,
  CoordinatorPausedError,
  FencedError,
  WriterActiveError,
  type AppendResult,
  type Chat,
  type MessageBatch,
  type OperationInfo,
  type ConversationStart,
} from '../client/index.js';
import { PeerHead } from '../client/peer-head.js';
import { isAfter } from '../shared/positions.js';
import type { ChatSessionOptions, OperationStatus, PendingAppend, Presented } from './chat-session-options.js';
import type { SessionState, SessionView } from './tool-schemas.js';
import { chatStopped, outcomeUnknown, presentationFailure, settleTimeout, ToolFailure } from './tool-errors.js';
import { ShownBatches } from './shown-batches.js';
import { whenConnected, within } from './waits.js';

export type { ChatSessionOptions } from './chat-session-options.js';

/**
 * One agent in one chat behind the MCP tools, a thin layer over the library: a
 * {@link Conversation} reads (the one resume policy; only batches that hold a message; the
 * peer's receipts and fences are state) and a {@link ChatWriter} writes, claiming on the first
 * write (an abandoned claim is taken over, a connected holder is `WRITER_ACTIVE`). What this
 * class adds is the pull presentation of `read_new` (shown-batches.ts: the batch it returned is
 * presented again until a receipt covers it), the session's state, and the settling of appends
 * of unknown outcome. Nothing is acknowledged implicitly, nothing of
 * unknown outcome is resent, and opening or reading writes nothing.
 */
export class ChatSession {
  readonly chatId: string;
  readonly chat: Chat;
  readonly agentId: string;
  readonly streamId: string;
  readonly peerStreamId: string;
  readonly #opts: ChatSessionOptions;
  readonly #conversation: Conversation;
  readonly #writer: ChatWriter;
  readonly #head: PeerHead;
  readonly #shown: ShownBatches;
  readonly #ownConversation: boolean;
  #terminal: Error | null = null;
  #stopped = false;
  #pending: PendingAppend | null = null;
  #resolving: Promise<{ committed: boolean; operation: OperationInfo }> | null = null;
  /** read_new calls run one at a time: two waits must not take two batches. */
  #reading: Promise<unknown> = Promise.resolve();

  private constructor(opts: ChatSessionOptions, chat: Chat, conversation: Conversation, head: PeerHead, own: boolean) {
    this.#opts = opts;
    this.#ownConversation = own;
    this.chat = chat;
    this.chatId = chat.id;
    this.#conversation = conversation;
    this.#head = head;
    this.#shown = new ShownBatches(conversation);
    this.agentId = conversation.agentId;
    this.streamId = conversation.ownStreamId;
    this.peerStreamId = conversation.peerStreamId;
    this.#writer = new ChatWriter(opts.client, {
      chatId: chat.id,
      conversation,
      replace: opts.replace ? true : 'if-abandoned',
      reason: 'yello mcp',
      ...(opts.writerConnectWaitMs !== undefined ? { connectWaitMs: opts.writerConnectWaitMs } : {}),
    });
    this.#writer.on('claimed', ({ epoch }) => {
      opts.onClaimed?.({ chatId: chat.id, epoch });
    });
    const stopped = (error: Error) => {
      this.#terminate(error);
    };
    conversation.on('break', stopped);
    conversation.on('replaced', stopped);
  }

  /**
   * A session of `chat` (nothing is claimed or written) on `followed`, the conversation the
   * agent's inbox follows, at the agent's last receipt. Without one (the inbox could not follow
   * the chat: a continuity break at its start, say) the session opens its own, which fails with
   * that break unless a person chose `--resume-after-break`. `head` watched the peer stream
   * before the conversation followed it.
   */
  static async start(opts: ChatSessionOptions, chat: Chat, followed: Conversation | null, head: PeerHead): Promise<ChatSession> {
    const chatId = chat.id;
    let conversation = followed;
    let from: ConversationStart = 'acknowledged';
    if (!conversation) {
      try {
        conversation = await Conversation.open(opts.client, { chatId });
      } catch (err) {
        if (!(err instanceof ContinuityBreakError) || !opts.resumeAfterBreak) throw err;
        opts.log.warn({ chatId, reason: err.reason, data: err.data }, 'resuming after a continuity break (--resume-after-break)');
        from = 'generation-start';
        conversation = await Conversation.open(opts.client, { chatId, start: from });
      }
    }
    await head.startedAt(conversation, from);
    opts.log.info({ chatId, acknowledged: conversation.acknowledged }, 'chat session started');
    return new ChatSession(opts, chat, conversation, head, conversation !== followed);
  }

  // ---- state ----------------------------------------------------------------------------

  get state(): SessionState {
    if (this.#terminal) return this.#terminal instanceof FencedError ? 'fenced' : 'needs-intervention';
    if (this.#stopped) return 'stopped';
    if (this.#writer.uncertainOperationId !== null) return 'paused';
    return this.#opts.client.connected ? 'running' : 'reconnecting';
  }

  view(): SessionView {
    const acked = this.#conversation.acknowledged;
    return {
      state: this.state,
      streamId: this.streamId,
      peerStreamId: this.peerStreamId,
      epoch: this.#writer.epoch,
      next: acked ? { generation: acked.generation, position: acked.nextPosition } : this.#head.start(),
      presentedBatchId: this.presented?.batchId ?? null,
      uncertainOperationId: this.#writer.uncertainOperationId,
    };
  }

  /** Messages of the peer stream after the agent's last receipt, once what the stream held at the start has arrived. */
  async unreadMessages(): Promise<number> {
    await this.#head.caughtUp(this.#opts.settleMs);
    return this.#head.messagesAfter(this.#conversation.acknowledged);
  }

  /** Throws the reason this session stopped (fenced, break, shutdown), if it did. */
  assertUsable(): void {
    if (this.#terminal) throw this.#terminal;
    if (this.#stopped)
      throw new ToolFailure(
        'STOPPED',
        `the session of chat ${this.chatId} has stopped (the server is shutting down)`,
        'Start the MCP server again.',
      );
  }

  /** Keep `err` as why this session stopped, if it is one of the kinds that stop it. */
  #absorb(err: unknown): never {
    if (err instanceof ContinuityBreakError || err instanceof FencedError || this.#conversation.failure === err)
      this.#terminate(err as Error);
    throw this.#terminal ?? err;
  }

  /** Stop for good, for `error` (the first reason stays): a fence or a break as it is, anything else as CHAT_STOPPED. */
  #terminate(error: Error): void {
    if (this.#terminal) return;
    this.#terminal = error instanceof FencedError || error instanceof ContinuityBreakError ? error : chatStopped(this.chatId, error);
    this.#opts.onStopped({ chatId: this.chatId, error: this.#terminal });
  }

  // ---- reading --------------------------------------------------------------------------

  /** The batch shown to the agent and not acknowledged yet, or null. */
  get presented(): MessageBatch | null {
    return this.#shown.presented;
  }

  /** Whether a receipt of the agent (this server's, the CLI's, another's) already covers `batch`. */
  isAcknowledged(batch: MessageBatch): boolean {
    const acked = this.#conversation.acknowledged;
    return acked !== null && !isAfter(batch, acked);
  }

  /**
   * A batch wait_for_message took from this chat's conversation (which keeps it pending): what is
   * to be shown now (that batch, or an earlier one not acknowledged yet), marked as shown.
   */
  adopt(batch: MessageBatch): { batch: MessageBatch; repeated: boolean; more: boolean } {
    return this.#shown.show() ?? { batch, repeated: false, more: this.#conversation.queued > 0 };
  }

  /** A batch was taken and is not acknowledged: wait_for_message answers this chat at once. */
  get hasPending(): boolean {
    return this.#shown.hasPending;
  }

  /**
   * The presented batch again while no receipt covers it; else the next batch with a message,
   * waiting up to `waitMs` for one (only a message, a break or a fence of the agent's own
   * stream ends the wait). Rejects with the signal's reason once `signal` aborts (the request
   * was cancelled): a cancelled wait takes nothing, so the next read_new presents what came.
   */
  readNew(options: { waitMs: number; signal?: AbortSignal }): Promise<Presented> {
    const { signal } = options;
    const run = async () => {
      signal?.throwIfAborted();
      this.assertUsable();
      // A conversation that stopped before this session listened (no event told it) stops it now.
      const failure = this.#conversation.failure;
      if (failure) this.#absorb(failure);
      const held = this.#shown.show();
      if (held) return held;
      const deadline = Date.now() + options.waitMs;
      // What the daemon held when the session opened is delivered before "nothing new" is said.
      await this.#head.caughtUp(Math.max(options.waitMs, this.#opts.settleMs), signal);
      let batch: MessageBatch | null;
      try {
        // A batch a receipt already covers (acknowledged from a channel event, or by the CLI) is not new.
        do batch = await this.#conversation.next({ waitMs: Math.max(0, deadline - Date.now()), signal });
        while (batch && this.isAcknowledged(batch));
      } catch (err) {
        if (signal?.aborted) throw err;
        return this.#absorb(err);
      }
      return this.#shown.show() ?? { batch: null, repeated: false, more: false };
    };
    const p = this.#reading.then(run, run);
    this.#reading = p.catch(() => {});
    return p;
  }

  /**
   * The batch to acknowledge: the presented one (`batchId` left out, or naming it). A `batchId`
   * with nothing presented (this server restarted since read_new showed it, say) is looked up
   * by presenting again: the same batch is acknowledged; another one is shown first.
   */
  async #toAcknowledge(batchId: string | undefined, what: 'acknowledge' | 'reply'): Promise<MessageBatch> {
    const presented = this.presented;
    // A batch the channel pushed: shown to the agent without read_new (docs/mcp.md, "Channel").
    const pushed = batchId !== undefined && batchId !== presented?.batchId ? this.#opts.pushedBatch?.(this.chatId, batchId) : undefined;
    if (pushed) {
      if (this.isAcknowledged(pushed)) throw presentationFailure(this.chatId, batchId, null, what, true);
      return pushed;
    }
    if (presented) {
      if (batchId !== undefined && batchId !== presented.batchId) throw presentationFailure(this.chatId, batchId, presented, what);
      return presented;
    }
    if (batchId === undefined) throw presentationFailure(this.chatId, undefined, null, what);
    const again = await this.readNew({ waitMs: 0 });
    if (again.batch?.batchId === batchId) return again.batch;
    throw presentationFailure(this.chatId, batchId, again.batch, what, true);
  }

  // ---- writing --------------------------------------------------------------------------

  async #append(kind: PendingAppend['kind'], run: () => Promise<AppendResult>): Promise<AppendResult> {
    this.assertUsable();
    // Paused, the writer refuses without the daemon: no wait for a reconnect before PAUSED.
    if (this.#writer.uncertainOperationId === null) await whenConnected(this.#opts.client, this.#opts.settleMs);
    try {
      return await run();
    } catch (err) {
      const operationId = this.#writer.uncertainOperationId;
      if (operationId && !(err instanceof CoordinatorPausedError) && !this.#terminal) {
        this.#pending = { operationId, kind };
        throw outcomeUnknown(this.chatId, operationId, kind, err);
      }
      if (err instanceof WriterActiveError) err.data.streamId ??= this.streamId;
      return this.#absorb(err);
    }
  }

  /** Receipt for the presented batch (`batchId` left out: the one presented). */
  async acknowledge(batchId: string | undefined): Promise<{ result: AppendResult; batch: MessageBatch }> {
    this.assertUsable();
    const batch = await this.#toAcknowledge(batchId, 'acknowledge');
    const result = await this.#append('acknowledge', () => this.#writer.ack(batch));
    return { result, batch };
  }

  /** A message; with `acknowledge`, the message and the receipt of the presented batch in one atomic append. */
  async send(input: {
    text: string;
    messageId?: string;
    acknowledge?: boolean;
    batchId?: string;
  }): Promise<{ result: AppendResult; acknowledged: MessageBatch | null }> {
    const options = input.messageId !== undefined ? { messageId: input.messageId } : {};
    this.assertUsable();
    if (input.acknowledge) {
      const batch = await this.#toAcknowledge(input.batchId, 'reply');
      const result = await this.#append('reply', () => this.#writer.send(input.text, { ack: batch, ...options }));
      return { result, acknowledged: batch };
    }
    if (input.batchId !== undefined) {
      throw new ToolFailure(
        'INVALID_PARAMS',
        'batchId is only used together with acknowledge: true; nothing was sent',
        'Pass acknowledge: true to reply and acknowledge, or leave batchId out.',
        { path: 'batchId' },
      );
    }
    const result = await this.#append('send', () => this.#writer.send(input.text, options));
    return { result, acknowledged: null };
  }

  /**
   * Settle the append of unknown outcome (the writer asks `operations.get`; nothing is
   * resent), or report any operation of the agent's stream in this chat.
   */
  async operationStatus(operationId: string | undefined): Promise<OperationStatus> {
    const pending = this.#writer.uncertainOperationId;
    if (pending && !this.#terminal && (operationId === undefined || operationId === pending)) {
      this.#resolving ??= this.#writer.resolveUncertain().finally(() => {
        this.#resolving = null;
      });
      const outcome = await within(this.#resolving, this.#opts.settleMs, () => settleTimeout(this.chatId, pending, this.#opts.settleMs));
      const settled = this.#pending?.operationId === pending ? this.#pending : null;
      this.#pending = null;
      this.#opts.log.info({ chatId: this.chatId, operationId: pending, committed: outcome.committed }, 'append of unknown outcome settled');
      return { operation: outcome.operation, committed: outcome.committed, resolved: true, kind: settled?.kind ?? null, paused: false };
    }
    const id = operationId ?? pending ?? null;
    if (id === null) return { operation: null, committed: null, resolved: false, kind: null, paused: false };
    const operation = await this.#opts.client.call('operations.get', { streamId: this.streamId, operationId: id });
    return {
      operation,
      committed: operation.state === 'committed' ? true : operation.state === 'unknown' ? false : null,
      resolved: false,
      kind: this.#pending?.operationId === id ? this.#pending.kind : null,
      paused: this.#writer.uncertainOperationId !== null && !this.#terminal,
    };
  }

  /** Resolves once every append handed out has its answer (a claim's included). */
  settled(): Promise<unknown> {
    return this.#writer.settled();
  }

  /** Stop reading and release the claim if this session made one (the writer always releases, reconnecting if needed). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#ownConversation) await this.#conversation.close().catch(() => {});
    await this.#writer.release().catch(() => {});
  }
}
