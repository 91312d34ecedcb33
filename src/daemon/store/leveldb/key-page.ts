import { errors } from '../../../shared/errors.js';
import type { TokenCodec } from '../../crypto/token-codec.js';
import { prefixEnd } from './key-layout.js';
import type { Storage } from './storage.js';

/**
 * Default page of every list method (`agents.list`, `grants.list`, `chats.list`); at most 500.
 * 500 of the largest agents (a 256-character name, a 2,048-character image) are about 1.3 MB, so
 * no page comes near the 16 MiB answer cap, however many rows the table holds.
 */
export const LIST_LIMIT = 100;

/** One page of a list method, and the cursor of the next one (null on the last page). */
export interface KeyPage<T> {
  entries: Array<{ key: string; value: T }>;
  nextCursor: string | null;
}

/**
 * A page of the stored values under `prefix`, in key order, at most `limit`, continuing after
 * the key a `cursor` of `kind` names (docs/protocol.md §6.9: a list cursor binds where the page
 * ended, and so its prefix: a cursor of another filter is INVALID_PARAMS at `cursor`). Reads
 * `limit + 1` entries, so an answer is bounded by the page whatever the table holds.
 */
export async function keyPage<T>(
  storage: Storage,
  codec: TokenCodec,
  kind: string,
  prefix: string,
  cursor: string | undefined,
  limit: number,
): Promise<KeyPage<T>> {
  let range: { gte: string } | { gt: string } = { gte: prefix };
  if (cursor !== undefined) {
    const after = codec.open(kind, cursor);
    if (typeof after !== 'string' || !after.startsWith(prefix))
      throw errors.invalidParams('cursor', `not a cursor of ${kind} for this list (HMAC check failed, wrong kind or another filter)`);
    range = { gt: after };
  }
  const entries: Array<{ key: string; value: T }> = [];
  for await (const entry of storage.entries<T>({ ...range, lt: prefixEnd(prefix), limit: limit + 1 })) entries.push(entry);
  const page = entries.slice(0, limit);
  const last = page[page.length - 1];
  return { entries: page, nextCursor: entries.length > limit && last ? codec.seal(kind, last.key) : null };
}
