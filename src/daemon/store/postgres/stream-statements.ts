// Every statement the PostgreSQL streams port writes with, once each, its parameters named (the
// Message DB manner: a function per statement). Reads of records, operations and the op log are
// stream-reads.ts's; the group statement of a commit is group-statement.ts's.

import type { StreamMeta } from '../port/values.js';
import type { Sql } from './connection.js';
import { headDigest, noticePayload, STREAMS_CHANNEL } from './notices.js';
import { encodeRow, RowKey } from './row-codec.js';

/** Where a statement runs: the pool, a transaction's scope, or a reserved connection. */
export type Scope = Sql | Parameters<Parameters<Sql['begin']>[1]>[0];

/** A stored head row: its id and checksummed body. */
export interface HeadRow {
  stream_id: string;
  meta: string;
}

/** The server session a statement ran in: its pid, and when that server started (a failover makes the same pid another session). */
export interface Session {
  pid: number;
  serverStarted: string;
}

const PAGE = 256;

/** Every stored head (open, a reload after notices may have been lost). */
export function selectHeads(sql: Scope): Promise<HeadRow[]> {
  return sql<HeadRow[]>`select stream_id, meta from heads`;
}

/** One stored head row, or undefined. */
export async function selectHead(sql: Scope, streamId: string): Promise<HeadRow | undefined> {
  const [row] = await sql<HeadRow[]>`select stream_id, meta from heads where stream_id = ${streamId}`;
  return row;
}

/** The stored head rows of these streams. */
export function selectHeadsOf(sql: Scope, streamIds: readonly string[]): Promise<HeadRow[]> {
  return sql<HeadRow[]>`select stream_id, meta from heads where stream_id = any(${[...streamIds]}::text[])`;
}

/** The stored head rows of a chat's streams. */
export function selectHeadsOfChat(sql: Scope, chatId: string): Promise<HeadRow[]> {
  return sql<HeadRow[]>`select stream_id, meta from heads where chat_id = ${chatId}`;
}

/** A page of stream ids after `after`, in id order. */
export async function selectStreamIds(sql: Scope, after: string): Promise<string[]> {
  const rows = await sql<{ stream_id: string }[]>`
    select stream_id from heads where stream_id > ${after} order by stream_id limit ${PAGE}`;
  return rows.map((r) => r.stream_id);
}

/** Rows a page of `selectStreamIds` holds at most. */
export const STREAM_IDS_PAGE = PAGE;

/**
 * Insert a head (a new stream: a chat's two, generation 1, empty); with `replace`, overwrite the
 * one stored (a reset of a head rebuilt from its records: no precondition). The one column list
 * of the heads table.
 */
export function insertHead(sql: Scope, h: StreamMeta, options: { body?: string; replace?: boolean } = {}) {
  const body = options.body ?? encodeRow(RowKey.head(h.streamId), h);
  return sql`
    insert into heads (stream_id, chat_id, author, peer, generation, first_position, next_position, writer_epoch, meta)
    values (${h.streamId}, ${h.chatId}, ${h.authorAgentId}, ${h.peerAgentId}, ${h.generation}, ${h.firstPosition},
            ${h.nextPosition}, ${h.writer.epoch}, ${body})
    ${
      options.replace === true
        ? sql`on conflict (stream_id) do update set generation = excluded.generation, first_position = excluded.first_position,
            next_position = excluded.next_position, writer_epoch = excluded.writer_epoch, meta = excluded.meta`
        : sql``
    }`;
}

/** Tell every daemon a head moved (the notice of a head written outside the group statement). */
export function notifyHead(sql: Scope, head: StreamMeta, body: string) {
  const payload = noticePayload({
    streamId: head.streamId,
    generation: head.generation,
    nextPosition: head.nextPosition,
    digest: headDigest(body),
    meta: body,
  });
  return sql`select pg_notify(${STREAMS_CHANNEL}, ${payload})`;
}

/** The session this statement runs in (sent ahead of a group's statements on its connection). */
export function sessionOf(sql: Scope) {
  return sql<Session[]>`select pg_backend_pid() as pid, pg_postmaster_start_time()::text as "serverStarted"`;
}

/**
 * The session of the group commit's own connection (stream-transaction.ts), which also makes it
 * plan generically: the group statement is planned once per connection instead of per group.
 * Planning it was three times its execution at one client (0.41 against 0.14 ms in
 * pg_stat_statements) and half the cluster's CPU per append. Its generic plan probes heads by
 * primary key whatever the tables' sizes (bench/README.md); it is remade whenever the tables'
 * statistics change (autovacuum), which the heads row each group updates keeps frequent. The
 * pool's other connections keep planning each statement for its parameters (connection.ts).
 */
export function commitSessionOf(sql: Scope) {
  return sql<Session[]>`
    select pg_backend_pid() as pid, pg_postmaster_start_time()::text as "serverStarted",
      set_config('plan_cache_mode', 'force_generic_plan', false) as plans`;
}

/** What a connection leaving the group commit is set back to: the pool's planning (connection.ts). */
export function resetPlans(sql: Scope) {
  return sql`reset plan_cache_mode`;
}

/** Whether a session is still alive (a commit of it may still be finishing). */
export async function sessionAlive(sql: Scope, s: Session): Promise<boolean> {
  const rows = await sql`select 1 from pg_stat_activity where pid = ${s.pid} and pg_postmaster_start_time()::text = ${s.serverStarted}`;
  return rows.length > 0;
}

/** A stored operation's body, or undefined (which key a unique violation hit). */
export async function selectOperationBody(sql: Scope, streamId: string, operationId: string): Promise<string | undefined> {
  const [row] = await sql<{ body: string }[]>`select body from operations where stream_id = ${streamId} and operation_id = ${operationId}`;
  return row?.body;
}

/** The positions of these clientMessageIds in a generation, as stored. */
export function selectMessagePositions(sql: Scope, streamId: string, generation: number, ids: readonly string[]) {
  return sql<{ client_message_id: string; position: string }[]>`
    select client_message_id, position from message_ids
    where stream_id = ${streamId} and generation = ${generation} and client_message_id = any(${[...ids]}::text[])`;
}

/** Rows a sweep deletes per statement: a long trimmed prefix is deleted in bounded steps. */
export const SWEEP_BATCH = 10_000;

/**
 * Delete what a trim left behind below `firstPosition` of a generation, at most SWEEP_BATCH rows
 * of each table: records, operations wholly below it (their op-log entry is an index of that
 * table since schema 2; one cut in two stays), message ids of trimmed messages. Counts per table.
 */
export async function sweepBelow(sql: Scope, streamId: string, generation: number, firstPosition: number) {
  const records = await sql`
    delete from records where ctid = any(array(select ctid from records
      where stream_id = ${streamId} and generation = ${generation} and position < ${firstPosition} limit ${SWEEP_BATCH}))`;
  const operations = await sql`
    delete from operations where ctid = any(array(select ctid from operations
      where stream_id = ${streamId} and generation = ${generation} and next_position <= ${firstPosition} limit ${SWEEP_BATCH}))`;
  const messageIds = await sql`
    delete from message_ids where ctid = any(array(select ctid from message_ids
      where stream_id = ${streamId} and generation = ${generation} and position < ${firstPosition} limit ${SWEEP_BATCH}))`;
  return { records: records.count, operations: operations.count, messageIds: messageIds.count };
}
