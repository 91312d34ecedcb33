// What a trim left behind on LevelDB (`sweepTrimmed` of the stream port), deleted in synced
// batches of at most TRIM_DELETE_BATCH keys, so a huge trim never builds one giant batch: the
// records below the new first position (the record counter already went down with the trim),
// the operations wholly below it with their log entries, and the message ids of trimmed messages.

import { TRIM_DELETE_BATCH } from '../port/stream-kernel.js';
import type { SweepResult } from '../port/stream-port.js';
import { K, prefixEnd } from './key-layout.js';
import type { Storage, WriteOp } from './storage.js';
import type { StreamTables } from './stream-tables.js';

export async function sweepTrimmed(
  storage: Storage,
  tables: StreamTables,
  streamId: string,
  generation: number,
  firstPosition: number,
): Promise<SweepResult> {
  const done = { records: 0, operations: 0, messageIds: 0 };
  if (firstPosition === 0) return done;
  let batch: WriteOp[] = [];
  const flush = async () => {
    if (batch.length > 0) await storage.write(batch);
    batch = [];
  };
  const recordsPrefix = K.recordsPrefix(streamId, generation);
  for await (const key of storage.keys({ gte: recordsPrefix, lt: K.record(streamId, generation, firstPosition) })) {
    batch.push({ type: 'del', key });
    done.records++;
    if (batch.length >= TRIM_DELETE_BATCH) await flush();
  }
  await flush();
  for await (const { key, value: operationId } of storage.entries<string>({
    gte: K.opLog(streamId, generation, 0),
    lt: K.opLog(streamId, generation, firstPosition),
  })) {
    const op = tables.operation(streamId, operationId);
    // Cut in two by the trim: it stays, and so does every later one.
    if (op && op.nextPosition > firstPosition) break;
    // An operation's entry and its log entry go together, so a crash never leaves a log
    // entry without its operation (which operations.get would report as damage).
    batch.push({ type: 'del', key }, { type: 'del', key: K.operation(streamId, operationId) });
    done.operations++;
    if (batch.length >= TRIM_DELETE_BATCH) await flush();
  }
  await flush();
  const idsPrefix = K.messageIdsPrefix(streamId, generation);
  for await (const { key, value: position } of storage.entries<string>({ gte: idsPrefix, lt: prefixEnd(idsPrefix) })) {
    if (Number(position) >= firstPosition) continue;
    batch.push({ type: 'del', key });
    done.messageIds++;
    if (batch.length >= TRIM_DELETE_BATCH) await flush();
  }
  await flush();
  return done;
}
