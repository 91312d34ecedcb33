import type { ParamsIn } from '../shared/method-types.js';
import type { ChatBatchNotification, ReadBatch, StoredRecord } from '../shared/types.js';

/**
 * A daemon batch of the peer stream that holds at least one message: what a reader is shown
 * and acknowledges. Receipts and fences of the range stay in `records` (a receipt covers the
 * whole range), but a batch of only those is never a MessageBatch.
 */
export interface MessageBatch {
  chatId: string;
  streamId: string;
  generation: string;
  fromPosition: string;
  nextPosition: string;
  /** Names this presentation for the receipt (docs/protocol.md §6.9). */
  batchId: string;
  /** Every record of the range, in position order. */
  records: StoredRecord[];
  /** The `chat.message` records of `records`. */
  messages: StoredRecord[];
  /** The compound cursor after this batch ('' for a batch rebuilt from a `streams.read`). */
  cursor: string;
}

/** A receipt as `streams.append` takes it. */
export type ReceiptRecordInput = Extract<ParamsIn<'streams.append'>['records'][number], { type: 'chat.receipt' }>;

/** The `chat.message` records among `records`. */
export function messagesOf(records: readonly StoredRecord[]): StoredRecord[] {
  return records.filter((r) => r.wrapper.type === 'chat.message');
}

/**
 * A MessageBatch from a `chats.batch` or a `streams.read` answer, or from one kept across a
 * restart (its batch id stays valid as long as the daemon's secret does). Null when the
 * batch holds no message: there is nothing to show or acknowledge in it.
 */
export function toMessageBatch(
  chatId: string,
  batch: Pick<ChatBatchNotification | ReadBatch, 'streamId' | 'generation' | 'fromPosition' | 'nextPosition' | 'batchId' | 'records'> & {
    cursor?: string;
  },
): MessageBatch | null {
  const messages = messagesOf(batch.records);
  if (messages.length === 0) return null;
  return {
    chatId,
    streamId: batch.streamId,
    generation: batch.generation,
    fromPosition: batch.fromPosition,
    nextPosition: batch.nextPosition,
    batchId: batch.batchId,
    records: batch.records,
    messages,
    cursor: batch.cursor ?? '',
  };
}

/**
 * The one receipt builder: acknowledges `batch` and, receipts being cumulative, everything of
 * its peer generation before its `nextPosition` (docs/protocol.md §5.6).
 */
export function receiptFor(batch: Pick<MessageBatch, 'streamId' | 'generation' | 'nextPosition' | 'batchId'>): ReceiptRecordInput {
  return {
    type: 'chat.receipt',
    peerStreamId: batch.streamId,
    peerGeneration: batch.generation,
    nextPosition: batch.nextPosition,
    batchId: batch.batchId,
  };
}

// The order of positions lives in src/shared/positions.ts; readers of batches find it here too.
export { isAfter } from '../shared/positions.js';
