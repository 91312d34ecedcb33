/**
 * The appends this daemon has read off the wire and not yet answered, by stream and
 * operationId (memory only). `operations.get` answers `pending` for them: between reading an
 * append and admitting it the appender may wait (on PostgreSQL, `prepare` fetches the
 * operation and message ids it decides against), and an `operations.get` answered in that
 * wait would say "unknown" (never committed) of an append that commits a moment later.
 */
export class ReceivingAppends {
  readonly #count = new Map<string, number>();

  /** Runs `fn` with the operation counted as received until it settles. */
  async during<T>(streamId: string, operationId: string, fn: () => Promise<T>): Promise<T> {
    const key = keyOf(streamId, operationId);
    this.#count.set(key, (this.#count.get(key) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      const n = (this.#count.get(key) ?? 1) - 1;
      if (n === 0) this.#count.delete(key);
      else this.#count.set(key, n);
    }
  }

  has(streamId: string, operationId: string): boolean {
    return this.#count.has(keyOf(streamId, operationId));
  }
}

// An operationId is `[A-Za-z0-9_-]` (docs/protocol.md ids), so the key is unambiguous.
function keyOf(streamId: string, operationId: string): string {
  return `${streamId}\n${operationId}`;
}
