// A Jepsen-style history checker for yello streams (docs/protocol.md §5, §6).
//
// Tests record every client append as an operation with an outcome: `ok` (acknowledged with a
// result), `fail` (answered with an error: nothing may have been written), or `info` (unknown
// outcome: the connection died or timed out after sending; it may have committed, but then
// whole). After each fault cycle the test calls `check()`, which reads the daemon's state back
// over the wire (streams.get, streams.read of every stream from firstPosition, operations.list,
// operations.get, keys.list, chats.get) and checks the invariants below against the history and
// against everything the checker has ever seen:
//
//   - no lost writes: every acknowledged append is present at its acknowledged positions with
//     identical records (what the append result returned, and what the client asked for);
//   - no divergence: a position (stream, generation, position) never holds two different records,
//     across reads, follow deliveries and cycles; nothing once seen disappears (no trims here);
//   - contiguity: the records of a stream are exactly firstPosition..nextPosition-1, in order;
//   - signatures: every chat.message verifies against keys.list (ES256, IEEE P1363, the §5
//     payload), contentSha256 matches content, from/to/chat match the stream;
//   - timestamps never go backwards within a stream (§4);
//   - receipts never go backwards: per peer generation, each receipt's nextPosition is strictly
//     greater than the previous one; they name the chat's peer stream and acknowledge only
//     positions that exist there; streams.get(peer).acknowledged is the latest one;
//   - writer fences: epochs strictly increase, the last one is streams.get's writer.epoch;
//   - operations consistent with records: committed (operations.get / operations.list) ⇔ records
//     carrying that operationId in wrapper.operationId exactly at firstPosition..nextPosition-1,
//     recordIndex 0..n-1; `fail` never committed; `info` is whole or absent; no record carries
//     an operationId nobody invoked (no phantom writes).
//
// It talks to the daemon through anything with `call(method, params)` that resolves with the raw
// JSON-RPC response (test/helpers/wire-fixtures.ts's Wire), and shares no code with src/ (it
// takes the contract's types from src/shared, types only).

import { isDeepStrictEqual } from 'node:util';
import type { MethodResults } from '../../src/shared/methods.js';
import type { OperationInfo } from '../../src/shared/results.js';
import type { ChatMessage, RecordWrapper, StoredRecord } from '../../src/shared/types.js';
import type { ResultOf } from './wire-client.mjs';
import {
  clientMessageIdFor,
  isJsonObject,
  jsonPreview,
  ok,
  sha256b64url,
  signedPayload,
  verifyEs256,
  type PublicJwk,
  type Unchecked,
  type WireResponse,
} from './wire-fixtures.js';

/** Anything that can send one JSON-RPC request and resolve with the raw response. */
export interface RpcCaller {
  call<M extends string>(method: M, params?: unknown, timeoutMs?: number): Promise<WireResponse<ResultOf<MethodResults, M>>>;
}

/** An input record of streams.append. */
export type AppendInput =
  | { type: 'chat.message'; messageId: string; content: string }
  | { type: 'chat.receipt'; peerStreamId: string; peerGeneration: string; nextPosition: string; batchId: string };

/** invoke → ok | fail | info (Jepsen's vocabulary); `invoked` until the client learns more. */
export type Outcome = 'invoked' | 'ok' | 'fail' | 'info';

/** One append as the client saw it. */
export interface HistoryOp {
  /** Index in the history. */
  index: number;
  /** Which client process issued it (for messages). */
  process: string;
  /** Fault cycle in which it was invoked. */
  cycle: number;
  streamId: string;
  generation: string;
  expectedPosition: string;
  operationId: string;
  records: AppendInput[];
  outcome: Outcome;
  /** For `ok`: what the daemon acknowledged. */
  result?: { generation: string; firstPosition: string; nextPosition: string; records: StoredRecord[]; duplicate?: boolean };
  /** For `fail`: the error answered. */
  error?: { code: number; type?: string; message?: string };
  /** For `info`: why the outcome is unknown. */
  reason?: string;
  /** For `info`: what the client later learned from operations.get (it must agree with the store). */
  resolution?: { committed: boolean; firstPosition?: string; nextPosition?: string };
}

