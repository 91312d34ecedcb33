import { randomUUID } from 'node:crypto';
import { makeStreamId } from '../shared/ids.js';
import type { ParamsIn } from '../shared/method-types.js';
import type { AppendResult } from '../shared/types.js';
import { Backoff } from '../shared/backoff.js';
import type { ChatWriterEvents, ChatWriterOptions, ChatWriterState, Unsettled } from './chat-writer-types.js';
import type { UncertainOutcome } from './coordinator-types.js';
import { ConnectionLostError, CoordinatorPausedError, FencedError, TimeoutError, YelloClientError, fencedError } from './errors.js';
import { Listeners, type Listener } from './listeners.js';
import { receiptFor, type MessageBatch, type ReceiptRecordInput } from './message-batch.js';
import { retryDelay, waitingOutRateLimit } from './refusals.js';
import { isOutcomeUnknown, lookUpOperation } from './uncertain.js';
import type { YelloClient } from './yello-client.js';
import { allPages, LIST_PAGE } from './list-pages.js';

export type { ChatWriterEvents, ChatWriterOptions, ChatWriterState, Unsettled };

type Records = ParamsIn<'streams.append'>['records'];

/** What the writer holds of its stream once claimed. */
interface Claim {
  token: string;
  epoch: string;
  generation: string;
  nextPosition: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The writing side of one agent in one chat (docs/protocol.md §8). It claims the agent's
 * stream lazily, on the first write (reading never writes), appends one operation at a time
 * at the stream's head with a fresh operationId, and never resends: an append of unknown
 * outcome pauses it (`CoordinatorPausedError`) until `resolveUncertain()` asked the daemon.
 * After taking a claim over, it lists `operations.list` before its first write and reports
 * (`unsettled`) what the displaced holder committed since its claim.
 */
export class ChatWriter {
  readonly chatId: string;
  readonly #client: YelloClient;
  readonly #options: ChatWriterOptions;
  readonly #listeners = new Listeners<ChatWriterEvents>();
  #streamId: string | null = null;
  #claim: Claim | null = null;
  #state: ChatWriterState = 'unclaimed';
  #uncertain: string | null = null;
  /** The receipt the append of unknown outcome carried, if any: the conversation learns of it once it committed. */
  #uncertainReceipt: ReceiptRecordInput | null = null;
  #inspect: { previousEpoch: string; since: string | null } | null = null;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(client: YelloClient, options: ChatWriterOptions) {
    this.#client = client;
    this.#options = options;
    this.chatId = options.chatId;
    const agentId = client.session.agentId;
    if (client.session.role === 'agent' && agentId) this.#streamId = makeStreamId(options.chatId, agentId);
  }

  get state(): ChatWriterState {
    return this.#state;
  }
  /** The agent's stream in the chat. */
  get streamId(): string {
    return this.#streamId ?? '';
  }
  /** The claim's epoch, or null before the first write. */
  get epoch(): string | null {
    return this.#claim?.epoch ?? null;
  }
  /** The claim's token, to keep it for a later `coordinatorToken` (null before the first write). */
  get coordinatorToken(): string | null {
    return this.#claim?.token ?? null;
  }
  /** The operationId of an append of unknown outcome, while paused (and after, until settled). */
  get uncertainOperationId(): string | null {
    return this.#uncertain;
  }

  /** Listen to an event; returns a function that removes the listener. */
  on<E extends keyof ChatWriterEvents>(event: E, listener: Listener<ChatWriterEvents[E]>): () => void {
    return this.#listeners.on(event, listener);
  }

  /** Send a message; with `ack`, the message and the receipt of `ack` in one atomic append. */
  send(text: string, options: { ack?: MessageBatch; messageId?: string } = {}): Promise<AppendResult> {
    const message = { type: 'chat.message' as const, messageId: options.messageId ?? randomUUID(), content: text };
    return this.#append(options.ack ? [message, receiptFor(options.ack)] : [message]);
  }

  /** Acknowledge a batch (and, receipts being cumulative, everything before it). */
  ack(batch: MessageBatch): Promise<AppendResult> {
    return this.#append([receiptFor(batch)]);
  }

  /** Resolves once every append handed out has its answer. */
  settled(): Promise<unknown> {
    return this.#chain;
  }

