import { LineFramer } from '../shared/line-framing.js';

/** Thrown by {@link LineSplitter.push} when a line grows past its cap. */
export class LineOverflow extends Error {
  constructor(
    readonly limit: number,
    readonly size: number,
  ) {
    super(`a line from yellod exceeded ${limit} bytes (${size} bytes so far)`);
  }
}

/**
 * The client's reading of the daemon's answers: the one newline framing
 * (src/shared/line-framing.ts), each line decoded from UTF-8 once it is whole; a line over the
 * cap is a {@link LineOverflow}, which ends the connection.
 */
export class LineSplitter {
  readonly #framer: LineFramer<Buffer>;
  readonly #maxLineBytes: number;
  readonly #onLine: (line: string) => void;

  /** `maxLineBytes` caps a line's bytes, without its newline. */
  constructor(maxLineBytes: number, onLine: (line: string) => void) {
    this.#maxLineBytes = maxLineBytes;
    this.#framer = new LineFramer<Buffer>(maxLineBytes, (parts, bytes) => Buffer.concat(parts, bytes));
    this.#onLine = onLine;
  }

  /** Bytes examined for a newline so far: equal to the bytes pushed, whatever the chunking. */
  get scannedBytes(): number {
    return this.#framer.scannedBytes;
  }

  /** Bytes of the unfinished line held in memory. */
  get bufferedBytes(): number {
    return this.#framer.bufferedBytes;
  }

  /**
   * Take one chunk; call `onLine` for every line it completes, in order. Throws
   * {@link LineOverflow} once the unfinished line is over the cap; lines completed earlier in
   * the same chunk have been delivered by then, and the splitter must not be used again.
   */
  push(chunk: Buffer): void {
    this.#framer.push(chunk);
    for (const event of this.#framer.drain()) {
      if ('tooLarge' in event) {
        this.#framer.clear();
        throw new LineOverflow(this.#maxLineBytes, event.tooLarge);
      }
      this.#onLine(event.line.toString('utf8'));
    }
  }
}
