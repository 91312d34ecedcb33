import { formatDecimal } from '../../shared/ids.js';
import type { MessageSignature, Redaction, StoredRecord } from '../../shared/types.js';

/**
 * The stored (compact) form of records, operations and stream tails. A record's key already
 * names its stream, generation and position, and the stream names its chat, author and peer,
 * so the stored value keeps only what varies: about half the bytes of the wire form, written
 * on every append (bench/README.md, "storage layout"). Reads expand it back to exactly the
 * record the append answered with, key order included.
 */

/** A record as stored. */
export type CompactRecord =
  | [
      'm',
      operationId: string,
      recordIndex: number,
      clientMessageId: string,
      content: string,
      contentSha256: string,
      kid: string,
      signature: string,
      createdAt: string,
    ]
  | ['r', operationId: string, recordIndex: number, peerStreamId: string, peerGeneration: string, nextPosition: string, batchId: string]
  | ['f', epoch: string, claimedAt: string, replaced: boolean, reason: string | null];

/**
 * The compact form stores neither the wrapper version nor the signature algorithm: each has a
 * single value, which expansion restores. `Sole` turns a second value into a compile error here
 * rather than letting compaction drop it.
 */
type Sole<T, V extends T> = [T] extends [V] ? V : never;
const WRAPPER_VERSION: Sole<StoredRecord['wrapper']['version'], 2> = 2;
const SIGNATURE_ALG: Sole<MessageSignature['alg'], 'ES256'> = 'ES256';

/** What a stored record does not repeat: its place, and the stream's chat, author and peer. */
export interface RecordPlace {
  streamId: string;
  generation: number;
  position: number;
  chatId: string;
  authorAgentId: string;
  peerAgentId: string;
}

/**
 * The compact form of `record`, or the record itself when a field it would drop does not agree
 * with its place (never from this daemon's append path; kept so nothing is ever lost).
 */
export function compactRecord(record: StoredRecord, place: RecordPlace): CompactRecord | StoredRecord {
  const w = record.wrapper;
  if (
    record.streamId !== place.streamId ||
    record.generation !== formatDecimal(place.generation) ||
    record.position !== formatDecimal(place.position)
  )
    return record;
  if (w.chatId !== place.chatId || w.authorAgentId !== place.authorAgentId) return record;
  switch (w.type) {
    case 'chat.message': {
      const m = w.message;
      if (m.chatId !== place.chatId || m.fromAgentId !== place.authorAgentId || m.toAgentId !== place.peerAgentId) return record;
      return [
        'm',
        w.operationId,
        w.recordIndex,
        m.clientMessageId,
        m.content,
        m.contentSha256,
        m.signature.kid,
        m.signature.value,
        m.signature.createdAt,
      ];
    }
    case 'chat.receipt': {
      const r = w.receipt;
      return ['r', w.operationId, w.recordIndex, r.peerStreamId, r.peerGeneration, r.nextPosition, r.batchId];
    }
    case 'chat.writer-fence': {
      const f = w.fence;
      if (w.operationId !== `fence.${f.epoch}` || w.recordIndex !== 0) return record;
      return ['f', f.epoch, f.claimedAt, f.replaced, f.reason ?? null];
    }
  }
}

/** The full record of a stored value (compact, or a full record kept as it was). */
export function expandRecord(stored: CompactRecord | StoredRecord, place: RecordPlace): StoredRecord {
  if (!Array.isArray(stored)) return stored;
  const head = { streamId: place.streamId, generation: formatDecimal(place.generation), position: formatDecimal(place.position) };
  switch (stored[0]) {
    case 'm': {
      const [, operationId, recordIndex, clientMessageId, content, contentSha256, kid, value, createdAt] = stored;
      return {
        ...head,
        wrapper: {
          version: WRAPPER_VERSION,
          chatId: place.chatId,
          authorAgentId: place.authorAgentId,
          operationId,
          recordIndex,
          type: 'chat.message',
          message: {
            chatId: place.chatId,
            fromAgentId: place.authorAgentId,
            toAgentId: place.peerAgentId,
            clientMessageId,
            content,
            contentSha256,
            signature: { kid, alg: SIGNATURE_ALG, value, createdAt },
          },
        },
      };
    }
    case 'r': {
      const [, operationId, recordIndex, peerStreamId, peerGeneration, nextPosition, batchId] = stored;
      return {
        ...head,
        wrapper: {
          version: WRAPPER_VERSION,
          chatId: place.chatId,
          authorAgentId: place.authorAgentId,
          operationId,
          recordIndex,
          type: 'chat.receipt',
          receipt: { peerStreamId, peerGeneration, nextPosition, batchId },
        },
      };
    }
    case 'f': {
      const [, epoch, claimedAt, replaced, reason] = stored;
      return {
        ...head,
        wrapper: {
          version: WRAPPER_VERSION,
          chatId: place.chatId,
          authorAgentId: place.authorAgentId,
          operationId: `fence.${epoch}`,
          recordIndex: 0,
          type: 'chat.writer-fence',
          fence: { epoch, claimedAt, replaced, ...(reason !== null ? { reason } : {}) },
        },
      };
    }
    default:
      throw new TypeError(`unknown stored record tag ${String((stored as unknown[])[0])}`);
  }
}

/** The clientMessageId of a stored message (compact or whole), else null. */
export function storedClientMessageId(stored: CompactRecord | StoredRecord): string | null {
  if (Array.isArray(stored)) return stored[0] === 'm' ? stored[3] : null;
  return stored.wrapper.type === 'chat.message' ? stored.wrapper.message.clientMessageId : null;
}

/** An operation as the daemon uses it. */
export interface StoredOperation {
  operationId: string;
  generation: number;
  firstPosition: number;
  nextPosition: number;
  committedAt: string;
  requestDigest: string;
  redactions: Redaction[];
}

/** An operation as stored under `o/<streamId>/<operationId>` (the id is in the key). */
export type CompactOperation = [
  generation: number,
  firstPosition: number,
  nextPosition: number,
  committedAt: string,
  requestDigest: string,
  redactions: Redaction[],
];

export function compactOperation(op: StoredOperation): CompactOperation {
  return [op.generation, op.firstPosition, op.nextPosition, op.committedAt, op.requestDigest, op.redactions];
}

export function expandOperation(operationId: string, stored: CompactOperation | StoredOperation): StoredOperation {
  if (!Array.isArray(stored)) return stored;
  const [generation, firstPosition, nextPosition, committedAt, requestDigest, redactions] = stored;
  return { operationId, generation, firstPosition, nextPosition, committedAt, requestDigest, redactions };
}

/**
 * The part of a stream head every append changes, stored under its own small key (`h/`), so
 * the full head (`s/`: writer, sealed generations, trim point) is written only when those change.
 */
export type StreamTail = [
  generation: number,
  nextPosition: number,
  lastCreatedAt: string | null,
  receiptGeneration: number | null,
  receiptNextPosition: number | null,
];
