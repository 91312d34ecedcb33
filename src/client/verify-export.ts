import { CHECKPOINT_TYPE } from '../shared/checkpoint.js';
import { ChainDigest } from './hashing.js';
import { DECIMAL_PATTERN, splitStreamId, makeStreamId } from '../shared/ids.js';
import type { Checkpoint, ChatMessage, ChatReceipt, Jwks, StoredRecord } from '../shared/types.js';
import { checkpointFailure, KeyRing, messageFailure } from './verify.js';

/**
 * What `verifyExport` can find wrong, as stable strings (the `problem` texts are for people):
 * - `NOT_JSON`, `NOT_A_RECORD`: a line that is not JSON, or neither a stored record nor a checkpoint line.
 * - `CONTENT_HASH`, `SIGNATURE`, `UNKNOWN_KID`: a message's own checks (§5.4).
 * - `WRONG_STREAM`: a record or checkpoint whose ids disagree with its `streamId`, of another
 *   chat than the rest of the export, or of a third stream.
 * - `POSITION`: positions are not exactly the checkpoint's `firstPosition` .. `nextPosition - 1`
 *   (a gap, a repeat, records missing at either end or past it).
 * - `CREATED_AT_ORDER`: a message older than the message before it in its stream generation.
 * - `REPLAY`: a signature value that already appeared on another line.
 * - `CLIENT_MESSAGE_ID`: a malformed `clientMessageId`, or one used twice in a stream generation.
 * - `OPERATION`: records of one operation that are not consecutive with recordIndex 0, 1, …,
 *   an operationId used again later in its stream, or a fence whose operationId is not `fence.<epoch>`.
 * - `RECEIPT`: a receipt for another stream than the chat's other one, or one that does not
 *   move forward within its stream generation, or one that provably existed when the export's
 *   checkpoint of that peer stream generation was taken and acknowledges positions beyond it
 *   (acknowledged records are missing).
 * - `AFTER_CHECKPOINT`: a record after its stream generation's checkpoint line.
 * - `NO_CHECKPOINT`: records of a stream generation without a checkpoint: their completeness and
 *   order cannot be proved (an export made before checkpoints existed: export it again).
 * - `MISSING_STREAM`: the export has nothing of the chat's other stream, which its records name;
 *   `EMPTY`: the export has no records and no checkpoints.
 * - `CHECKPOINT_INVALID`, `CHECKPOINT_SIGNATURE`: a malformed or repeated checkpoint, or one
 *   whose signature (or kid: `UNKNOWN_KID`) does not verify.
 * - `CHAIN_DIGEST`: the records of a checkpoint's range do not hash to its `chainDigest`:
 *   something in the range was changed, swapped, replaced or renumbered. The digest covers the
 *   whole range, so this problem names the range; the other checks name positions where they can.
 */
export type ExportProblemKind =
  | 'NOT_JSON'
  | 'NOT_A_RECORD'
  | 'CONTENT_HASH'
  | 'SIGNATURE'
  | 'UNKNOWN_KID'
  | 'WRONG_STREAM'
  | 'POSITION'
  | 'CREATED_AT_ORDER'
  | 'REPLAY'
  | 'CLIENT_MESSAGE_ID'
  | 'OPERATION'
  | 'RECEIPT'
  | 'AFTER_CHECKPOINT'
  | 'NO_CHECKPOINT'
  | 'MISSING_STREAM'
  | 'EMPTY'
  | 'CHECKPOINT_INVALID'
  | 'CHECKPOINT_SIGNATURE'
  | 'CHAIN_DIGEST';

/** One problem of an export, with where it is: 1-based line (0 for the export as a whole), stream, generation and position when known. */
export interface ExportProblem {
  line: number;
  streamId: string | null;
  generation: string | null;
  position: string | null;
  kind: ExportProblemKind;
  problem: string;
}

/** What the export holds of one stream generation. */
export interface ExportGeneration {
  streamId: string;
  generation: string;
  /** Positions of the records found (null when there are none). */
  firstPosition: string | null;
  nextPosition: string | null;
  records: number;
  /** The checkpoint line that closes it, or null when there is none. */
  checkpoint: { line: number; firstPosition: string; nextPosition: string; createdAt: string; kid: string } | null;
}

/** The outcome of `verifyExport`: counts, what each stream generation holds, and every problem found. */
export interface ExportVerification {
  records: number;
  messages: number;
  checkpoints: number;
  generations: ExportGeneration[];
  problems: ExportProblem[];
}

