import { Transform, type TransformCallback } from 'node:stream';
import { LineFramer } from '../shared/line-framing.js';

/** The SDK's stdio read buffer (10 MiB): a longer line makes it throw and close the transport. */
export const MAX_STDIN_LINE_BYTES = 10 * 1024 * 1024 - 1;

/**
 * Stdin framing in front of the SDK's stdio transport (the one newline framing,
 * src/shared/line-framing.ts): passes each complete line through as its own chunk, and a line
 * longer than `maxLineBytes` is discarded up to its newline and answered with a JSON-RPC error
 * (-32600, id null) through `answer`, so one oversized line neither ends the server (the SDK
 * would close on it and exit 0) nor grows memory past the limit. Each complete line is then
 * given to `check` (request-gate.ts's `frameError`): a line it answers is not passed on. Blank lines
 * are dropped.
 */
export class StdinLines extends Transform {
  readonly #max: number;
  readonly #answer: (line: string) => void;
  readonly #check: (line: string) => string | null;
  readonly #framer: LineFramer<Buffer>;

  constructor(answer: (line: string) => void, maxLineBytes = MAX_STDIN_LINE_BYTES, check: (line: string) => string | null = () => null) {
    super();
    this.#answer = answer;
    this.#max = maxLineBytes;
    this.#check = check;
    this.#framer = new LineFramer<Buffer>(maxLineBytes, (parts, bytes) => Buffer.concat(parts, bytes));
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#framer.push(chunk);
    for (const event of this.#framer.drain()) {
      if ('tooLarge' in event) this.#tooLarge();
      else this.#complete(event.line);
    }
    done();
  }

  #complete(line: Buffer): void {
    const text = line.toString('utf8');
    if (text.trim() === '') return;
    const refusal = this.#check(text);
    if (refusal !== null) this.#answer(refusal);
    else this.push(Buffer.concat([line, Buffer.from('\n')]));
  }

  #tooLarge(): void {
    this.#answer(
      JSON.stringify({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32600, message: `request line longer than ${this.#max} bytes: discarded up to its newline; nothing was done` },
      }) + '\n',
    );
  }
}
