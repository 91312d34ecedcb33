import type { Logger } from 'pino';
import { errors, YelloError } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import type { CorruptStream } from '../../shared/types.js';
import { errorMessage } from '../runtime/error-fields.js';
import type { IntegrityPort } from './port/store-port.js';
import type { CorruptMark } from './port/values.js';

/**
 * A stream generation the daemon cannot vouch for from `fromPosition` on: records there may
 * have been acknowledged and lost, or may disagree with the head. Reads below `fromPosition`
 * still serve what verifies; reads at or past it, and every write to the stream while the mark
 * covers its current generation, answer STORAGE_FAILURE with reason CORRUPT. Marks are stored
 * (the port's IntegrityPort), so they survive restarts; `streams.reset` moves the stream to a
 * generation past every mark.
 */
export type { CorruptMark } from './port/values.js';

/** Where marks are stored, and whether the store still takes writes. */
export interface MarkStore {
  readonly integrity: IntegrityPort;
  readonly readOnly: boolean;
}

/** The public form of a mark (`daemon.status`, `yello status`). */
export type CorruptStreamInfo = CorruptStream;

/** Whether `err` is a STORAGE_FAILURE with reason CORRUPT: a value failed its check, or a mark covers it. */
export function isCorrupt(err: unknown): err is YelloError {
  return err instanceof YelloError && err.details.reason === 'CORRUPT';
}

/** Corruption marks: found at startup, by the head check, or by a read; listed in `daemon.status`. */
export class Integrity {
  readonly #store: MarkStore;
  readonly #log: Logger;
  readonly #marks = new Map<string, CorruptMark[]>();
  readonly #listeners: Array<(mark: CorruptMark) => void> = [];

  constructor(store: MarkStore, log: Logger) {
    this.#store = store;
    this.#log = log;
  }

