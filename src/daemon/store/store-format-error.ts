/** A store written by a newer daemon (`corrupt: false`), or a format key that fails its check (`corrupt: true`). */
export class StoreFormatError extends Error {
  constructor(
    message: string,
    readonly corrupt: boolean,
  ) {
    super(message);
  }
}