interface Where {
  line: number;
  streamId: string | null;
  generation: string | null;
  position: string | null;
}

/** Where a record is: records always have a position. */
type RecordWhere = Where & { position: string };

interface Group {
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

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SHA256_B64URL = /^[A-Za-z0-9_-]{43}$/;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === 'string';
const isDecimal = (v: unknown): v is string => typeof v === 'string' && DECIMAL_PATTERN.test(v);
const range = (a: bigint, b: bigint) => (a === b ? `${a}` : `${a}..${b}`);

/** The shape of a stored record (§5.2), enough to check it without tripping over missing members. */
function isStoredRecord(v: Record<string, unknown>): v is Record<string, unknown> & StoredRecord {
  const w = v.wrapper;
  if (!isString(v.streamId) || !isDecimal(v.generation) || !isDecimal(v.position) || !isObject(w)) return false;
  if (!isString(w.chatId) || !isString(w.authorAgentId) || !isString(w.operationId) || !Number.isSafeInteger(w.recordIndex)) return false;
  if (w.type === 'chat.message') {
    const m = w.message;
    return (
      isObject(m) &&
      isString(m.chatId) &&
      isString(m.fromAgentId) &&
      isString(m.toAgentId) &&
      isString(m.clientMessageId) &&
      isString(m.content) &&
      isString(m.contentSha256) &&
      isObject(m.signature) &&
      isString(m.signature.kid) &&
      isString(m.signature.alg) &&
      isString(m.signature.value) &&
      isString(m.signature.createdAt)
    );
  }
  if (w.type === 'chat.receipt') {
    const r = w.receipt;
    return isObject(r) && isString(r.peerStreamId) && isString(r.peerGeneration) && isString(r.nextPosition) && isString(r.batchId);
  }
  if (w.type === 'chat.writer-fence') return isObject(w.fence) && isString(w.fence.epoch);
  return false;
}

/** The shape of a checkpoint (§5.9). */
function isCheckpoint(v: unknown): v is Checkpoint {
  if (!isObject(v) || v.type !== CHECKPOINT_TYPE) return false;
  const s = v.signature;
  return (
    isString(v.streamId) &&
    isString(v.chatId) &&
    isString(v.authorAgentId) &&
    isDecimal(v.generation) &&
    isDecimal(v.firstPosition) &&
    isDecimal(v.nextPosition) &&
    isDecimal(v.recordCount) &&
    isString(v.chainDigest) &&
    isString(v.createdAt) &&
    isObject(s) &&
    isString(s.kid) &&
    isString(s.alg) &&
    isString(s.value)
  );
}

/** The latest receipt of a peer stream generation (see ExportVerifier's `#acknowledged`). */
interface Acknowledged {
  nextPosition: bigint;
  at: Where;
  group: Group;
  signedAfter: string | null;
}

/**
 * Checks an export (`yello chats export`) offline, one line at a time, against a JWKS
 * (docs/protocol.md §5.9): every message's hash and signature; every checkpoint's signature;
 * that each stream generation's records are exactly the positions its checkpoint covers and
 * hash to its chain digest; stream membership, timestamp order, replays, and the structure of
 * operations and receipts. Memory grows with the number of messages (their signatures and
 * clientMessageIds are remembered to find repeats), not with content.
 */
export class ExportVerifier {
  readonly #keys: KeyRing;
  readonly #groups = new Map<string, Group>();
  readonly #signatures = new Map<string, { at: Where; reported: boolean }>();
  readonly #operations = new Map<string, Set<string>>();
  /** Per author: the agents its messages and receipts name as the peer, with where first. */
  readonly #peers = new Map<string, Map<string, Where>>();
  readonly #problems: ExportProblem[] = [];
  /**
   * Per peer stream generation: the highest position a receipt acknowledges, where, its own
   * stream generation, and the createdAt of the first message its author signed after it.
   */
  readonly #acknowledged = new Map<string, Acknowledged>();
  #chat: { chatId: string; line: number } | null = null;
  #line = 0;
  #records = 0;
  #messages = 0;
  #checkpoints = 0;
  #result: ExportVerification | null = null;

  constructor(jwks: Jwks) {
    this.#keys = new KeyRing(jwks);
  }

