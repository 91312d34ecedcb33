import { errors } from '../../shared/errors.js';
import type { TokenCodec } from '../crypto/token-codec.js';

/**
 * Default page of every list method (`agents.list`, `grants.list`, `chats.list`); at most 500.
 * 500 of the largest agents (a 256-character name, a 2,048-character image) are about 1.3 MB, so
 * no page comes near the 16 MiB answer cap, however many rows the table holds.
 */
export const LIST_LIMIT = 100;

/**
 * Where the page a list `cursor` of `kind` continues from: the sealed position of the last entry
 * of the previous page (docs/protocol.md §6.9). A cursor binds where its page ended, and so its
 * filter: one that does not start with `scope` (another filter's) is INVALID_PARAMS at `cursor`,
 * as is one that fails its HMAC, is of another kind, or is not `segments` ids joined by `/` (ids
 * never contain one: a cursor an older daemon sealed around a LevelDB key is refused, not misread).
 */
export function openListCursor(
  codec: TokenCodec,
  kind: string,
  cursor: string | undefined,
  scope: string,
  segments: number,
): string | undefined {
  if (cursor === undefined) return undefined;
  const after = codec.open(kind, cursor);
  if (typeof after !== 'string' || !after.startsWith(scope) || after.split('/').length !== segments)
    throw errors.invalidParams('cursor', `not a cursor of ${kind} for this list (HMAC check failed, wrong kind or another filter)`);
  return after;
}

/**
 * The page of `rows` (read with `limit + 1`, so an answer is bounded by the page whatever the
 * table holds) and the cursor of the next one, sealing the position `positionOf` gives the
 * page's last entry; null on the last page.
 */
export function listPage<T>(
  codec: TokenCodec,
  kind: string,
  rows: T[],
  limit: number,
  positionOf: (row: T) => string,
): { entries: T[]; nextCursor: string | null } {
  const entries = rows.slice(0, limit);
  const last = entries[entries.length - 1];
  return { entries, nextCursor: rows.length > limit && last !== undefined ? codec.seal(kind, positionOf(last)) : null };
}
