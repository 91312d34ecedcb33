import { errors, YelloError } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import { messagePayload } from '../../shared/message-signing.js';
import { contentSha256 } from '../crypto/hashing.js';
import type { AppendResult, MessageSignature, Redaction, StoredRecord } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import type { SignBatcher } from '../crypto/sign-batcher.js';
import type { Signer } from '../crypto/signer.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { Directory } from '../directory/directory.js';
import type { AppendRequest } from '../requests.js';
import type { Counters } from '../store/leveldb/counters.js';
import type { Integrity } from '../store/integrity.js';
import { K } from '../store/leveldb/key-layout.js';
import type { StoredOperation } from '../store/record-layout.js';
import type { Storage, WriteOp } from '../store/leveldb/storage.js';
import { cloneMeta, type StreamMeta } from '../store/stream-meta.js';
import type { StreamTables } from '../store/leveldb/stream-tables.js';
import { assertAuthor } from './access.js';
import { applyPolicy, checkMessageIds, checkReceipts, requestDigest } from './append-checks.js';
import type { StreamContext } from './context.js';
import { nextTimestamp, tokenCurrent } from './fencing.js';
import type { StreamHeads } from './heads.js';
import { NegativeIndexes } from './negative-index.js';
import type { StreamReader } from './stream-reader.js';
import type { Holder, WriterPresence } from './writer-presence.js';

/**
 * `streams.append`: compare-and-append with idempotent replay. Checked in the order of §6
 * (size is checked at the wire): author, stream, replay of a known operationId, corruption
 * mark, writer token, position, grant, receipts, message ids, PII policy. From the first check
 * to the queued write nothing awaits, so two appends can never both pass one position check.
 */
export class Appender {
  readonly #storage: Storage;
  readonly #heads: StreamHeads;
  readonly #tables: StreamTables;
  readonly #integrity: Integrity;
  readonly #directory: Directory;
  readonly #counters: Counters;
  readonly #codec: TokenCodec;
  readonly #signer: Signer;
  readonly #batcher: SignBatcher;
  readonly #reader: StreamReader;
  readonly #negative: NegativeIndexes;
  readonly #presence: WriterPresence;

  constructor(ctx: StreamContext, signer: Signer, batcher: SignBatcher, reader: StreamReader) {
    this.#storage = ctx.storage;
    this.#heads = ctx.heads;
    this.#tables = ctx.tables;
    this.#integrity = ctx.integrity;
    this.#directory = ctx.directory;
    this.#counters = ctx.counters;
    this.#codec = ctx.codec;
    this.#signer = signer;
    this.#batcher = batcher;
    this.#reader = reader;
    this.#negative = new NegativeIndexes(ctx.storage);
    this.#presence = ctx.presence;
  }

  /** Whether the stream's negative index is built (tests observe it instead of sleeping). */
  negativeIndexReady(streamId: string): boolean {
    return this.#negative.ready(streamId);
  }

