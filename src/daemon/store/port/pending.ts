// The pending overlay: values admitted and not yet durable, by key. The next decision is taken
// against them (the admitted view), readers never see them (the committed view), and whoever
// answers from one awaits its durability first. Each key counts its changes in flight: the entry
// goes when the last one settled, whatever its outcome.

interface Entry<T> {
  value: T;
  inFlight: number;
  durable: Promise<unknown>;
}

export class Pending<T> {
  readonly #entries = new Map<string, Entry<T>>();

  /** The admitted value, when a change of the key is in flight. */
  get(key: string): { value: T } | undefined {
    return this.#entries.get(key);
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /** Admit `value` for `key`; `durable` settles when its change settled. */
  add(key: string, value: T, durable: Promise<unknown>): void {
    const e = this.#entries.get(key);
    if (e) {
      e.value = value;
      e.inFlight++;
      e.durable = durable;
    } else this.#entries.set(key, { value, inFlight: 1, durable });
  }

  /** One change of `key` settled. */
  done(key: string): void {
    const e = this.#entries.get(key);
    if (e && --e.inFlight === 0) this.#entries.delete(key);
  }

  /** Resolves when the last admitted change of `key` settled (at once when none is in flight). */
  async durable(key: string): Promise<void> {
    await this.#entries.get(key)?.durable;
  }

  get size(): number {
    return this.#entries.size;
  }
}
