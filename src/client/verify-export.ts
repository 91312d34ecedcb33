import { CHECKPOINT_TYPE } from '../shared/checkpoint.js';
import { splitStreamId, makeStreamId } from '../shared/ids.js';
import type { Checkpoint, ChatMessage, ChatReceipt, Jwks, StoredRecord } from '../shared/types.js';
import { checkCheckpointRange } from './export-checkpoint.js';
import { checkMessageOrder, checkOperation, checkReceiptOrder, newGroup, placeRecord, type Group } from './export-generation.js';
import {
  range,
  type ExportGeneration,
  type ExportProblem,
  type ExportProblemKind,
  type ExportVerification,
  type RecordWhere,
  type Where,
} from './export-problems.js';
import { isCheckpoint, isObject, isStoredRecord, isString } from './export-shapes.js';
import { checkpointFailure, KeyRing, messageFailure } from './verify.js';

export type { ExportGeneration, ExportProblem, ExportProblemKind, ExportVerification } from './export-problems.js';

// The export check in stages, each in a module of its own: the shape of a line (export-shapes.ts),
// the order within a stream generation (export-generation.ts), a checkpoint's range and digest
// (export-checkpoint.ts); this file holds what spans lines: the chat and its two streams,
// signatures and replays, receipts against the peer's checkpoint.

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

  readonly #report = (at: Where, kind: ExportProblemKind, problem: string): void => {
    this.#problems.push({ ...at, kind, problem });
  };

  #group(streamId: string, generation: string, line: number): Group {
    const key = `${streamId}\n${generation}`;
    let g = this.#groups.get(key);
    if (!g) this.#groups.set(key, (g = newGroup(streamId, generation, line)));
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

    const { pos, contiguous } = placeRecord(this.#report, at, g, r);
    let ops = this.#operations.get(r.streamId);
    if (!ops) this.#operations.set(r.streamId, (ops = new Set()));
    checkOperation(this.#report, at, g, r, pos, contiguous, ops);
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
    checkMessageOrder(this.#report, at, g, m);
  }

  /** Receipts move forward within their generation; the highest per peer stream generation is kept for #checkAcknowledged. */
  #receipt(at: Where, g: Group, rc: ChatReceipt): void {
    const cur = checkReceiptOrder(this.#report, at, g, rc);
    if (!cur) return;
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
    checkCheckpointRange(this.#report, at, g, c);
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
