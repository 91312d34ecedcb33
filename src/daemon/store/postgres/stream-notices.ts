// The notice feed of the PostgreSQL streams port: LISTEN on the streams channel, where every
// commit that moved a head says so (notices.ts). A notice refreshes the cached head (head-cache.ts:
// taken from the notice when it is the very next change of the cached one, else read) and wakes
// the listeners of `changes()` (live followers, which read the records from the table, long
// polls, the store's counts). A LISTEN reconnect loses the notices sent while it was down: every
// head is read again and each one that moved is told as its notice would have been.

import type { Logger } from 'pino';
import type { Sql } from './connection.js';
import type { HeadCache } from './head-cache.js';
import { STREAMS_CHANNEL, type HeadNotice } from './notices.js';
import { retryUntilDone } from './retry.js';

interface Listener {
  push(n: HeadNotice): void;
  end(): void;
}

export interface NoticeFeedOptions {
  log?: Logger | undefined;
  /** Whether the store is closing (read at every step of a catch-up). */
  closing(): boolean;
}

export class NoticeFeed {
  readonly #sql: Sql;
  readonly #heads: HeadCache;
  readonly #o: NoticeFeedOptions;
  readonly #listeners = new Set<Listener>();
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

  /**
   * After a LISTEN reconnect: read every head, cache each that differs from the cached one, and
   * tell it like a notice, so followers and long polls read what they were not told of and the
   * store counts it. Retried with backoff while the database does not answer: until it is done,
   * this daemon may serve heads older than the database's.
   */
  #catchUp(): void {
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
    const { meta, ...notice } = n;
    if (stale && this.#heads.take(notice, meta)) {
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