/** What one `check()` found. */
export interface CheckReport {
  cycle: number;
  streams: number;
  records: number;
  messages: number;
  receipts: number;
  fences: number;
  /** Appends acknowledged so far (whole history). */
  acknowledged: number;
  /** Appends of unknown outcome so far, by what the store says. */
  unknownCommitted: number;
  unknownNotCommitted: number;
  /** Appends answered with an error so far (none may have committed). */
  failed: number;
  /** Acknowledged appends missing or altered in the store: must be 0. */
  lost: number;
  /** Every violated invariant, human-readable. */
  problems: string[];
}

export interface CheckerOptions {
  /** Compare stored message content with the requested content (true when the PII policy is off). */
  exactContent?: boolean;
  /** Every client operationId in the store must be in the history (default true). */
  strictOrigin?: boolean;
  /** Maximum problems kept per check (default 200). */
  maxProblems?: number;
}

/** Stable JSON: object keys sorted, so two equal records always compare equal as text. */
export function canonicalJson(value: object): string {
  return JSON.stringify(value, (_k, v: unknown) => {
    if (isJsonObject(v)) {
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) out[k] = v[k];
      return out;
    }
    return v;
  });
}

function big(s: string): bigint {
  return BigInt(s);
}

/** A stored record as far as `observe` needs it to be one. */
function isStoredRecord(v: unknown): v is StoredRecord {
  return typeof v === 'object' && v !== null && typeof (v as { streamId?: unknown }).streamId === 'string';
}

/**
 * A wrapper as read is checked before anything relies on its shape (the checker does not trust
 * the daemon to send the shape the contract says): a version 2 wrapper of a known type, of this
 * chat and author.
 */
function isWrapperOf(w: unknown, chatId: string, authorAgentId: string): w is RecordWrapper {
  return (
    isJsonObject(w) &&
    w.version === 2 &&
    w.chatId === chatId &&
    w.authorAgentId === authorAgentId &&
    (w.type === 'chat.message' || w.type === 'chat.receipt' || w.type === 'chat.writer-fence')
  );
}

/** The chat's two agents, as chats.get tells them. */
interface ChatInfo {
  chatId: string;
  agentAId: string;
  agentBId: string;
}

export class HistoryChecker {
  readonly ops: HistoryOp[] = [];
  /** The fault cycle new operations belong to; the test bumps it. */
  cycle = 0;
  readonly #byOperation = new Map<string, HistoryOp>();
  /** Every record ever seen: `stream@generation#position` → canonical JSON, and where it was first seen. */
  readonly #seen = new Map<string, { json: string; source: string }>();
  /** Highest position ever seen per `stream@generation` (nothing below it may vanish). */
  readonly #seenEnd = new Map<string, bigint>();
  /** operationIds already confirmed through operations.get (their state cannot change any more). */
  readonly #confirmed = new Map<string, 'committed' | 'unknown'>();
  readonly #chats = new Map<string, ChatInfo>();
  /** Positions whose message signature already verified. */
  readonly #verified = new Set<string>();
  /** Problems found outside check() (divergence seen by observe()). */
  readonly #pending: string[] = [];
  readonly #opts: Required<CheckerOptions>;

