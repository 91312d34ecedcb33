// The one group-commit policy of every backend: one group out at a time; the next one is cut one
// turn of the event loop after the last settled (requests already sitting in socket buffers are
// admitted and join it, with no timer) and takes everything admitted meanwhile, so groups grow
// with the load. Cutting per turn instead was measured slower on PostgreSQL: groups stayed as
// small as one turn's admissions (1.3 appends at 64 clients), each paying its own fsync in line
// behind the others. On LevelDB, skipping the turn while writes came one at a time did not make a
// lone writer faster and cost 0.86-0.94x the appends/s at 8 and 64 (bench/README.md).

/** Resolves on the next turn of the event loop (after I/O callbacks already due). */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class GroupCommit<T> {
  readonly #commit: (group: T[]) => Promise<void>;
  readonly #maxGroup: number;
  #queue: T[] = [];
  #scheduled = false;
  #committing = false;
  #chain: Promise<void> = Promise.resolve();

  /**
   * `commit` writes one group durably and settles each of its items; it never rejects (a failure
   * is the outcome of the group's items). `maxGroup` bounds a group (the rest waits for the next).
   */
  constructor(commit: (group: T[]) => Promise<void>, options: { maxGroup?: number } = {}) {
    this.#commit = commit;
    this.#maxGroup = options.maxGroup ?? Infinity;
  }

  /** Queue an admitted item for the next group. */
  push(item: T): void {
    this.#queue.push(item);
    this.#schedule();
  }

  /** Take every queued item out (a backend failing them all at once after a failed group). */
  drain(): T[] {
    return this.#queue.splice(0);
  }

  /**
   * Run `task` after every group cut before it settled, and before the next group: a reload of
   * rows never reads the tables before this daemon's own earlier commit settled. Its failure is
   * the caller's (the chain goes on).
   */
  after<R>(task: () => Promise<R>): Promise<R> {
    const run = this.#chain.then(task);
    this.#chain = run.then(
      () => {},
      () => {},
    );
    return run;
  }

  /** Settles once every group cut so far (and every task queued with `after`) settled; never rejects. */
  get settled(): Promise<void> {
    return this.#chain;
  }

  /** Whether nothing is queued or out. */
  get idle(): boolean {
    return this.#queue.length === 0 && !this.#scheduled && !this.#committing;
  }

  /** Resolves once nothing is queued or out (close: new items are refused by then). */
  async drained(): Promise<void> {
    while (!this.idle) await (this.#committing ? this.#chain : nextTurn());
  }

  #schedule(): void {
    if (this.#scheduled || this.#committing) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (this.#committing || this.#queue.length === 0) return;
      const group = this.#queue.length <= this.#maxGroup ? this.#queue : this.#queue.slice(0, this.#maxGroup);
      this.#queue = group === this.#queue ? [] : this.#queue.slice(group.length);
      this.#committing = true;
      this.#chain = this.#chain
        .then(() => this.#commit(group))
        .catch(() => {})
        .finally(() => {
          this.#committing = false;
          if (this.#queue.length > 0) this.#schedule();
        });
    });
  }
}
