import { DECIMAL_PATTERN, ID_PATTERN, MESSAGE_ID_PATTERN } from './ids.js';
import type { MethodName, Params } from './schemas.js';

/**
 * Hand-written acceptors for the hottest params (`streams.append`), tried before the zod
 * schema: they accept only inputs the schema accepts, and return exactly what it would return
 * (a property test compares both on generated inputs). Anything they do not accept, valid or
 * not, goes to the schema, which then decides and explains (`path`, `reason`).
 */
export const fastParams: Partial<{ [M in MethodName]: (raw: unknown) => Params<M> | undefined }> = {
  'streams.append': fastAppend,
};

const STREAM_ID = /^[A-Za-z0-9_-]{1,128}:[A-Za-z0-9_-]{1,128}$/;
const APPEND_KEYS = new Set(['streamId', 'coordinatorToken', 'generation', 'expectedPosition', 'operationId', 'records']);

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function onlyKeys(o: Record<string, unknown>, allowed: ReadonlySet<string>, count: number): boolean {
  let n = 0;
  for (const k in o) {
    if (!Object.hasOwn(o, k)) continue;
    if (!allowed.has(k)) return false;
    n++;
  }
  return n === count;
}

const MESSAGE_KEYS = new Set(['type', 'messageId', 'content']);
const RECEIPT_KEYS = new Set(['type', 'peerStreamId', 'peerGeneration', 'nextPosition', 'batchId']);

function fastAppend(raw: unknown): Params<'streams.append'> | undefined {
  if (!isPlainObject(raw) || !onlyKeys(raw, APPEND_KEYS, 6)) return undefined;
  const { streamId, coordinatorToken, generation, expectedPosition, operationId, records } = raw;
  if (typeof streamId !== 'string' || !STREAM_ID.test(streamId)) return undefined;
  if (typeof coordinatorToken !== 'string' || coordinatorToken.length < 1 || coordinatorToken.length > 256) return undefined;
  if (typeof generation !== 'string' || !DECIMAL_PATTERN.test(generation)) return undefined;
  if (typeof expectedPosition !== 'string' || !DECIMAL_PATTERN.test(expectedPosition)) return undefined;
  if (typeof operationId !== 'string' || !ID_PATTERN.test(operationId)) return undefined;
  if (!Array.isArray(records) || records.length < 1 || records.length > 64) return undefined;
  const out: Params<'streams.append'>['records'] = [];
  for (const r of records) {
    if (!isPlainObject(r)) return undefined;
    if (r.type === 'chat.message') {
      if (!onlyKeys(r, MESSAGE_KEYS, 3)) return undefined;
      const { messageId, content } = r;
      if (typeof messageId !== 'string' || !MESSAGE_ID_PATTERN.test(messageId)) return undefined;
      if (typeof content !== 'string' || content.length > 262_144 || !content.isWellFormed()) return undefined;
      out.push({ type: 'chat.message', messageId, content });
    } else if (r.type === 'chat.receipt') {
      if (!onlyKeys(r, RECEIPT_KEYS, 5)) return undefined;
      const { peerStreamId, peerGeneration, nextPosition, batchId } = r;
      if (typeof peerStreamId !== 'string' || !STREAM_ID.test(peerStreamId)) return undefined;
      if (typeof peerGeneration !== 'string' || !DECIMAL_PATTERN.test(peerGeneration)) return undefined;
      if (typeof nextPosition !== 'string' || !DECIMAL_PATTERN.test(nextPosition)) return undefined;
      if (typeof batchId !== 'string' || batchId.length < 1 || batchId.length > 1024) return undefined;
      out.push({ type: 'chat.receipt', peerStreamId, peerGeneration, nextPosition, batchId });
    } else {
      return undefined;
    }
  }
  return { streamId, coordinatorToken, generation, expectedPosition, operationId, records: out };
}
