import type { Sql } from './connection.js';

/** What one append needs to know before admission: its operation and its message ids. */
export interface LookupRequest {
  streamId: string;
  operationId: string;
  generation: number;
  clientMessageIds: readonly string[];
}

/** The stored rows that answer one request (bodies still encoded). */
export interface LookupRows {
  /** The operation's row, if the operation id was used in this stream. */
  op: string | undefined;
  /** The message ids of the request already used in its generation, with their rows. */
  msgs: Array<{ clientMessageId: string; body: string }>;
}

interface Waiting {
  request: LookupRequest;
  resolve: (rows: LookupRows) => void;
  reject: (err: unknown) => void;
}

interface Row {
  kind: 'o' | 'm';
  i: number;
  id: string;
  body: string;
}

/** Lookup queries out at once, at most: more lookups wait and go together in the next one. */
const MAX_OUT = 2;

/**
 * The admission lookups of appends, batched under load. Each append on PostgreSQL must know,
 * before it is admitted, whether its operation id and message ids were used (permanent
 * idempotency, docs/protocol.md §6.7); asked one by one that was two queries per append, and at
 * 64 clients those queries, not the group commit, were the daemon's bottleneck. A lookup goes
 * out at once while fewer than MAX_OUT queries are out (a few clients wait for nothing, and
 * appends of different clients are not held behind each other), else it waits for one to answer
 * and goes with every lookup that came meanwhile, in one query: batches grow with the load.
 */
export class AdmissionLookups {
  readonly #sql: Sql;
  #waiting: Waiting[] = [];
  #out = 0;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  fetch(request: LookupRequest): Promise<LookupRows> {
    return new Promise<LookupRows>((resolve, reject) => {
      this.#waiting.push({ request, resolve, reject });
      if (this.#out < MAX_OUT) this.#send();
    });
  }

  #send(): void {
    const batch = this.#waiting.splice(0);
    if (batch.length === 0) return;
    this.#out++;
    void this.#flush(batch).finally(() => {
      this.#out--;
      this.#send();
    });
  }

  async #flush(batch: Waiting[]): Promise<void> {
    const oi: number[] = [];
    const os: string[] = [];
    const oid: string[] = [];
    const mi: number[] = [];
    const ms: string[] = [];
    const mg: number[] = [];
    const mid: string[] = [];
    batch.forEach(({ request: r }, i) => {
      oi.push(i);
      os.push(r.streamId);
      oid.push(r.operationId);
      for (const id of r.clientMessageIds) {
        mi.push(i);
        ms.push(r.streamId);
        mg.push(r.generation);
        mid.push(id);
      }
    });
    let rows: Row[];
    try {
      // Lateral: one primary-key probe per asked id, whatever the plan cache thinks of the
      // arrays' length (a join let a generic plan scan the whole table).
      rows = await this.#sql<Row[]>`
        select 'o' as kind, q.i, q.id, o.body
          from unnest(${oi}::int[], ${os}::text[], ${oid}::text[]) as q(i, s, id)
          cross join lateral (select body from operations where stream_id = q.s and operation_id = q.id) o
        union all
        select 'm' as kind, q.i, q.id, m.body
          from unnest(${mi}::int[], ${ms}::text[], ${mg}::bigint[], ${mid}::text[]) as q(i, s, g, id)
          cross join lateral (select body from message_ids where stream_id = q.s and generation = q.g and client_message_id = q.id) m`;
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    const answers: LookupRows[] = batch.map(() => ({ op: undefined, msgs: [] }));
    for (const row of rows) {
      const answer = answers[row.i];
      if (!answer) continue;
      if (row.kind === 'o') answer.op = row.body;
      else answer.msgs.push({ clientMessageId: row.id, body: row.body });
    }
    batch.forEach((w, i) => {
      w.resolve(answers[i] ?? { op: undefined, msgs: [] });
    });
  }
}
