// The key and integrity ports on PostgreSQL (issue 24): every daemon's public signing keys in
// one table, so a record signed on any daemon verifies on all of them, and the corruption
// marks of streams. Small tables, read whole; bodies checksummed like every other row.

import type { IntegrityPort, KeyPort } from '../port/store-port.js';
import type { CorruptMark, PublicKeyRow } from '../port/values.js';
import type { Sql } from './connection.js';
import { decodeRow, encodeRow, RowKey } from './row-codec.js';

/** A whole-stream mark (generation null) is stored as generation 0, which no stream has. */
const WHOLE_STREAM = 0;

export class PostgresKeys implements KeyPort {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async publish(rows: readonly PublicKeyRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.#sql.begin(async (tx) => {
      for (const r of rows)
        await tx`
          insert into keys (kid, daemon, retired, body) values (${r.kid}, ${r.daemonId}, ${r.retiredAt !== null}, ${encodeRow(RowKey.key(r.kid), r)})
          on conflict (kid) do update set daemon = excluded.daemon, retired = excluded.retired, body = excluded.body`;
    });
  }

  async all(): Promise<PublicKeyRow[]> {
    const rows = await this.#sql<{ kid: string; body: string }[]>`select kid, body from keys order by kid`;
    return rows.map((r) => decodeRow<PublicKeyRow>(RowKey.key(r.kid), r.body));
  }
}

export class PostgresIntegrity implements IntegrityPort {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async *marks(): AsyncIterable<CorruptMark> {
    const rows = await this.#sql<{ stream_id: string; generation: string; body: string }[]>`
      select stream_id, generation, body from corruption_marks order by stream_id, generation`;
    for (const r of rows) {
      const generation = Number(r.generation);
      yield decodeRow<CorruptMark>(RowKey.corruptMark(r.stream_id, generation), r.body, { streamId: r.stream_id });
    }
  }

  async putMarks(marks: readonly CorruptMark[]): Promise<void> {
    if (marks.length === 0) return;
    await this.#sql.begin(async (tx) => {
      for (const m of marks) await this.#put(tx, m);
    });
  }

  async narrowMark(streamId: string, narrowed: CorruptMark): Promise<void> {
    await this.#sql.begin(async (tx) => {
      await tx`delete from corruption_marks where stream_id = ${streamId} and generation = ${WHOLE_STREAM}`;
      await this.#put(tx, narrowed);
    });
  }

  async #put(tx: Parameters<Parameters<Sql['begin']>[1]>[0], m: CorruptMark): Promise<void> {
    const generation = m.generation ?? WHOLE_STREAM;
    await tx`
      insert into corruption_marks (stream_id, generation, body)
      values (${m.streamId}, ${generation}, ${encodeRow(RowKey.corruptMark(m.streamId, generation), m)})
      on conflict (stream_id, generation) do update set body = excluded.body`;
  }
}
