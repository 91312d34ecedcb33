import type { Acknowledged, MessageBatch } from '../client/index.js';
import { isAfter } from '../client/message-batch.js';

/**
 * The pull presentation of one chat session: batches taken from its conversation and not
 * acknowledged yet, in stream order (read_new and wait_for_message both take from the one
 * conversation, so one may take a batch while the other waits), and which of them the agent
 * has been shown. The first one is presented once it was shown, again and again until a
 * receipt covers it.
 */
export class HeldBatches {
  #held: MessageBatch[] = [];
  /** batchIds of held batches the agent has been shown. */
  readonly #shown = new Set<string>();

  /** The batch shown to the agent and not acknowledged yet, or null. */
  get presented(): MessageBatch | null {
    const first = this.#held[0];
    return first && this.#shown.has(first.batchId) ? first : null;
  }

  /** Batches held (shown or not). */
  get count(): number {
    return this.#held.length;
  }

  /** Keep a batch taken from the conversation, in stream order (takers may finish out of order). */
  hold(batch: MessageBatch): void {
    const before = (a: MessageBatch, b: MessageBatch) =>
      BigInt(a.generation) !== BigInt(b.generation)
        ? BigInt(a.generation) < BigInt(b.generation)
        : BigInt(a.fromPosition) < BigInt(b.fromPosition);
    const at = this.#held.findIndex((h) => before(batch, h));
    if (at === -1) this.#held.push(batch);
    else this.#held.splice(at, 0, batch);
  }

  /** The held batch to show next (the presented one again, or the first taken), marked as shown. */
  show(): { batch: MessageBatch; repeated: boolean } | null {
    const first = this.#held[0];
    if (!first) return null;
    const repeated = this.#shown.has(first.batchId);
    this.#shown.add(first.batchId);
    return { batch: first, repeated };
  }

  /** A receipt reaching `acknowledged` covers every held batch that ends at or before it. */
  advance(acknowledged: Acknowledged | null | undefined): void {
    if (!acknowledged) return;
    const covered = (b: MessageBatch) => !isAfter(b, acknowledged);
    for (const b of this.#held) if (covered(b)) this.#shown.delete(b.batchId);
    this.#held = this.#held.filter((b) => !covered(b));
  }
}
