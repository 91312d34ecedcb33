// How a head change decided on the head in memory is decided again. The head in memory may be
// older than the store's (with many daemons on one PostgreSQL database, another daemon's commit
// may not have been heard yet), so a change whose commit found the head moved is decided again
// on the new one, and a refusal decided on the old one is answered only once the store's head
// says the same. Every writer of heads (appends, claims, releases, trims, resets) goes through
// these, with the same number of attempts.

import { errors } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import type { CommitOutcome } from '../store/port/stream-port.js';
import type { StreamMeta } from '../store/stream-meta.js';
import type { StreamHeads } from './heads.js';

/** Decisions of one request, the last one answering with the head it found (no more retries). */
export const MAX_ATTEMPTS = 3;

/** Run `attempt` until it answers something other than 'stale'; `last` is true on the final try. */
export async function decideAgain<T>(attempt: (last: boolean) => Promise<T | 'stale'>): Promise<T> {
  for (let n = 1; ; n++) {
    const result = await attempt(n === MAX_ATTEMPTS);
    if (result !== 'stale') return result;
  }
}

/**
 * Answer `refusal`, decided on `decidedOn` (the head in memory), unless the store's head of
 * `streamId` has moved since and attempts are left: then 'stale', decided again on that one.
 */
export async function refuseUnlessMoved(
  heads: StreamHeads,
  streamId: string,
  decidedOn: StreamMeta,
  last: boolean,
  refusal: Error,
): Promise<'stale'> {
  if (!last && (await heads.movedSince(streamId, decidedOn))) return 'stale';
  throw refusal;
}

/**
 * Whether a head change must be decided again: stale with attempts left. Stale on the last
 * attempt is POSITION_MISMATCH with the head that moved; a claim, release, trim or reset has no
 * unique key, so a duplicate is a broken invariant of the backend.
 */
export function stale(outcome: Exclude<CommitOutcome, { status: 'unknown' | 'denied' }>, last: boolean): boolean {
  if (outcome.status === 'ok') return false;
  if (outcome.status === 'stale') {
    if (!last) return true;
    throw errors.positionMismatch(formatDecimal(outcome.head?.nextPosition ?? 0), formatDecimal(outcome.head?.generation ?? 0));
  }
  throw new Error(`a head change was refused as a duplicate ${outcome.what}`);
}
