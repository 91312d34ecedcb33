import type { StoredRecord, WriterFence } from '../shared/types.js';
import { isAfter } from '../shared/positions.js';
import type { MessageBatch } from './message-batch.js';

/** A position of a stream generation: where a receipt reaches. */
export interface Acknowledged {
  generation: string;
  nextPosition: string;
}

/** What the peer's records changed: its receipt of this agent's stream moved, its stream got a new writer. */
export interface PeerNews {
  acknowledged: Acknowledged | null;
  writer: WriterFence | null;
}

const receiptEnd = (r: { peerGeneration: string; nextPosition: string }): Acknowledged => ({
  generation: r.peerGeneration,
  nextPosition: r.nextPosition,
});

/**
 * The state a {@link Conversation} absorbs from the records of both streams of its chat: the
 * agent's own latest receipt of the peer stream and the batches it was handed that no receipt
 * covers yet (the one batch tracking: a presenter asks `pending()`, it does not keep its own
 * list), the peer's latest receipt of the agent's stream, and the writer fences of both. Plain
 * state, no I/O: the conversation feeds it and tells its listeners.
 */
export class ConversationState {
  readonly #ownStreamId: string;
  readonly #peerStreamId: string;
  #acknowledged: Acknowledged | null;
  #peerAcknowledged: Acknowledged | null;
  #pending: MessageBatch[] = [];
  #peerEpoch = -1n;
  /** The epoch of this agent's writer, once it claimed; a newer fence in the own stream means it was replaced. */
  #writerEpoch: bigint | null = null;
  #ownFenceEpoch = -1n;

  constructor(
    streams: { ownStreamId: string; peerStreamId: string },
    start: { acknowledged: Acknowledged | null; peerAcknowledged: Acknowledged | null },
  ) {
    this.#ownStreamId = streams.ownStreamId;
    this.#peerStreamId = streams.peerStreamId;
    this.#acknowledged = start.acknowledged;
    this.#peerAcknowledged = start.peerAcknowledged;
  }

  /** The epoch of the newest writer fence seen in this agent's own stream, or null. */
  get ownWriterEpoch(): string | null {
    return this.#ownFenceEpoch < 0n ? null : this.#ownFenceEpoch.toString();
  }

  /** This agent's latest receipt of the peer stream. */
  get acknowledged(): Acknowledged | null {
    return this.#acknowledged;
  }

  /** The peer's latest receipt of this agent's stream. */
  get peerAcknowledged(): Acknowledged | null {
    return this.#peerAcknowledged;
  }

  /** Batches handed out that no receipt covers yet, oldest first. */
  get pending(): readonly MessageBatch[] {
    return this.#pending;
  }

  /** Whether a receipt of this agent already covers `batch`. */
  covers(batch: Acknowledged): boolean {
    return this.#acknowledged !== null && !isAfter(batch, this.#acknowledged);
  }

  /** A batch was handed out: pending until a receipt covers it (one covered already is not). */
  handedOut(batch: MessageBatch): void {
    if (!this.covers(batch)) this.#pending.push(batch);
  }

  /** This agent's receipt reached `ack` (a record of the own stream, or an append whose outcome was learned later). */
  receipt(ack: Acknowledged): void {
    if (this.#acknowledged && !isAfter(ack, this.#acknowledged)) return;
    this.#acknowledged = ack;
    this.#pending = this.#pending.filter((b) => isAfter(b, ack));
  }

  /**
   * Records of the own stream: receipts of the peer stream move `acknowledged`, fences move the
   * own writer epoch. Returns the epoch that replaced this agent's writer, or null.
   */
  observeOwn(records: readonly StoredRecord[]): string | null {
    let replacedBy: string | null = null;
    for (const r of records) {
      if (r.wrapper.type === 'chat.receipt' && r.wrapper.receipt.peerStreamId === this.#peerStreamId) {
        this.receipt(receiptEnd(r.wrapper.receipt));
      } else if (r.wrapper.type === 'chat.writer-fence') {
        const epoch = BigInt(r.wrapper.fence.epoch);
        if (epoch > this.#ownFenceEpoch) this.#ownFenceEpoch = epoch;
        if (this.#writerEpoch !== null && epoch > this.#writerEpoch) replacedBy ??= r.wrapper.fence.epoch;
      }
    }
    return replacedBy;
  }

  /** Records of the peer stream: what moved (the peer's receipt of the own stream, its writer). */
  observePeer(records: readonly StoredRecord[]): PeerNews[] {
    const news: PeerNews[] = [];
    for (const r of records) {
      if (r.wrapper.type === 'chat.receipt' && r.wrapper.receipt.peerStreamId === this.#ownStreamId) {
        const ack = receiptEnd(r.wrapper.receipt);
        if (!this.#peerAcknowledged || isAfter(ack, this.#peerAcknowledged)) {
          this.#peerAcknowledged = ack;
          news.push({ acknowledged: ack, writer: null });
        }
      } else if (r.wrapper.type === 'chat.writer-fence' && BigInt(r.wrapper.fence.epoch) > this.#peerEpoch) {
        this.#peerEpoch = BigInt(r.wrapper.fence.epoch);
        news.push({ acknowledged: null, writer: r.wrapper.fence });
      }
    }
    return news;
  }

  /** This agent's writer claimed at `epoch` (null: none). Returns the epoch that replaced it already, or null. */
  expectWriter(epoch: string | null): string | null {
    this.#writerEpoch = epoch === null ? null : BigInt(epoch);
    return this.#writerEpoch !== null && this.#ownFenceEpoch > this.#writerEpoch ? this.#ownFenceEpoch.toString() : null;
  }
}
