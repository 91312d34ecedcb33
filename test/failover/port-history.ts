// The history of a failover run at the port level (test/failover/primary-kills.test.ts) and its
// checker. The writers (fixtures/writer-child.mjs) report every attempt, acknowledgement,
// unknown outcome and settlement; the checker reads the tables back through the PostgreSQL
// streams port and decides, for each stream:
//   - every acknowledged append is present: its operation (same positions) and each of its
//     records at its position, with the exact content and a valid checksum (a row whose
//     checksum fails reads back as no record);
//   - the stream is contiguous: records at every position from its first to its head's next
//     position, each belonging to the operation the op log names for its range, the ranges
//     neither overlapping nor leaving holes (no gaps, no position twice, no append twice);
//   - an append whose outcome was unknown and that operationStatus settled `committed` is
//     wholly present, one settled `absent` (or refused before admission) wholly absent: no
//     operation, no record carrying its id.
import { createHash } from 'node:crypto';
import type { Sql } from '../../src/daemon/store/postgres/connection.js';
import { PostgresStreams } from '../../src/daemon/store/postgres/stream-store.js';

/** The content of record `index` of operation `op` (as fixtures/writer-child.mjs writes it). */
export function recordContent(op: string, index: number): string {
  return (
    `${op}#${index} ` +
    createHash('sha256')
      .update(`${op}/${index}`)
      .digest('hex')
      .repeat(1 + (index % 3))
  );
}

type OpState = 'tried' | 'acked' | 'unknown' | 'committed' | 'absent' | 'refused';

export interface OpEntry {
  streamId: string;
  op: string;
  first: number;
  count: number;
  state: OpState;
  /** Whether a writer acknowledged it (its commit resolved ok). */
  acked: boolean;
  /** When the harness learned its current state (checks judge only what was known before they began). */
  at: number;
  /** Whether its outcome was unknown at some point (then settled or still open). */
  wasUnknown: boolean;
}

export interface CheckOptions {
  /**
   * The writers are stopped and their sessions gone: the tables are final, so records beyond a
   * head count as discontinuities and appends no one settled as open. While writers run, a
   * check judges what was decided before it began and what lies below the heads it loaded
   * first (everything there is committed: a head moves in the transaction of its records).
   */
  final: boolean;
}

export interface CheckResult {
  acknowledged: number;
  /** Acknowledged appends missing, partly present, or with other content. */
  lost: string[];
  /** Unknown outcomes settled committed / absent, and the settled ones that are not whole. */
  unknownCommitted: number;
  unknownAbsent: number;
  notWhole: string[];
  /** Holes, overlaps, records of no operation, bad checksums, content that differs. */
  discontinuities: string[];
  /** Appends tried whose outcome no one settled (the writer died with them in flight). */
  open: number;
  records: number;
}

export class PortHistory {
  readonly ops = new Map<string, OpEntry>();
  readonly odd: string[] = [];
  refused = 0;
  /** Writers whose recover() never returned (they exit and a successor settles their operations). */
  readonly hung: string[] = [];

  /** One line of a writer's stdout. */
  line(text: string, at: number, onAck?: (writer: string, at: number) => void): void {
    const [tag = '', streamId = '', op = '', a, b, c] = text.split(' ');
    const key = `${streamId} ${op}`;
    const e = this.ops.get(key);
    switch (tag) {
      case 'try':
        this.ops.set(key, { streamId, op, first: Number(a), count: Number(b), state: 'tried', acked: false, wasUnknown: false, at });
        return;
      case 'ack':
        if (e) {
          e.state = 'acked';
          e.acked = true;
          e.at = at;
        }
        onAck?.(op.split('-')[0] ?? '', at);
        return;
      case 'unknown':
        if (e) {
          e.at = at;
          e.state = 'unknown';
          e.wasUnknown = true;
        }
        return;
      case 'settled':
        if (!e) return;
        e.at = at;
        if (a === 'committed') {
          e.state = 'committed';
          e.first = Number(b);
          e.count = Number(c);
        } else e.state = 'absent';
        return;
      case 'refused':
        if (e) {
          e.state = 'refused';
          e.at = at;
        }
        this.refused++;
        return;
      case 'odd':
        this.odd.push(text);
        return;
      case 'hung':
        this.hung.push(text);
        return;
      default:
        return; // ready, debug output
    }
  }

  /** Operations of `writer` tried and not settled (for a writer that died: its successor settles them). */
  unsettled(writer: string): Array<[string, string]> {
    return [...this.ops.values()]
      .filter((e) => e.op.startsWith(`${writer}-`) && (e.state === 'tried' || e.state === 'unknown'))
      .map((e) => {
        e.wasUnknown = true;
        return [e.streamId, e.op];
      });
  }

