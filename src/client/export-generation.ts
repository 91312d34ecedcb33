import { ChainDigest } from './hashing.js';
import type { Checkpoint, ChatMessage, ChatReceipt, StoredRecord } from '../shared/types.js';
import type { RecordWhere, Report, Where } from './export-problems.js';
import { isDecimal } from './export-shapes.js';

// The per-generation stage of `verifyExport`: what the export has of one stream generation, and
// the order its records must keep (positions, timestamps, clientMessageIds, operations, receipts).

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SHA256_B64URL = /^[A-Za-z0-9_-]{43}$/;

/** What the export has of one stream generation so far. */
export interface Group {
  streamId: string;
  generation: string;
  firstLine: number;
  first: bigint | null;
  last: bigint | null;
  count: number;
  digest: ChainDigest;
  positionProblems: number;
  lastCreatedAt: string | null;
  lastOp: { operationId: string; recordIndex: number; position: bigint } | null;
  clientMessageIds: Map<string, string>;
  lastReceipt: { peerGeneration: bigint; nextPosition: bigint } | null;
  checkpoint: { line: number; value: Checkpoint } | null;
}

export function newGroup(streamId: string, generation: string, line: number): Group {
  return {
    streamId,
    generation,
    firstLine: line,
    first: null,
    last: null,
    count: 0,
    digest: new ChainDigest(),
    positionProblems: 0,
    lastCreatedAt: null,
    lastOp: null,
    clientMessageIds: new Map(),
    lastReceipt: null,
    checkpoint: null,
  };
}

/**
 * Place a record (before its generation's checkpoint) in its group: positions go up by one, and
 * the record joins the chain digest. Returns its position and whether it follows the one before.
 */
export function placeRecord(report: Report, at: RecordWhere, g: Group, r: StoredRecord): { pos: bigint; contiguous: boolean } {
  const pos = BigInt(r.position);
  if (g.last !== null && pos !== g.last + 1n) {
    g.positionProblems++;
    report(
      at,
      'POSITION',
      pos <= g.last ? `position repeats or goes back (after ${g.last})` : `gap: positions ${g.last + 1n}..${pos - 1n} missing`,
    );
  }
  if (g.first === null) {
    g.first = pos;
    g.firstLine = at.line;
  }
  const contiguous = g.last !== null && pos === g.last + 1n;
  g.last = pos;
  g.count++;
  g.digest.add(r);
  return { pos, contiguous };
}

/** Within a generation, messages keep signature-time order, and a clientMessageId is used once. */
export function checkMessageOrder(report: Report, at: RecordWhere, g: Group, m: ChatMessage): void {
  const createdAt = m.signature.createdAt;
  if (TIMESTAMP.test(createdAt)) {
    if (g.lastCreatedAt !== null && createdAt < g.lastCreatedAt) {
      report(at, 'CREATED_AT_ORDER', `createdAt ${createdAt} is earlier than ${g.lastCreatedAt} of the message before it`);
    }
    g.lastCreatedAt = createdAt;
  }
  if (!SHA256_B64URL.test(m.clientMessageId)) {
    report(at, 'CLIENT_MESSAGE_ID', 'clientMessageId is not 43 characters of base64url');
  } else {
    const earlier = g.clientMessageIds.get(m.clientMessageId);
    if (earlier !== undefined) report(at, 'CLIENT_MESSAGE_ID', `clientMessageId already used at position ${earlier} of this generation`);
    else g.clientMessageIds.set(m.clientMessageId, at.position);
  }
}

/**
 * An append writes its records at consecutive positions with recordIndex 0, 1, …, and an
 * operationId is used once per stream (across generations); a claim writes one fence with
 * operationId `fence.<epoch>`. Checked only between neighbours the export has, since a trim
 * may have cut an operation.
 */
export function checkOperation(
  report: Report,
  at: Where,
  g: Group,
  r: StoredRecord,
  pos: bigint,
  contiguous: boolean,
  streamOperations: Set<string>,
): void {
  const w = r.wrapper;
  if (w.type === 'chat.writer-fence' && (w.operationId !== `fence.${w.fence.epoch}` || w.recordIndex !== 0)) {
    report(
      at,
      'OPERATION',
      `a fence of epoch ${w.fence.epoch} must be record 0 of operation fence.${w.fence.epoch}, not record ${w.recordIndex} of ${w.operationId}`,
    );
  }
  const prev = g.lastOp;
  const continues = contiguous && prev !== null && prev.operationId === w.operationId;
  if (continues && w.recordIndex !== prev.recordIndex + 1) {
    report(at, 'OPERATION', `record ${w.recordIndex} of operation ${w.operationId} follows its record ${prev.recordIndex}`);
  } else if (!continues && (contiguous || pos === 0n) && w.recordIndex !== 0) {
    report(at, 'OPERATION', `operation ${w.operationId} starts here with record ${w.recordIndex}, not 0`);
  }
  if (!continues) {
    if (streamOperations.has(w.operationId)) report(at, 'OPERATION', `operation ${w.operationId} already appeared earlier in this stream`);
    streamOperations.add(w.operationId);
  }
  g.lastOp = { operationId: w.operationId, recordIndex: w.recordIndex, position: pos };
}

/** Receipts of a stream generation move forward: a later peer generation, or a higher position in the same one. */
export function checkReceiptOrder(
  report: Report,
  at: Where,
  g: Group,
  rc: ChatReceipt,
): { peerGeneration: bigint; nextPosition: bigint } | null {
  if (!isDecimal(rc.peerGeneration) || !isDecimal(rc.nextPosition)) {
    report(at, 'RECEIPT', "the receipt's peerGeneration and nextPosition must be canonical decimals");
    return null;
  }
  const cur = { peerGeneration: BigInt(rc.peerGeneration), nextPosition: BigInt(rc.nextPosition) };
  const last = g.lastReceipt;
  if (
    last &&
    (cur.peerGeneration < last.peerGeneration || (cur.peerGeneration === last.peerGeneration && cur.nextPosition <= last.nextPosition))
  ) {
    report(
      at,
      'RECEIPT',
      `the receipt (generation ${cur.peerGeneration}, nextPosition ${cur.nextPosition}) does not move forward from the one before it (generation ${last.peerGeneration}, nextPosition ${last.nextPosition})`,
    );
  }
  g.lastReceipt = cur;
  return cur;
}
