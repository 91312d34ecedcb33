import type { StoredRecord, StreamState } from './types.js';

/**
 * What "unread" means wherever a count of it is shown (the inbox, the console's overview): the
 * messages of the peer stream's current generation from where the reader's latest receipt of
 * that generation leaves off; from its first retained position when there is no such receipt
 * or a trim passed it. (A receipt of an older generation says nothing of the current one.)
 */
export function unreadFrom(s: StreamState): bigint {
  const first = BigInt(s.firstPosition);
  const ack = s.acknowledged && s.acknowledged.generation === s.generation ? BigInt(s.acknowledged.nextPosition) : first;
  return ack > first ? ack : first;
}

/** Whether `r`, a record of the stream's current generation, is an unread message (see {@link unreadFrom}). */
export function isUnreadMessage(r: StoredRecord, from: bigint): boolean {
  return r.wrapper.type === 'chat.message' && BigInt(r.position) >= from;
}