  async append(caller: Caller, p: AppendRequest, holder?: Holder): Promise<AppendResult> {
    this.#storage.assertWritable(p.operationId);
    assertAuthor(caller, p.streamId);
    const meta = this.#heads.requireAdmitted(p.streamId);

    const digest = requestDigest(p);
    const negative = this.#negative.of(meta);
    const op = negative.mayHaveOperation(p.operationId) ? this.#tables.operation(p.streamId, p.operationId, true) : undefined;
    if (op !== undefined) {
      if (op.requestDigest !== digest) throw errors.operationConflict(p.operationId);
      await this.#storage.durable(K.operation(p.streamId, p.operationId));
      return { ...(await this.#replay(p.streamId, op)), duplicate: true };
    }
    this.#integrity.assertWritable(p.streamId, meta.generation, p.operationId);

    if (!tokenCurrent(meta, p.coordinatorToken)) throw errors.fenced(p.streamId, formatDecimal(meta.writer.epoch));
    const generation = p.generation;
    const expected = p.expectedPosition;
    if (generation !== meta.generation || expected !== meta.nextPosition) {
      throw errors.positionMismatch(formatDecimal(meta.nextPosition), formatDecimal(meta.generation));
    }
    if (!this.#directory.maySend(meta.authorAgentId, meta.peerAgentId)) {
      throw errors.permissionDenied('NO_GRANT', `no grant lets ${meta.authorAgentId} send to ${meta.peerAgentId}`);
    }

    const next = cloneMeta(meta);
    checkReceipts(this.#heads, this.#codec, caller, next, p.records);
    const messageIds = checkMessageIds(this.#storage, meta, p.records, negative);
    const redactions: Redaction[] = [];
    const contents = applyPolicy(this.#directory.piiMode(meta.authorAgentId), p.records, redactions);
    const { records, signing } = this.#records(p, next, contents, messageIds);

    const ops: WriteOp[] = [];
    messageIds.forEach((id, index) => {
      if (id !== undefined) ops.push({ type: 'put', key: K.messageId(p.streamId, generation, id), value: formatDecimal(expected + index) });
    });
    next.nextPosition = expected + p.records.length;
    const committedAt = new Date().toISOString();
    const stored: StoredOperation = {
      operationId: p.operationId,
      generation,
      firstPosition: expected,
      nextPosition: next.nextPosition,
      committedAt,
      requestDigest: digest,
      redactions,
    };
    ops.push(this.#tables.operationOp(p.streamId, stored));
    negative.operations.add(p.operationId);
    for (const id of messageIds) if (id !== undefined) negative.messages(generation).add(id);
    ops.push({ type: 'put', key: K.opLog(p.streamId, generation, expected), value: p.operationId });
    this.#counters.records += p.records.length;
    ops.push(this.#counters.op());
    const range = { generation, fromPosition: expected, nextPosition: next.nextPosition, records };
    // Admitted with the current token: this connection holds the claim (so it is not abandoned).
    // Attached now, while the token is still current; after the await a claim may have moved on.
    if (holder && meta.writer.tokenHash !== null) this.#presence.attach(p.streamId, meta.writer.tokenHash, holder);
    try {
      await this.#heads.commit(next, ops, range, signing.length > 0 ? Promise.all(signing).then(() => {}) : null);
    } catch (err) {
      // Queued and then failed: the answer names the operation, whose outcome is unknown.
      if (err instanceof YelloError && err.type === 'STORAGE_FAILURE') throw err.withDetails({ operationId: p.operationId });
      throw err;
    }
    return {
      streamId: p.streamId,
      generation: formatDecimal(generation),
      operationId: p.operationId,
      firstPosition: formatDecimal(expected),
      nextPosition: formatDecimal(next.nextPosition),
      records,
      duplicate: false,
      redactions,
    };
  }

  /**
   * The records of an append at their positions. Signatures are asked for here: computed at once
   * while appends come one at a time, at the end of this event-loop turn when it is busy
   * (sign-batcher.ts); the write waits for `signing`. Everything signed (the payload, the kid, createdAt) is fixed
   * now, at admission, and createdAt never goes backwards within a stream.
   */
  #records(
    p: AppendRequest,
    next: StreamMeta,
    contents: Array<string | undefined>,
    messageIds: Array<string | undefined>,
  ): { records: StoredRecord[]; signing: Array<Promise<void>> } {
    const signing: Array<Promise<void>> = [];
    const gen = formatDecimal(p.generation);
    const { chatId, authorAgentId, peerAgentId } = next;
    const records = p.records.map((input, index): StoredRecord => {
      const position = formatDecimal(p.expectedPosition + index);
      const base = { version: 2 as const, chatId, authorAgentId, operationId: p.operationId, recordIndex: index };
      if (input.type === 'chat.receipt') {
        const { peerStreamId, peerGeneration, nextPosition, batchId } = input;
        return {
          streamId: p.streamId,
          generation: gen,
          position,
          wrapper: { ...base, type: 'chat.receipt', receipt: { peerStreamId, peerGeneration, nextPosition, batchId } },
        };
      }
      const content = ofMessage(contents, index, 'content');
      const sha = contentSha256(content);
      const fields = { chatId, fromAgentId: authorAgentId, toAgentId: peerAgentId, createdAt: nextTimestamp(next), contentSha256: sha };
      const signature: MessageSignature = { kid: this.#signer.kid, alg: 'ES256', value: '', createdAt: fields.createdAt };
      const payload = messagePayload(fields);
      const value = this.#batcher.sign(signature.kid, payload);
      if (typeof value === 'string') signature.value = value;
      else signing.push(value.then((v) => void (signature.value = v)));
      const message = {
        chatId,
        fromAgentId: authorAgentId,
        toAgentId: peerAgentId,
        clientMessageId: ofMessage(messageIds, index, 'clientMessageId'),
        content,
        contentSha256: sha,
        signature,
      };
      return { streamId: p.streamId, generation: gen, position, wrapper: { ...base, type: 'chat.message', message } };
    });
    return { records, signing };
  }

  async #replay(streamId: string, op: StoredOperation): Promise<Omit<AppendResult, 'duplicate'>> {
    const records = await this.#reader.range(streamId, op.generation, op.firstPosition, op.nextPosition, Infinity, Infinity);
    return {
      streamId,
      generation: formatDecimal(op.generation),
      operationId: op.operationId,
      firstPosition: formatDecimal(op.firstPosition),
      nextPosition: formatDecimal(op.nextPosition),
      records,
      redactions: op.redactions,
    };
  }
}

/** A message record's entry in a per-record array (receipts leave theirs undefined). */
function ofMessage(values: ReadonlyArray<string | undefined>, index: number, what: string): string {
  const value = values[index];
  if (value === undefined) throw new Error(`append: message record ${index} has no ${what}`);
  return value;
}
