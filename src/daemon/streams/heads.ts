import { errors } from '../../shared/errors.js';
import { formatDecimal, splitStreamId } from '../../shared/ids.js';
import type { StoredRecord, StreamState } from '../../shared/types.js';
import type { Directory } from '../directory/directory.js';
import { isCorrupt, type Integrity } from '../store/integrity.js';
import type { StorePort } from '../store/port/store-port.js';
import { outcomeOf, type CommitOutcome, type StreamChange, type StreamIdentity, type StreamPort } from '../store/port/stream-port.js';
import { peerStreamIdOf, publicStreamState, type StreamMeta } from '../store/stream-meta.js';
import type { WriterPresence } from './writer-presence.js';

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
  /**
   * Another daemon on the same store moved the head of `streamId` (PostgreSQL's notices): the
   * records are not at hand, so readers and followers read them from the store.
   */
  moved?(streamId: string): void;
}

/** The records a head change writes, in one generation. */
export type RecordRange = Omit<CommittedRange, 'streamId' | 'chatId'>;

/**
 * The stream heads every part of the stream store shares, and the one way to change them.
 *
 * Two views of each head are kept by the storage port: `admitted` (what the next change is
 * decided on, including changes not yet durable) and `committed` (what readers see). A change is
 * decided synchronously on the admitted head and handed to the port with that head as its
 * precondition (`commit`), so concurrent changes cannot both pass one check: the second is
 * `stale`, and its caller decides again on the head it is given.
 *
 * The first load of a head in this process checks it against its records (the port's
 * `verifyHead`): a disagreement marks the stream corrupt, so nothing is written over a position
 * that may hold an acknowledged record.
 */
export class StreamHeads {
  readonly #streams: StreamPort;
  readonly #directory: Directory;
  readonly #integrity: Integrity;
  readonly #presence: WriterPresence;
  readonly #listeners: StreamEvents[] = [];
  /** Streams whose head was checked against its records in this process. */
  readonly #reconciled = new Set<string>();

  constructor(store: StorePort, directory: Directory, integrity: Integrity, presence: WriterPresence) {
    this.#streams = store.streams;
    this.#presence = presence;
    this.#directory = directory;
    this.#integrity = integrity;
  }

  listen(listener: StreamEvents): void {
    this.#listeners.push(listener);
  }

