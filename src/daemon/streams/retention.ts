import { errors } from '../../shared/errors.js';
import { formatDecimal, splitStreamId } from '../../shared/ids.js';
import type { StreamState } from '../../shared/types.js';
import { peerIdOf } from '../../shared/chat-peers.js';
import type { Directory } from '../directory/directory.js';
import { isCorrupt, type Integrity } from '../store/integrity.js';
import type { StorePort } from '../store/port/store-port.js';
import { expectOf, type StreamPort } from '../store/port/stream-port.js';
import { cloneMeta, newStreamMeta, peerStreamIdOf, type StreamMeta } from '../store/stream-meta.js';
import type { StreamContext } from './context.js';
import { decideAgain, refuseUnlessMoved, stale } from './decide-again.js';
import type { StreamHeads } from './heads.js';

/**
 * Retention and generations: `streams.trim` drops a prefix of the current generation,
 * `streams.reset` seals it and starts the next. Both tell subscribers (a discontinuity), whose
 * cursors may no longer continue exactly.
 */
export class Retention {
  readonly #store: StorePort;
  readonly #streams: StreamPort;
  readonly #heads: StreamHeads;
  readonly #integrity: Integrity;
  readonly #directory: Directory;

  constructor({ store, streams, heads, integrity, directory }: StreamContext) {
    this.#store = store;
    this.#streams = streams;
    this.#heads = heads;
    this.#integrity = integrity;
    this.#directory = directory;
  }

