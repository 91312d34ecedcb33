// The statement a group commit of the PostgreSQL streams port sends for the changes of one
// layer (at most one change of each stream): data-modifying CTEs over arrays, one element a row,
// so that 64 appends cost one statement instead of 64. Built here, run by stream-store.ts.

import { compactOperation, compactRecord } from '../record-layout.js';
import type { StreamChange } from '../port/stream-port.js';
import type { StoredRecord, StreamMeta } from '../port/values.js';
import type { Sql } from './connection.js';
import { headDigest, noticePayload, STREAMS_CHANNEL } from './notices.js';
import { encodeRow, RowKey } from './row-codec.js';

/** Where a group's statement runs: a transaction's scope, or a reserved connection inside BEGIN … COMMIT. */
type TxSql = Parameters<Parameters<Sql['begin']>[1]>[0] | Sql;

/** A change of a group's statement: its head's body, and the body of the head it follows in the group ('' for none). */
export interface Layered {
  change: StreamChange;
  meta: string;
  after: string;
}

/** What a group's statement did: the streams whose head moved, and the changes the directory denied (nothing written). */
export interface GroupResult {
  moved: Set<string>;
  denied: Map<string, 'session' | 'grant'>;
}

/**
 * Changes of distinct streams, each with a precondition, as one statement (data-modifying
 * CTEs over arrays, one element a row): the conditional UPDATE of the heads decides which
 * changes hold (and row-locks their heads until COMMIT), and only their records, operations
 * (the op log too, since schema 2), message ids and trims are written; each moved head is
 * notified, with its body, the digest of the body it replaced and the change's record rows, as
 * much of that as fits (stream-store.ts `#onNotify` then needs no read to learn the head, nor a
 * follower's pump to read the records); the payloads are built here (notices.ts), so the
 * statement only sends those of the changes that held. Returns the
 * streams whose head moved. A change that follows another of its stream in the group also
 * requires the head that one wrote (its exact body): were that one refused, the head may still
 * match the three numbers of the precondition (another daemon's append in between), but not
 * what this change was decided on. The statement is sent before this function first awaits
 * (postgres.js would otherwise send it a microtask later, after statements queued meanwhile),
 * so that a caller pipelining BEGIN, the layers and COMMIT gets them in that order.
 *
 * A change made by an agent also requires what its admission relied on (`ChangeAdmission`),
 * read by the statement itself, in its snapshot (issue 52 finding 7): the session's token still
 * the author's (a rotation replaces the token row, a disable deletes it) and, for an append
 * under policy `grants`, the grant from author to peer. Each is one primary-key probe. A change
 * refused by them writes nothing and comes back in `denied`, so that a revocation committed
 * through any daemon refuses every change that reaches the database after it, whatever the
 * daemon that admitted the change had heard.
 */
