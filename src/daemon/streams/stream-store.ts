import { errors, YelloError } from '../../shared/errors.js';
import { formatDecimal, parseDecimal, splitStreamId } from '../../shared/ids.js';
import { clientMessageId, contentSha256, messagePayload, sha256Base64url } from '../../shared/message-signing.js';
import type { OperationInfo } from '../../shared/results.js';
import type { AppendResult, MessageSignature, ReadBatch, Redaction, StoredRecord, StreamState } from '../../shared/types.js';
import { openBatchId, sealBatchId } from '../crypto/batch-codec.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { AppendRequest, ClaimRequest, ReadRequest, ReleaseRequest } from '../requests.js';
import type { Caller } from '../caller.js';
import type { Counters } from '../store/counters.js';
import { Directory } from '../directory/directory.js';
import type { Integrity } from '../store/integrity.js';
import { K, prefixEnd } from '../store/key-layout.js';
import { PAGE_BYTES } from '../limits.js';
import { applyPiiPolicy } from '../pii/pii-policy.js';
import type { Signer } from '../crypto/signer.js';
import type { Storage, WriteOp } from '../store/storage.js';
import { cloneMeta, newStreamMeta, publicStreamState, type StreamMeta } from '../store/stream-meta.js';
import { hashToken, newToken } from '../crypto/tokens.js';
import type { Touch } from '../store/wal-guard.js';
import type { StoredOperation } from '../store/record-layout.js';
import { placeOf, StreamTables, type StreamIdentity } from '../store/stream-tables.js';
import { StreamNegativeIndex } from './negative-index.js';
import type { SignBatcher } from '../crypto/sign-batcher.js';
import { expandRecord, type CompactRecord } from '../store/record-layout.js';

export type { StoredOperation } from '../store/record-layout.js';

/** A committed range of one stream, handed to subscribers in commit order. */
export interface CommittedRange {
  streamId: string;
  chatId: string;
  generation: number;
  fromPosition: number;
  nextPosition: number;
  records: StoredRecord[];
}

/** Listener for changes subscribers must hear about. */
export interface StreamEvents {
  committed(range: CommittedRange): void;
  /** A reset or trim: exact continuity may be impossible for readers of `streamId`. */
  discontinuity(streamId: string): void;
}

const COORDINATOR_TOKEN_PREFIX = 'yello_ct_';
/** Records deleted per batch when trimming, so a huge trim never builds one giant batch. */
const TRIM_CHUNK = 10_000;

/**
 * The directional streams: heads, writer fencing, compare-and-append, reads with exact
 * continuity, operations, trim and reset.
 *
 * Two views of each stream head are cached: `admitted` (what the next write is checked
 * against, including writes not yet durable) and `committed` (what readers see). Admission is
 * synchronous from the first check to the queued write, so concurrent appends cannot both
 * pass the same position check.
 */
export class StreamStore {
  readonly #storage: Storage;
  readonly #directory: Directory;
  readonly #signer: Signer;
  readonly #codec: TokenCodec;
  readonly #counters: Counters;
  readonly #integrity: Integrity;
  readonly #tables: StreamTables;
  readonly #admitted = new Map<string, StreamMeta>();
  readonly #committed = new Map<string, StreamMeta>();
  readonly #listeners: StreamEvents[] = [];

  /** Per stream: which operationIds and clientMessageIds certainly do not exist yet. */
  readonly #negative = new Map<string, StreamNegativeIndex>();
  /** Streams whose head was checked against its records in this process. */
  readonly #reconciled = new Set<string>();

  readonly #batcher: SignBatcher | null;

  constructor(storage: Storage, directory: Directory, signer: Signer, codec: TokenCodec, counters: Counters, integrity: Integrity, batcher: SignBatcher | null = null) {
    this.#batcher = batcher;
    this.#storage = storage;
    this.#integrity = integrity;
    this.#tables = new StreamTables(storage);
    this.#directory = directory;
    this.#signer = signer;
    this.#codec = codec;
    this.#counters = counters;
    storage.onFailure(() => {
      this.#admitted.clear();
      this.#committed.clear();
      this.#negative.clear();
    });
  }

  listen(listener: StreamEvents): void {
    this.#listeners.push(listener);
  }

  // ---- heads ----------------------------------------------------------------------------