  /** Load stored marks (once, at startup). */
  async load(): Promise<void> {
    for await (const mark of this.#store.integrity.marks()) this.#remember(mark);
  }

  /** Be told of every new mark (subscriptions end the ones it affects). */
  onMark(listener: (mark: CorruptMark) => void): void {
    this.#listeners.push(listener);
  }

  /**
   * Mark a stream generation corrupt from `fromPosition` (keeping the lowest position when it is
   * already marked), log it, store it, and tell listeners. Returns the error to answer with.
   */
  mark(m: Omit<CorruptMark, 'detectedAt'>): YelloError {
    const existing = this.#find(m.streamId, m.generation);
    if (existing && existing.fromPosition <= m.fromPosition) return corruptError(existing);
    const mark: CorruptMark = { ...m, detectedAt: new Date().toISOString() };
    this.#remember(mark);
    this.#log.error(
      { streamId: mark.streamId, generation: mark.generation, fromPosition: mark.fromPosition, detail: mark.detail },
      'stream marked corrupt',
    );
    this.#persist(mark);
    for (const l of this.#listeners) l(mark);
    return corruptError(mark);
  }

  /** Persist a mark; a read-only store keeps it in memory and it is found again after a restart. */
  #persist(mark: CorruptMark): void {
    if (this.#store.readOnly) return;
    this.#store.integrity.putMarks([mark]).catch((err: unknown) => {
      this.#log.error({ streamId: mark.streamId, err: { message: errorMessage(err) } }, 'could not store a corruption mark');
    });
  }

  /** Write marks durably now (startup, before the log guard forgets what it held). */
  persistNow(marks: CorruptMark[]): Promise<void> {
    return marks.length === 0 ? Promise.resolve() : this.#store.integrity.putMarks(marks);
  }

  /** Remember without storing (startup, when many marks are written in one batch). */
  remember(m: Omit<CorruptMark, 'detectedAt'>): CorruptMark {
    const mark: CorruptMark = { ...m, detectedAt: new Date().toISOString() };
    const existing = this.#find(m.streamId, m.generation);
    if (existing && existing.fromPosition <= mark.fromPosition) return existing;
    this.#remember(mark);
    return mark;
  }

  #remember(mark: CorruptMark): void {
    const list = (this.#marks.get(mark.streamId) ?? []).filter((x) => x.generation !== mark.generation);
    list.push(mark);
    this.#marks.set(mark.streamId, list);
  }

  #find(streamId: string, generation: number | null): CorruptMark | undefined {
    return this.#marks.get(streamId)?.find((m) => m.generation === generation);
  }

  /**
   * Throw when the stream may not be written: its head is unreadable, or a mark covers the
   * current generation or a later one (a reset that was itself lost).
   */
  assertWritable(streamId: string, currentGeneration: number, operationId: string | null = null): void {
    const blocking = this.#marks.get(streamId)?.find((m) => m.generation === null || m.generation >= currentGeneration);
    if (blocking) throw corruptError(blocking, operationId);
  }

  /** Throw when any mark names the stream (what is absent from it may have been lost). */
  assertIntact(streamId: string): void {
    const mark = this.#marks.get(streamId)?.[0];
    if (mark) throw corruptError(mark);
  }

  /**
   * After a head that failed its checksum was rebuilt from records: the whole-stream mark
   * becomes a mark of the last generation found, from where its records end.
   */
  narrowHeadMark(streamId: string, generation: number, fromPosition: number): void {
    const list = this.#marks.get(streamId) ?? [];
    const head = list.find((m) => m.generation === null);
    if (!head) return;
    this.#marks.set(
      streamId,
      list.filter((m) => m !== head),
    );
    const narrowed = this.remember({ streamId, generation, fromPosition, detail: `${head.detail}; head rebuilt from records` });
    if (this.#store.readOnly) return;
    this.#store.integrity.narrowMark(streamId, narrowed).catch((err: unknown) => {
      this.#log.error({ streamId, err: { message: errorMessage(err) } }, 'could not store a corruption mark');
    });
  }

  /** The first position of `generation` that reads may not pass (Infinity when unmarked). */
  readLimit(streamId: string, generation: number): number {
    let limit = Infinity;
    for (const m of this.#marks.get(streamId) ?? []) {
      if (m.generation === null) return 0;
      if (m.generation === generation) limit = Math.min(limit, m.fromPosition);
    }
    return limit;
  }

  /** Throw when reading `generation` at `position` would pass a mark. */
  assertReadable(streamId: string, generation: number, position: number): void {
    if (position < this.readLimit(streamId, generation)) return;
    const mark = this.#marks.get(streamId)?.find((m) => m.generation === null || m.generation === generation);
    // A finite read limit comes from such a mark, so this only guards against a broken invariant.
    if (!mark) throw new Error(`no corruption mark of ${streamId} bounds generation ${generation} at ${position}`);
    throw corruptError(mark);
  }

  /** Whether any mark names the stream. */
  isMarked(streamId: string): boolean {
    return (this.#marks.get(streamId)?.length ?? 0) > 0;
  }

  /** The highest marked generation of a stream (a reset must go past it), or 0. */
  highestMarkedGeneration(streamId: string): number {
    return Math.max(0, ...(this.#marks.get(streamId) ?? []).map((m) => m.generation ?? 0));
  }

  /** Every mark, for `daemon.status`. */
  list(): CorruptStreamInfo[] {
    return [...this.#marks.values()].flat().map((m) => ({
      streamId: m.streamId,
      generation: m.generation === null ? null : formatDecimal(m.generation),
      fromPosition: formatDecimal(m.fromPosition),
      detail: m.detail,
      detectedAt: m.detectedAt,
    }));
  }
}

/** STORAGE_FAILURE/CORRUPT for an answer that a damaged entry outside any stream makes untrustworthy. */
export function untrustworthy(key: string, detail: string): YelloError {
  return errors.corrupt({ key, streamId: null, generation: null, fromPosition: null, detail });
}

/** The STORAGE_FAILURE/CORRUPT error for a mark. */
export function corruptError(m: CorruptMark, operationId: string | null = null): YelloError {
  return errors.corrupt(
    {
      key: null,
      streamId: m.streamId,
      generation: m.generation === null ? null : formatDecimal(m.generation),
      fromPosition: formatDecimal(m.fromPosition),
      detail: m.detail,
    },
    operationId,
  );
}