  constructor(options: CheckerOptions = {}) {
    this.#opts = {
      exactContent: options.exactContent ?? true,
      strictOrigin: options.strictOrigin ?? true,
      maxProblems: options.maxProblems ?? 200,
    };
  }

  // ---- recording ------------------------------------------------------------------------

  /** Records the invocation of an append (before it is sent). */
  invoke(
    process: string,
    op: { streamId: string; generation: string; expectedPosition: string; operationId: string; records: AppendInput[] },
  ): HistoryOp {
    if (this.#byOperation.has(`${op.streamId} ${op.operationId}`))
      throw new Error(`operationId ${op.operationId} invoked twice on ${op.streamId}`);
    const h: HistoryOp = {
      index: this.ops.length,
      process,
      cycle: this.cycle,
      ...op,
      records: op.records.map((r) => ({ ...r })),
      outcome: 'invoked',
    };
    this.ops.push(h);
    this.#byOperation.set(`${op.streamId} ${op.operationId}`, h);
    return h;
  }

  /** The append was acknowledged with `result` (the streams.append result). */
  ok(h: HistoryOp, result: MethodResults['streams.append']): void {
    h.outcome = 'ok';
    h.result = {
      generation: result.generation,
      firstPosition: result.firstPosition,
      nextPosition: result.nextPosition,
      records: result.records,
      duplicate: result.duplicate,
    };
    for (const r of result.records) this.observe(r, `ack of ${h.operationId}`);
  }

  /** The append was answered with an error: nothing may have been written. */
  fail(h: HistoryOp, error: { code: number; message?: string; data?: { type?: string } }): void {
    h.outcome = 'fail';
    h.error = { code: error.code, type: error.data?.type, message: error.message };
  }

  /** The outcome is unknown (connection lost or timeout after sending). */
  info(h: HistoryOp, reason: string): void {
    h.outcome = 'info';
    h.reason = reason;
  }

  /** What the client learned about an `info` append from operations.get. */
  resolve(h: HistoryOp, op: { state: string; firstPosition?: string | null; nextPosition?: string | null }): void {
    h.resolution =
      op.state === 'committed'
        ? { committed: true, firstPosition: op.firstPosition ?? undefined, nextPosition: op.nextPosition ?? undefined }
        : { committed: false };
  }

  /** Outcomes so far. */
  counts(): { acknowledged: number; failed: number; unknown: number; unknownCommitted: number; unknownNotCommitted: number } {
    let acknowledged = 0;
    let failed = 0;
    let unknown = 0;
    let unknownCommitted = 0;
    let unknownNotCommitted = 0;
    for (const h of this.ops) {
      if (h.outcome === 'ok') acknowledged++;
      else if (h.outcome === 'fail') failed++;
      else {
        unknown++;
        const state = this.#confirmed.get(`${h.streamId} ${h.operationId}`);
        if (state === 'committed') unknownCommitted++;
        else if (state === 'unknown') unknownNotCommitted++;
      }
    }
    return { acknowledged, failed, unknown, unknownCommitted, unknownNotCommitted };
  }

  /**
   * A stored record seen anywhere (read, follow, append result). The same position must never
   * hold another record; returns the problem if it does (also reported by the next check()).
   */
  observe(record: unknown, source: string): string | null {
    if (!isStoredRecord(record)) {
      const p = `${source}: not a stored record: ${jsonPreview(record, 200)}`;
      this.#pending.push(p);
      return p;
    }
    const key = `${record.streamId}@${record.generation}#${record.position}`;
    const json = canonicalJson(record);
    const prior = this.#seen.get(key);
    if (prior === undefined) {
      this.#seen.set(key, { json, source });
      const sg = `${record.streamId}@${record.generation}`;
      const pos = big(record.position);
      if ((this.#seenEnd.get(sg) ?? -1n) < pos) this.#seenEnd.set(sg, pos);
      return null;
    }
    if (prior.json !== json) {
      const p = `DIVERGENCE at ${key}: first seen (${prior.source}) as ${prior.json.slice(0, 300)}; now (${source}) ${json.slice(0, 300)}`;
      this.#pending.push(p);
      return p;
    }
    return null;
  }

  // ---- checking -------------------------------------------------------------------------

  /**
   * Reads every stream back and checks all invariants. `streamIds` are the streams to check
   * (default: every stream named in the history). Call it only while no append is in flight.
   */
  async check(rpc: RpcCaller, streamIds?: string[]): Promise<CheckReport> {
    const problems: string[] = [];
    const problem = (p: string): void => {
      if (problems.length < this.#opts.maxProblems) problems.push(p);
    };
    problems.push(...this.#pending.splice(0));
    const ids = [...new Set(streamIds ?? this.ops.map((h) => h.streamId))].sort();
    const keys = ok(await rpc.call('keys.list', {}), 'keys.list').keys as PublicJwk[];

    const states = new Map<string, MethodResults['streams.get']>();
    const recordsOf = new Map<string, StoredRecord[]>();
    let records = 0;
    let messages = 0;
    let receipts = 0;
    let fences = 0;

    // 1. Read every stream whole; contiguity, divergence, signatures, per-stream order rules.
    for (const streamId of ids) {
      const state = ok(await rpc.call('streams.get', { streamId }), `streams.get ${streamId}`);
      states.set(streamId, state);
      const chat = await this.#chat(rpc, state.chatId);
      const rs = await readWhole(rpc, streamId, state.generation, state.firstPosition, state.nextPosition);
      // Steps 2 and 3 look only at records whose wrapper passed the header check below.
      const wellFormed: StoredRecord[] = [];
      recordsOf.set(streamId, wellFormed);
      records += rs.length;
      const sg = `${streamId}@${state.generation}`;
      // Contiguity: exactly firstPosition..nextPosition-1, in order.
      const first = big(state.firstPosition);
      const next = big(state.nextPosition);
      if (big(String(rs.length)) !== next - first)
        problem(`${streamId}: read ${rs.length} records, streams.get says ${state.firstPosition}..${state.nextPosition}`);
      rs.forEach((r, i) => {
        const want = (first + BigInt(i)).toString();
        if (r.position !== want) problem(`${streamId}: record #${i} is at position ${r.position}, expected ${want} (gap or duplicate)`);
        if (r.streamId !== streamId || r.generation !== state.generation)
          problem(`${streamId}@${state.generation}#${r.position}: record says ${r.streamId}@${r.generation}`);
        this.observe(r, `check cycle ${this.cycle}`);
      });
      // Nothing once seen below the end may vanish.
      const seenEnd = this.#seenEnd.get(sg);
      if (seenEnd !== undefined && seenEnd >= next)
        problem(`LOST: ${sg} position ${seenEnd} was seen before, but the stream now ends at ${state.nextPosition}`);

      const peerAgentId = state.authorAgentId === chat.agentAId ? chat.agentBId : chat.agentAId;
      const peerStreamId = `${chat.chatId}:${peerAgentId}`;
      let lastCreatedAt = '';
      let lastEpoch = -1n;
      const lastReceipt = new Map<string, bigint>();
      for (const r of rs) {
        const where = `${streamId}@${r.generation}#${r.position}`;
        const w = r.wrapper;
        if (!isWrapperOf(w, chat.chatId, state.authorAgentId)) {
          problem(`${where}: bad wrapper header ${jsonPreview(w, 200)}`);
          continue;
        }
        wellFormed.push(r);
        switch (w.type) {
          case 'chat.message': {
            messages++;
            // Only the header is checked so far: the message itself is taken as read.
            const m: Unchecked<ChatMessage> = w.message;
            // A position's record cannot change without a DIVERGENCE problem, so verify each once.
            if (!this.#verified.has(where)) {
              const ps = messageProblemsOf(m, keys);
              for (const p of ps) problem(`${where}: ${p}`);
              if (ps.length === 0) this.#verified.add(where);
            }
            if (m.chatId !== chat.chatId || m.fromAgentId !== state.authorAgentId || m.toAgentId !== peerAgentId)
              problem(`${where}: message chat/from/to do not match the stream`);
            const ts = isJsonObject(m.signature) ? m.signature.createdAt : undefined;
            if (typeof ts === 'string') {
              if (ts < lastCreatedAt) problem(`${where}: timestamp ${ts} goes backwards (previous ${lastCreatedAt})`);
              lastCreatedAt = ts;
            }
            break;
          }
          case 'chat.receipt': {
            receipts++;
            const rc = w.receipt;
            if (rc.peerStreamId !== peerStreamId) problem(`${where}: receipt names ${rc.peerStreamId}, the peer stream is ${peerStreamId}`);
            const prev = lastReceipt.get(rc.peerGeneration);
            const np = big(rc.nextPosition);
            if (prev !== undefined && np <= prev)
              problem(
                `${where}: receipt goes backwards: nextPosition ${rc.nextPosition} after ${prev} (peer generation ${rc.peerGeneration})`,
              );
            lastReceipt.set(rc.peerGeneration, np);
            break;
          }
          case 'chat.writer-fence': {
            fences++;
            const epoch = big(w.fence.epoch);
            if (epoch <= lastEpoch) problem(`${where}: fence epoch ${w.fence.epoch} not above ${lastEpoch}`);
            if (w.operationId !== `fence.${w.fence.epoch}`) problem(`${where}: fence operationId ${w.operationId}`);
            lastEpoch = epoch;
            break;
          }
        }
      }
      if (lastEpoch >= 0n && state.writer.epoch !== lastEpoch.toString())
        problem(`${streamId}: last fence epoch ${lastEpoch}, streams.get writer.epoch ${state.writer.epoch}`);
    }

    // Divergence found while reading.
    for (const p of this.#pending.splice(0)) problem(p);

    // 2. Receipts against the peer stream: they acknowledge only what exists, and the latest
    //    one is what streams.get(peer).acknowledged says.
    for (const streamId of ids) {
      const state = states.get(streamId)!;
      const chat = this.#chats.get(state.chatId)!;
      const peerAgentId = state.authorAgentId === chat.agentAId ? chat.agentBId : chat.agentAId;
      const peerStreamId = `${chat.chatId}:${peerAgentId}`;
      const peer = states.get(peerStreamId) ?? ok(await rpc.call('streams.get', { streamId: peerStreamId }), `streams.get ${peerStreamId}`);
      const rs = recordsOf.get(streamId)!.filter((r) => r.wrapper.type === 'chat.receipt');
      const receiptOf = (r: StoredRecord) => (r.wrapper.type === 'chat.receipt' ? r.wrapper.receipt : undefined);
      for (const r of rs) {
        const rc = receiptOf(r)!;
        if (rc.peerGeneration === peer.generation && big(rc.nextPosition) > big(peer.nextPosition)) {
          problem(
            `LOST: ${streamId}#${r.position} acknowledges ${peerStreamId} up to ${rc.nextPosition}, but that stream ends at ${peer.nextPosition}`,
          );
        }
      }
      const latest = rs
        .map(receiptOf)
        .filter((rc) => rc!.peerGeneration === peer.generation)
        .at(-1);
      const acked = peer.acknowledged;
      if (latest) {
        if (!acked || acked.generation !== peer.generation || acked.nextPosition !== latest.nextPosition) {
          problem(
            `${peerStreamId}: acknowledged is ${JSON.stringify(acked)}, the latest receipt in ${streamId} says ${latest.nextPosition}`,
          );
        }
      } else if (acked && acked.generation === peer.generation) {
        problem(
          `${peerStreamId}: acknowledged ${JSON.stringify(acked)} but ${streamId} holds no receipt for generation ${peer.generation}`,
        );
      }
    }

    // 3. Operations consistent with records.
    const groups = new Map<string, { streamId: string; records: StoredRecord[] }>();
    for (const streamId of ids) {
      for (const r of recordsOf.get(streamId)!) {
        const opId = r.wrapper.operationId;
        if (r.wrapper.type === 'chat.writer-fence') continue;
        const k = `${streamId} ${opId}`;
        let g = groups.get(k);
        if (!g) groups.set(k, (g = { streamId, records: [] }));
        g.records.push(r);
      }
    }
    const listed = new Map<string, OperationInfo>();
    for (const streamId of ids) {
      for (const op of await listOperations(rpc, streamId)) listed.set(`${streamId} ${op.operationId}`, op);
    }
    for (const [k, g] of groups) {
      const first = big(g.records[0]!.position);
      g.records.forEach((r, i) => {
        if (big(r.position) !== first + BigInt(i))
          problem(`${k}: records not at consecutive positions (${g.records.map((x) => x.position).join(',')})`);
        if (r.wrapper.recordIndex !== i) problem(`${k}: record at ${r.position} has recordIndex ${r.wrapper.recordIndex}, expected ${i}`);
      });
      const op = listed.get(k);
      const nextPos = (first + BigInt(g.records.length)).toString();
      if (!op || op.state !== 'committed')
        problem(
          `${k}: records at ${g.records[0]!.position}..${nextPos} but operations.list does not list it committed (${JSON.stringify(op)})`,
        );
      else if (op.firstPosition !== g.records[0]!.position || op.nextPosition !== nextPos) {
        problem(`${k}: operations.list says ${op.firstPosition}..${op.nextPosition}, records are at ${g.records[0]!.position}..${nextPos}`);
      }
      if (this.#opts.strictOrigin && !this.#byOperation.has(k))
        problem(`PHANTOM: ${k} is in the store (${g.records.length} records at ${g.records[0]!.position}) but was never invoked`);
    }
    for (const [k, op] of listed) {
      if (!groups.has(k))
        problem(`${k}: operations.list says ${op.state} ${op.firstPosition}..${op.nextPosition} but no record carries it`);
    }

    // 4. The history against the store.
    let lost = 0;
    const toConfirm: HistoryOp[] = [];
    for (const h of this.ops) {
      const k = `${h.streamId} ${h.operationId}`;
      if (!ids.includes(h.streamId)) continue;
      const g = groups.get(k);
      if (h.outcome === 'ok') {
        const res = h.result!;
        const rs = g?.records ?? [];
        // Set from the closure below, so counted as a list rather than a flag TypeScript cannot follow.
        const lostProblems: string[] = [];
        const lose = (p: string): void => {
          lostProblems.push(p);
          problem(`LOST: ${p}`);
        };
        if (!g) lose(`acknowledged ${k} (${res.firstPosition}..${res.nextPosition}, cycle ${h.cycle}) has no records in the store`);
        else {
          if (rs[0]!.position !== res.firstPosition || (big(rs[0]!.position) + BigInt(rs.length)).toString() !== res.nextPosition) {
            lose(`acknowledged ${k} at ${res.firstPosition}..${res.nextPosition}, the store has it at ${rs[0]!.position}..+${rs.length}`);
          }
          if (res.generation !== h.generation) problem(`${k}: acknowledged in generation ${res.generation}, asked for ${h.generation}`);
          if (!res.duplicate && res.firstPosition !== h.expectedPosition)
            problem(`${k}: acknowledged at ${res.firstPosition}, expectedPosition was ${h.expectedPosition}`);
          res.records.forEach((ack, i) => {
            const stored = rs[i];
            if (!stored || canonicalJson(stored) !== canonicalJson(ack))
              lose(
                `${k} record ${i}: acknowledged ${canonicalJson(ack).slice(0, 200)}, stored ${stored ? canonicalJson(stored).slice(0, 200) : 'undefined'}`,
              );
          });
          for (const p of inputProblems(h, rs, this.#opts.exactContent)) problem(`${k}: ${p}`);
        }
        if (lostProblems.length > 0) lost++;
      } else if (h.outcome === 'fail') {
        if (g) problem(`${k} was answered with ${h.error?.type ?? h.error?.code} but committed at ${g.records[0]!.position}`);
      } else {
        // info / invoked: whole or absent.
        if (g) {
          if (g.records.length !== h.records.length)
            problem(`PARTIAL: ${k} of unknown outcome has ${g.records.length} of ${h.records.length} records`);
          if (g.records[0]!.position !== h.expectedPosition)
            problem(`${k} of unknown outcome committed at ${g.records[0]!.position}, expectedPosition was ${h.expectedPosition}`);
          for (const p of inputProblems(h, g.records, this.#opts.exactContent)) problem(`${k}: ${p}`);
        }
        if (h.resolution && h.resolution.committed !== Boolean(g)) {
          problem(`${k}: the client learned committed=${h.resolution.committed} from operations.get, the store says ${Boolean(g)}`);
        }
        if (h.resolution?.committed && g && h.resolution.firstPosition !== g.records[0]!.position)
          problem(`${k}: operations.get told the client ${h.resolution.firstPosition}, store ${g.records[0]!.position}`);
      }
      toConfirm.push(h);
    }

    // operations.get for every operation of the history, every time: committed and unknown are
    // final once nothing is in flight, so a change between checks is a lost or resurrected write.
    for (let i = 0; i < toConfirm.length; i += 64) {
      const chunk = toConfirm.slice(i, i + 64);
      const answers = await Promise.all(chunk.map((h) => rpc.call('operations.get', { streamId: h.streamId, operationId: h.operationId })));
      chunk.forEach((h, j) => {
        const k = `${h.streamId} ${h.operationId}`;
        const resp = answers[j]!;
        if (resp.error) {
          problem(`${k}: operations.get failed ${JSON.stringify(resp.error)}`);
          return;
        }
        const op = resp.result!;
        const g = groups.get(k);
        switch (op.state) {
          case 'pending':
            problem(`${k}: operations.get says pending while nothing is in flight`);
            return;
          case 'committed':
            if (!g) problem(`${k}: operations.get says committed (${op.firstPosition}..${op.nextPosition}) but no record carries it`);
            else if (
              op.firstPosition !== g.records[0]!.position ||
              op.nextPosition !== (big(g.records[0]!.position) + BigInt(g.records.length)).toString()
            ) {
              problem(
                `${k}: operations.get says ${op.firstPosition}..${op.nextPosition}, records at ${g.records[0]!.position}..+${g.records.length}`,
              );
            }
            if (op.generation !== h.generation) problem(`${k}: operations.get generation ${op.generation}, asked ${h.generation}`);
            if (h.outcome === 'fail') problem(`${k}: answered ${h.error?.type} but operations.get says committed`);
            break;
          case 'unknown':
            if (g) problem(`${k}: operations.get says unknown but ${g.records.length} records carry it at ${g.records[0]!.position}`);
            if (h.outcome === 'ok') problem(`LOST: acknowledged ${k} is unknown to operations.get`);
            break;
          default:
            // Not a state the contract knows: the daemon answered something else.
            problem(`${k}: operations.get state ${String((op as { state?: unknown }).state)}`);
            return;
        }
        const before = this.#confirmed.get(k);
        if (before !== undefined && before !== op.state)
          problem(`${k}: operations.get said ${before} at an earlier check, now ${op.state}`);
        this.#confirmed.set(k, op.state);
      });
    }

    const counts = this.counts();
    return {
      cycle: this.cycle,
      streams: ids.length,
      records,
      messages,
      receipts,
      fences,
      acknowledged: counts.acknowledged,
      unknownCommitted: counts.unknownCommitted,
      unknownNotCommitted: counts.unknownNotCommitted,
      failed: counts.failed,
      lost,
      problems,
    };
  }

  async #chat(rpc: RpcCaller, chatId: string): Promise<ChatInfo> {
    let c = this.#chats.get(chatId);
    if (!c) {
      const r = ok(await rpc.call('chats.get', { chatId }), `chats.get ${chatId}`);
      c = { chatId, agentAId: r.chat.agentAId, agentBId: r.chat.agentBId };
      this.#chats.set(chatId, c);
    }
    return c;
  }
}

/** Every record of `generation` from `first` to `next` (exclusive), paged. */
export async function readWhole(
  rpc: RpcCaller,
  streamId: string,
  generation: string,
  first: string,
  next: string,
): Promise<StoredRecord[]> {
  const out: StoredRecord[] = [];
  let from = first;
  while (big(from) < big(next)) {
    const r = ok(
      await rpc.call('streams.read', { streamId, generation, fromPosition: from, limit: 1000 }),
      `streams.read ${streamId} from ${from}`,
    );
    const rs = r.records;
    if (rs.length === 0) throw new Error(`streams.read ${streamId} from ${from} returned nothing before nextPosition ${next}`);
    if (r.fromPosition !== from || big(r.nextPosition) !== big(from) + BigInt(rs.length)) {
      throw new Error(`streams.read ${streamId} from ${from}: batch says ${r.fromPosition}..${r.nextPosition} with ${rs.length} records`);
    }
    out.push(...rs);
    from = r.nextPosition;
  }
  return out;
}

/** Every committed operation of a stream (operations.list, paged). */
async function listOperations(rpc: RpcCaller, streamId: string): Promise<OperationInfo[]> {
  const out: OperationInfo[] = [];
  let cursor: string | undefined;
  for (;;) {
    const r = ok(
      await rpc.call('operations.list', cursor === undefined ? { streamId, limit: 500 } : { streamId, cursor, limit: 500 }),
      `operations.list ${streamId}`,
    );
    out.push(...r.operations);
    if (!r.nextCursor) return out;
    cursor = r.nextCursor;
  }
}

/** §5 checks of one stored message: contentSha256 and the ES256 signature against the key set. */
export function messageProblemsOf(m: Unchecked<ChatMessage> | undefined, keys: PublicJwk[]): string[] {
  const problems: string[] = [];
  if (!isJsonObject(m)) return ['no message'];
  const sig = m.signature;
  if (!isJsonObject(sig)) return ['no signature'];
  if (sig.alg !== 'ES256') problems.push(`signature alg ${String(sig.alg)}`);
  const createdAt = sig.createdAt;
  if (typeof createdAt !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(createdAt))
    problems.push(`createdAt ${String(createdAt)} is not RFC 3339 UTC with ms`);
  const { chatId, fromAgentId, toAgentId, content, contentSha256 } = m;
  if (typeof content !== 'string' || sha256b64url(content) !== contentSha256) problems.push('contentSha256 does not match content');
  const key = keys.find((k) => k.kid === sig.kid);
  if (!key) problems.push(`no key ${String(sig.kid)} in keys.list`);
  else if (
    typeof chatId !== 'string' ||
    typeof fromAgentId !== 'string' ||
    typeof toAgentId !== 'string' ||
    typeof createdAt !== 'string' ||
    typeof contentSha256 !== 'string' ||
    typeof sig.value !== 'string' ||
    !verifyEs256(signedPayload({ chatId, fromAgentId, toAgentId, createdAt, contentSha256 }), sig.value, key)
  ) {
    problems.push('signature does not verify');
  }
  return problems;
}

/** The stored records of an operation against what the client asked for. */
function inputProblems(h: HistoryOp, stored: StoredRecord[], exactContent: boolean): string[] {
  const problems: string[] = [];
  h.records.forEach((input, i) => {
    const r = stored[i];
    if (!r) return;
    const w = r.wrapper;
    if (w.operationId !== h.operationId || w.type !== input.type) {
      problems.push(`record ${i} is ${w.type}/${w.operationId}, asked ${input.type}/${h.operationId}`);
      return;
    }
    if (input.type === 'chat.message' && w.type === 'chat.message') {
      if (w.message.clientMessageId !== clientMessageIdFor(w.chatId, w.authorAgentId, input.messageId))
        problems.push(`record ${i}: clientMessageId does not match messageId ${input.messageId}`);
      if (exactContent && w.message.content !== input.content) problems.push(`record ${i}: content differs from what was sent`);
    } else if (input.type === 'chat.receipt' && w.type === 'chat.receipt') {
      const want = {
        peerStreamId: input.peerStreamId,
        peerGeneration: input.peerGeneration,
        nextPosition: input.nextPosition,
        batchId: input.batchId,
      };
      if (!isDeepStrictEqual(w.receipt, want))
        problems.push(`record ${i}: receipt ${JSON.stringify(w.receipt)} differs from ${JSON.stringify(want)}`);
    }
  });
  return problems;
}