  #admittedMeta(streamId: string): StreamMeta | undefined {
    let meta = this.#admitted.get(streamId);
    if (!meta) {
      meta = this.#load(streamId, true);
      if (!meta) return undefined;
      this.#admitted.set(streamId, meta);
    }
    return meta;
  }

  /** Committed head of a stream (what readers may see), or undefined. */
  committedMeta(streamId: string): StreamMeta | undefined {
    let meta = this.#committed.get(streamId);
    if (!meta) {
      meta = this.#load(streamId, false);
      if (!meta) return undefined;
      this.#committed.set(streamId, meta);
    }
    return meta;
  }

  /** Read a head; an unreadable one marks the whole stream corrupt. The first load checks it. */
  #load(streamId: string, admitted: boolean): StreamMeta | undefined {
    const key = K.stream(streamId);
    let meta: StreamMeta | undefined;
    try {
      meta = this.#tables.head(streamId, admitted);
    } catch (err) {
      if (!(err instanceof YelloError) || err.details.reason !== 'CORRUPT') throw err;
      throw this.#integrity.mark({ streamId, generation: null, fromPosition: 0, detail: `the stream head fails its check (${String(err.details.detail)})` });
    }
    if (meta && !this.#tables.headPending(streamId)) this.reconcile(meta);
    if (!meta && this.#headBelongsToChat(streamId)) {
      // Both heads are written with the chat, in one batch: a chat without one lost it.
      throw this.#integrity.mark({ streamId, generation: null, fromPosition: 0, detail: `the stream head (${key}) is missing, though its chat exists` });
    }
    // A stream the log guard says was written, whose head (and chat) a log loss took: corrupt,
    // not missing — its acknowledged records may exist, or may be what was lost.
    if (!meta) this.#integrity.assertIntact(streamId);
    return meta;
  }

  /** Whether the stream's chat exists and the author is one of its two agents. */
  #headBelongsToChat(streamId: string): boolean {
    const parts = splitStreamId(streamId);
    if (!parts) return false;
    const chat = this.#directory.chatRow(parts.chatId);
    return chat !== undefined && (chat.agentAId === parts.authorAgentId || chat.agentBId === parts.authorAgentId);
  }

  /**
   * Check a committed head against its records, once per process and with point reads only:
   * the last record the head claims exists, names its position and an operation that covers
   * it; nothing lies at or past the head, nor in a later generation. A disagreement marks the
   * stream corrupt, so no append is ever written over a position that may hold an
   * acknowledged record.
   */
  reconcile(meta: StreamMeta): void {
    const { streamId, generation, firstPosition, nextPosition } = meta;
    if (this.#reconciled.has(streamId)) return;
    this.#reconciled.add(streamId);
    const mark = (fromPosition: number, detail: string) => this.#integrity.mark({ streamId, generation, fromPosition, detail });
    const read = <T>(get: () => T | undefined): T | undefined | 'corrupt' => {
      try {
        return get();
      } catch (err) {
        if (err instanceof YelloError && err.details.reason === 'CORRUPT') return 'corrupt';
        throw err;
      }
    };
    if (nextPosition > firstPosition) {
      const at = nextPosition - 1;
      const last = read(() => this.#tables.record(meta, generation, at));
      if (last === 'corrupt') return void mark(at, `the head's last record (position ${at}) fails its checksum`);
      if (last === undefined) return void mark(at, `the head says records end at ${nextPosition}, but position ${at} is missing`);
      if (last.position !== formatDecimal(at) || last.streamId !== streamId || last.generation !== formatDecimal(generation)) {
        return void mark(at, `the record stored at position ${at} names another place`);
      }
      if (last.wrapper.type !== 'chat.writer-fence') {
        const op = read(() => this.#tables.operation(streamId, last.wrapper.operationId));
        if (op === 'corrupt' || op === undefined || op.generation !== generation || op.firstPosition > at || op.nextPosition <= at) {
          return void mark(at, `the operation of the last record (${last.wrapper.operationId}) is missing or does not cover position ${at}`);
        }
      }
    }
    const past = read(() => this.#tables.record(meta, generation, nextPosition));
    if (past !== undefined) return void mark(nextPosition, `a record lies at position ${nextPosition}, past the head: the head is behind its records`);
    const later = read(() => this.#tables.record(meta, generation + 1, 0));
    if (later !== undefined) return void mark(nextPosition, `records of generation ${generation + 1} exist, but the head is at generation ${generation}`);
  }

  /**
   * Admit a new head: cache it as admitted, persist it with its records, publish it as
   * committed once durable, then tell subscribers.
   */
  async #commitMeta(
    next: StreamMeta,
    ops: WriteOp[],
    range?: { generation: number; fromPosition: number; nextPosition: number; records: StoredRecord[] },
    ready: Promise<void> | null = null,
  ): Promise<void> {
    const previous = this.#admitted.get(next.streamId);
    // Where the stream stood before this write, for the log guard: anything lost lies past it.
    const touch: Touch = {
      streamId: next.streamId,
      generation: next.generation,
      position: previous && previous.generation === next.generation ? previous.nextPosition : next.firstPosition,
    };
    this.#admitted.set(next.streamId, next);
    ops.push(...this.#tables.headOps(next, previous));
    const snapshot = cloneMeta(next);
    const records = range?.records ?? [];
    for (const r of records) ops.push(this.#tables.recordOp(next, r, range!.generation, Number(r.position)));
    await this.#storage.write(ops, [touch], ready);
    const current = this.#committed.get(next.streamId);
    // Commits of one stream complete in admission order; never move the committed view back.
    if (!current || current.generation < snapshot.generation || current.nextPosition <= snapshot.nextPosition) {
      this.#committed.set(next.streamId, snapshot);
    }
    if (range && records.length > 0) {
      const full: CommittedRange = { generation: range.generation, fromPosition: range.fromPosition, nextPosition: range.nextPosition, records, streamId: next.streamId, chatId: next.chatId };
      for (const l of this.#listeners) l.committed(full);
    }
  }

  /**
   * Check every stored head against its records in the background (startup), so corruption is
   * listed before traffic finds it. Heads are not cached by this: idle memory stays small.
   */
  async reconcileAll(): Promise<void> {
    let n = 0;
    for await (const { key } of this.#storage.entriesChecked<unknown>({ gte: K.streamsPrefix, lt: prefixEnd(K.streamsPrefix) })) {
      const streamId = key.slice(K.streamsPrefix.length);
      if (!this.#reconciled.has(streamId)) {
        try {
          this.#load(streamId, false);
        } catch (err) {
          if (!(err instanceof YelloError) || err.details.reason !== 'CORRUPT') throw err;
        }
      }
      // Yield now and then: the sweep must not hold the event loop.
      if (++n % 64 === 0) await new Promise<void>((r) => setImmediate(r));
    }
  }

  /** Chat, author and peer of a stream, which its stored records do not repeat. */
  #identity(streamId: string): StreamIdentity {
    const meta = this.#committed.get(streamId) ?? this.#admitted.get(streamId) ?? this.committedMeta(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    return meta;
  }

  /** Public state, with the peer's receipt as `acknowledged`. */
  state(meta: StreamMeta): StreamState {
    return publicStreamState(meta, this.committedMeta(`${meta.chatId}:${meta.peerAgentId}`));
  }

  /** `streams.get`: participants and admin. */
  get(caller: Caller, streamId: string): StreamState {
    const meta = this.committedMeta(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    this.#assertReader(caller, meta);
    return this.state(meta);
  }

  #assertReader(caller: Caller, meta: StreamMeta): void {
    if (caller.role === 'agent' && caller.agentId !== meta.authorAgentId && caller.agentId !== meta.peerAgentId) {
      throw errors.permissionDenied('NOT_PARTICIPANT', `agent ${caller.agentId} is not a participant of ${meta.chatId}`);
    }
  }

  /** Author check before the stream lookup (§6 order: author, then stream). */
  #assertAuthor(caller: Caller, streamId: string): void {
    const parts = splitStreamId(streamId);
    if (caller.role !== 'agent' || !parts || parts.authorAgentId !== caller.agentId) {
      throw errors.permissionDenied('NOT_AUTHOR', 'only the author of a stream may claim it or append to it');
    }
  }

  #requireAdmitted(streamId: string): StreamMeta {
    const meta = this.#admittedMeta(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    return meta;
  }

  /** The head to write to: it exists and no corruption mark covers it. */
  #writableMeta(streamId: string, operationId: string | null = null): StreamMeta {
    const meta = this.#requireAdmitted(streamId);
    this.#integrity.assertWritable(streamId, meta.generation, operationId);
    return meta;
  }

  // ---- writer fencing -------------------------------------------------------------------

  async claim(caller: Caller, p: ClaimRequest): Promise<{ streamId: string; generation: string; epoch: string; coordinatorToken: string; nextPosition: string }> {
    this.#storage.assertWritable();
    this.#assertAuthor(caller, p.streamId);
    const meta = this.#writableMeta(p.streamId);
    if (meta.writer.active && !p.replace) {
      throw errors.writerActive(formatDecimal(meta.writer.epoch), meta.writer.claimedAt ?? '');
    }
    const next = cloneMeta(meta);
    const epoch = meta.writer.epoch + 1;
    const claimedAt = this.#timestamp(next);
    const token = `${COORDINATOR_TOKEN_PREFIX}${newToken('')}`;
    const position = next.nextPosition;
    const record: StoredRecord = {
      streamId: p.streamId, generation: formatDecimal(next.generation), position: formatDecimal(position),
      wrapper: {
        version: 2, chatId: meta.chatId, authorAgentId: meta.authorAgentId, operationId: `fence.${epoch}`, recordIndex: 0,
        type: 'chat.writer-fence',
        fence: { epoch: formatDecimal(epoch), claimedAt, replaced: meta.writer.active, ...(p.reason !== undefined ? { reason: p.reason } : {}) },
      },
    };
    next.writer = { epoch, claimedAt, active: true, tokenHash: hashToken(token) };
    next.nextPosition = position + 1;
    this.#counters.records++;
    await this.#commitMeta(next, [this.#counters.op()], {
      generation: next.generation, fromPosition: position, nextPosition: position + 1, records: [record],
    });
    return { streamId: p.streamId, generation: formatDecimal(next.generation), epoch: formatDecimal(epoch), coordinatorToken: token, nextPosition: formatDecimal(next.nextPosition) };
  }

  async release(caller: Caller, p: ReleaseRequest): Promise<StreamState> {
    this.#storage.assertWritable();
    if (caller.role === 'agent') {
      this.#assertAuthor(caller, p.streamId);
      if (p.coordinatorToken === undefined) throw errors.invalidParams('coordinatorToken', 'the author releases with its coordinator token');
    }
    const meta = this.#writableMeta(p.streamId);
    if (caller.role === 'agent' && !this.#tokenCurrent(meta, p.coordinatorToken!)) {
      throw errors.fenced(p.streamId, formatDecimal(meta.writer.epoch));
    }
    if (meta.writer.active) {
      const next = cloneMeta(meta);
      next.writer = { ...next.writer, active: false, tokenHash: null };
      await this.#commitMeta(next, []);
      return this.state(next);
    }
    await this.#storage.durable(K.stream(p.streamId));
    return this.state(meta);
  }

  #tokenCurrent(meta: StreamMeta, token: string): boolean {
    return meta.writer.active && meta.writer.tokenHash !== null && meta.writer.tokenHash === hashToken(token);
  }

  /** Non-decreasing RFC 3339 timestamp for the next record of `meta` (mutates lastCreatedAt). */
  #timestamp(meta: StreamMeta): string {
    const now = new Date().toISOString();
    const ts = meta.lastCreatedAt !== null && meta.lastCreatedAt > now ? meta.lastCreatedAt : now;
    meta.lastCreatedAt = ts;
    return ts;
  }

  // ---- append ---------------------------------------------------------------------------

  /** `streams.append`, checked in the order of §6 (size is checked at the wire). */
  async append(caller: Caller, p: AppendRequest): Promise<AppendResult> {
    this.#storage.assertWritable(p.operationId);
    this.#assertAuthor(caller, p.streamId);
    const meta = this.#requireAdmitted(p.streamId);

    const digest = requestDigest(p);
    const opKey = K.operation(p.streamId, p.operationId);
    const negative = this.#negativeIndex(meta);
    const op = negative.mayHaveOperation(p.operationId) ? this.#tables.operation(p.streamId, p.operationId, true) : undefined;
    if (op !== undefined) {
      if (op.requestDigest !== digest) throw errors.operationConflict(p.operationId);
      await this.#storage.durable(opKey);
      return { ...(await this.#replay(p.streamId, op)), duplicate: true };
    }
    this.#integrity.assertWritable(p.streamId, meta.generation, p.operationId);

    if (!this.#tokenCurrent(meta, p.coordinatorToken)) throw errors.fenced(p.streamId, formatDecimal(meta.writer.epoch));
    const generation = p.generation;
    const expected = p.expectedPosition;
    if (generation !== meta.generation || expected !== meta.nextPosition) {
      throw errors.positionMismatch(formatDecimal(meta.nextPosition), formatDecimal(meta.generation));
    }
    if (!this.#directory.maySend(meta.authorAgentId, meta.peerAgentId)) {
      throw errors.permissionDenied('NO_GRANT', `no grant lets ${meta.authorAgentId} send to ${meta.peerAgentId}`);
    }

    const next = cloneMeta(meta);
    this.#checkReceipts(caller, next, p.records);
    const messageIds = this.#checkMessageIds(meta, p.records, negative);
    const redactions: Redaction[] = [];
    const contents = this.#applyPolicy(meta.authorAgentId, p.records, redactions);

    const ops: WriteOp[] = [];
    const gen = formatDecimal(generation);
    // Signatures are asked for here and computed at the end of this event-loop turn, inline
    // for a few, by a worker for many (sign-batcher.ts); the write waits for them. Everything
    // signed (the payload, the kid, createdAt) is fixed now, at admission.
    const signing: Array<Promise<void>> = [];
    const records = p.records.map((input, index): StoredRecord => {
      const position = formatDecimal(expected + index);
      const base = { version: 2 as const, chatId: meta.chatId, authorAgentId: meta.authorAgentId, operationId: p.operationId, recordIndex: index };
      if (input.type === 'chat.receipt') {
        return {
          streamId: p.streamId, generation: gen, position,
          wrapper: { ...base, type: 'chat.receipt', receipt: { peerStreamId: input.peerStreamId, peerGeneration: input.peerGeneration, nextPosition: input.nextPosition, batchId: input.batchId } },
        };
      }
      const content = contents[index]!;
      const sha = contentSha256(content);
      // The timestamp is fixed at admission, so it never goes backwards within a stream.
      const fields = { chatId: meta.chatId, fromAgentId: meta.authorAgentId, toAgentId: meta.peerAgentId, createdAt: this.#timestamp(next), contentSha256: sha };
      const signature: MessageSignature = { kid: this.#signer.kid, alg: 'ES256', value: '', createdAt: fields.createdAt };
      const value = this.#batcher ? this.#batcher.sign(signature.kid, messagePayload(fields)) : this.#signer.signPayloadAs(signature.kid, messagePayload(fields));
      if (typeof value === 'string') signature.value = value;
      else signing.push(value.then((v) => void (signature.value = v)));
      return {
        streamId: p.streamId, generation: gen, position,
        wrapper: { ...base, type: 'chat.message', message: { chatId: meta.chatId, fromAgentId: meta.authorAgentId, toAgentId: meta.peerAgentId, clientMessageId: messageIds[index]!, content, contentSha256: sha, signature } },
      };
    });
    messageIds.forEach((id, index) => {
      if (id !== undefined) ops.push({ type: 'put', key: K.messageId(p.streamId, generation, id), value: formatDecimal(expected + index) });
    });
    next.nextPosition = expected + p.records.length;
    const committedAt = new Date().toISOString();
    const stored: StoredOperation = { operationId: p.operationId, generation, firstPosition: expected, nextPosition: next.nextPosition, committedAt, requestDigest: digest, redactions };
    ops.push(this.#tables.operationOp(p.streamId, stored));
    negative.operations.add(p.operationId);
    for (const id of messageIds) if (id !== undefined) negative.messages(generation).add(id);
    ops.push({ type: 'put', key: K.opLog(p.streamId, generation, expected), value: p.operationId });
    this.#counters.records += p.records.length;
    ops.push(this.#counters.op());
    try {
      await this.#commitMeta(next, ops, { generation, fromPosition: expected, nextPosition: next.nextPosition, records }, signing.length > 0 ? Promise.all(signing).then(() => {}) : null);
    } catch (err) {
      // Queued and then failed: the answer names the operation, whose outcome is unknown.
      if (err instanceof YelloError && err.type === 'STORAGE_FAILURE') throw err.withDetails({ operationId: p.operationId });
      throw err;
    }
    return { streamId: p.streamId, generation: gen, operationId: p.operationId, firstPosition: formatDecimal(expected), nextPosition: formatDecimal(next.nextPosition), records, duplicate: false, redactions };
  }

  /** Whether the stream's negative index is built (tests observe it instead of sleeping). */
  negativeIndexReady(streamId: string): boolean {
    return this.#negative.get(streamId)?.ready === true;
  }

  /**
   * The negative index of a stream, started on its first append in this process: until the
   * keys-only scan has filled it, every lookup reads LevelDB.
   */
  #negativeIndex(meta: StreamMeta): StreamNegativeIndex {
    let index = this.#negative.get(meta.streamId);
    if (index) return index;
    const fresh = new StreamNegativeIndex();
    this.#negative.set(meta.streamId, fresh);
    const ops = K.operationsPrefix(meta.streamId);
    const messages = K.messageIdsPrefix(meta.streamId, meta.generation);
    void (async () => {
      for await (const key of this.#storage.keys({ gte: ops, lt: prefixEnd(ops) })) fresh.operations.add(key.slice(ops.length));
      for await (const key of this.#storage.keys({ gte: messages, lt: prefixEnd(messages) })) fresh.messages(meta.generation).add(key.slice(messages.length));
      fresh.ready = true;
    })().catch(() => {
      // Not ready stays not ready: every lookup keeps reading LevelDB, which is always correct.
    });
    return fresh;
  }

  /** Receipts: a batch this agent was shown, of the peer's current generation, moving forward. Updates `next.receipt`. */
  #checkReceipts(caller: Caller, next: StreamMeta, records: AppendRequest['records']): void {
    const peerStreamId = `${next.chatId}:${next.peerAgentId}`;
    for (const r of records) {
      if (r.type !== 'chat.receipt') continue;
      if (r.peerStreamId !== peerStreamId) throw errors.invalidReceipt('WRONG_STREAM');
      const batch = openBatchId(this.#codec, r.batchId);
      if (!batch) throw errors.invalidReceipt('UNKNOWN_BATCH');
      const reader = caller.role === 'agent' ? caller.agentId : 'admin';
      if (batch.reader !== reader || batch.streamId !== r.peerStreamId) throw errors.invalidReceipt('NOT_PRESENTED');
      const peerGeneration = parseDecimal(r.peerGeneration);
      const nextPosition = parseDecimal(r.nextPosition);
      if (batch.generation !== peerGeneration || batch.nextPosition !== nextPosition) throw errors.invalidReceipt('BATCH_MISMATCH');
      const peer = this.#admittedMeta(peerStreamId);
      if (!peer || peer.generation !== peerGeneration) throw errors.invalidReceipt('STALE_GENERATION');
      const last = next.receipt;
      if (last && last.peerGeneration === peerGeneration && nextPosition <= last.nextPosition) throw errors.invalidReceipt('NOT_FORWARD');
      if (last && last.peerGeneration > peerGeneration) throw errors.invalidReceipt('STALE_GENERATION');
      next.receipt = { peerGeneration, nextPosition };
    }
  }

  /** clientMessageIds of the messages (by record index); DUPLICATE_MESSAGE on reuse in this generation. */
  #checkMessageIds(meta: StreamMeta, records: AppendRequest['records'], negative: StreamNegativeIndex): Array<string | undefined> {
    const seen = new Map<string, number>();
    return records.map((r, index) => {
      if (r.type !== 'chat.message') return undefined;
      const id = clientMessageId(meta.chatId, meta.authorAgentId, r.messageId);
      const stored = negative.mayHaveMessage(meta.generation, id) ? this.#storage.getAdmitted<string>(K.messageId(meta.streamId, meta.generation, id)) : undefined;
      if (stored !== undefined) throw errors.duplicateMessage(stored);
      const inRequest = seen.get(id);
      if (inRequest !== undefined) throw errors.duplicateMessage(formatDecimal(meta.nextPosition + inRequest));
      seen.set(id, index);
      return id;
    });
  }

  #applyPolicy(authorAgentId: string, records: AppendRequest['records'], redactions: Redaction[]): Array<string | undefined> {
    const mode = this.#directory.piiMode(authorAgentId);
    const kinds = new Set<string>();
    const contents = records.map((r, recordIndex) => {
      if (r.type !== 'chat.message') return undefined;
      const outcome = applyPiiPolicy(r.content, mode);
      for (const f of outcome.found) {
        kinds.add(f.kind);
        if (mode === 'redact') redactions.push({ recordIndex, kind: f.kind, count: f.count });
      }
      return outcome.content;
    });
    if (mode === 'reject' && kinds.size > 0) throw errors.policyRejected([...kinds].sort());
    return contents;
  }

  async #replay(streamId: string, op: StoredOperation): Promise<Omit<AppendResult, 'duplicate'>> {
    const records = await this.#range(streamId, op.generation, op.firstPosition, op.nextPosition, Infinity, Infinity);
    return {
      streamId, generation: formatDecimal(op.generation), operationId: op.operationId,
      firstPosition: formatDecimal(op.firstPosition), nextPosition: formatDecimal(op.nextPosition), records, redactions: op.redactions,
    };
  }

  // ---- reads ----------------------------------------------------------------------------

  /** Bounds of a readable generation: the current one, or a sealed earlier one. */
  bounds(meta: StreamMeta, generation: number): { firstPosition: number; nextPosition: number; sealed: boolean } | null {
    if (generation === meta.generation) return { firstPosition: meta.firstPosition, nextPosition: meta.nextPosition, sealed: false };
    const s = meta.sealed.find((g) => g.generation === generation);
    return s ? { firstPosition: s.firstPosition, nextPosition: s.nextPosition, sealed: true } : null;
  }

  /** Committed meta of a stream a reader expects to exist, or CONTINUITY_BREAK/STREAM_MISSING. */
  continuingMeta(streamId: string): StreamMeta {
    const meta = this.committedMeta(streamId);
    if (!meta) throw errors.continuityBreak('STREAM_MISSING', streamId, streamId, null);
    return meta;
  }

  /** `continuingMeta`, for a participant or admin. */
  readableMeta(caller: Caller, streamId: string): StreamMeta {
    const meta = this.continuingMeta(streamId);
    this.#assertReader(caller, meta);
    return meta;
  }

  /** `streams.read` without waiting. */
  async read(caller: Caller, p: ReadRequest): Promise<ReadBatch> {
    const meta = this.readableMeta(caller, p.streamId);
    const generation = p.generation;
    const from = p.fromPosition;
    const b = this.bounds(meta, generation);
    if (!b) throw errors.continuityBreak('GENERATION_CHANGED', p.streamId, formatDecimal(generation), formatDecimal(meta.generation));
    if (from < b.firstPosition) throw errors.continuityBreak('PREFIX_UNAVAILABLE', p.streamId, formatDecimal(from), formatDecimal(b.firstPosition));
    // Past a corruption mark nothing can be vouched for, not even "no more records".
    this.#integrity.assertReadable(p.streamId, generation, from);
    if (from > b.nextPosition) throw errors.invalidParams('fromPosition', `fromPosition is beyond nextPosition ${b.nextPosition}`);
    const end = Math.min(b.nextPosition, this.#integrity.readLimit(p.streamId, generation));
    // Never more than a page, whatever the caller asks (docs/protocol.md §3.2 page budget).
    const records = await this.#range(p.streamId, generation, from, end, p.limit, Math.min(p.maxBytes, PAGE_BYTES));
    const nextPosition = from + records.length;
    return {
      batchId: this.batchId(caller, p.streamId, generation, from, nextPosition),
      streamId: p.streamId, generation: formatDecimal(generation), fromPosition: formatDecimal(from), nextPosition: formatDecimal(nextPosition), records, sealed: b.sealed,
    };
  }

  /** The first position of a generation readers may not pass (Infinity when unmarked). */
  readLimit(streamId: string, generation: number): number {
    return this.#integrity.readLimit(streamId, generation);
  }

  /** Throw STORAGE_FAILURE/CORRUPT when `position` is at or past a corruption mark. */
  assertReadable(streamId: string, generation: number, position: number): void {
    this.#integrity.assertReadable(streamId, generation, position);
  }

  /** Mint the batchId of a presented range. */
  batchId(caller: Caller, streamId: string, generation: number, from: number, next: number): string {
    return sealBatchId(this.#codec, { reader: caller.role === 'agent' ? caller.agentId : 'admin', streamId, generation, fromPosition: from, nextPosition: next });
  }

  /**
   * Committed records of [from, end) of one generation, in position order (or reverse), each
   * checksum-verified and at exactly the next expected position. A missing position is never
   * skipped: below the recorded trim point it was trimmed while we read (PREFIX_UNAVAILABLE);
   * at or above it, an acknowledged record is gone, which is corruption. Whether ending
   * before the range's far end is a break is the caller's call. Breaking out closes the iterator.
   */
  async *scan(streamId: string, generation: number, from: number, end: number, reverse = false): AsyncGenerator<{ record: StoredRecord; bytes: number }> {
    if (from >= end) return;
    let expect = reverse ? end - 1 : from;
    const stream = this.#identity(streamId);
    const entries = this.#tables.records(stream, generation, from, end, reverse);
    for (;;) {
      let next: IteratorResult<{ record: StoredRecord; bytes: number }>;
      try {
        next = await entries.next();
      } catch (err) {
        // A record that fails its check is an acknowledged record lost: mark the stream there.
        if (err instanceof YelloError && err.details.reason === 'CORRUPT' && err.details.streamId === streamId) {
          const at = err.details.fromPosition === null ? expect : Number(err.details.fromPosition);
          throw this.#integrity.mark({ streamId, generation, fromPosition: at, detail: `record ${at} fails its checksum` });
        }
        throw err;
      }
      if (next.done) return;
      const { record, bytes } = next.value;
      if (record.position !== formatDecimal(expect)) throw this.missing(streamId, generation, expect);
      yield { record, bytes };
      expect += reverse ? -1 : 1;
    }
  }

  /**
   * The error for a record that is not where the head says it is: PREFIX_UNAVAILABLE when a
   * trim took it, else a corruption mark from `position` on.
   */
  missing(streamId: string, generation: number, position: number): YelloError {
    const meta = this.committedMeta(streamId);
    const b = meta ? this.bounds(meta, generation) : null;
    if (b && position < b.firstPosition) {
      return errors.continuityBreak('PREFIX_UNAVAILABLE', streamId, formatDecimal(position), formatDecimal(b.firstPosition));
    }
    return this.#integrity.mark({ streamId, generation, fromPosition: position, detail: `record ${position} is missing above the trim point` });
  }

  /** Records [from, end), at most `limit`, stopping once `maxBytes` is reached (always at least one). */
  async #range(streamId: string, generation: number, from: number, end: number, limit: number, maxBytes: number): Promise<StoredRecord[]> {
    const out: StoredRecord[] = [];
    let bytes = 0;
    try {
      for await (const r of this.scan(streamId, generation, from, end)) {
        out.push(r.record);
        bytes += r.bytes;
        if (out.length >= limit || bytes >= maxBytes) break;
      }
    } catch (err) {
      // Serve the intact records before the damage; the next read starts at it and fails there.
      if (out.length === 0 || !(err instanceof YelloError && err.details.reason === 'CORRUPT')) throw err;
    }
    if (out.length === 0 && from < end) throw this.missing(streamId, generation, from);
    return out;
  }

  /** Committed records [from, end) for internal readers (follow, history), cut at `maxBytes` (always at least one). */
  range(streamId: string, generation: number, from: number, end: number, limit: number, maxBytes = Infinity): Promise<StoredRecord[]> {
    return this.#range(streamId, generation, from, end, limit, maxBytes);
  }

  // ---- operations -----------------------------------------------------------------------

  /**
   * `operations.get`. An operation absent from a stream that lost records cannot be called
   * "never committed": that is a STORAGE_FAILURE/CORRUPT, not `unknown`.
   */
  async operation(caller: Caller, streamId: string, operationId: string): Promise<OperationInfo> {
    const meta = this.committedMeta(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    this.#assertReader(caller, meta);
    const key = K.operation(streamId, operationId);
    // Pending first: admitted and waiting for its fsync, or its fsync failed and only a restart
    // tells. LevelDB shows a batch to point reads a moment before the daemon has published the
    // new head; answering "committed" from that would disagree with streams.get.
    if (this.#storage.hasPending(key) || this.#storage.inDoubt(key)) return noOperation(operationId, 'pending');
    const committed = this.#tables.operation(streamId, operationId);
    if (committed !== undefined) return operationInfo(committed);
    this.#integrity.assertIntact(streamId);
    // "unknown" means "never committed", which the answer's reader acts on (it may send again):
    // confirm it against the operation log, so a lost index entry is reported, not denied.
    // A scan of the stream's (small) log entries, on this path only.
    const prefix = K.opLogPrefix(streamId);
    for await (const { key: logKey, value } of this.#storage.entries<string>({ gte: prefix, lt: prefixEnd(prefix) })) {
      if (value !== operationId) continue;
      const at = locateKeyPosition(logKey);
      throw this.#integrity.mark({ streamId, generation: at.generation, fromPosition: at.position, detail: `operation ${operationId} is in the operation log but its entry is missing` });
    }
    return noOperation(operationId, 'unknown');
  }

  async operations(caller: Caller, streamId: string, cursor: string | undefined, limit: number): Promise<{ operations: OperationInfo[]; nextCursor: string | null }> {
    const meta = this.committedMeta(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    this.#assertReader(caller, meta);
    const prefix = K.opLogPrefix(streamId);
    let after: string | undefined;
    if (cursor !== undefined) {
      after = this.#codec.open<string>('ops', cursor) ?? undefined;
      if (after === undefined || !after.startsWith(prefix)) throw errors.invalidParams('cursor', 'not a cursor of operations.list for this stream');
    }
    const entries: Array<{ key: string; value: string }> = [];
    for await (const entry of this.#storage.entries<string>(after === undefined ? { gte: prefix, lt: prefixEnd(prefix), limit: limit + 1 } : { gt: after, lt: prefixEnd(prefix), limit: limit + 1 })) {
      entries.push(entry);
    }
    const page = entries.slice(0, limit);
    const operations = page.map(({ key, value: opId }) => {
      const op = this.#tables.operation(streamId, opId);
      if (op === undefined) {
        const at = locateKeyPosition(key);
        throw this.#integrity.mark({ streamId, generation: at.generation, fromPosition: at.position, detail: `operation ${opId} is in the operation log but missing` });
      }
      return operationInfo(op);
    });
    const last = page[page.length - 1];
    return { operations, nextCursor: entries.length > limit && last ? this.#codec.seal('ops', last.key) : null };
  }

  // ---- retention and generations --------------------------------------------------------

  async trim(streamId: string, beforePosition: number, force: boolean): Promise<{ firstPosition: string }> {
    this.#storage.assertWritable();
    const meta = this.#writableMeta(streamId);
    if (beforePosition > meta.nextPosition) throw errors.invalidParams('beforePosition', `beforePosition is beyond nextPosition ${meta.nextPosition}`);
    if (beforePosition <= meta.firstPosition) return { firstPosition: formatDecimal(meta.firstPosition) };
    if (!force) {
      const peer = this.#admittedMeta(`${meta.chatId}:${meta.peerAgentId}`);
      const acked = peer?.receipt && peer.receipt.peerGeneration === meta.generation ? peer.receipt.nextPosition : 0;
      if (beforePosition > acked) {
        throw errors.permissionDenied('UNACKNOWLEDGED', `the peer acknowledged up to ${acked}; trimming to ${beforePosition} needs force: true`);
      }
    }
    const from = meta.firstPosition;
    const next = cloneMeta(meta);
    next.firstPosition = beforePosition;
    const generation = meta.generation;
    const firstChunkEnd = Math.min(beforePosition, from + TRIM_CHUNK);
    const dels: WriteOp[] = [];
    for (let p = from; p < firstChunkEnd; p++) dels.push({ type: 'del', key: K.record(streamId, generation, p) });
    this.#counters.records -= beforePosition - from;
    dels.push(this.#counters.op());
    // The new firstPosition commits with the first chunk: from then on readers fail closed below
    // it, so the remaining deletes only reclaim space.
    await this.#commitMeta(next, dels);
    for (const l of this.#listeners) l.discontinuity(streamId);
    for (let start = firstChunkEnd; start < beforePosition; start += TRIM_CHUNK) {
      const chunk: WriteOp[] = [];
      for (let p = start; p < Math.min(beforePosition, start + TRIM_CHUNK); p++) chunk.push({ type: 'del', key: K.record(streamId, generation, p) });
      await this.#storage.write(chunk);
    }
    return { firstPosition: formatDecimal(beforePosition) };
  }

  /**
   * `streams.reset`: seal the current generation and start the next at position 0. This is also
   * the way out of corruption: the new generation lies past every marked one, so readers get
   * GENERATION_CHANGED and writers start clean, and nothing is written over a position that
   * may have held an acknowledged record. A head that fails its checksum is rebuilt from the
   * stream's records first.
   */
  async reset(streamId: string, reason: string): Promise<StreamState> {
    this.#storage.assertWritable();
    let meta: StreamMeta;
    try {
      meta = this.#requireAdmitted(streamId);
    } catch (err) {
      if (!(err instanceof YelloError) || err.details.reason !== 'CORRUPT' || err.details.generation !== null) throw err;
      meta = await this.#rebuildHead(streamId);
    }
    const next = cloneMeta(meta);
    const sealedAt = new Date().toISOString();
    if (!next.sealed.some((g) => g.generation === meta.generation)) {
      next.sealed.push({ generation: meta.generation, firstPosition: meta.firstPosition, nextPosition: meta.nextPosition, sealedAt, reason });
    }
    next.generation = Math.max(meta.generation, this.#integrity.highestMarkedGeneration(streamId)) + 1;
    next.firstPosition = 0;
    next.nextPosition = 0;
    next.writer = { epoch: meta.writer.epoch + 1, claimedAt: meta.writer.claimedAt, active: false, tokenHash: null };
    await this.#commitMeta(next, []);
    this.#committed.set(streamId, cloneMeta(next));
    for (const l of this.#listeners) l.discontinuity(streamId);
    return this.state(next);
  }

  /**
   * A head rebuilt from what the records say, after the stored head failed its checksum: every
   * generation found becomes a sealed one with the bounds its records show, the writer epoch
   * moves past every fence (so no old coordinator token works), and the whole-stream mark
   * narrows to the last generation from where its records end.
   */
  async #rebuildHead(streamId: string): Promise<StreamMeta> {
    const parts = splitStreamId(streamId);
    if (!parts) throw errors.notFound('stream', streamId);
    const chat = this.#directory.chat(parts.chatId);
    const peer = Directory.peerOf(chat, parts.authorAgentId);
    const meta = newStreamMeta(chat.id, parts.authorAgentId, peer, chat.createdAt);
    const gens = new Map<number, { first: number; next: number }>();
    let epoch = 0;
    const prefix = K.recordsOfStream(streamId);
    for await (const { key, value: stored } of this.#storage.entriesChecked<CompactRecord | StoredRecord>({ gte: prefix, lt: prefixEnd(prefix) })) {
      const [, , g, pos] = key.split('/');
      const generation = Number(g);
      const position = Number(pos);
      let value: StoredRecord | undefined;
      try {
        value = stored === undefined ? undefined : expandRecord(stored, placeOf(meta, generation, position));
      } catch {
        value = undefined;
      }
      const bounds = gens.get(generation) ?? { first: position, next: position + 1 };
      bounds.first = Math.min(bounds.first, position);
      bounds.next = Math.max(bounds.next, position + 1);
      gens.set(generation, bounds);
      if (value?.wrapper.type === 'chat.writer-fence') epoch = Math.max(epoch, Number(value.wrapper.fence.epoch));
      if (value?.wrapper.type === 'chat.message') meta.lastCreatedAt = value.wrapper.message.signature.createdAt;
    }
    const sealedAt = new Date().toISOString();
    const ordered = [...gens.entries()].sort((a, b) => a[0] - b[0]);
    for (const [generation, b] of ordered) {
      meta.sealed.push({ generation, firstPosition: b.first, nextPosition: b.next, sealedAt, reason: 'rebuilt from records after the head failed its checksum' });
    }
    const last = ordered.at(-1);
    meta.generation = last ? last[0] : 1;
    meta.firstPosition = last ? last[1].first : 0;
    meta.nextPosition = last ? last[1].next : 0;
    meta.writer = { epoch: epoch + 1, claimedAt: null, active: false, tokenHash: null };
    this.#integrity.narrowHeadMark(streamId, meta.generation, meta.nextPosition);
    this.#admitted.set(streamId, meta);
    return meta;
  }
}

function operationInfo(op: StoredOperation): OperationInfo {
  return {
    operationId: op.operationId, state: 'committed', generation: formatDecimal(op.generation), firstPosition: formatDecimal(op.firstPosition),
    nextPosition: formatDecimal(op.nextPosition), committedAt: op.committedAt, requestDigest: op.requestDigest,
  };
}

/** An operation with no committed record: every optional field is sent as null (§4). */
function noOperation(operationId: string, state: 'pending' | 'unknown'): OperationInfo {
  return { operationId, state, generation: null, firstPosition: null, nextPosition: null, committedAt: null, requestDigest: null };
}

/** Generation and position of an operation-log key. */
function locateKeyPosition(key: string): { generation: number; position: number } {
  const parts = key.split('/');
  return { generation: Number(parts[parts.length - 2]), position: Number(parts[parts.length - 1]) };
}

/** Digest of what an append asks to write (not the token): equal requests replay, others conflict. */
function requestDigest(p: AppendRequest): string {
  const records = p.records.map((r) =>
    r.type === 'chat.message'
      ? ['m', r.messageId, r.content]
      : ['r', r.peerStreamId, r.peerGeneration, r.nextPosition, r.batchId],
  );
  // Positions as the decimal strings of the wire, so digests stored before stay comparable.
  const canonical = JSON.stringify([p.streamId, formatDecimal(p.generation), formatDecimal(p.expectedPosition), records]);
  return sha256Base64url(canonical);
}
