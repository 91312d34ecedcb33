// The notice feed of the PostgreSQL streams port: LISTEN on the streams channel, where every
// commit that moved a head says so (notices.ts). A notice refreshes the cached head (head-cache.ts:
// taken from the notice when it is the very next change of the cached one, else read), keeps the
// records it carried for the followers' next read, and wakes the listeners of `changes()` (live
// followers, long polls, the store's counts). A LISTEN reconnect loses the notices sent while it
// was down: every head is read again and each one that moved is told as its notice would have been.

import type { Logger } from 'pino';
import type { Sql } from './connection.js';
import type { HeadCache } from './head-cache.js';
import { STREAMS_CHANNEL, type HeadNotice } from './notices.js';
import { retryUntilDone } from './retry.js';

/** Streams whose latest notified records are kept for the followers' next read (8 KB each at most). */
const NOTICED_STREAMS = 256;

interface Listener {
  push(n: HeadNotice): void;
  end(): void;
}

export interface NoticeFeedOptions {
  log?: Logger | undefined;
  /** Whether the store is closing (read at every step of a catch-up). */
  closing(): boolean;
  /** Whether a change of the stream is admitted here and not settled (its records are read from the table). */
  pending(streamId: string): boolean;
}

export class NoticeFeed {
  readonly #sql: Sql;
  readonly #heads: HeadCache;
  readonly #o: NoticeFeedOptions;
  readonly #listeners = new Set<Listener>();
  /**
   * The record rows another daemon's latest notice of a stream carried, when that notice's head
   * was taken: what the followers of this daemon read next, answered without a round trip.
   * Oldest first (a Map keeps insertion order), at most NOTICED_STREAMS.
   */
  readonly #noticed = new Map<string, { generation: number; from: number; rows: Array<[number, string]> }>();
  #unlisten: (() => Promise<void>) | undefined;
  #ended = false;

  constructor(sql: Sql, heads: HeadCache, options: NoticeFeedOptions) {
    this.#sql = sql;
    this.#heads = heads;
    this.#o = options;
  }

  /** LISTEN (the driver listens again after every reconnect, and this catches up then). */
  async listen(): Promise<void> {
    const listening = await this.#sql.listen(
      STREAMS_CHANNEL,
      (payload) => {
        this.#onNotify(payload);
      },
      // Called again after every reconnect of the LISTEN connection (test/multi-host/listen-reconnect.test.ts).
      () => {
        if (this.#unlisten) this.#catchUp();
      },
    );
    this.#unlisten = () => listening.unlisten();
  }

  /** Records kept from notices may have a gap after lost ones: the next reads go to the table. */
  forget(): void {
    this.#noticed.clear();
  }

  /**
   * After a LISTEN reconnect: read every head, cache each that differs from the cached one, and
   * tell it like a notice, so followers and long polls read what they were not told of and the
   * store counts it. Retried with backoff while the database does not answer: until it is done,
   * this daemon may serve heads older than the database's.
   */
  #catchUp(): void {
    this.forget();
    void retryUntilDone({
      stopped: () => this.#o.closing(),
      attempt: () =>
        this.#heads.catchUp(
          () => this.#o.closing(),
          (n) => {
            this.#tell(n);
          },
        ),
      failed: (err, attempt) =>
        // The code only: a server's message may quote data.
        this.#o.log?.warn(
          { err: { code: (err as { code?: string }).code }, attempt },
          'reading the heads again after a LISTEN reconnect failed; retrying',
        ),
    });
  }

  #onNotify(payload: string): void {
    let n: HeadNotice;
    try {
      n = JSON.parse(payload) as HeadNotice;
    } catch {
      return;
    }
    const stale = this.#heads.stale(n);
    const { meta, records, ...notice } = n;
    this.#noticed.delete(n.streamId);
    if (stale && this.#heads.take(notice, meta)) {
      // Records of our own commits (their notice can come before their answer) are read from
      // the table: what is kept here is for the followers of other daemons' appends.
      if (!this.#o.pending(n.streamId)) this.#keep(notice, records);
      this.#tell(notice);
      return;
    }
    const refresh = stale ? this.#heads.refresh(n.streamId) : Promise.resolve();
    void refresh.then(
      () => {
        this.#tell(notice);
      },
      (err: unknown) =>
        // The code only: a server's message may quote data.
        this.#o.log?.warn(
          { err: { code: (err as { code?: string }).code }, streamId: n.streamId },
          'refreshing a head after a notice failed',
        ),
    );
  }

  #tell(n: HeadNotice): void {
    for (const l of this.#listeners) l.push(n);
  }

  /**
   * Keep the record rows of a notice whose head was taken when they are exactly the records
   * that head added to its generation ([from, nextPosition), in order). Their bodies are the
   * rows the notifying commit inserted; they are checked when read, like rows of the table.
   */
  #keep(n: HeadNotice, rows: unknown): void {
    if (!Array.isArray(rows) || rows.length === 0) return;
    const from = n.nextPosition - rows.length;
    const ok = rows.every((r: unknown, i) => Array.isArray(r) && r.length === 2 && r[0] === from + i && typeof r[1] === 'string');
    if (!ok) return;
    if (this.#noticed.size >= NOTICED_STREAMS) {
      const oldest = this.#noticed.keys().next().value;
      if (oldest !== undefined) this.#noticed.delete(oldest);
    }
    this.#noticed.set(n.streamId, { generation: n.generation, from, rows: rows as Array<[number, string]> });
  }

  /**
   * The rows of [from, end) from the latest notice of the stream, when it holds all of them and
   * none is below the committed head's first position (a trim since); else undefined (read).
   */
  rows(streamId: string, generation: number, from: number, end: number): Array<[number, string]> | undefined {
    const n = this.#noticed.get(streamId);
    const head = this.#heads.get(streamId);
    if (!n || !head || n.generation !== generation || from < n.from || from < head.firstPosition) return undefined;
    if (end > n.from + n.rows.length || from >= end) return undefined;
    return n.rows.slice(from - n.from, end - n.from);
  }

  /**
   * Heads moved by commits (this daemon's and the others'), after the cached head was
   * refreshed: what wakes live followers on every daemon. Ends with `end()`.
   */
  changes(): AsyncIterable<HeadNotice> {
    const queue: HeadNotice[] = [];
    let wake: (() => void) | undefined;
    let ended = this.#ended || this.#o.closing();
    const listener: Listener = {
      push: (n) => {
        queue.push(n);
        wake?.();
      },
      end: () => {
        ended = true;
        wake?.();
      },
    };
    this.#listeners.add(listener);
    const listeners = this.#listeners;
    return {
      async *[Symbol.asyncIterator]() {
        try {
          for (;;) {
            const n = queue.shift();
            if (n) yield n;
            else if (ended) return;
            else await new Promise<void>((r) => (wake = r));
          }
        } finally {
          listeners.delete(listener);
        }
      },
    };
  }

  /** Stop listening and end every `changes()`. */
  async end(): Promise<void> {
    this.#ended = true;
    const unlisten = this.#unlisten;
    this.#unlisten = undefined;
    await unlisten?.().catch(() => {});
    for (const l of this.#listeners) l.end();
  }
}