  /** Check the next line of the export (lines are numbered from 1 in the order given). */
  line(text: string): void {
    if (this.#result) throw new Error('ExportVerifier: line() after result()');
    const line = ++this.#line;
    if (text.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      this.#report({ line, streamId: null, generation: null, position: null }, 'NOT_JSON', 'not JSON');
      return;
    }
    if (isObject(value) && 'checkpoint' in value) {
      if (Object.keys(value).length !== 1 || !isCheckpoint(value.checkpoint)) {
        const c = isObject(value.checkpoint) ? value.checkpoint : {};
        const at = {
          line,
          streamId: isString(c.streamId) ? c.streamId : null,
          generation: isString(c.generation) ? c.generation : null,
          position: null,
        };
        this.#report(at, 'CHECKPOINT_INVALID', `not a ${CHECKPOINT_TYPE} checkpoint line`);
        return;
      }
      this.#checkpoint(line, value.checkpoint);
      return;
    }
    if (!isObject(value) || !isStoredRecord(value)) {
      const r = isObject(value) ? value : {};
      this.#report(
        {
          line,
          streamId: isString(r.streamId) ? r.streamId : null,
          generation: isString(r.generation) ? r.generation : null,
          position: isString(r.position) ? r.position : null,
        },
        'NOT_A_RECORD',
        'not a stored record',
      );
      return;
    }
    this.#record(line, value);
  }

