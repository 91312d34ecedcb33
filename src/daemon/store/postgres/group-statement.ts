// The statement a group commit of the PostgreSQL streams port sends for the changes of one
// layer (at most one change of each stream): data-modifying CTEs over arrays, one element a row,
// so that 64 appends cost one statement instead of 64. Each table's rows are built as typed
// objects (one per row, every column named) by an exhaustive switch over the change kinds, and
// turned into the statement's column arrays in one place (`columns`), so a column can neither be
// forgotten nor shifted, and a new change kind fails to compile until it says what it writes.

import { compactOperation, compactRecord } from '../record-layout.js';
import type { StreamChange } from '../port/stream-port.js';
import { TRIM_DELETE_BATCH } from '../port/stream-kernel.js';
import type { StoredRecord, StreamMeta } from '../port/values.js';
import { headDigest, noticePayload, STREAMS_CHANNEL } from './notices.js';
import { encodeRow, RowKey } from './row-codec.js';
import type { Scope } from './stream-statements.js';

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

/** A change's row of the statement's `c`: its precondition, its new head, its notice and what its admission relied on. */
interface ChangeRow {
  sid: string;
  /** The precondition: generation, next position, writer epoch. */
  eg: number;
  enp: number;
  eep: number;
  /** The retained start a trim requires (-1: none; positions are never negative). */
  efrom: number;
  /** The exact body of the head a change following another of its stream requires ('' for none). */
  after: string;
  ng: number;
  nfp: number;
  nnp: number;
  nep: number;
  meta: string;
  notice: string;
  /** The author, the session's token hash ('' for none) and whether the grant to the peer is required (1). */
  author: string;
  peer: string;
  tok: string;
  gr: number;
}

interface RecordRow {
  sid: string;
  g: number;
  p: number;
  b: string;
}

interface OperationRow {
  sid: string;
  id: string;
  g: number;
  f: number;
  x: number;
  b: string;
}

interface MessageIdRow {
  sid: string;
  g: number;
  id: string;
  p: number;
  b: string;
}

/** The records a trim deletes in its commit: `[from, below)` of generation `g` (the sweep deletes the rest). */
interface TrimRow {
  sid: string;
  g: number;
  from: number;
  below: number;
}

/** The rows of a group's statement, one list a table. */
interface Rows {
  changes: ChangeRow[];
  records: RecordRow[];
  operations: OperationRow[];
  messageIds: MessageIdRow[];
  trims: TrimRow[];
}

/** One column of typed rows, as the array `unnest` takes. */
function col<R, K extends keyof R>(rows: readonly R[], key: K): Array<R[K]> {
  return rows.map((r) => r[key]);
}

/**
 * What precedes each body in a column sent by `bodies`: a control character, which a body
 * never holds raw (checksum digits and JSON, which escapes it; notices are JSON too).
 */
const SEP = '\x1e';

/**
 * A column of bodies (the kilobytes of a group) as one text, each body preceded by SEP, that the
 * statement splits with `(string_to_array(…, chr(30)))[2:]`: as an array literal postgres.js
 * escaped every quote and backslash of them (a regular expression pass over each, ~20 µs of the
 * daemon's main thread per append at 64 clients) and the server parsed them back character by
 * character. The leading SEP makes the split exact for every list (none: '', one empty body: SEP).
 */
function bodies<R extends Record<K, string>, K extends keyof R>(rows: readonly R[], key: K): string {
  let out = '';
  for (const r of rows) {
    const v = r[key];
    if (v.includes(SEP)) throw new Error(`a ${String(key)} to send holds the separator`);
    out += SEP + v;
  }
  return out;
}

/** What a change writes besides its head: the exhaustive switch over change kinds. */
function rowsOf(c: StreamChange, rows: Rows): void {
  const next = c.next;
  const sid = next.streamId;
  switch (c.kind) {
    case 'append': {
      const op = c.operation;
      rows.operations.push({
        sid,
        id: op.operationId,
        g: op.generation,
        f: op.firstPosition,
        x: op.nextPosition,
        b: encodeRow(RowKey.operation(sid, op.operationId), compactOperation(op)),
      });
      for (const [id, p] of c.messageIds)
        rows.messageIds.push({ sid, g: next.generation, id, p, b: encodeRow(RowKey.messageId(sid, next.generation, id), p) });
      recordRows(next, c.records, rows);
      return;
    }
    case 'claim':
      recordRows(next, [c.fence], rows);
      return;
    case 'trim':
      rows.trims.push({
        sid,
        g: next.generation,
        from: c.fromPosition,
        below: Math.min(next.firstPosition, c.fromPosition + TRIM_DELETE_BATCH),
      });
      return;
    case 'release':
    case 'reset':
      return;
  }
}

/** The record rows of `records` of `n`'s stream, added to `rows`. */
function recordRows(n: StreamMeta, records: readonly StoredRecord[], rows: Rows): void {
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
    const b = encodeRow(RowKey.record(n.streamId, generation, position), compactRecord(r, place));
    rows.records.push({ sid: n.streamId, g: generation, p: position, b });
  }
}

