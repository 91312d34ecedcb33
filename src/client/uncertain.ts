import type { OperationInfo } from '../shared/results.js';
import type { StreamState } from '../shared/types.js';
import { ConnectionLostError, StorageFailureError, TimeoutError } from './errors.js';
import type { YelloClient } from './yello-client.js';

/**
 * Whether an append's failure leaves its outcome unknown: the connection died or timed out
 * after the request was written, or the daemon's synced write failed (it may be on disk).
 */
export function isOutcomeUnknown(err: unknown): boolean {
  if (err instanceof ConnectionLostError) return err.outcomeUnknown;
  if (err instanceof TimeoutError) return true;
  return err instanceof StorageFailureError && err.data.outcome === 'unknown';
}

/**
 * Ask the daemon how an append of unknown outcome ended (`operations.get`), and the stream's
 * head as it stands after it (`streams.get`). Null while it cannot tell yet: the question got
 * no answer (ask again), or the operation is still pending its sync (ask again shortly).
 */
export async function lookUpOperation(
  client: YelloClient,
  streamId: string,
  operationId: string,
): Promise<{ operation: OperationInfo; head: StreamState } | null> {
  let operation: OperationInfo;
  try {
    operation = await client.call('operations.get', { streamId, operationId });
  } catch (err) {
    if (err instanceof ConnectionLostError || err instanceof TimeoutError) return null;
    throw err;
  }
  if (operation.state === 'pending') {
    await new Promise((r) => setTimeout(r, 20));
    return null;
  }
  return { operation, head: await client.call('streams.get', { streamId }) };
}
