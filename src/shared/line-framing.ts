/**
 * Newline-delimited framing, the one copy: the daemon reads requests with it, the client reads
 * answers, the MCP server reads its stdin. Linear time: each byte that arrives is scanned for
 * `\n` exactly once; a partial line is kept as a list of chunks (never a growing string
 * rescanned from its start, which made a 125 MiB answer take minutes) and joined once, when its
 * newline arrives, so a UTF-8 character split across chunks is intact. Bytes only: the caller
 * decodes, and brings its own join (`Buffer.concat` under Node), since src/shared has no Buffer.
 */

const NEWLINE = 0x0a;

/** What one step gives: a complete line, or the size a line reached as it passed the cap. */
export type LineEvent<B extends Uint8Array> = { line: B } | { tooLarge: number };

/**
 * Chunks go in as they arrive; `next()` takes one step (up to the next newline or the end of
 * the chunk), so the caller can stop between any two steps. Empty lines are skipped. A line
 * over `maxLineBytes` (without its newline) is reported once, as soon as it passes the cap, and
 * the rest of it is dropped up to its newline: the framing stays usable.
 */
export class LineFramer<B extends Uint8Array> {
  readonly #maxLineBytes: number;
  readonly #join: (parts: B[], bytes: number) => B;
  #input: B[] = [];
  #inputOffset = 0;
  #parts: B[] = [];
  #partBytes = 0;
  #discarding = false;
  #scanned = 0;

  constructor(maxLineBytes: number, join: (parts: B[], bytes: number) => B) {
    this.#maxLineBytes = maxLineBytes;
    this.#join = join;
  }

  /** Take a chunk (nothing is scanned until `next()`). */
  push(chunk: B): void {
    if (chunk.length > 0) this.#input.push(chunk);
  }

  /** Whether input is waiting to be scanned. */
  get pending(): boolean {
    return this.#input.length > 0;
  }

  /** Bytes examined for a newline so far: equal to the bytes stepped through, whatever the chunking. */
  get scannedBytes(): number {
    return this.#scanned;
  }

  /** Bytes of the unfinished line held in memory. */
  get bufferedBytes(): number {
    return this.#partBytes;
  }

  /** Drop the input not scanned yet (the connection closed). */
  clear(): void {
    this.#input = [];
    this.#inputOffset = 0;
  }

  /** Every event of the input pushed so far, in order. */
  *drain(): Generator<LineEvent<B>, void, undefined> {
    while (this.pending) {
      const event = this.next();
      if (event) yield event;
    }
  }

  /** One step: the line or oversize it completes, or null when it only consumed input. */
  next(): LineEvent<B> | null {
    const chunk = this.#input[0];
    if (chunk === undefined) return null;
    const start = this.#inputOffset;
    const nl = chunk.indexOf(NEWLINE, start);
    const end = nl === -1 ? chunk.length : nl;
    this.#scanned += (nl === -1 ? chunk.length : nl + 1) - start;
    let event: LineEvent<B> | null = null;
    if (!this.#discarding) {
      const size = this.#partBytes + (end - start);
      if (size > this.#maxLineBytes) {
        this.#discarding = true;
        this.#parts = [];
        this.#partBytes = 0;
        event = { tooLarge: size };
      } else if (end > start) {
        this.#parts.push(chunk.subarray(start, end) as B);
        this.#partBytes = size;
      }
    }
    if (nl === -1 || nl + 1 >= chunk.length) {
      this.#input.shift();
      this.#inputOffset = 0;
    } else {
      this.#inputOffset = nl + 1;
    }
    if (nl === -1) return event;
    if (!this.#discarding && this.#partBytes > 0) {
      // One part (the usual case) is used as it is, without a copy.
      const [only] = this.#parts;
      event = { line: this.#parts.length === 1 && only !== undefined ? only : this.#join(this.#parts, this.#partBytes) };
    }
    this.#parts = [];
    this.#partBytes = 0;
    this.#discarding = false;
    return event;
  }
}
