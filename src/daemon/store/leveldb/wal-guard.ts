import { existsSync, readFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import { writeFileDurable } from '../../runtime/files.js';

/** A stream generation written to, and where it stood before the write. */
export interface Touch {
  streamId: string;
  generation: number;
  /** The stream's nextPosition before the first write of this era: anything lost lies at or after it. */
  position: number;
}

/** What the guard file held when the daemon started: the streams written since LevelDB's last flush. */
export interface GuardContents {
  touches: Touch[];
  /** A line failed its checksum: the file cannot say which streams were written. */
  damaged: boolean;
}

/** Distinct touches per era before a checkpoint moves the log into table files and empties the file. */
const CHECKPOINT_TOUCHES = 1024;

/**
 * Localises acknowledged writes that LevelDB may drop from its write-ahead log.
 *
 * LevelDB (without `paranoid_checks`, which classic-level does not expose) recovers a damaged
 * log by skipping the damaged block and applying what follows, and reports it only in its own
 * `LOG` file. That detects a loss but cannot say *what* was lost: a stream whose last writes
 * were in the dropped bytes looks consistent, just shorter, and the next append would reuse
 * acknowledged positions. So, before a group's synced batch, the first write of each stream
 * generation since the last checkpoint is recorded here, in a small file of its own, with
 * `fdatasync`. After a detected loss, exactly the streams named here are suspect, from the
 * position named here on.
 *
 * An era ends at startup (LevelDB has just moved its log into a table) or at a checkpoint
 * (a forced memtable flush); the file then only needs the touches made after it.
 */
export class WalGuard {
  readonly #path: string;
  /** Touches recorded in the current era, by `streamId generation`. */
  #era = new Map<string, Touch>();
  #checkpointing = false;
  #file: FileHandle | null = null;
  #chain: Promise<void> = Promise.resolve();

  constructor(path: string) {
    this.#path = path;
  }

  /** Read what the previous run left (before `startEra` empties it). */
  read(): GuardContents {
    if (!existsSync(this.#path)) return { touches: [], damaged: false };
    const touches: Touch[] = [];
    let damaged = false;
    for (const line of readFileSync(this.#path, 'utf8').split('\n')) {
      if (line === '') continue;
      const parsed = parseLine(line);
      if (parsed) touches.push(parsed);
      else damaged = true;
    }
    return { touches, damaged };
  }

  /** Start an empty era; call only once LevelDB has opened (its log is then in table files). */
  startEra(): void {
    writeFileDurable(this.#path, '', 0o600);
    this.#era.clear();
  }

  /** The touches not yet recorded in this era (deduplicated). */
  fresh(touches: readonly Touch[]): Touch[] {
    const out = new Map<string, Touch>();
    for (const t of touches) {
      const id = touchId(t);
      if (!this.#era.has(id) && !out.has(id)) out.set(id, t);
    }
    return [...out.values()];
  }

  /** Append touches and `fdatasync` them; resolves once they are durable. */
  record(touches: readonly Touch[]): Promise<void> {
    return this.#serial(async () => {
      this.#file ??= await open(this.#path, 'a', 0o600);
      await this.#file.appendFile(touches.map(formatLine).join(''));
      await this.#file.datasync();
      for (const t of touches) this.#era.set(touchId(t), t);
    });
  }

  /** Whether the era is large enough to be worth a checkpoint (and none is running). */
  get wantsCheckpoint(): boolean {
    return !this.#checkpointing && this.#era.size >= CHECKPOINT_TOUCHES;
  }

  /**
   * Begin a checkpoint between two groups (no `record` in flight): from now on every stream is
   * recorded again on its next write. Call `end()` once the memtable that holds the earlier
   * writes is in a table file: the file is rewritten with only the touches made since. On
   * `abort()` nothing is dropped.
   */
  beginCheckpoint(): { end: () => Promise<void>; abort: () => void } {
    this.#checkpointing = true;
    const before = this.#era;
    this.#era = new Map();
    return {
      end: () =>
        this.#serial(async () => {
          await this.#file?.close();
          this.#file = null;
          writeFileDurable(this.#path, [...this.#era.values()].map(formatLine).join(''), 0o600);
          this.#checkpointing = false;
        }),
      abort: () => {
        for (const [id, t] of before) if (!this.#era.has(id)) this.#era.set(id, t);
        this.#checkpointing = false;
      },
    };
  }

  #serial(run: () => Promise<void>): Promise<void> {
    const next = this.#chain.then(run);
    this.#chain = next.catch(() => {});
    return next;
  }

  async close(): Promise<void> {
    await this.#chain;
    await this.#file?.close();
    this.#file = null;
  }
}

const touchId = (t: Touch) => `${t.streamId} ${t.generation}`;

function formatLine(t: Touch): string {
  const body = `${t.streamId} ${t.generation} ${t.position}`;
  return `${crc32(body).toString(16).padStart(8, '0')} ${body}\n`;
}

function parseLine(line: string): Touch | null {
  const body = line.slice(9);
  if (line[8] !== ' ' || line.slice(0, 8) !== crc32(body).toString(16).padStart(8, '0')) return null;
  const [streamId, generation, position] = body.split(' ');
  if (!streamId || generation === undefined || position === undefined) return null;
  return { streamId, generation: Number(generation), position: Number(position) };
}
