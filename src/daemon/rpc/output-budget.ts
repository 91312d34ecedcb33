import { OUTPUT_WINDOW, PAGE_BYTES } from '../limits.js';

/**
 * What one request line is having made for it and has not yet written: the page a handler is
 * filling and, for a batch, the answers held until the whole array goes out. Both count against
 * OUTPUT_WINDOW until the line's answer is written.
 */
export class Owed {
  page = 0;
  answered = 0;
}

/**
 * The page budget a connection's pending answers share: a page is cut at what OUTPUT_WINDOW has
 * left after the unsent output and the other answers being made, so pipelined reads owe about
 * one window between them, not one page each.
 */
export class OutputBudget {
  readonly #unsent: () => number;
  /** Bytes of pages being made and batch answers being held. */
  #owedBytes = 0;

  /** `unsent`: the output written to the socket and not yet taken by the peer. */
  constructor(unsent: () => number) {
    this.#unsent = unsent;
  }

  /**
   * The page budget of one answer in the making: at most PAGE_BYTES, at least 1 (one record).
   * Asking again replaces the earlier reservation of the same request line.
   */
  page(owed: Owed): number {
    const room = OUTPUT_WINDOW - this.#unsent() - (this.#owedBytes - owed.page);
    const budget = Math.max(1, Math.min(PAGE_BYTES, room));
    this.#owedBytes += budget - owed.page;
    owed.page = budget;
    return budget;
  }

  /** A batch element was answered with `bytes`, held until the batch goes out: it replaces the element's page. */
  answered(owed: Owed, bytes: number): void {
    this.#owedBytes += bytes - owed.page;
    owed.answered += bytes;
    owed.page = 0;
  }

  /** The line's answer was written (or dropped): it owes nothing any more. */
  release(owed: Owed): void {
    this.#owedBytes -= owed.page + owed.answered;
    owed.page = 0;
    owed.answered = 0;
  }
}
