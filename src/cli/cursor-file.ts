import { existsSync, readFileSync, statSync } from 'node:fs';
import type { Writable } from 'node:stream';
import type { CursorStore } from '../client/index.js';
import type { Io } from './io.js';
import { CliError, EXIT } from './output.js';
import { writeFileAtomic } from './secret-files.js';

/** The cursor options of `chats follow`. */
export interface CursorArgs {
  io: Io;
  cursor?: string;
  'cursor-in'?: string;
  'cursor-out'?: string;
}

function readCursorFile(path: string, flag: string): string | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${flag} ${path}: ${(err as Error).message}`, EXIT.usage);
  }
  return text.trim() || null;
}

/**
 * The cursor to start from: `--cursor` is a cursor token or a file holding one; `--cursor-in
 * FILE` is a file, and a missing one means "no stored cursor yet" so that the same command can
 * run in a loop with `--cursor-in F --cursor-out F`.
 */
export function startCursor(args: CursorArgs): string | null {
  if (args.cursor !== undefined && args['cursor-in'] !== undefined)
    throw new CliError('give --cursor or --cursor-in, not both', EXIT.usage);
  if (args['cursor-in'] !== undefined) {
    if (!existsSync(args['cursor-in'])) {
      args.io.stderr.write(`yello: no cursor in ${args['cursor-in']} yet; starting without one\n`);
      return null;
    }
    return readCursorFile(args['cursor-in'], '--cursor-in');
  }
  if (args.cursor === undefined) return null;
  if (existsSync(args.cursor) && statSync(args.cursor).isFile()) return readCursorFile(args.cursor, '--cursor');
  return args.cursor;
}

/**
 * The cursor of the last batch a follow printed: kept for the "resume with" line at exit and,
 * with `--cursor-out`, written (0600, atomically) after each batch. Doubles as the
 * Coordinator's cursor store for `--ack`.
 */
export class CursorKeeper implements CursorStore {
  #current: string | null;
  readonly #out: string | null;
  readonly #stderr: Writable;
  #printed = false;

  constructor(initial: string | null, out: string | undefined, stderr: Writable) {
    this.#current = initial;
    this.#out = out ?? null;
    this.#stderr = stderr;
  }

  get current(): string | null {
    return this.#current;
  }

  load(): Promise<string | null> {
    return Promise.resolve(this.#current);
  }

  save(_chatId: string, cursor: string): Promise<void> {
    // The executor runs now, and a failure to write --cursor-out in it becomes the rejection
    // the CursorStore contract promises instead of a synchronous throw.
    return new Promise((resolve) => {
      this.set(cursor);
      resolve();
    });
  }

  set(cursor: string): void {
    this.#current = cursor;
    if (this.#out) writeFileAtomic(this.#out, cursor + '\n');
  }

  /** Say on stderr where to resume (once). */
  printResumeHint(): void {
    if (this.#printed || !this.#current) return;
    this.#printed = true;
    this.#stderr.write(`yello: resume with --cursor ${this.#current}${this.#out ? ` (also in ${this.#out})` : ''}\n`);
  }
}
