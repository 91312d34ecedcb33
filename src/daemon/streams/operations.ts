import { errors, type YelloError } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import type { OperationInfo } from '../../shared/results.js';
import type { Caller } from '../caller.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { Integrity } from '../store/integrity.js';
import { K, prefixEnd } from '../store/leveldb/key-layout.js';
import type { StoredOperation } from '../store/record-layout.js';
import type { Storage } from '../store/leveldb/storage.js';
import type { StreamMeta } from '../store/stream-meta.js';
import type { StreamTables } from '../store/leveldb/stream-tables.js';
import { assertReader } from './access.js';
import type { StreamContext } from './context.js';
import type { StreamHeads } from './heads.js';

const OPS_CURSOR_KIND = 'ops';

/**
 * `operations.get` and `operations.list`: what became of an append, looked up by its
 * operationId, and the stream's operations in commit order.
 */
export class Operations {
  readonly #storage: Storage;
  readonly #heads: StreamHeads;
  readonly #tables: StreamTables;
  readonly #integrity: Integrity;
  readonly #codec: TokenCodec;

  constructor({ storage, heads, tables, integrity, codec }: StreamContext) {
    this.#storage = storage;
    this.#heads = heads;
    this.#tables = tables;
    this.#integrity = integrity;
    this.#codec = codec;
  }

  /**
   * `operations.get`. An operation absent from a stream that lost records cannot be called
   * "never committed": that is a STORAGE_FAILURE/CORRUPT, not `unknown`.
   */
  async get(caller: Caller, streamId: string, operationId: string): Promise<OperationInfo> {
    this.#readable(caller, streamId);
    const key = K.operation(streamId, operationId);
    // Pending first: admitted and waiting for its fsync, or its fsync failed and only a restart
    // tells. LevelDB shows a batch to point reads a moment before the daemon has published the
    // new head; answering "committed" from that would disagree with streams.get.
    if (this.#storage.hasPending(key) || this.#storage.inDoubt(key)) return noOperation(operationId, 'pending');
    const committed = this.#tables.operation(streamId, operationId);
    if (committed !== undefined) return operationInfo(committed);
    this.#integrity.assertIntact(streamId);
    // "unknown" means "never committed", which the answer's reader acts on (it may send again):
    // confirm it against the operation log, so a lost index entry is reported, not denied.
    // A scan of the stream's (small) log entries, on this path only.
    const prefix = K.opLogPrefix(streamId);
    for await (const { key: logKey, value } of this.#storage.entries<string>({ gte: prefix, lt: prefixEnd(prefix) })) {
      if (value === operationId) throw this.#lostEntry(streamId, operationId, logKey, 'is in the operation log but its entry is missing');
    }
    return noOperation(operationId, 'unknown');
  }

  /** `operations.list`: a page of the operation log, `cursor` continuing after the last one. */
  async list(
    caller: Caller,
    streamId: string,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ operations: OperationInfo[]; nextCursor: string | null }> {
    this.#readable(caller, streamId);
    const prefix = K.opLogPrefix(streamId);
    let after: string | undefined;
    if (cursor !== undefined) {
      const opened = this.#codec.open(OPS_CURSOR_KIND, cursor);
      if (typeof opened !== 'string' || !opened.startsWith(prefix))
        throw errors.invalidParams('cursor', 'not a cursor of operations.list for this stream');
      after = opened;
    }
    const range = after === undefined ? { gte: prefix } : { gt: after };
    const entries: Array<{ key: string; value: string }> = [];
    for await (const entry of this.#storage.entries<string>({ ...range, lt: prefixEnd(prefix), limit: limit + 1 })) entries.push(entry);
    const page = entries.slice(0, limit);
    const operations = page.map(({ key, value: opId }) => {
      const op = this.#tables.operation(streamId, opId);
      if (op === undefined) throw this.#lostEntry(streamId, opId, key, 'is in the operation log but missing');
      return operationInfo(op);
    });
    const last = page[page.length - 1];
    return { operations, nextCursor: entries.length > limit && last ? this.#codec.seal(OPS_CURSOR_KIND, last.key) : null };
  }

  #readable(caller: Caller, streamId: string): StreamMeta {
    const meta = this.#heads.committed(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    assertReader(caller, meta);
    return meta;
  }

  /** An operation the log names but whose entry is gone: a corruption mark where the log places it. */
  #lostEntry(streamId: string, operationId: string, logKey: string, what: string): YelloError {
    const at = locateKeyPosition(logKey);
    return this.#integrity.mark({
      streamId,
      generation: at.generation,
      fromPosition: at.position,
      detail: `operation ${operationId} ${what}`,
    });
  }
}

function operationInfo(op: StoredOperation): OperationInfo {
  return {
    operationId: op.operationId,
    state: 'committed',
    generation: formatDecimal(op.generation),
    firstPosition: formatDecimal(op.firstPosition),
    nextPosition: formatDecimal(op.nextPosition),
    committedAt: op.committedAt,
    requestDigest: op.requestDigest,
  };
}

/** An operation with no committed record: every optional field is sent as null (§4). */
function noOperation(operationId: string, state: 'pending' | 'unknown'): OperationInfo {
  return { operationId, state, generation: null, firstPosition: null, nextPosition: null, committedAt: null, requestDigest: null };
}

/** Generation and position of an operation-log key. */
function locateKeyPosition(key: string): { generation: number; position: number } {
  const parts = key.split('/');
  return { generation: Number(parts[parts.length - 2]), position: Number(parts[parts.length - 1]) };
}