  /** Tell subscribers that exact continuity may be gone for readers of `streamId`. */
  discontinuity(streamId: string): void {
    for (const l of this.#listeners) l.discontinuity(streamId);
  }

  /** Tell readers and followers that `streamId`'s head moved through another daemon. */
  moved(streamId: string): void {
    for (const l of this.#listeners) l.moved?.(streamId);
  }

  /** Admitted head of a stream (what the next write is checked against), or undefined. */
  admitted(streamId: string): StreamMeta | undefined {
    return this.#load(streamId, 'admitted');
  }

  /** Committed head of a stream (what readers may see), or undefined. */
  committed(streamId: string): StreamMeta | undefined {
    return this.#load(streamId, 'committed');
  }

  /** The admitted head, or NOT_FOUND. */
  requireAdmitted(streamId: string): StreamMeta {
    const meta = this.admitted(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    return meta;
  }

  /** The head to write to: it exists and no corruption mark covers it. */
  writable(streamId: string, operationId: string | null = null): StreamMeta {
    const meta = this.requireAdmitted(streamId);
    this.#integrity.assertWritable(streamId, meta.generation, operationId);
    return meta;
  }

  /**
   * Whether the head of `streamId` differs, as the store has it now, from `decidedOn`: a refusal
   * decided on a head in memory is confirmed with this before it is answered, because with many
   * daemons on one store (PostgreSQL) that head is a cache another daemon's commit may have
   * moved unheard (its notice not arrived yet): a token it fenced, or a claim, append, release or
   * trim it made. Waits for this daemon's changes of the stream in flight first (their outcome
   * refreshes the head too). Always false where memory is the store (LevelDB): no cost there.
   */
  async movedSince(streamId: string, decidedOn: StreamMeta): Promise<boolean> {
    const reload = this.#streams.reloadHead?.bind(this.#streams);
    if (!reload) return false;
    await this.#streams.headDurable(streamId);
    await reload(streamId);
    const now = this.#streams.head(streamId, 'admitted');
    return now === undefined || !sameDecision(now, decidedOn);
  }

  /** Chat, author and peer of a stream, which its stored records do not repeat. */
  identity(streamId: string): StreamIdentity {
    const meta = this.committed(streamId) ?? this.admitted(streamId);
    if (!meta) throw errors.notFound('stream', streamId);
    return meta;
  }

  /** Public state, with the peer's receipt as `acknowledged` and a mark of the current generation as `corruptFrom`. */
  state(meta: StreamMeta): StreamState {
    const state = publicStreamState(meta, this.committed(peerStreamIdOf(meta)), this.#presence.connected(meta));
    const limit = this.#integrity.readLimit(meta.streamId, meta.generation);
    return Number.isFinite(limit) ? { ...state, corruptFrom: formatDecimal(limit) } : state;
  }

  /**
   * Hand a decided change to the port: admitted by the port's synchronous `admit` in the caller's
   * turn (nothing before it awaits, so the caller's checks and this admission are one step),
   * durable when `ok` comes back, then subscribers hear of its records. `stale` and
   * `duplicate` come back for the caller to decide again; an unknown outcome throws its
   * STORAGE_FAILURE, a denied one UNAUTHENTICATED or NO_GRANT (`deniedError`).
   */
  async commit(change: StreamChange): Promise<Exclude<CommitOutcome, { status: 'unknown' | 'denied' }>> {
    // Admitted here, synchronously, in the caller's turn; its durability is awaited after.
    const outcome = await outcomeOf(this.#streams.admit(change));
    if (outcome.status === 'unknown') throw outcome.error;
    if (outcome.status === 'denied') {
      // The store's directory refused the session or grant the change relied on (revoked
      // through another daemon, unheard here yet): definite, nothing written, no retry.
      await this.#streams.headDurable(change.next.streamId);
      throw deniedError(outcome.reason, change.next);
    }
    if (outcome.status === 'stale') {
      // The changes admitted after this one on the stream were decided on its head, which the
      // store never wrote: they are refused too. Deciding again on the admitted head would decide
      // on theirs (an old epoch and position: POSITION_MISMATCH for a token another daemon
      // fenced), so wait until they settled; each refusal refreshes the head from the store.
      await this.#streams.headDurable(change.next.streamId);
      return outcome;
    }
    if (outcome.status !== 'ok') return outcome;
    const records: StoredRecord[] = change.kind === 'append' ? change.records : change.kind === 'claim' ? [change.fence] : [];
    if (records.length > 0) {
      const { next } = change;
      const fromPosition = next.nextPosition - records.length;
      const full: CommittedRange = {
        streamId: next.streamId,
        chatId: next.chatId,
        generation: next.generation,
        fromPosition,
        nextPosition: next.nextPosition,
        records,
      };
      for (const l of this.#listeners) l.committed(full);
    }
    return outcome;
  }

  /**
   * Check every stored head against its records in the background (startup), so corruption is
   * listed before traffic finds it.
   */
  async reconcileAll(): Promise<void> {
    let n = 0;
    for await (const streamId of this.#streams.streamIds()) {
      if (!this.#reconciled.has(streamId)) {
        try {
          this.#load(streamId, 'committed');
        } catch (err) {
          if (!isCorrupt(err)) throw err;
        }
      }
      // Yield now and then: the sweep must not hold the event loop.
      if (++n % 64 === 0) await new Promise<void>((r) => setImmediate(r));
    }
  }

  /** Read a head; an unreadable one marks the whole stream corrupt. The first load checks it. */
  #load(streamId: string, view: 'admitted' | 'committed'): StreamMeta | undefined {
    let meta: StreamMeta | undefined;
    try {
      meta = this.#streams.head(streamId, view);
    } catch (err) {
      if (!isCorrupt(err)) throw err;
      const detail = `the stream head fails its check (${String(err.details.detail)})`;
      throw this.#integrity.mark({ streamId, generation: null, fromPosition: 0, detail });
    }
    if (meta) {
      if (!this.#reconciled.has(streamId) && !this.#streams.headPending(streamId)) this.#reconcile(meta);
      return meta;
    }
    if (this.#headBelongsToChat(streamId)) {
      // Both heads are written with the chat, in one commit: a chat without one lost it.
      const detail = `the stream head of ${streamId} is missing, though its chat exists`;
      throw this.#integrity.mark({ streamId, generation: null, fromPosition: 0, detail });
    }
    // A stream the log guard says was written, whose head (and chat) a log loss took: corrupt,
    // not missing — its acknowledged records may exist, or may be what was lost.
    this.#integrity.assertIntact(streamId);
    return undefined;
  }

  /** Whether the stream's chat exists and the author is one of its two agents. */
  #headBelongsToChat(streamId: string): boolean {
    const parts = splitStreamId(streamId);
    if (!parts) return false;
    const chat = this.#directory.chatRow(parts.chatId);
    return chat !== undefined && (chat.agentAId === parts.authorAgentId || chat.agentBId === parts.authorAgentId);
  }

  /** Check a committed head against its records, once per process; a disagreement marks the stream. */
  #reconcile(meta: StreamMeta): void {
    this.#reconciled.add(meta.streamId);
    const problem = this.#streams.verifyHead(meta);
    if (problem) this.#integrity.mark({ streamId: meta.streamId, generation: meta.generation, ...problem });
  }
}

/** Whether two heads decide a change the same: generation, range, writer, receipt. */
function sameDecision(a: StreamMeta, b: StreamMeta): boolean {
  return (
    a.generation === b.generation &&
    a.firstPosition === b.firstPosition &&
    a.nextPosition === b.nextPosition &&
    a.writer.epoch === b.writer.epoch &&
    a.writer.active === b.writer.active &&
    a.writer.tokenHash === b.writer.tokenHash &&
    a.receipt?.peerGeneration === b.receipt?.peerGeneration &&
    a.receipt?.nextPosition === b.receipt?.nextPosition
  );
}

/** The answer to a change the store's directory denied: the session is gone, or the grant. */
export function deniedError(reason: 'session' | 'grant', stream: Pick<StreamMeta, 'authorAgentId' | 'peerAgentId'>): Error {
  return reason === 'session'
    ? errors.unauthenticated('the token of this session was rotated or its agent disabled; call session.hello again')
    : errors.permissionDenied('NO_GRANT', `no grant lets ${stream.authorAgentId} send to ${stream.peerAgentId}`);
}
