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
import type { Integrity } from '../store/integrity.js';
import type { StorePort } from '../store/port/store-port.js';
import { expectOf, type StreamPort } from '../store/port/stream-port.js';
import type { StoredOperation } from '../store/record-layout.js';
import { cloneMeta, peerStreamIdOf, type StreamMeta } from '../store/stream-meta.js';
import { assertAuthor } from './access.js';
import { applyPolicy, checkMessageIds, checkReceipts, messageIdsOf, requestDigest } from './append-checks.js';
import type { StreamContext } from './context.js';
import { decideAgain, refuseUnlessMoved } from './decide-again.js';
import { admissionOf, nextTimestamp, tokenCurrent } from './fencing.js';
import type { StreamHeads } from './heads.js';
import type { ReceivingAppends } from './receiving-appends.js';
import type { StreamReader } from './stream-reader.js';
import { LookupPenalty } from './lookup-penalty.js';
import type { Holder, WriterPresence } from './writer-presence.js';

/**
 * `streams.append`: compare-and-append with idempotent replay. Checked in the order of §6
 * (size is checked at the wire): author, stream, replay of a known operationId, corruption
 * mark, writer token, position, grant, receipts, message ids, PII policy. From the first check
 * to the commit's admission nothing awaits (the port's `prepare` comes before the first check,
 * LevelDB needs none, and PostgreSQL's is skipped on a first try: `#optimistic`), so two appends
 * can never both pass one position check; the commit carries the head it was decided on, and a
 * head another daemon moved meanwhile is decided again.
 */
export class Appender {
  readonly #store: StorePort;
  readonly #streams: StreamPort;
  readonly #heads: StreamHeads;
  readonly #integrity: Integrity;
  readonly #directory: Directory;
  readonly #codec: TokenCodec;
  readonly #signer: Signer;
  readonly #batcher: SignBatcher;
  readonly #reader: StreamReader;
  readonly #presence: WriterPresence;
  readonly #receiving: ReceivingAppends;
  /** Which agents' next appends look up before deciding (`#optimistic`). */
  readonly #penalty = new LookupPenalty();

  constructor(ctx: StreamContext, signer: Signer, batcher: SignBatcher, reader: StreamReader) {
    this.#store = ctx.store;
    this.#streams = ctx.streams;
    this.#heads = ctx.heads;
    this.#integrity = ctx.integrity;
    this.#directory = ctx.directory;
    this.#codec = ctx.codec;
    this.#signer = signer;
    this.#batcher = batcher;
    this.#reader = reader;
    this.#presence = ctx.presence;
    this.#receiving = ctx.receiving;
  }

  append(caller: Caller, p: AppendRequest, holder?: Holder): Promise<AppendResult> {
    // Counted as received from here, before the first await: operations.get answers pending.
    return this.#receiving.during(p.streamId, p.operationId, async () => {
      if (this.#streams.lookupsNeedPrepare && !this.#lookupFirst(caller)) {
        const first = await this.#optimistic(caller, p, holder);
        if (first !== undefined) return first;
      }
      const decided = decideAgain((last) => this.#attempt(caller, p, holder, last, true));
      if (!this.#streams.lookupsNeedPrepare) return decided;
      return decided.catch((err: unknown) => this.#unlessReplay(caller, p, err));
    });
  }

  /**
   * A refusal on a shared store, answered only if the operation is still unknown. The lookup of
   * the last attempt went out before the head it was refused on was read (or the commit found
   * the head moved): another daemon may have committed this very operation in between (the
   * client sent it to both), and then its replay is the answer (§6), not FENCED or
   * POSITION_MISMATCH.
   *
   * Every refusal is confirmed, not only FENCED and POSITION_MISMATCH: the head in memory may not
   * have heard that commit yet, so the token and position checks pass on it and the refusal comes
   * from a later check (a grant revoked since, a receipt checked against a peer head older than
   * the one the other daemon saw); answering it would tell the client "not written" about an
   * append that was. Refusals are rare outside hostile callers, and each costs them one lookup.
   * Only appends need this: a claim, release, trim or reset has no operation id, hence no replay
   * to find, so it lives here and not in decide-again.ts.
   */
  async #unlessReplay(caller: Caller, p: AppendRequest, err: unknown): Promise<AppendResult> {
    if (!redecidable(err)) throw err;
    // Only the author of an existing stream has a replay (checks 1 and 2 come before it).
    try {
      assertAuthor(caller, p.streamId);
      this.#heads.requireAdmitted(p.streamId);
    } catch {
      throw err;
    }
    await this.#streams.prepare(p.streamId, p.operationId, []);
    const op = this.#streams.operation(p.streamId, p.operationId);
    if (op === undefined) throw err;
    return this.#replayKnown(p, op, requestDigest(p));
  }