  /**
   * Claim the stream now, before any write, unless this writer holds a claim already: for a
   * presenter that must learn from its first presentation on that another claim replaced it
   * (a Conversation told the epoch stops then). Its token may be handed to another process that
   * appends under the same claim (`yello attach` and the CLI in its pane).
   */
  claim(): Promise<{ epoch: string; coordinatorToken: string }> {
    return this.#serial(async () => {
      const { claim } = await this.#ready();
      return { epoch: claim.epoch, coordinatorToken: claim.token };
    });
  }

  /** Checks before an append or a claim, then the claim (made now if need be) and its client. */
  async #ready(): Promise<{ client: YelloClient; claim: Claim }> {
    if (this.#state === 'fenced')
      throw new YelloClientError('BAD_STATE', `the writer of ${this.chatId} was replaced by another claim: nothing more is appended`);
    if (this.#uncertain !== null) throw new CoordinatorPausedError(this.#uncertain);
    const client = await this.#connected();
    const claim = this.#claim ?? (await this.#claimNow(client));
    if (this.#inspect) await this.#report(client, claim);
    return { client, claim };
  }

  /** One at a time: `run` starts once everything handed out before it has its answer. */
  #serial<T>(run: () => Promise<T>): Promise<T> {
    const p = this.#chain.then(run, run);
    this.#chain = p.catch(() => {});
    return p;
  }

  #append(records: Records): Promise<AppendResult> {
    return this.#serial(async (): Promise<AppendResult> => {
      const { client, claim } = await this.#ready();
      const operationId = `op-${randomUUID()}`;
      try {
        const result = await client.call('streams.append', {
          streamId: this.streamId,
          coordinatorToken: claim.token,
          generation: claim.generation,
          expectedPosition: claim.nextPosition,
          operationId,
          records,
        });
        claim.nextPosition = result.nextPosition;
        this.#options.conversation?.observeOwn(result.records);
        return result;
      } catch (err) {
        if (isOutcomeUnknown(err)) {
          this.#uncertain = operationId;
          this.#uncertainReceipt = records.find((r): r is ReceiptRecordInput => r.type === 'chat.receipt') ?? null;
          this.#state = 'paused';
          this.#listeners.emit('uncertain', { operationId, error: err as Error });
        } else if (err instanceof FencedError) {
          this.#fenced(err);
        }
        throw err;
      }
    });
  }

  /** The client once connected: waits (nothing written) while it reconnects. */
  async #connected(): Promise<YelloClient> {
    const deadline = Date.now() + (this.#options.connectWaitMs ?? 10_000);
    while (!this.#client.connected && this.#client.reconnecting && Date.now() < deadline) await sleep(25);
    if (!this.#client.connected) throw new ConnectionLostError('not connected to yellod; nothing was written', false);
    return this.#client;
  }

  async #claimNow(client: YelloClient): Promise<Claim> {
    if (!this.#streamId) throw new YelloClientError('BAD_TOKEN', 'a chat writer needs an agent token');
    const streamId = this.#streamId;
    const before = await client.call('streams.get', { streamId });
    let claim: Claim;
    if (this.#options.coordinatorToken) {
      claim = {
        token: this.#options.coordinatorToken,
        epoch: before.writer.epoch,
        generation: before.generation,
        nextPosition: before.nextPosition,
      };
    } else {
      this.#options.conversation?.expectWriter(null);
      const params = { streamId, replace: this.#options.replace ?? 'if-abandoned', reason: this.#options.reason };
      // Each stream of the agent takes a claim, and the daemon allows 60 a minute per agent: one
      // resuming many chats at once waits its turn rather than failing (docs/security.md, "Quotas").
      const res = await waitingOutRateLimit(() => client.call('streams.claim', params), this.#options.claimWaitMs ?? 30_000);
      claim = { token: res.coordinatorToken, epoch: res.epoch, generation: res.generation, nextPosition: res.nextPosition };
      if (before.writer.active) this.#inspect = { previousEpoch: before.writer.epoch, since: before.writer.claimedAt };
    }
    this.#claim = claim;
    this.#state = 'claimed';
    this.#options.conversation?.expectWriter(claim.epoch);
    this.#listeners.emit('claimed', {
      epoch: claim.epoch,
      generation: claim.generation,
      nextPosition: claim.nextPosition,
      tookOver: this.#inspect !== null,
    });
    return claim;
  }

  /** After a takeover: what the displaced holder committed since its claim (`operations.list`), reported once. */
  async #report(client: YelloClient, claim: Claim): Promise<void> {
    const inspect = this.#inspect;
    if (!inspect) return;
    const listed = await allPages(
      (cursor) => client.call('operations.list', { streamId: this.streamId, ...cursor, limit: LIST_PAGE }),
      (p) => p.operations,
    );
    const operations = listed.filter(
      (op) => op.generation === claim.generation && (inspect.since === null || (op.committedAt ?? '') >= inspect.since),
    );
    this.#inspect = null;
    if (operations.length > 0) this.#listeners.emit('unsettled', { previousEpoch: inspect.previousEpoch, operations });
  }

  #released(): void {
    this.#state = 'released';
    this.#claim = null;
    this.#options.conversation?.expectWriter(null);
  }

  #fenced(err: FencedError): void {
    if (this.#state === 'fenced') return;
    this.#state = 'fenced';
    this.#listeners.emit('fenced', err);
  }

  /**
   * After an append of unknown outcome: ask the daemon (`operations.get`, waiting while it is
   * `pending` or the client reconnects) whether it committed, and resume. Nothing is resent;
   * an uncommitted message is the caller's to send again if it still wants to.
   */
  async resolveUncertain(): Promise<UncertainOutcome> {
    const operationId = this.#uncertain;
    const claim = this.#claim;
    if (operationId === null || !claim) throw new YelloClientError('BAD_STATE', 'no append of unknown outcome');
    // A daemon that refuses for now (RATE_LIMITED, SHUTTING_DOWN) is asked again after the one
    // backoff, and never sooner than a RATE_LIMITED's retryAfterMs: not in a hot loop.
    const backoff = new Backoff({ minDelayMs: 50, maxDelayMs: 2000, jitter: true });
    for (;;) {
      if (!this.#client.connected) {
        if (!this.#client.reconnecting) throw new ConnectionLostError('not connected to yellod; the outcome is still unknown', false);
        await sleep(50);
        continue;
      }
      let found: Awaited<ReturnType<typeof lookUpOperation>>;
      try {
        found = await lookUpOperation(this.#client, this.streamId, operationId);
      } catch (err) {
        if (!(err instanceof YelloClientError && err.transient)) throw err;
        await sleep(retryDelay(err, backoff));
        continue;
      }
      if (!found) continue;
      const { operation, head } = found;
      if (head.writer.epoch !== claim.epoch || !head.writer.active) {
        const err = fencedError(
          this.streamId,
          head.writer.epoch,
          `stream ${this.streamId} was claimed by epoch ${head.writer.epoch} while paused`,
        );
        this.#fenced(err);
        throw err;
      }
      // operations.get can say committed a moment before the head shows it: wait for the head,
      // or the next append would be POSITION_MISMATCH.
      if (
        operation.state === 'committed' &&
        operation.generation === head.generation &&
        BigInt(head.nextPosition) < BigInt(operation.nextPosition ?? '0')
      ) {
        await sleep(20);
        continue;
      }
      claim.nextPosition = head.nextPosition;
      claim.generation = head.generation;
      const receipt = this.#uncertainReceipt;
      if (operation.state === 'committed' && receipt)
        this.#options.conversation?.observeReceipt({ generation: receipt.peerGeneration, nextPosition: receipt.nextPosition });
      this.#uncertain = null;
      this.#uncertainReceipt = null;
      this.#state = 'claimed';
      const outcome: UncertainOutcome = { operationId, committed: operation.state === 'committed', operation };
      this.#listeners.emit('resolved', outcome);
      return outcome;
    }
  }

  /**
   * Release the claim, if this writer holds one (a later write claims again): after the appends handed out have their
   * answers, over the client, or (if it is closed or gave up) over a connection of its own,
   * retrying for up to `timeoutMs` (default 10 s) through a daemon restart. A stream someone
   * else claimed meanwhile (FENCED with a later epoch) is left alone; one already released
   * (FENCED with this claim's epoch: a timed-out attempt that was done, or the admin) ends
   * `released`, not `fenced`.
   */
  async release(options: { timeoutMs?: number } = {}): Promise<void> {
    await this.#chain;
    const claim = this.#claim;
    if (!claim || this.#state === 'fenced') return;
    const deadline = Date.now() + (options.timeoutMs ?? 10_000);
    const backoff = new Backoff({ minDelayMs: 50, maxDelayMs: 1000 });
    let own: YelloClient | null = null;
    try {
      for (;;) {
        try {
          let via = this.#client;
          if (!via.connected && via.reconnecting && Date.now() < deadline) {
            await sleep(25);
            continue;
          }
          if (!via.connected) via = own ??= await this.#client.dialAgain();
          await via.call('streams.release', { streamId: this.streamId, coordinatorToken: claim.token });
          this.#released();
          return;
        } catch (err) {
          if (err instanceof FencedError) {
            // The same epoch: no one claimed since, the stream was released (by an attempt of
            // ours that timed out but was done, or by the admin); only a later epoch fenced us.
            if (String(err.data.epoch) === claim.epoch) this.#released();
            else this.#fenced(err);
            return;
          }
          const again =
            err instanceof ConnectionLostError || err instanceof TimeoutError || (err instanceof YelloClientError && err.transient);
          if (!again || Date.now() >= deadline) throw err;
          if (own && !own.connected) own = null;
          await sleep(backoff.next()?.delayMs ?? 1000);
        }
      }
    } finally {
      own?.close();
    }
  }
}