/** The statement's rows of a layer. */
function rowsOfLayer(changes: readonly Layered[]): Rows {
  const rows: Rows = { changes: [], records: [], operations: [], messageIds: [], trims: [] };
  for (const { change: c, meta, after } of changes) {
    const next = c.next;
    const e = c.expect;
    if (e === null) throw new Error('a change without a precondition has no pipelined form');
    rowsOf(c, rows);
    const admission = c.kind === 'append' || c.kind === 'claim' || c.kind === 'release' ? c.admission : undefined;
    rows.changes.push({
      sid: next.streamId,
      eg: e.generation,
      enp: e.nextPosition,
      eep: e.writerEpoch,
      efrom: c.kind === 'trim' ? c.fromPosition : -1,
      after,
      ng: next.generation,
      nfp: next.firstPosition,
      nnp: next.nextPosition,
      nep: next.writer.epoch,
      meta,
      notice: noticePayload({
        streamId: next.streamId,
        generation: next.generation,
        nextPosition: next.nextPosition,
        digest: headDigest(meta),
        ...(after === '' ? {} : { prev: headDigest(after) }),
        meta,
      }),
      author: next.authorAgentId,
      peer: next.peerAgentId,
      tok: admission?.tokenHash ?? '',
      gr: admission?.grant === true ? 1 : 0,
    });
  }
  return rows;
}

/**
 * Changes of distinct streams, each with a precondition, as one statement (data-modifying
 * CTEs over arrays, one element a row): the conditional UPDATE of the heads decides which
 * changes hold (and row-locks their heads until COMMIT), and only their records, operations
 * (the op log too, since schema 2), message ids and trims are written; each moved head is
 * notified, with its body, the digest of the body it replaced and the change's record rows, as
 * much of that as fits (stream-notices.ts then needs no read to learn the head, nor a follower's
 * pump to read the records); the payloads are built here (notices.ts), so the statement only
 * sends those of the changes that held. Returns the streams whose head moved. A change that
 * follows another of its stream in the group also requires the head that one wrote (its exact
 * body): were that one refused, the head may still match the three numbers of the precondition
 * (another daemon's append in between), but not what this change was decided on. The statement
 * is sent before this function first awaits (postgres.js would otherwise send it a microtask
 * later, after statements queued meanwhile), so that a caller pipelining BEGIN, the layers and
 * COMMIT gets them in that order.
 *
 * A trim deletes at most TRIM_DELETE_BATCH records here, in the transaction every other change
 * of the group waits on; the sweep (`sweepBelow`) deletes the rest in bounded steps of its own.
 *
 * A change made by an agent also requires what its admission relied on (`ChangeAdmission`),
 * read by the statement itself, in its snapshot (issue 52 finding 7): the session's token still
 * the author's (a rotation replaces the token row, a disable deletes it) and, for an append
 * under policy `grants`, the grant from author to peer. Each is one primary-key probe. A change
 * refused by them writes nothing and comes back in `denied`, so that a revocation committed
 * through any daemon refuses every change that reaches the database after it, whatever the
 * daemon that admitted the change had heard.
 */
export async function groupStatement(tx: Scope, changes: readonly Layered[]): Promise<GroupResult> {
  const { changes: c, records: r, operations: o, messageIds: m, trims: t } = rowsOfLayer(changes);
  const query = tx<{ stream_id: string; moved: boolean; session: boolean; grant: boolean }[]>`
    with c as (
      select * from unnest(${col(c, 'sid')}::text[], ${col(c, 'eg')}::bigint[], ${col(c, 'enp')}::bigint[], ${col(c, 'eep')}::bigint[],
        ${col(c, 'efrom')}::bigint[], (string_to_array(${bodies(c, 'after')}::text, chr(30)))[2:],
        ${col(c, 'ng')}::bigint[], ${col(c, 'nfp')}::bigint[], ${col(c, 'nnp')}::bigint[], ${col(c, 'nep')}::bigint[],
        (string_to_array(${bodies(c, 'meta')}::text, chr(30)))[2:], (string_to_array(${bodies(c, 'notice')}::text, chr(30)))[2:],
        ${col(c, 'author')}::text[], ${col(c, 'peer')}::text[], ${col(c, 'tok')}::text[], ${col(c, 'gr')}::int[])
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
      select t.s, t.g, t.p, t.b
      from unnest(${col(r, 'sid')}::text[], ${col(r, 'g')}::bigint[], ${col(r, 'p')}::bigint[],
        (string_to_array(${bodies(r, 'b')}::text, chr(30)))[2:]) as t(s, g, p, b)
      where t.s in (select stream_id from h)),
    o as (insert into operations (stream_id, operation_id, generation, first_position, next_position, body)
      select t.s, t.id, t.g, t.f, t.x, t.b
      from unnest(${col(o, 'sid')}::text[], ${col(o, 'id')}::text[], ${col(o, 'g')}::bigint[], ${col(o, 'f')}::bigint[],
        ${col(o, 'x')}::bigint[], (string_to_array(${bodies(o, 'b')}::text, chr(30)))[2:]) as t(s, id, g, f, x, b)
      where t.s in (select stream_id from h)),
    m as (insert into message_ids (stream_id, generation, client_message_id, position, body)
      select t.s, t.g, t.id, t.p, t.b
      from unnest(${col(m, 'sid')}::text[], ${col(m, 'g')}::bigint[], ${col(m, 'id')}::text[], ${col(m, 'p')}::bigint[],
        (string_to_array(${bodies(m, 'b')}::text, chr(30)))[2:]) as t(s, g, id, p, b)
      where t.s in (select stream_id from h)),
    d as (delete from records
      using unnest(${col(t, 'sid')}::text[], ${col(t, 'g')}::bigint[], ${col(t, 'from')}::bigint[], ${col(t, 'below')}::bigint[])
        as t(s, g, lo, below)
      where records.stream_id = t.s and records.generation = t.g and records.position >= t.lo and records.position < t.below
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
