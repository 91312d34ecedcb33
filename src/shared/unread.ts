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

/**
 * Whether the peer stream holds nothing after the reader's latest receipt: its head is the
 * receipt, in the current generation (or an untouched first generation and no receipt). Then
 * nothing can be unread and nothing can be behind a break, so a reader need not follow the
 * stream to know; anything else (records after the receipt, which may be only the peer's
 * receipts and fences; a receipt of an older generation) has to be read to say.
 */
export function nothingAfterReceipt(peer: StreamState): boolean {
  const ack = peer.acknowledged;
  if (ack && ack.generation === peer.generation) return ack.nextPosition === peer.nextPosition;
  return !ack && peer.generation === '1' && peer.nextPosition === '0';
}
