import { CHECKPOINT_TYPE } from '../shared/checkpoint.js';
import { DECIMAL_PATTERN } from '../shared/ids.js';
import type { Checkpoint, StoredRecord } from '../shared/types.js';

// The first stage of `verifyExport`: which lines of an export have the shape of a stored record
// or a checkpoint, so that the later checks read their members without tripping over missing ones.

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
export const isString = (v: unknown): v is string => typeof v === 'string';
export const isDecimal = (v: unknown): v is string => typeof v === 'string' && DECIMAL_PATTERN.test(v);

/** The shape of a stored record (§5.2), enough to check it without tripping over missing members. */
export function isStoredRecord(v: Record<string, unknown>): v is Record<string, unknown> & StoredRecord {
  const w = v.wrapper;
  if (!isString(v.streamId) || !isDecimal(v.generation) || !isDecimal(v.position) || !isObject(w)) return false;
  if (!isString(w.chatId) || !isString(w.authorAgentId) || !isString(w.operationId) || !Number.isSafeInteger(w.recordIndex)) return false;
  if (w.type === 'chat.message') {
    const m = w.message;
    return (
      isObject(m) &&
      isString(m.chatId) &&
      isString(m.fromAgentId) &&
      isString(m.toAgentId) &&
      isString(m.clientMessageId) &&
      isString(m.content) &&
      isString(m.contentSha256) &&
      isObject(m.signature) &&
      isString(m.signature.kid) &&
      isString(m.signature.alg) &&
      isString(m.signature.value) &&
      isString(m.signature.createdAt)
    );
  }
  if (w.type === 'chat.receipt') {
    const r = w.receipt;
    return isObject(r) && isString(r.peerStreamId) && isString(r.peerGeneration) && isString(r.nextPosition) && isString(r.batchId);
  }
  if (w.type === 'chat.writer-fence') return isObject(w.fence) && isString(w.fence.epoch);
  return false;
}

/** The shape of a checkpoint (§5.9). */
export function isCheckpoint(v: unknown): v is Checkpoint {
  if (!isObject(v) || v.type !== CHECKPOINT_TYPE) return false;
  const s = v.signature;
  return (
    isString(v.streamId) &&
    isString(v.chatId) &&
    isString(v.authorAgentId) &&
    isDecimal(v.generation) &&
    isDecimal(v.firstPosition) &&
    isDecimal(v.nextPosition) &&
    isDecimal(v.recordCount) &&
    isString(v.chainDigest) &&
    isString(v.createdAt) &&
    isObject(s) &&
    isString(s.kid) &&
    isString(s.alg) &&
    isString(s.value)
  );
}
