// Reads of the PostgreSQL streams port: records by position range, operations, the op log,
// message ids, each row's body checked on the way out (row-codec.ts: a body that fails its
// checksum is CORRUPT, never a silently different value). Paged, so a long range never holds
// more than a page of rows. PostgresStreams (stream-store.ts) answers the port with these.

import { expandOperation, expandRecord, type CompactOperation, type CompactRecord } from '../record-layout.js';
import type { OpLogEntry, StoredRecordAt, StreamIdentity } from '../port/stream-port.js';
import type { StoredOperation, StoredRecord } from '../port/values.js';
import type { Sql } from './connection.js';
import { errors } from '../../../shared/errors.js';
import { decodeRow, RowKey, tryDecodeRow } from './row-codec.js';

const PAGE = 256;

export class StreamReads {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  /** A stored record row's body as the record, checked (CORRUPT when it fails its checksum). */
  #expand(stream: StreamIdentity, generation: number, position: number, body: string): StoredRecord {
    const stored = decodeRow<CompactRecord | StoredRecord>(RowKey.record(stream.streamId, generation, position), body, {
      streamId: stream.streamId,
      generation,
      position,
    });
    return expandRecord(stored, { ...stream, generation, position });
  }

  async *records(
    stream: StreamIdentity,
    generation: number,
    from: number,
    end: number,
    options: { reverse?: boolean; limit?: number } = {},
  ): AsyncIterable<StoredRecordAt> {
    let left = options.limit ?? Infinity;
    let lo = from;
    let hi = end;
    while (left > 0 && lo < hi) {
      const take = Math.min(PAGE, left);
      const rows = options.reverse
        ? await this.#sql<{ position: string; body: string }[]>`
            select position, body from records where stream_id = ${stream.streamId} and generation = ${generation}
              and position >= ${lo} and position < ${hi} order by position desc limit ${take}`
        : await this.#sql<{ position: string; body: string }[]>`
            select position, body from records where stream_id = ${stream.streamId} and generation = ${generation}
              and position >= ${lo} and position < ${hi} order by position limit ${take}`;
      for (const r of rows) {
        const position = Number(r.position);
        yield { position, record: this.#expand(stream, generation, position, r.body), bytes: r.body.length };
      }
      left -= rows.length;
      const last = rows.at(-1);
      if (!last || rows.length < take) return;
      if (options.reverse) hi = Number(last.position);
      else lo = Number(last.position) + 1;
    }
  }

  async record(stream: StreamIdentity, generation: number, position: number): Promise<StoredRecord | undefined> {
    const [row] = await this.#sql<{ body: string }[]>`
      select body from records where stream_id = ${stream.streamId} and generation = ${generation} and position = ${position}`;
    return row ? this.#expand(stream, generation, position, row.body) : undefined;
  }

  async *allRecords(stream: StreamIdentity): AsyncIterable<{ generation: number; position: number; record: StoredRecord | undefined }> {
    let after: [number, number] = [0, -1];
    for (;;) {
      const rows = await this.#sql<{ generation: string; position: string; body: string }[]>`
        select generation, position, body from records where stream_id = ${stream.streamId}
          and (generation, position) > (${after[0]}, ${after[1]}) order by generation, position limit ${PAGE}`;
      for (const r of rows) {
        const generation = Number(r.generation);
        const position = Number(r.position);
        const stored = tryDecodeRow<CompactRecord | StoredRecord>(RowKey.record(stream.streamId, generation, position), r.body);
        let record: StoredRecord | undefined;
        try {
          record = stored === undefined ? undefined : expandRecord(stored, { ...stream, generation, position });
        } catch {
          record = undefined;
        }
        yield { generation, position, record };
        after = [generation, position];
      }
      if (rows.length < PAGE) return;
    }
  }

  async findOperation(streamId: string, operationId: string): Promise<StoredOperation | undefined> {
    const [row] = await this.#sql<
      { body: string }[]
    >`select body from operations where stream_id = ${streamId} and operation_id = ${operationId}`;
    return row
      ? expandOperation(operationId, decodeRow<CompactOperation>(RowKey.operation(streamId, operationId), row.body, { streamId }))
      : undefined;
  }

  async *opLog(
    streamId: string,
    range: { after?: { generation: number; position: number }; before?: { generation: number; position: number }; limit?: number } = {},
  ): AsyncIterable<OpLogEntry> {
    let after = range.after ?? { generation: 0, position: -1 };
    const before = range.before ?? { generation: Number.MAX_SAFE_INTEGER, position: 0 };
    let left = range.limit ?? Infinity;
    while (left > 0) {
      const take = Math.min(PAGE, left);
      // The index operations_log (schema 2) serves this order. The body (checksummed under the
      // operation's key) says where the operation starts; a row whose columns say otherwise is
      // corrupt, as an op_log row failing its checksum was.
      const rows = await this.#sql<{ generation: string; first_position: string; operation_id: string; body: string }[]>`
        select generation, first_position, operation_id, body from operations where stream_id = ${streamId}
          and (generation, first_position) > (${after.generation}, ${after.position})
          and (generation, first_position) < (${before.generation}, ${before.position})
        order by generation, first_position limit ${take}`;
      for (const r of rows) {
        const generation = Number(r.generation);
        const position = Number(r.first_position);
        const key = RowKey.operation(streamId, r.operation_id);
        const op = expandOperation(
          r.operation_id,
          decodeRow<CompactOperation | StoredOperation>(key, r.body, { streamId, generation, position }),
        );
        if (op.generation !== generation || op.firstPosition !== position)
          throw errors.corrupt({
            key,
            streamId,
            generation: String(generation),
            fromPosition: String(position),
            detail: `a PostgreSQL operations row says it starts at ${generation}/${position}, its body at ${op.generation}/${op.firstPosition}`,
          });
        yield { generation, position, operationId: r.operation_id };
        after = { generation, position };
      }
      left -= rows.length;
      if (rows.length < take) return;
    }
  }

  async *operationIds(streamId: string): AsyncIterable<string> {
    let after = '';
    for (;;) {
      const rows = await this.#sql<{ operation_id: string }[]>`
        select operation_id from operations where stream_id = ${streamId} and operation_id > ${after} order by operation_id limit ${PAGE}`;
      for (const r of rows) yield r.operation_id;
      const last = rows.at(-1);
      if (!last || rows.length < PAGE) return;
      after = last.operation_id;
    }
  }

  async *messageIds(streamId: string, generation: number): AsyncIterable<string> {
    let after = '';
    for (;;) {
      const rows = await this.#sql<{ client_message_id: string }[]>`
        select client_message_id from message_ids where stream_id = ${streamId} and generation = ${generation}
          and client_message_id > ${after} order by client_message_id limit ${PAGE}`;
      for (const r of rows) yield r.client_message_id;
      const last = rows.at(-1);
      if (!last || rows.length < PAGE) return;
      after = last.client_message_id;
    }
  }

  async approximateBytes(streamId: string): Promise<number> {
    const [row] = await this.#sql<{ n: string | null }[]>`select sum(length(body)) as n from records where stream_id = ${streamId}`;
    return Number(row?.n ?? 0);
  }
}
