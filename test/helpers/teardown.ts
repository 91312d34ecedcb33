// Undoing what a beforeAll made, for the afterAll.

/**
 * What a beforeAll made, undone by the afterAll in reverse order. Only what was really made is
 * undone: a beforeAll that failed half way leaves nothing behind, and the afterAll does not trip
 * over what it never made.
 */
export class Teardown {
  readonly #steps: (() => unknown)[] = [];

  /** Registers how to undo `resource` and returns it. */
  add<T>(resource: T, undo: (r: T) => unknown): T {
    this.#steps.push(() => undo(resource));
    return resource;
  }

  /** Undoes everything registered, last first. */
  async run(): Promise<void> {
    for (const step of this.#steps.splice(0).reverse()) await step();
  }
}
