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

/**
 * The admission lookups of every append read in one turn of the loop, in one query. Each append
 * on PostgreSQL must know, before it is admitted, whether its operation id and message ids were
 * used (permanent idempotency, docs/protocol.md §6.7); asked one by one that is two queries per
 * append, and at 64 clients those queries, not the group commit, were the daemon's bottleneck
 * (bench section (g)). Gathered until the loop has handled what it read (setImmediate), they
 * cost one round trip per turn.
 */
export class AdmissionLookups {
  readonly #sql: Sql;
  #waiting: Waiting[] = [];
  #scheduled = false;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  fetch(request: LookupRequest): Promise<LookupRows> {
    return new Promise<LookupRows>((resolve, reject) => {
      this.#waiting.push({ request, resolve, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        void this.#flush(this.#waiting.splice(0));
      });
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
      rows = await this.#sql<Row[]>`
        select 'o' as kind, q.i, o.operation_id as id, o.body
          from unnest(${oi}::int[], ${os}::text[], ${oid}::text[]) as q(i, s, id)
          join operations o on o.stream_id = q.s and o.operation_id = q.id
        union all
        select 'm' as kind, q.i, m.client_message_id as id, m.body
          from unnest(${mi}::int[], ${ms}::text[], ${mg}::bigint[], ${mid}::text[]) as q(i, s, g, id)
          join message_ids m on m.stream_id = q.s and m.generation = q.g and m.client_message_id = q.id`;
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
