import { mkdir, readFile, rename, writeFile, open } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Where a coordinator keeps its compound cursor between runs. */
export interface CursorStore {
  load(chatId: string): Promise<string | null>;
  save(chatId: string, cursor: string): Promise<void>;
}

/** Cursors in memory (tests, short-lived tools). */
export class MemoryCursorStore implements CursorStore {
  readonly #map = new Map<string, string>();
  load(chatId: string): Promise<string | null> {
    return Promise.resolve(this.#map.get(chatId) ?? null);
  }
  save(chatId: string, cursor: string): Promise<void> {
    this.#map.set(chatId, cursor);
    return Promise.resolve();
  }
}

/**
 * Cursors in one JSON file, replaced atomically (write, fsync, rename), so a crash leaves
 * either the old or the new cursor, never a torn one.
 */
export class FileCursorStore implements CursorStore {
  readonly #path: string;
  #cache: Record<string, string> | null = null;
  #writing: Promise<void> = Promise.resolve();

  constructor(path: string) {
    this.#path = path;
  }

  async #all(): Promise<Record<string, string>> {
    if (this.#cache) return this.#cache;
    try {
      this.#cache = JSON.parse(await readFile(this.#path, 'utf8')) as Record<string, string>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      this.#cache = {};
    }
    return this.#cache;
  }

  async load(chatId: string): Promise<string | null> {
    return (await this.#all())[chatId] ?? null;
  }

  save(chatId: string, cursor: string): Promise<void> {
    const next = this.#writing.then(async () => {
      const all = await this.#all();
      all[chatId] = cursor;
      await mkdir(dirname(this.#path), { recursive: true, mode: 0o700 });
      const tmp = `${this.#path}.tmp-${process.pid}`;
      await writeFile(tmp, JSON.stringify(all), { mode: 0o600 });
      const fh = await open(tmp, 'r+');
      await fh.sync();
      await fh.close();
      await rename(tmp, this.#path);
    });
    this.#writing = next.catch(() => {});
    return next;
  }
}
