const NEWLINE = 0x0a;

/** What one step of reading input gives: a complete line, or the size a line reached past the cap. */
export type LineEvent = { line: Buffer } | { tooLarge: number };

/**
 * Newline-delimited framing of a connection's input. Chunks go in as they arrive; `next()`
 * takes one step (up to the next newline or the end of the chunk) so the caller can stop
 * between any two steps. A line over `maxLineBytes` is reported once, as soon as it passes the
 * cap, and the rest of it is dropped: the connection stays usable.
 */
export class LineReader {
  readonly #maxLineBytes: number;
  #input: Buffer[] = [];
  #inputOffset = 0;
  #chunks: Buffer[] = [];
  #chunkBytes = 0;
  #discarding = false;

  constructor(maxLineBytes: number) {
    this.#maxLineBytes = maxLineBytes;
  }

  push(chunk: Buffer): void {
    this.#input.push(chunk);
  }

  /** Whether input is waiting to be read. */
  get pending(): boolean {
    return this.#input.length > 0;
  }

  /** Drop the input not read yet (the connection closed). */
  clear(): void {
    this.#input = [];
  }

  /** One step: the line or oversize it completes, or null when it only consumed input. */
  next(): LineEvent | null {
    const chunk = this.#input[0];
    if (chunk === undefined) return null;
    const nl = chunk.indexOf(NEWLINE, this.#inputOffset);
    const end = nl === -1 ? chunk.length : nl;
    let event: LineEvent | null = null;
    if (!this.#discarding) {
      const piece = chunk.subarray(this.#inputOffset, end);
      this.#chunkBytes += piece.length;
      if (this.#chunkBytes > this.#maxLineBytes) {
        this.#discarding = true;
        this.#chunks = [];
        event = { tooLarge: this.#chunkBytes };
      } else if (piece.length > 0) {
        this.#chunks.push(piece);
      }
    }
    if (nl === -1) {
      this.#input.shift();
      this.#inputOffset = 0;
      return event;
    }
    this.#inputOffset = nl + 1;
    if (this.#inputOffset >= chunk.length) {
      this.#input.shift();
      this.#inputOffset = 0;
    }
    if (!this.#discarding && this.#chunkBytes > 0) {
      const only = this.#chunks.length === 1 ? this.#chunks[0] : undefined;
      event = { line: only ?? Buffer.concat(this.#chunks, this.#chunkBytes) };
    }
    this.#chunks = [];
    this.#chunkBytes = 0;
    this.#discarding = false;
    return event;
  }
}
