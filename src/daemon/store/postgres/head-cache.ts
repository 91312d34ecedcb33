// The committed heads of a PostgreSQL store, in memory: every head loaded at open, kept current
// from this daemon's commits as they settle and from the other daemons' notices (stream-notices.ts).
// Several daemons write the same heads, so this is a cache: a change decided on it carries it as
// a precondition, checked in the transaction, and a refusal decided on it is confirmed on a
// re-read head (`refresh`). Each head is kept with its stored body: a change decided on it
// requires that exact body, and a notice names the body it replaced by its digest.

import type { StreamMeta } from '../port/values.js';
import type { HeadNotice } from './notices.js';
import { headDigest } from './notices.js';
import { decodeRow, encodeRow, RowKey } from './row-codec.js';
import { selectHead, selectHeads, type Scope } from './stream-statements.js';

/** A stored head body as the head (CORRUPT when it fails its check). */
export function decodeHead(streamId: string, body: string): StreamMeta {
  return decodeRow<StreamMeta>(RowKey.head(streamId), body, { streamId });
}

/** Whether `a` is at a later position than `b` (a later generation, or further in the same one). */
function ahead(a: StreamMeta, b: { generation: number; nextPosition: number }): boolean {
  return a.generation > b.generation || (a.generation === b.generation && a.nextPosition > b.nextPosition);
}

export class HeadCache {
  readonly #sql: Scope;
  readonly #committed = new Map<string, StreamMeta>();
  /** The stored body of each committed head (what a change decided on it requires). */
  readonly #bodies = new Map<string, string>();
  /**
   * Bumped by every settle of a stream and every head taken from a notice: a refresh read
   * before one is older than what it cached.
   */
  readonly #settles = new Map<string, number>();
  /** The stored body of the head a stale change found (read in its transaction), until it settles. */
  readonly #staleBodies = new Map<string, string>();

  constructor(sql: Scope) {
    this.#sql = sql;
  }

  get(streamId: string): StreamMeta | undefined {
    return this.#committed.get(streamId);
  }

  /** The stored body of the committed head, or undefined. */
  body(streamId: string): string | undefined {
    return this.#bodies.get(streamId);
  }

  /** Cache a committed head with its stored body (encoded when not read from the table); undefined: the stream is gone. */
  set(streamId: string, meta: StreamMeta | undefined, body?: string): void {
    if (meta) {
      this.#committed.set(streamId, meta);
      this.#bodies.set(streamId, body ?? encodeRow(RowKey.head(streamId), meta));
    } else {
      this.#committed.delete(streamId);
      this.#bodies.delete(streamId);
    }
  }

  /** Heads committed outside this daemon's stream commits (a chat's two, created with it): cached unless one is known. */
  learn(heads: readonly StreamMeta[]): void {
    for (const h of heads) if (!this.#committed.has(h.streamId)) this.set(h.streamId, h);
  }

  /** A change of the stream settled: a refresh read before it is older. */
  bump(streamId: string): void {
    this.#settles.set(streamId, (this.#settles.get(streamId) ?? 0) + 1);
  }

  /** A change refused as stale found this head body in its transaction: the committed head once it settles. */
  noteStale(streamId: string, body: string): void {
    this.#staleBodies.set(streamId, body);
  }

  /** The body a stale change found, taken once (at its settle). */
  takeStale(streamId: string): string | undefined {
    const body = this.#staleBodies.get(streamId);
    this.#staleBodies.delete(streamId);
    return body;
  }

  /** Load every head (open, and after notices may have been lost). */
  async load(): Promise<void> {
    for (const r of await selectHeads(this.#sql)) this.set(r.stream_id, decodeHead(r.stream_id, r.meta), r.meta);
  }

  /**
   * Read every head and cache each that moved and that no commit of ours settled meanwhile (nor
   * a notice since brought further); `moved` is told of each, as its lost notice would have been.
   */
  async catchUp(closing: () => boolean, moved: (n: HeadNotice) => void): Promise<void> {
    const settles = new Map(this.#settles);
    const rows = await selectHeads(this.#sql);
    for (const r of rows) {
      if (closing()) return;
      if ((this.#settles.get(r.stream_id) ?? 0) !== (settles.get(r.stream_id) ?? 0)) continue;
      if (this.#bodies.get(r.stream_id) === r.meta) continue;
      const meta = decodeHead(r.stream_id, r.meta);
      // A notice on the new session may have refreshed it to a later head while this read ran.
      const cached = this.#committed.get(r.stream_id);
      if (cached && ahead(cached, meta)) continue;
      this.set(r.stream_id, meta, r.meta);
      moved({ streamId: r.stream_id, generation: meta.generation, nextPosition: meta.nextPosition, digest: headDigest(r.meta) });
    }
  }

  /** Read one head again; cached unless a commit of ours settled meanwhile (it knows a head at least as new). */
  async refresh(streamId: string): Promise<StreamMeta | undefined> {
    const settles = this.#settles.get(streamId) ?? 0;
    const row = await selectHead(this.#sql, streamId);
    const meta = row ? decodeHead(streamId, row.meta) : undefined;
    // A change after it from another daemon sends its own notice (and makes our next change stale, which reloads it).
    if ((this.#settles.get(streamId) ?? 0) === settles) this.set(streamId, meta, row?.meta);
    return meta;
  }

  /** Whether a notice says the cached head is older than the one committed. */
  stale(n: HeadNotice): boolean {
    const cached = this.#committed.get(n.streamId);
    const body = this.#bodies.get(n.streamId);
    if (n.digest !== undefined) return body === undefined || headDigest(body) !== n.digest;
    return !cached || cached.generation < n.generation || (cached.generation === n.generation && cached.nextPosition < n.nextPosition);
  }

  /**
   * Cache the head a notice carries, when it is the very next change of the cached one (its
   * `prev` is the cached body's digest) and its body checks out: no read then. Notices arrive in
   * commit order, so a notice whose `prev` is not the cached head (one of ours settled before an
   * earlier notice arrived, notices lost with a LISTEN connection) is read instead, as is one
   * without its body (too long for a notice). Returns whether it took the head.
   */
  take(n: HeadNotice, meta: string | undefined): boolean {
    const body = this.#bodies.get(n.streamId);
    const known = body === undefined ? undefined : headDigest(body);
    if (meta === undefined || n.prev === undefined || n.prev !== known || typeof meta !== 'string') return false;
    if (n.digest !== undefined && headDigest(meta) !== n.digest) return false;
    let head: StreamMeta;
    try {
      head = decodeHead(n.streamId, meta);
    } catch {
      return false;
    }
    if (head.streamId !== n.streamId || head.generation !== n.generation || head.nextPosition !== n.nextPosition) return false;
    // A refresh read before this is older than this head: it must not overwrite it.
    this.bump(n.streamId);
    this.set(n.streamId, head, meta);
    return true;
  }
}