  /**
   * On a backend whose lookups need `prepare` (PostgreSQL), a first decision without it: most
   * appends are new, and the commit's unique keys refuse a taken operation id or message id
   * anyway (`duplicate`: the replay or DUPLICATE_MESSAGE, the operation first). Only what the
   * lookup could have changed is decided again with it: a refusal (a replay answers before
   * FENCED, POSITION_MISMATCH, NO_GRANT, a receipt, CORRUPT or POLICY_REJECTED, §6) and a head
   * that moved. Undefined means decide again; an unknown outcome, a read-only or closing store
   * is answered as it is.
   */
  async #optimistic(caller: Caller, p: AppendRequest, holder: Holder | undefined): Promise<AppendResult | undefined> {
    try {
      const result = await this.#attempt(caller, p, holder, true, false);
      return result === 'stale' ? undefined : result;
    } catch (err) {
      if (!redecidable(err)) throw err;
      // A taken id the commit found aborts the whole group's fast transaction (stream-store.ts):
      // an author whose appends get refused looks up first for a while, so that resending old
      // ids costs its own appends a lookup, not everyone's group a second transaction.
      if (caller.role === 'agent') this.#penalty.refused(caller.agentId);
      return undefined;
    }
  }

  /** Whether this caller's append looks up first (one of its last decisions without it was refused). */
  #lookupFirst(caller: Caller): boolean {
    return caller.role === 'agent' && this.#penalty.lookupFirst(caller.agentId);
  }

  /**
   * One decision and its commit; 'stale' when the head moved under it and another attempt is
   * allowed. Without `lookup`, `operation()` and `messagePosition()` may not know what is stored.
   */
  async #attempt(
    caller: Caller,
    p: AppendRequest,
    holder: Holder | undefined,
    last: boolean,
    lookup: boolean,
  ): Promise<AppendResult | 'stale'> {
    this.#store.assertWritable(p.operationId);
    assertAuthor(caller, p.streamId);
    const before = this.#heads.requireAdmitted(p.streamId);
    // A stream's chat and author never change, so its ids are the same on any later head.
    const ids = messageIdsOf(before, p.records);
    const preparing = lookup
      ? this.#streams.prepare(
          p.streamId,
          p.operationId,
          ids.filter((id) => id !== undefined),
        )
      : null;
    if (preparing) await preparing;
    const meta = preparing ? this.#heads.requireAdmitted(p.streamId) : before;

    const digest = requestDigest(p);
    const op = this.#streams.operation(p.streamId, p.operationId);
    if (op !== undefined) return this.#replayKnown(p, op, digest);
    this.#integrity.assertWritable(p.streamId, meta.generation, p.operationId);

    const generation = p.generation;
    const expected = p.expectedPosition;
    const refused = !tokenCurrent(meta, p.coordinatorToken)
      ? errors.fenced(p.streamId, formatDecimal(meta.writer.epoch))
      : generation !== meta.generation || expected !== meta.nextPosition
        ? errors.positionMismatch(formatDecimal(meta.nextPosition), formatDecimal(meta.generation))
        : undefined;
    // Decided on the head in memory, which another daemon may have moved unheard.
    if (refused) return refuseUnlessMoved(this.#heads, p.streamId, meta, last, refused);
    if (!this.#directory.maySend(meta.authorAgentId, meta.peerAgentId)) {
      // A grant made through another daemon may not have been heard here: decided again once read.
      if (!last && (await this.#directory.grantAppeared(meta.authorAgentId, meta.peerAgentId))) return 'stale';
      throw errors.permissionDenied('NO_GRANT', `no grant lets ${meta.authorAgentId} send to ${meta.peerAgentId}`);
    }

    const next = cloneMeta(meta);
    try {
      checkReceipts(this.#heads, this.#codec, caller, next, p.records);
    } catch (err) {
      // A peer generation newer than the head in memory: the peer may have been reset through
      // another daemon, unheard here yet (its batch was read there).
      const peer = this.#heads.admitted(peerStreamIdOf(meta));
      if (peer && err instanceof YelloError && err.type === 'INVALID_RECEIPT' && err.details.reason === 'STALE_GENERATION')
        return refuseUnlessMoved(this.#heads, peer.streamId, peer, last, err);
      throw err;
    }
    const messageIds = checkMessageIds(this.#streams, meta, ids);
    const redactions: Redaction[] = [];
    const contents = applyPolicy(this.#directory.piiMode(meta.authorAgentId), p.records, redactions);
    const { records, signing } = this.#records(p, next, contents, messageIds);

    const positioned: Array<[string, number]> = [];
    messageIds.forEach((id, index) => {
      if (id !== undefined) positioned.push([id, expected + index]);
    });
    next.nextPosition = expected + p.records.length;
    // The stream's clock, as its records' createdAt and its fences' claimedAt: never before them,
    // whatever the wall clock did (a takeover lists what was committed since the displaced claim).
    const committedAt = nextTimestamp(next);
    const stored: StoredOperation = {
      operationId: p.operationId,
      generation,
      firstPosition: expected,
      nextPosition: next.nextPosition,
      committedAt,
      requestDigest: digest,
      redactions,
    };
    // Admitted with the current token: this connection holds the claim (so it is not abandoned).
    // Attached now, while the token is still current; after the await a claim may have moved on.
    if (holder && meta.writer.tokenHash !== null) this.#presence.attach(p.streamId, meta.writer.tokenHash, holder);
    let outcome;
    try {
      outcome = await this.#heads.commit({
        kind: 'append',
        expect: expectOf(meta),
        next,
        records,
        operation: stored,
        messageIds: positioned,
        ready: signing.length > 0 ? Promise.all(signing).then(() => {}) : null,
        ...admissionOf(caller, this.#directory.policy === 'grants'),
      });
    } catch (err) {
      // Queued and then failed: the answer names the operation, whose outcome is unknown.
      if (err instanceof YelloError && err.type === 'STORAGE_FAILURE') throw err.withDetails({ operationId: p.operationId });
      throw err;
    }
    switch (outcome.status) {
      case 'ok':
        break;
      case 'stale':
        // Another writer moved the head: decide again on the new one (its answer is the contract's).
        if (!last) return 'stale';
        // Out of attempts: the answer is the head the store refused it against (checks 8, 9).
        if (outcome.head && !tokenCurrent(outcome.head, p.coordinatorToken))
          throw errors.fenced(p.streamId, formatDecimal(outcome.head.writer.epoch));
        throw errors.positionMismatch(formatDecimal(outcome.head?.nextPosition ?? 0), formatDecimal(outcome.head?.generation ?? 0));
      case 'duplicate':
        if (outcome.what === 'operation') return this.#replayKnown(p, outcome.operation, digest);
        throw errors.duplicateMessage(formatDecimal(outcome.position));
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

  /** The answer to an operationId already admitted: its replay once durable, or OPERATION_CONFLICT. */
  async #replayKnown(p: AppendRequest, op: StoredOperation, digest: string): Promise<AppendResult> {
    if (op.requestDigest !== digest) throw errors.operationConflict(p.operationId);
    await this.#streams.operationDurable(p.streamId, p.operationId);
    return { ...(await this.#replay(p.streamId, op)), duplicate: true };
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

/** A refusal a replay answers before (§6): not an unknown outcome, nor a read-only or closing store. */
function redecidable(err: unknown): err is YelloError {
  return err instanceof YelloError && (err.type !== 'STORAGE_FAILURE' || err.details.reason === 'CORRUPT');
}

/** A message record's entry in a per-record array (receipts leave theirs undefined). */
function ofMessage(values: ReadonlyArray<string | undefined>, index: number, what: string): string {
  const value = values[index];
  if (value === undefined) throw new Error(`append: message record ${index} has no ${what}`);
  return value;
}