  /** `streams.trim`: below what the peer acknowledged, or anything up to the head with `force`. */
  async trim(streamId: string, beforePosition: number, force: boolean): Promise<{ firstPosition: string }> {
    return decideAgain((last) => this.#trim(streamId, beforePosition, force, last));
  }

  async #trim(streamId: string, beforePosition: number, force: boolean, last: boolean): Promise<{ firstPosition: string } | 'stale'> {
    this.#store.assertWritable();
    const meta = this.#heads.writable(streamId);
    if (beforePosition > meta.nextPosition) {
      // The head in memory may be behind appends made through another daemon, unheard here yet.
      const beyond = errors.invalidParams('beforePosition', `beforePosition is beyond nextPosition ${meta.nextPosition}`);
      return refuseUnlessMoved(this.#heads, streamId, meta, last, beyond);
    }
    if (beforePosition <= meta.firstPosition) return { firstPosition: formatDecimal(meta.firstPosition) };
    if (!force) {
      const peer = this.#heads.admitted(peerStreamIdOf(meta));
      const acked = peer?.receipt && peer.receipt.peerGeneration === meta.generation ? peer.receipt.nextPosition : 0;
      if (beforePosition > acked) {
        // Likewise the peer's receipt, when the peer acknowledged through another daemon.
        const unacknowledged = errors.permissionDenied(
          'UNACKNOWLEDGED',
          `the peer acknowledged up to ${acked}; trimming to ${beforePosition} needs force: true`,
        );
        if (!peer) throw unacknowledged;
        return refuseUnlessMoved(this.#heads, peer.streamId, peer, last, unacknowledged);
      }
    }
    const next = cloneMeta(meta);
    next.firstPosition = beforePosition;
    // From the commit on readers fail closed below the new firstPosition, so what the sweep
    // deletes after it only reclaims space.
    const outcome = await this.#heads.commit({ kind: 'trim', expect: expectOf(meta), next, fromPosition: meta.firstPosition });
    if (stale(outcome, last)) return 'stale';
    this.#heads.discontinuity(streamId);
    await this.compact(streamId);
    return { firstPosition: formatDecimal(beforePosition) };
  }

  /**
   * Forget what the trimmed prefix of the current generation left behind: records a trim
   * interrupted by a crash had not deleted yet, the entries and operation-log entries of
   * operations whose records all lie below the retained start, and the message-id index
   * entries of trimmed messages. An operation whose records were cut in two keeps its entry.
   * Each batch deletes an operation's entry and its log entry together, so a crash never
   * leaves a log entry without its operation (which `operations.get` would report as damage).
   * Idempotent: it only removes what lies below the committed `firstPosition`.
   */
  async compact(streamId: string): Promise<{ records: number; operations: number; messageIds: number }> {
    const meta = this.#heads.writable(streamId);
    return this.#streams.sweepTrimmed(streamId, meta.generation, meta.firstPosition);
  }

  /**
   * `streams.reset`: seal the current generation and start the next at position 0. This is also
   * the way out of corruption: the new generation lies past every marked one, so readers get
   * GENERATION_CHANGED and writers start clean, and nothing is written over a position that
   * may have held an acknowledged record. A head that fails its checksum is rebuilt from the
   * stream's records first.
   */
  async reset(streamId: string, reason: string): Promise<StreamState> {
    return decideAgain((last) => this.#reset(streamId, reason, last));
  }

  async #reset(streamId: string, reason: string, last: boolean): Promise<StreamState | 'stale'> {
    this.#store.assertWritable();
    let meta: StreamMeta;
    let rebuilt = false;
    try {
      meta = this.#heads.requireAdmitted(streamId);
    } catch (err) {
      if (!isCorrupt(err) || err.details.generation !== null) throw err;
      meta = await this.#rebuildHead(streamId);
      rebuilt = true;
    }
    const next = cloneMeta(meta);
    const sealedAt = new Date().toISOString();
    if (!next.sealed.some((g) => g.generation === meta.generation)) {
      next.sealed.push({
        generation: meta.generation,
        firstPosition: meta.firstPosition,
        nextPosition: meta.nextPosition,
        sealedAt,
        reason,
      });
    }
    next.generation = Math.max(meta.generation, this.#integrity.highestMarkedGeneration(streamId)) + 1;
    next.firstPosition = 0;
    next.nextPosition = 0;
    next.writer = { epoch: meta.writer.epoch + 1, claimedAt: meta.writer.claimedAt, active: false, tokenHash: null };
    // A rebuilt head replaces whatever is stored (it failed its check): no precondition.
    if (stale(await this.#heads.commit({ kind: 'reset', expect: rebuilt ? null : expectOf(meta), next }), last)) return 'stale';
    this.#heads.discontinuity(streamId);
    return this.#heads.state(next);
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
    const peer = peerIdOf(chat, parts.authorAgentId);
    const meta = newStreamMeta(chat.id, parts.authorAgentId, peer, chat.createdAt);
    const gens = new Map<number, { first: number; next: number }>();
    let epoch = 0;
    for await (const { generation, position, record: value } of this.#streams.allRecords(meta)) {
      const bounds = gens.get(generation) ?? { first: position, next: position + 1 };
      bounds.first = Math.min(bounds.first, position);
      bounds.next = Math.max(bounds.next, position + 1);
      gens.set(generation, bounds);
      if (value?.wrapper.type === 'chat.writer-fence') epoch = Math.max(epoch, Number(value.wrapper.fence.epoch));
      if (value?.wrapper.type === 'chat.message') meta.lastCreatedAt = value.wrapper.message.signature.createdAt;
    }
    const sealedAt = new Date().toISOString();
    const ordered = [...gens.entries()].sort((a, b) => a[0] - b[0]);
    const reason = 'rebuilt from records after the head failed its checksum';
    for (const [generation, b] of ordered) {
      meta.sealed.push({ generation, firstPosition: b.first, nextPosition: b.next, sealedAt, reason });
    }
    const last = ordered.at(-1);
    meta.generation = last ? last[0] : 1;
    meta.firstPosition = last ? last[1].first : 0;
    meta.nextPosition = last ? last[1].next : 0;
    meta.writer = { epoch: epoch + 1, claimedAt: null, active: false, tokenHash: null };
    this.#integrity.narrowHeadMark(streamId, meta.generation, meta.nextPosition);
    return meta;
  }
}
