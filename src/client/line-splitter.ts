/**
 * NDJSON framing in linear time. Each byte that arrives is scanned for `\n` exactly once:
 * the partial line is kept as a list of Buffer chunks (never a growing string that is
 * rescanned from its start, which made a 125 MiB answer take minutes), and a line is decoded
 * from UTF-8 once, when its newline arrives, so a character split across chunks is intact.
 */

const NEWLINE = 0x0a;

/** Thrown by {@link LineSplitter.push} when a line grows past its cap. */
export class LineOverflow extends Error {
  constructor(
    readonly limit: number,
    readonly size: number,
  ) {
    super(`a line from yellod exceeded ${limit} bytes (${size} bytes so far)`);
  }
}

/** Splits a byte stream into `\n`-delimited UTF-8 lines; empty lines are skipped. */
export class LineSplitter {
  readonly #maxLineBytes: number;
  readonly #onLine: (line: string) => void;
  #parts: Buffer[] = [];
  #partBytes = 0;
  #scanned = 0;

  /** `maxLineBytes` caps a line's bytes, without its newline. */
  constructor(maxLineBytes: number, onLine: (line: string) => void) {
    this.#maxLineBytes = maxLineBytes;
    this.#onLine = onLine;
  }

  /** Bytes examined for a newline so far: equal to the bytes pushed, whatever the chunking. */
  get scannedBytes(): number {
    return this.#scanned;
  }

  /** Bytes of the unfinished line held in memory. */
  get bufferedBytes(): number {
    return this.#partBytes;
  }

  /**
   * Take one chunk; call `onLine` for every line it completes, in order. Throws
   * {@link LineOverflow} once the unfinished line is over the cap; lines completed earlier in
   * the same chunk have been delivered by then, and the splitter must not be used again.
   */
  push(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start);
      const end = nl === -1 ? chunk.length : nl;
      this.#scanned += (nl === -1 ? chunk.length : nl + 1) - start;
      const size = this.#partBytes + (end - start);
      if (size > this.#maxLineBytes) {
        this.#parts = [];
        this.#partBytes = 0;
        throw new LineOverflow(this.#maxLineBytes, size);
      }
      if (end > start) {
        this.#parts.push(chunk.subarray(start, end));
        this.#partBytes = size;
      }
      if (nl === -1) return;
      start = nl + 1;
      if (this.#partBytes > 0) {
        const parts = this.#parts;
        // One part (the usual case) is used as it is, without a copy.
        const [first] = parts;
        const line = parts.length === 1 && first !== undefined ? first : Buffer.concat(parts, this.#partBytes);
        this.#parts = [];
        this.#partBytes = 0;
        this.#onLine(line.toString('utf8'));
      }
    }
  }
}
