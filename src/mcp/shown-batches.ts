import type { Conversation, MessageBatch } from '../client/index.js';
import type { Presented } from './chat-session-options.js';

/**
 * read_new's pull presentation over a conversation: which of its pending batches (taken, no
 * receipt yet; read_new and wait_for_message both take from it) the agent has been shown. The
 * oldest pending batch is presented, again and again, until a receipt covers it.
 */
export class ShownBatches {
  readonly #conversation: Conversation;
  /** batchIds of the conversation's pending batches that the agent has been shown. */
  readonly #ids = new Set<string>();

  constructor(conversation: Conversation) {
    this.#conversation = conversation;
  }

  /** The batch shown to the agent and not acknowledged yet, or null. */
  get presented(): MessageBatch | null {
    const first = this.#conversation.pending()[0];
    return first && this.#ids.has(first.batchId) ? first : null;
  }

  /** A batch was taken and is not acknowledged. */
  get hasPending(): boolean {
    return this.#conversation.pending().length > 0;
  }

  /**
   * The first batch taken and not acknowledged (the presented one again, or the next), marked
   * as shown, with whether more follows it; null when none is pending.
   */
  show(): (Presented & { batch: MessageBatch }) | null {
    const pending = this.#conversation.pending();
    // A receipt covered the others: forget them.
    for (const id of this.#ids) if (!pending.some((b) => b.batchId === id)) this.#ids.delete(id);
    const first = pending[0];
    if (!first) return null;
    const repeated = this.#ids.has(first.batchId);
    this.#ids.add(first.batchId);
    // More follows: another taken and not acknowledged, or one waiting in the conversation.
    return { batch: first, repeated, more: pending.length > 1 || this.#conversation.queued > 0 };
  }
}