  /** Finish: report what only the whole export shows, and return the outcome (the same one if called again). */
  result(): ExportVerification {
    if (this.#result) return this.#result;
    for (const g of this.#groups.values()) {
      if (g.checkpoint === null && g.count > 0) {
        this.#report(
          { line: g.firstLine, streamId: g.streamId, generation: g.generation, position: `${g.first}` },
          'NO_CHECKPOINT',
          'no checkpoint for this stream generation: completeness and order not provable (an export from before checkpoints? export it again)',
        );
      }
    }
    this.#checkPeers();
    this.#checkAcknowledged();
    if (this.#records === 0 && this.#checkpoints === 0 && this.#problems.length === 0) {
      this.#report(
        { line: 0, streamId: null, generation: null, position: null },
        'EMPTY',
        'the export holds no records and no checkpoints',
      );
    }
    const generations = [...this.#groups.values()].map((g): ExportGeneration => ({
      streamId: g.streamId,
      generation: g.generation,
      firstPosition: g.first === null ? null : `${g.first}`,
      nextPosition: g.last === null ? null : `${g.last + 1n}`,
      records: g.count,
      checkpoint: g.checkpoint && {
        line: g.checkpoint.line,
        firstPosition: g.checkpoint.value.firstPosition,
        nextPosition: g.checkpoint.value.nextPosition,
        createdAt: g.checkpoint.value.createdAt,
        kid: g.checkpoint.value.signature.kid,
      },
    }));
    const problems = [...this.#problems].sort((a, b) => a.line - b.line);
    this.#result = { records: this.#records, messages: this.#messages, checkpoints: this.#checkpoints, generations, problems };
    return this.#result;
  }

  #report(at: Where, kind: ExportProblemKind, problem: string): void {
    this.#problems.push({ ...at, kind, problem });
  }

  #group(streamId: string, generation: string, line: number): Group {
    const key = `${streamId}\n${generation}`;
    let g = this.#groups.get(key);
    if (!g) {
      g = {
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
      this.#groups.set(key, g);
    }
    return g;
  }

  /** The export is of one chat and at most its two streams. Null when `streamId` is not of it. */
  #member(at: Where, streamId: string): { chatId: string; authorAgentId: string } | null {
    const parts = splitStreamId(streamId);
    if (!parts) {
      this.#report(at, 'WRONG_STREAM', `streamId ${streamId} is not chatId:authorAgentId`);
      return null;
    }
    if (this.#chat === null) this.#chat = { chatId: parts.chatId, line: at.line };
    else if (parts.chatId !== this.#chat.chatId) {
      this.#report(
        at,
        'WRONG_STREAM',
        `belongs to chat ${parts.chatId}, but the export is of chat ${this.#chat.chatId} (line ${this.#chat.line})`,
      );
      return null;
    }
    if (!this.#peers.has(parts.authorAgentId)) {
      if (this.#peers.size >= 2) {
        this.#report(at, 'WRONG_STREAM', `a third stream (${streamId}): a chat has two`);
        return null;
      }
      this.#peers.set(parts.authorAgentId, new Map());
    }
    return parts;
  }

  /** Remember that `author`'s stream names `peer` as the other participant. */
  #namesPeer(author: string, peer: string, at: Where): void {
    const named = this.#peers.get(author);
    if (named && !named.has(peer)) named.set(peer, at);
  }

  #record(line: number, r: StoredRecord): void {
    this.#records++;
    const at: RecordWhere = { line, streamId: r.streamId, generation: r.generation, position: r.position };
    const w = r.wrapper;
    const parts = this.#member(at, r.streamId);
    if (parts) {
      if (w.chatId !== parts.chatId || w.authorAgentId !== parts.authorAgentId) {
        this.#report(at, 'WRONG_STREAM', `the wrapper names ${makeStreamId(w.chatId, w.authorAgentId)}, not its stream ${r.streamId}`);
      }
      if (w.type === 'chat.message') {
        const m = w.message;
        if (m.chatId !== parts.chatId || m.fromAgentId !== parts.authorAgentId || m.toAgentId === parts.authorAgentId) {
          this.#report(
            at,
            'WRONG_STREAM',
            `the message is from ${m.fromAgentId} to ${m.toAgentId} in ${m.chatId}, which is not a message of stream ${r.streamId}`,
          );
        } else this.#namesPeer(parts.authorAgentId, m.toAgentId, at);
      }
      if (w.type === 'chat.receipt') {
        const peer = splitStreamId(w.receipt.peerStreamId);
        if (!peer || peer.chatId !== parts.chatId || peer.authorAgentId === parts.authorAgentId) {
          this.#report(
            at,
            'RECEIPT',
            `the receipt acknowledges ${w.receipt.peerStreamId}, which is not the other stream of chat ${parts.chatId}`,
          );
        } else this.#namesPeer(parts.authorAgentId, peer.authorAgentId, at);
      }
    }

    const g = this.#group(r.streamId, r.generation, line);
    if (w.type === 'chat.message') this.#message(at, g, w.message);
    if (g.checkpoint !== null) {
      this.#report(at, 'AFTER_CHECKPOINT', `a record after the checkpoint of this stream generation (line ${g.checkpoint.line})`);
      return;
    }

    const pos = BigInt(r.position);
    if (g.last !== null && pos !== g.last + 1n) {
      g.positionProblems++;
      this.#report(
        at,
        'POSITION',
        pos <= g.last ? `position repeats or goes back (after ${g.last})` : `gap: positions ${g.last + 1n}..${pos - 1n} missing`,
      );
    }
    if (g.first === null) {
      g.first = pos;
      g.firstLine = line;
    }
    const contiguous = g.last !== null && pos === g.last + 1n;
    g.last = pos;
    g.count++;
    g.digest.add(r);
    this.#operation(at, g, r, pos, contiguous);
    if (w.type === 'chat.receipt') this.#receipt(at, g, w.receipt);
  }

  #message(at: RecordWhere, g: Group, m: ChatMessage): void {
    this.#messages++;
    for (const a of this.#acknowledged.values()) if (a.group === g && a.signedAfter === null) a.signedAfter = m.signature.createdAt;
    const failure = messageFailure(m, this.#keys);
    if (failure) this.#report(at, failure.kind, failure.problem);
    // Which copy is the replay cannot be told apart: both places are named.
    const seen = this.#signatures.get(m.signature.value);
    if (seen) {
      if (!seen.reported) {
        seen.reported = true;
        this.#report(
          seen.at,
          'REPLAY',
          `the same signature appears again at line ${at.line} (position ${at.position} of ${at.streamId}): a message may appear once`,
        );
      }
      this.#report(
        at,
        'REPLAY',
        `the same signature as line ${seen.at.line} (position ${seen.at.position} of ${seen.at.streamId}): a message may appear once`,
      );
    } else this.#signatures.set(m.signature.value, { at, reported: false });
    if (g.checkpoint !== null) return;
    const createdAt = m.signature.createdAt;
    if (TIMESTAMP.test(createdAt)) {
      if (g.lastCreatedAt !== null && createdAt < g.lastCreatedAt) {
        this.#report(at, 'CREATED_AT_ORDER', `createdAt ${createdAt} is earlier than ${g.lastCreatedAt} of the message before it`);
      }
      g.lastCreatedAt = createdAt;
    }
    if (!SHA256_B64URL.test(m.clientMessageId)) {
      this.#report(at, 'CLIENT_MESSAGE_ID', 'clientMessageId is not 43 characters of base64url');
    } else {
      const earlier = g.clientMessageIds.get(m.clientMessageId);
      if (earlier !== undefined)
        this.#report(at, 'CLIENT_MESSAGE_ID', `clientMessageId already used at position ${earlier} of this generation`);
      else g.clientMessageIds.set(m.clientMessageId, at.position);
    }
  }

  /**
   * An append writes its records at consecutive positions with recordIndex 0, 1, …, and an
   * operationId is used once per stream (across generations); a claim writes one fence with
   * operationId `fence.<epoch>`. Checked only between neighbours the export has, since a trim
   * may have cut an operation.
   */
  #operation(at: Where, g: Group, r: StoredRecord, pos: bigint, contiguous: boolean): void {
    const w = r.wrapper;
    if (w.type === 'chat.writer-fence' && (w.operationId !== `fence.${w.fence.epoch}` || w.recordIndex !== 0)) {
      this.#report(
        at,
        'OPERATION',
        `a fence of epoch ${w.fence.epoch} must be record 0 of operation fence.${w.fence.epoch}, not record ${w.recordIndex} of ${w.operationId}`,
      );
    }
    const prev = g.lastOp;
    const continues = contiguous && prev !== null && prev.operationId === w.operationId;
    if (continues && w.recordIndex !== prev.recordIndex + 1) {
      this.#report(at, 'OPERATION', `record ${w.recordIndex} of operation ${w.operationId} follows its record ${prev.recordIndex}`);
    } else if (!continues && (contiguous || pos === 0n) && w.recordIndex !== 0) {
      this.#report(at, 'OPERATION', `operation ${w.operationId} starts here with record ${w.recordIndex}, not 0`);
    }
    if (!continues) {
      let ops = this.#operations.get(r.streamId);
      if (!ops) this.#operations.set(r.streamId, (ops = new Set()));
      if (ops.has(w.operationId)) this.#report(at, 'OPERATION', `operation ${w.operationId} already appeared earlier in this stream`);
      ops.add(w.operationId);
    }
    g.lastOp = { operationId: w.operationId, recordIndex: w.recordIndex, position: pos };
  }

  /** Receipts of a stream generation move forward: a later peer generation, or a higher position in the same one. */
  #receipt(at: Where, g: Group, rc: ChatReceipt): void {
    if (!isDecimal(rc.peerGeneration) || !isDecimal(rc.nextPosition)) {
      this.#report(at, 'RECEIPT', "the receipt's peerGeneration and nextPosition must be canonical decimals");
      return;
    }
    const cur = { peerGeneration: BigInt(rc.peerGeneration), nextPosition: BigInt(rc.nextPosition) };
    const last = g.lastReceipt;
    if (
      last &&
      (cur.peerGeneration < last.peerGeneration || (cur.peerGeneration === last.peerGeneration && cur.nextPosition <= last.nextPosition))
    ) {
      this.#report(
        at,
        'RECEIPT',
        `the receipt (generation ${cur.peerGeneration}, nextPosition ${cur.nextPosition}) does not move forward from the one before it (generation ${last.peerGeneration}, nextPosition ${last.nextPosition})`,
      );
    }
    g.lastReceipt = cur;
    const key = `${rc.peerStreamId}\n${rc.peerGeneration}`;
    const seen = this.#acknowledged.get(key);
    if (!seen || cur.nextPosition > seen.nextPosition)
      this.#acknowledged.set(key, { nextPosition: cur.nextPosition, at, group: g, signedAfter: null });
  }

  /**
   * A receipt says its author was shown the peer's records before `nextPosition`; a checkpoint
   * of that peer stream generation that ends below it leaves acknowledged records out (an
   * export of a stream whose head was rolled back, made before the daemon refused that).
   */
  #checkAcknowledged(): void {
    for (const [key, { nextPosition, at, group, signedAfter }] of this.#acknowledged) {
      const c = this.#groups.get(key)?.checkpoint?.value;
      if (!c || BigInt(c.nextPosition) >= nextPosition) continue;
      // Each stream is checkpointed at its own moment, so in a live chat a receipt may
      // acknowledge records appended after the peer's checkpoint. Only a receipt that provably
      // existed when that checkpoint fixed its range is a problem: its own stream was
      // checkpointed no later, or its author signed a message after it no later.
      const own = group.checkpoint?.value.createdAt;
      const existed = (own !== undefined && own <= c.createdAt) || (signedAfter !== null && signedAfter <= c.createdAt);
      if (!existed) continue;
      this.#report(
        at,
        'RECEIPT',
        `the receipt acknowledges ${c.streamId} generation ${c.generation} before position ${nextPosition}, but the export's checkpoint of it ends at ${c.nextPosition}: positions ${range(BigInt(c.nextPosition), nextPosition - 1n)} were acknowledged and are not in the export`,
      );
    }
  }

  #checkpoint(line: number, c: Checkpoint): void {
    this.#checkpoints++;
    const at: Where = { line, streamId: c.streamId, generation: c.generation, position: null };
    if (`${c.chatId}:${c.authorAgentId}` !== c.streamId)
      this.#report(at, 'CHECKPOINT_INVALID', `chatId ${c.chatId} and authorAgentId ${c.authorAgentId} do not make its streamId`);
    this.#member(at, c.streamId);
    const first = BigInt(c.firstPosition);
    const next = BigInt(c.nextPosition);
    if (next < first || BigInt(c.recordCount) !== next - first) {
      this.#report(
        at,
        'CHECKPOINT_INVALID',
        `recordCount ${c.recordCount} is not nextPosition ${c.nextPosition} - firstPosition ${c.firstPosition}`,
      );
    }
    const failure = checkpointFailure(c, this.#keys);
    if (failure)
      this.#report(at, failure.kind === 'UNKNOWN_KID' ? 'UNKNOWN_KID' : 'CHECKPOINT_SIGNATURE', `checkpoint: ${failure.problem}`);

    const g = this.#group(c.streamId, c.generation, line);
    if (g.checkpoint !== null) {
      this.#report(at, 'CHECKPOINT_INVALID', `a second checkpoint for this stream generation (the first is at line ${g.checkpoint.line})`);
      return;
    }
    g.checkpoint = { line, value: c };
    const covered = next > first ? `positions ${range(first, next - 1n)}` : 'no positions';
    if (g.first === null || g.last === null) {
      if (next > first) {
        this.#report(
          { ...at, position: `${first}` },
          'POSITION',
          `positions ${range(first, next - 1n)} missing: the checkpoint covers ${c.recordCount} records, the export has none`,
        );
      }
    } else {
      const end = g.last + 1n;
      let reported = g.positionProblems;
      if (g.first > first) {
        this.#report(
          { line: g.firstLine, streamId: g.streamId, generation: g.generation, position: `${first}` },
          'POSITION',
          `positions ${range(first, g.first - 1n)} missing at the start: the checkpoint (line ${line}) covers ${covered}`,
        );
        reported++;
      } else if (g.first < first) {
        this.#report(
          { line: g.firstLine, streamId: g.streamId, generation: g.generation, position: `${g.first}` },
          'POSITION',
          `records from position ${g.first} lie before the checkpoint's range (line ${line}: ${covered})`,
        );
        reported++;
      }
      if (end < next) {
        this.#report(
          { ...at, position: `${end}` },
          'POSITION',
          `positions ${range(end, next - 1n)} missing at the end: the checkpoint covers ${covered}`,
        );
        reported++;
      } else if (end > next) {
        this.#report(
          { ...at, position: `${next}` },
          'POSITION',
          `records continue past the checkpoint's nextPosition ${next} (to ${g.last})`,
        );
        reported++;
      }
      if (reported === 0 && BigInt(g.count) !== next - first) {
        this.#report(at, 'POSITION', `the export has ${g.count} records where the checkpoint covers ${c.recordCount}`);
      }
    }
    if (g.digest.digest() !== c.chainDigest) {
      this.#report(
        at,
        'CHAIN_DIGEST',
        `the ${g.count} records of this stream generation do not hash to the checkpoint's chainDigest (${covered}): a record was changed, swapped, replaced or renumbered`,
      );
    }
  }

  /** Each stream's messages and receipts name the other stream's author; the export has both streams. */
  #checkPeers(): void {
    const authors = [...this.#peers.keys()];
    for (const [author, named] of this.#peers) {
      const other = authors.find((a) => a !== author);
      for (const [peer, at] of named) {
        if (other !== undefined && peer !== other) {
          this.#report(at, 'WRONG_STREAM', `names ${peer} as the other participant, but the chat's other stream is of ${other}`);
        } else if (other === undefined && this.#chat) {
          this.#report(at, 'MISSING_STREAM', `the export has nothing of stream ${this.#chat.chatId}:${peer}, which this record names`);
        }
      }
    }
  }
}

/**
 * Check a whole export offline: `input` is its text or its lines. See {@link ExportVerifier}
 * for what is checked and {@link ExportProblemKind} for what can be reported.
 */
export function verifyExport(input: string | Iterable<string>, jwks: Jwks): ExportVerification {
  const v = new ExportVerifier(jwks);
  for (const line of typeof input === 'string' ? input.split('\n') : input) v.line(line);
  return v.result();
}