  /** Check the tables (through a pool on the current primary) against the history. */
  async check(sql: Sql, streamIds: readonly string[], options: CheckOptions): Promise<CheckResult> {
    const began = Date.now();
    const result: CheckResult = {
      acknowledged: 0,
      lost: [],
      unknownCommitted: 0,
      unknownAbsent: 0,
      notWhole: [],
      discontinuities: [],
      open: 0,
      records: 0,
    };
    const port = await PostgresStreams.open(sql);
    try {
      // The heads first, from the table (the port's cache moves with every notice meanwhile).
      const headRows = await sql<{ stream_id: string; first_position: string; next_position: string }[]>`
        select stream_id, first_position, next_position from heads`;
      const heads = new Map(
        headRows.map((r) => [r.stream_id, { firstPosition: Number(r.first_position), nextPosition: Number(r.next_position) }]),
      );
      const ranges = await sql<{ stream_id: string; operation_id: string; first_position: string; next_position: string }[]>`
        select stream_id, operation_id, first_position, next_position from operations`;
      const opRows = new Map(ranges.map((r) => [`${r.stream_id} ${r.operation_id}`, r]));
      /** stream → position → operation id and content, as read back (checksummed). */
      const present = new Map<string, Map<number, { op: string; index: number; content: string; sha: string }>>();
      for (const streamId of streamIds) {
        const meta = port.head(streamId, 'committed');
        const head = heads.get(streamId);
        if (!head || !meta) {
          result.discontinuities.push(`${streamId}: no head`);
          continue;
        }
        const at = new Map<number, { op: string; index: number; content: string; sha: string }>();
        present.set(streamId, at);
        for await (const r of port.allRecords({
          streamId,
          chatId: meta.chatId,
          authorAgentId: meta.authorAgentId,
          peerAgentId: meta.peerAgentId,
        })) {
          result.records++;
          const w = r.record?.wrapper;
          if (!w || w.type !== 'chat.message') {
            result.discontinuities.push(`${streamId}@${r.position}: unreadable (checksum) or not a message`);
            continue;
          }
          at.set(r.position, { op: w.operationId, index: w.recordIndex, content: w.message.content, sha: w.message.contentSha256 });
        }
        // Contiguity: every position from first to next, in op-log ranges that tile it.
        for (let p = head.firstPosition; p < head.nextPosition; p++) if (!at.has(p)) result.discontinuities.push(`${streamId}@${p}: gap`);
        for (const p of at.keys())
          if (p < head.firstPosition || (p >= head.nextPosition && options.final))
            result.discontinuities.push(`${streamId}@${p}: beyond the head`);
        let expected = head.firstPosition;
        for await (const entry of port.opLog(streamId)) {
          if (!options.final && entry.position >= head.nextPosition) break;
          const row = opRows.get(`${streamId} ${entry.operationId}`);
          if (!row) {
            result.discontinuities.push(`${streamId}@${entry.position}: op log names ${entry.operationId}, no such operation`);
            continue;
          }
          const first = Number(row.first_position);
          const next = Number(row.next_position);
          if (first !== expected) result.discontinuities.push(`${streamId}@${expected}: op log range starts at ${first}`);
          for (let p = first; p < next; p++) {
            const rec = at.get(p);
            if (rec && (rec.op !== entry.operationId || rec.index !== p - first))
              result.discontinuities.push(
                `${streamId}@${p}: record of ${rec.op}#${rec.index}, op log says ${entry.operationId}#${p - first}`,
              );
            if (rec && (rec.content !== recordContent(rec.op, rec.index) || rec.sha !== sha256(rec.content)))
              result.discontinuities.push(`${streamId}@${p}: content or its sha256 differs`);
          }
          expected = next;
        }
        if (expected !== head.nextPosition)
          result.discontinuities.push(`${streamId}: op log ends at ${expected}, head at ${head.nextPosition}`);
      }

      const whole = (e: OpEntry): boolean => {
        const row = opRows.get(`${e.streamId} ${e.op}`);
        if (!row || Number(row.first_position) !== e.first || Number(row.next_position) !== e.first + e.count) return false;
        const at = present.get(e.streamId);
        for (let i = 0; i < e.count; i++) {
          const rec = at?.get(e.first + i);
          if (!rec || rec.op !== e.op || rec.index !== i || rec.content !== recordContent(e.op, i) || rec.sha !== sha256(rec.content))
            return false;
        }
        return true;
      };
      const none = (e: OpEntry): boolean =>
        !opRows.has(`${e.streamId} ${e.op}`) && ![...(present.get(e.streamId)?.values() ?? [])].some((r) => r.op === e.op);
      for (const e of this.ops.values()) {
        if (!options.final && e.at >= began) continue;
        if (e.acked) {
          result.acknowledged++;
          if (!whole(e)) result.lost.push(`${e.streamId} ${e.op} @${e.first}+${e.count}`);
          continue;
        }
        if (e.state === 'committed') {
          if (e.wasUnknown) result.unknownCommitted++;
          if (!whole(e)) result.notWhole.push(`${e.streamId} ${e.op}: settled committed, not wholly present`);
        } else if (e.state === 'absent' || e.state === 'refused') {
          if (e.wasUnknown) result.unknownAbsent++;
          if (!none(e)) result.notWhole.push(`${e.streamId} ${e.op}: settled absent, partly present`);
        } else result.open++;
      }
    } finally {
      await port.close();
    }
    return result;
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
