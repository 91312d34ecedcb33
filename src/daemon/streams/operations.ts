import { errors, type YelloError } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import type { OperationInfo } from '../../shared/results.js';
import type { Caller } from '../caller.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { Integrity } from '../store/integrity.js';
import type { OpLogEntry, StreamPort } from '../store/port/stream-port.js';
import type { StoredOperation } from '../store/record-layout.js';
import type { StreamMeta } from '../store/stream-meta.js';
import { assertReader } from './access.js';
import type { StreamContext } from './context.js';
import type { StreamHeads } from './heads.js';
import type { ReceivingAppends } from './receiving-appends.js';

const OPS_CURSOR_KIND = 'ops';

/**
 * `operations.get` and `operations.list`: what became of an append, looked up by its
 * operationId, and the stream's operations in commit order.
 */
export class Operations {
  readonly #streams: StreamPort;
  readonly #heads: StreamHeads;
  readonly #integrity: Integrity;
  readonly #codec: TokenCodec;
  readonly #receiving: ReceivingAppends;

  constructor({ streams, heads, integrity, codec, receiving }: StreamContext) {
    this.#receiving = receiving;
    this.#streams = streams;
    this.#heads = heads;
    this.#integrity = integrity;
    this.#codec = codec;
  }

  /**
   * `operations.get`. An operation absent from a stream that lost records cannot be called
   * "never committed": that is a STORAGE_FAILURE/CORRUPT, not `unknown`.
   */
  async get(caller: Caller, streamId: string, operationId: string): Promise<OperationInfo> {
    this.#readable(caller, streamId);
    // Read and still being decided (ReceivingAppends): not "unknown", which would say never.
    if (this.#receiving.has(streamId, operationId)) return noOperation(operationId, 'pending');
    // Pending first: admitted and waiting for its commit, or its commit failed and only a
    // restart tells (the port's operationStatus).
    const status = await this.#streams.operationStatus(streamId, operationId);
    if (status.state === 'pending') return noOperation(operationId, 'pending');
    if (status.state === 'committed') return operationInfo(status.operation);
    this.#integrity.assertIntact(streamId);
    // "unknown" means "never committed", which the answer's reader acts on (it may send again):
    // confirm it against the operation log, so a lost index entry is reported, not denied.
    // A scan of the stream's (small) log entries, on this path only.
    for await (const entry of this.#streams.opLog(streamId)) {
      if (entry.operationId !== operationId) continue;
      // Committed since it was looked up (an append received after this call began, or committed
      // through another daemon): the entry is there now. Missing still: lost.
      const now = await this.#streams.findOperation(streamId, operationId);
      if (now) return operationInfo(now);
      throw this.#lostEntry(streamId, entry, 'is in the operation log but its entry is missing');
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
    // A cursor names the stream and the log position of the page's last operation.
    let after: { generation: number; position: number } | undefined;
    if (cursor !== undefined) {
      const opened = this.#codec.open(OPS_CURSOR_KIND, cursor);
      const at = typeof opened === 'string' ? parseOpsCursor(opened, streamId) : null;
      if (!at) throw errors.invalidParams('cursor', 'not a cursor of operations.list for this stream');
      after = at;
    }
    const entries: OpLogEntry[] = [];
    for await (const entry of this.#streams.opLog(streamId, { ...(after ? { after } : {}), limit: limit + 1 })) entries.push(entry);
    const page = entries.slice(0, limit);
    const operations: OperationInfo[] = [];
    for (const entry of page) {
      const op = await this.#streams.findOperation(streamId, entry.operationId);
      if (op === undefined) throw this.#lostEntry(streamId, entry, 'is in the operation log but missing');
      operations.push(operationInfo(op));
    }
    const last = page[page.length - 1];
    const nextCursor =
      entries.length > limit && last ? this.#codec.seal(OPS_CURSOR_KIND, `${streamId}/${last.generation}/${last.position}`) : null;
    return { operations, nextCursor };
  }

  #readable(caller: Caller, streamId: string): StreamMeta {
    const meta = this.#heads.committed(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    assertReader(caller, meta);
    return meta;
  }

  /** An operation the log names but whose entry is gone: a corruption mark where the log places it. */
  #lostEntry(streamId: string, entry: OpLogEntry, what: string): YelloError {
    return this.#integrity.mark({
      streamId,
      generation: entry.generation,
      fromPosition: entry.position,
      detail: `operation ${entry.operationId} ${what}`,
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

/** The log position an operations.list cursor of `streamId` continues after, or null. */
function parseOpsCursor(opened: string, streamId: string): { generation: number; position: number } | null {
  const prefix = `${streamId}/`;
  if (!opened.startsWith(prefix)) return null;
  const [g, p, ...rest] = opened.slice(prefix.length).split('/');
  if (rest.length > 0 || g === undefined || p === undefined || !/^\d+$/.test(g) || !/^\d+$/.test(p)) return null;
  return { generation: Number(g), position: Number(p) };
}
