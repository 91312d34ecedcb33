/** A listener of one event. */
export type Listener<T> = (value: T) => void;

/**
 * Typed listener sets keyed by event name, shared by the client and the coordinator. Not
 * exported from the package: each owner exposes its own `on()`.
 */
export class Listeners<Events> {
  readonly #sets = new Map<keyof Events, Set<Listener<never>>>();

  /** Add a listener; returns its remover. */
  on<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    let set = this.#sets.get(event);
    if (!set) this.#sets.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  emit<E extends keyof Events>(event: E, value: Events[E]): void {
    for (const l of this.#sets.get(event) ?? []) (l as Listener<Events[E]>)(value);
  }
}
