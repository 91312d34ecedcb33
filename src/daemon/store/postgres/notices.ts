// The notices of the PostgreSQL streams port: what a commit that moved a head tells every daemon
// of the store through `pg_notify` (stream-notices.ts reads them). Built by the daemon, not by
// the statement: building JSON and md5s in SQL was a quarter of the server's time per group
// commit (bench/README.md "(g) on 2026-12-03, optimistic admission"), and the server is what a
// loaded host runs out of first. A notice is a wake-up with the new head, never the records:
// NOTIFY sends every notice to every daemon listening (the notifier's own included), so records
// in it cost every daemon for every append, whether or not any of its agents follows that chat;
// a follower's daemon reads them from the table instead (bench/pg-fanout.mjs: an idle second
// daemon's CPU per append of a loaded one fell from 24.2 to 18.2 µs; bench/README.md).

import { hash } from 'node:crypto';

/** The channel of `pg_notify` at the end of every commit that moved a head. */
export const STREAMS_CHANNEL = 'yello_streams';

/**
 * A notice payload must be shorter than this (PostgreSQL's NOTIFY limit, 8000 bytes in a default
 * build; a longer one fails the statement, and with it the commit). A notice that would not fit
 * with the head goes without it (the listener reads it instead).
 */
export const NOTICE_MAX_BYTES = 8000;

/** What another daemon (or this one) committed: a wake-up, the data is read from the tables. */
export interface HeadNotice {
  streamId: string;
  generation: number;
  nextPosition: number;
  /**
   * md5 of the head's stored body: a release or a trim moves neither the generation nor the
   * position, so a cached head is refreshed whenever its body differs from the one notified.
   */
  digest?: string;
  /**
   * md5 of the body of the head this commit replaced (absent when its change did not require
   * that exact body). With `meta`, a listener whose cached head has that digest takes the new
   * head from the notice, without reading it: the notice is then the very next change of the
   * head it knows.
   */
  prev?: string;
  /** The head's stored body, when the notice had room for it (NOTICE_MAX_BYTES). */
  meta?: string;
}

/** The payload of a notice: all of it when it fits, else without the head. */
export function noticePayload(n: HeadNotice): string {
  // Field by field: whatever else a caller's object holds stays out of every daemon's feed.
  const full = JSON.stringify({
    streamId: n.streamId,
    generation: n.generation,
    nextPosition: n.nextPosition,
    digest: n.digest,
    prev: n.prev,
    meta: n.meta,
  });
  // A JSON string is at most 3 bytes per UTF-16 unit: most notices are measured without encoding.
  if (full.length * 3 < NOTICE_MAX_BYTES || Buffer.byteLength(full, 'utf8') < NOTICE_MAX_BYTES) return full;
  return JSON.stringify({ streamId: n.streamId, generation: n.generation, nextPosition: n.nextPosition, digest: n.digest });
}

/** The digest of a notice: md5 of the head's stored body (as PostgreSQL's `md5(text)`). */
export function headDigest(body: string): string {
  // The one-shot skips the Hash object (hashing.ts); two per change of a group.
  return hash('md5', body, 'hex');
}