export async function groupStatement(tx: TxSql, changes: readonly Layered[]): Promise<GroupResult> {
  const h = {
    sid: [] as string[],
    eg: [] as number[],
    enp: [] as number[],
    eep: [] as number[],
    efrom: [] as number[],
    after: [] as string[],
    // The admission: the author, the session's token hash ('' for none) and whether the grant to the peer is required.
    author: [] as string[],
    peer: [] as string[],
    tok: [] as string[],
    grant: [] as number[],
  };
  const n = { g: [] as number[], fp: [] as number[], np: [] as number[], ep: [] as number[], meta: [] as string[], notice: [] as string[] };
  const r = { sid: [] as string[], g: [] as number[], p: [] as number[], b: [] as string[] };
  const o = {
    sid: [] as string[],
    id: [] as string[],
    g: [] as number[],
    f: [] as number[],
    x: [] as number[],
    b: [] as string[],
  };
  const m = { sid: [] as string[], g: [] as number[], id: [] as string[], p: [] as number[], b: [] as string[] };
  const t = { sid: [] as string[], g: [] as number[], below: [] as number[] };
  for (const { change: c, meta, after } of changes) {
    const next = c.next;
    const e = c.expect;
    if (e === null) throw new Error('a change without a precondition has no pipelined form');
    const sid = next.streamId;
    h.sid.push(sid);
    h.eg.push(e.generation);
    h.enp.push(e.nextPosition);
    h.eep.push(e.writerEpoch);
    // -1: no condition on the first position (positions are never negative).
    h.efrom.push(c.kind === 'trim' ? c.fromPosition : -1);
    h.after.push(after);
    const admission = c.kind === 'append' || c.kind === 'claim' || c.kind === 'release' ? c.admission : undefined;
    h.author.push(next.authorAgentId);
    h.peer.push(next.peerAgentId);
    h.tok.push(admission?.tokenHash ?? '');
    h.grant.push(admission?.grant === true ? 1 : 0);
    n.g.push(next.generation);
    n.fp.push(next.firstPosition);
    n.np.push(next.nextPosition);
    n.ep.push(next.writer.epoch);
    n.meta.push(meta);
    const records = c.kind === 'append' ? c.records : c.kind === 'claim' ? [c.fence] : [];
    const rows = recordRows(next, records);
    const noticed: Array<[number, string]> = [];
    for (const [k, position] of rows.positions.entries()) {
      const body = rows.bodies[k] ?? '';
      r.sid.push(sid);
      r.g.push(next.generation);
      r.p.push(position);
      r.b.push(body);
      noticed.push([position, body]);
    }
    n.notice.push(
      noticePayload({
        streamId: sid,
        generation: next.generation,
        nextPosition: next.nextPosition,
        digest: headDigest(meta),
        ...(after === '' ? {} : { prev: headDigest(after) }),
        meta,
        ...(noticed.length > 0 ? { records: noticed } : {}),
      }),
    );
    if (c.kind === 'append') {
      const op = c.operation;
      o.sid.push(sid);
      o.id.push(op.operationId);
      o.g.push(op.generation);
      o.f.push(op.firstPosition);
      o.x.push(op.nextPosition);
      o.b.push(encodeRow(RowKey.operation(sid, op.operationId), compactOperation(op)));
      for (const [id, position] of c.messageIds) {
        m.sid.push(sid);
        m.g.push(next.generation);
        m.id.push(id);
        m.p.push(position);
        m.b.push(encodeRow(RowKey.messageId(sid, next.generation, id), position));
      }
    }
    if (c.kind === 'trim') {
      t.sid.push(sid);
      t.g.push(next.generation);
      t.below.push(next.firstPosition);
    }
  }
  const query = tx<{ stream_id: string; moved: boolean; session: boolean; grant: boolean }[]>`
    with c as (
      select * from unnest(${h.sid}::text[], ${h.eg}::bigint[], ${h.enp}::bigint[], ${h.eep}::bigint[], ${h.efrom}::bigint[], ${h.after}::text[],
        ${n.g}::bigint[], ${n.fp}::bigint[], ${n.np}::bigint[], ${n.ep}::bigint[], ${n.meta}::text[], ${n.notice}::text[],
        ${h.author}::text[], ${h.peer}::text[], ${h.tok}::text[], ${h.grant}::int[])
        as c(sid, eg, enp, eep, efrom, after, ng, nfp, nnp, nep, meta, notice, author, peer, tok, gr)),
    a as (
      select c.sid,
        c.tok = '' or exists (select 1 from tokens t where t.token_hash = c.tok and t.agent_id = c.author) as session,
        c.gr = 0 or exists (select 1 from grants g where g.agent_id = c.author and g.peer_agent_id = c.peer) as grant
      from c),
    h as (
      update heads set generation = c.ng, first_position = c.nfp, next_position = c.nnp, writer_epoch = c.nep, meta = c.meta
      from c join a on a.sid = c.sid
      where heads.stream_id = c.sid and heads.generation = c.eg and heads.next_position = c.enp
        and heads.writer_epoch = c.eep and (c.efrom = -1 or heads.first_position = c.efrom)
        and (c.after = '' or heads.meta = c.after) and a.session and a.grant
      returning heads.stream_id),
    r as (insert into records (stream_id, generation, position, body)
      select t.s, t.g, t.p, t.b from unnest(${r.sid}::text[], ${r.g}::bigint[], ${r.p}::bigint[], ${r.b}::text[]) as t(s, g, p, b)
      where t.s in (select stream_id from h)),
    o as (insert into operations (stream_id, operation_id, generation, first_position, next_position, body)
      select t.s, t.id, t.g, t.f, t.x, t.b
      from unnest(${o.sid}::text[], ${o.id}::text[], ${o.g}::bigint[], ${o.f}::bigint[], ${o.x}::bigint[], ${o.b}::text[])
        as t(s, id, g, f, x, b)
      where t.s in (select stream_id from h)),
    m as (insert into message_ids (stream_id, generation, client_message_id, position, body)
      select t.s, t.g, t.id, t.p, t.b from unnest(${m.sid}::text[], ${m.g}::bigint[], ${m.id}::text[], ${m.p}::bigint[], ${m.b}::text[])
        as t(s, g, id, p, b)
      where t.s in (select stream_id from h)),
    d as (delete from records using unnest(${t.sid}::text[], ${t.g}::bigint[], ${t.below}::bigint[]) as t(s, g, below)
      where records.stream_id = t.s and records.generation = t.g and records.position < t.below
        and t.s in (select stream_id from h))
    select c.sid as stream_id, h.stream_id is not null as moved, a.session, a.grant
      from c join a on a.sid = c.sid left join h on h.stream_id = c.sid
      left join lateral (select pg_notify(${STREAMS_CHANNEL}, c.notice) where h.stream_id is not null) notified on true`;
  void query.execute(); // awaited on the next line
  const rows = await query;
  const result: GroupResult = { moved: new Set(), denied: new Map() };
  for (const row of rows) {
    if (row.moved) result.moved.add(row.stream_id);
    else if (!row.session) result.denied.set(row.stream_id, 'session');
    else if (!row.grant) result.denied.set(row.stream_id, 'grant');
  }
  return result;
}

/** The rows of `records` of `n`'s stream: their positions and checksummed compact bodies. */
export function recordRows(n: StreamMeta, records: readonly StoredRecord[]): { positions: number[]; bodies: string[] } {
  const positions: number[] = [];
  const bodies: string[] = [];
  for (const r of records) {
    const position = Number(r.position);
    const generation = Number(r.generation);
    const place = {
      streamId: n.streamId,
      generation,
      position,
      chatId: n.chatId,
      authorAgentId: n.authorAgentId,
      peerAgentId: n.peerAgentId,
    };
    positions.push(position);
    bodies.push(encodeRow(RowKey.record(n.streamId, generation, position), compactRecord(r, place)));
  }
  return { positions, bodies };
}
