import type { JSONRPCRequest, JSONRPCResponse } from 'json-rpc-2.0';
import { JSONRPC_INVALID_REQUEST, YelloError } from '../../shared/errors.js';
import { BATCH_ANSWER_BYTES } from '../limits.js';

// The request checks json-rpc-2.0 does not do safely, and the answers a connection makes itself.

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A request id we can echo exactly (docs/protocol.md §3.3): a string, null, or a number that is
 * a safe integer (|n| ≤ 2^53 − 1). A longer or fractional number may not survive JSON.parse
 * unchanged (a 20-digit id would come back rounded), so it is refused as an invalid request.
 */
export function isId(v: unknown): v is string | number | null {
  return typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v)) || v === null;
}

/** A JSON-RPC 2.0 request or notification object, and nothing else (not a response). */
export function isRequestShape(v: unknown): v is JSONRPCRequest {
  if (!isObject(v)) return false;
  if (v.jsonrpc !== '2.0' || typeof v.method !== 'string') return false;
  if ('id' in v && !isId(v.id)) return false;
  if ('params' in v && v.params !== undefined && typeof v.params !== 'object') return false;
  if ('result' in v || 'error' in v) return false;
  return true;
}

/**
 * The serialized size of one batch element, for the append cap. Only appends need it, and a
 * value too deep to serialize is answered as an invalid request rather than crashing.
 */
export function batchElementSize(m: unknown): number {
  if (!isObject(m) || m.method !== 'streams.append') return 0;
  try {
    return Buffer.byteLength(JSON.stringify(m), 'utf8');
  } catch {
    return Number.MAX_SAFE_INTEGER;
  }
}

export function errorResponse(id: string | number | null, e: YelloError): JSONRPCResponse {
  return { jsonrpc: '2.0', id, error: { code: e.code, message: e.message, data: e.toData() } };
}

/** The answer owed by a batch element that was not run because the batch's answers reached their budget. */
export function notRun(m: unknown, answered: number): JSONRPCResponse | null {
  if (!isRequestShape(m)) return invalidRequest(isObject(m) && isId(m.id) ? m.id : null);
  if (m.id === undefined) return null;
  const message = `not run: the answers of this batch already hold ${answered} bytes (budget ${BATCH_ANSWER_BYTES}); send it again`;
  return errorResponse(m.id, new YelloError('REQUEST_TOO_LARGE', message, { limit: BATCH_ANSWER_BYTES, size: answered }));
}

export function invalidRequest(id: string | number | null): JSONRPCResponse {
  return { jsonrpc: '2.0', id, error: { code: JSONRPC_INVALID_REQUEST, message: 'Invalid Request: not a JSON-RPC 2.0 request object' } };
}
