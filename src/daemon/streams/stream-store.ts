import type { YelloError } from '../../shared/errors.js';
import type { OperationInfo } from '../../shared/results.js';
import type { AppendResult, ReadBatch, StoredRecord, StreamState } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import type { SignBatcher } from '../crypto/sign-batcher.js';
import type { Signer } from '../crypto/signer.js';
import type { TokenCodec } from '../crypto/token-codec.js';
import type { Directory } from '../directory/directory.js';
import type { AppendRequest, ClaimRequest, ReadRequest, ReleaseRequest } from '../requests.js';
import type { Integrity } from '../store/integrity.js';
import type { StorePort } from '../store/port/store-port.js';
import type { StreamMeta } from '../store/stream-meta.js';
import { Appender } from './appender.js';
import type { StreamContext } from './context.js';
import { Fencing, type Claim } from './fencing.js';
import { StreamHeads, type StreamEvents } from './heads.js';
import { Operations } from './operations.js';
import { Retention } from './retention.js';
import { RetentionRunner, type RetentionPolicy } from './retention-policy.js';
import type { Logger } from 'pino';
import { StreamReader, type GenerationBounds, type SizedRecord } from './stream-reader.js';
import { ReceivingAppends } from './receiving-appends.js';
import { WriterPresence, type Holder } from './writer-presence.js';

/**
 * The directional streams, as the handlers, readers and subscriptions see them. Each call goes
 * to the part that does it; the parts share one `StreamContext`, whose `StreamHeads` holds the
 * head caches and is the only way to change a head:
 *
 * - `heads.ts`: admitted/committed heads, the head check (reconcile), commit and events;
 * - `fencing.ts`: writer claims and releases; `appender.ts`: compare-and-append;
 * - `stream-reader.ts`: reads with exact continuity; `operations.ts`: operations.get/list;
 * - `retention.ts`: trim, reset and head rebuilds.
 */
export class StreamStore {
  readonly #heads: StreamHeads;
  readonly #fencing: Fencing;
  readonly #appender: Appender;
  readonly #reader: StreamReader;
  readonly #operations: Operations;
  readonly #retention: Retention;
  readonly #ctx: StreamContext;

  constructor(store: StorePort, directory: Directory, signer: Signer, codec: TokenCodec, integrity: Integrity, batcher: SignBatcher) {
    const presence = new WriterPresence();
    const heads = new StreamHeads(store, directory, integrity, presence);
    const ctx: StreamContext = {
      store,
      streams: store.streams,
      heads,
      integrity,
      directory,
      codec,
      presence,
      receiving: new ReceivingAppends(),
    };
    this.#heads = heads;
    this.#reader = new StreamReader(ctx);
    this.#fencing = new Fencing(ctx);
    this.#appender = new Appender(ctx, signer, batcher, this.#reader);
    this.#operations = new Operations(ctx);
    this.#retention = new Retention(ctx);
    this.#ctx = ctx;
  }

  // ---- heads (heads.ts) -----------------------------------------------------------------

  /** Be told of commits and discontinuities. */
  /** A head moved through another daemon on the same store: wake its readers and followers. */
  moved(streamId: string): void {
    this.#heads.moved(streamId);
  }

  listen(listener: StreamEvents): void {
    this.#heads.listen(listener);
  }

  /** Committed head of a stream (what readers may see), or undefined. */
  committedMeta(streamId: string): StreamMeta | undefined {
    return this.#heads.committed(streamId);
  }

  /** Public state, with the peer's receipt as `acknowledged`. */
  state(meta: StreamMeta): StreamState {
    return this.#heads.state(meta);
  }

  /** Check every stored head against its records (the startup sweep). */
  reconcileAll(): Promise<void> {
    return this.#heads.reconcileAll();
  }

  // ---- writes (fencing.ts, appender.ts) --------------------------------------------------

  /** `streams.claim`; `holder` is the connection the claim is attached to (none in-process). */
  claim(caller: Caller, p: ClaimRequest, holder?: Holder): Promise<Claim> {
    return this.#fencing.claim(caller, p, holder);
  }

  /** `streams.release`. */
  release(caller: Caller, p: ReleaseRequest): Promise<StreamState> {
    return this.#fencing.release(caller, p);
  }

  /** `streams.append`; a successful append attaches the claim to `holder`. */
  append(caller: Caller, p: AppendRequest, holder?: Holder): Promise<AppendResult> {
    return this.#appender.append(caller, p, holder);
  }

  // ---- reads (stream-reader.ts) -----------------------------------------------------------

  /** `streams.get`. */
  get(caller: Caller, streamId: string): StreamState {
    return this.#reader.get(caller, streamId);
  }

  /** `streams.read` without waiting (ChatReader adds the long poll). */
  read(caller: Caller, p: ReadRequest): Promise<ReadBatch> {
    return this.#reader.read(caller, p);
  }

  bounds(meta: StreamMeta, generation: number): GenerationBounds | null {
    return this.#reader.bounds(meta, generation);
  }

  continuingMeta(streamId: string): StreamMeta {
    return this.#reader.continuingMeta(streamId);
  }

  readableMeta(caller: Caller, streamId: string): StreamMeta {
    return this.#reader.readableMeta(caller, streamId);
  }

  checkContinuity(streamId: string, generation: number, position: number): StreamMeta {
    return this.#reader.checkContinuity(streamId, generation, position);
  }

  readLimit(streamId: string, generation: number): number {
    return this.#reader.readLimit(streamId, generation);
  }

  assertReadable(streamId: string, generation: number, position: number): void {
    this.#reader.assertReadable(streamId, generation, position);
  }

  batchId(caller: Caller, streamId: string, generation: number, from: number, next: number): string {
    return this.#reader.batchId(caller, streamId, generation, from, next);
  }

  scan(streamId: string, generation: number, from: number, end: number, reverse = false): AsyncGenerator<SizedRecord> {
    return this.#reader.scan(streamId, generation, from, end, reverse);
  }

  missing(streamId: string, generation: number, position: number): YelloError {
    return this.#reader.missing(streamId, generation, position);
  }

  /** Committed records [from, end) for internal readers (follow, checkpoints), cut at `maxBytes` (always at least one). */
  range(streamId: string, generation: number, from: number, end: number, limit: number, maxBytes = Infinity): Promise<StoredRecord[]> {
    return this.#reader.range(streamId, generation, from, end, limit, maxBytes);
  }

  // ---- operations (operations.ts) ---------------------------------------------------------

  /** `operations.get`. */
  operation(caller: Caller, streamId: string, operationId: string): Promise<OperationInfo> {
    return this.#operations.get(caller, streamId, operationId);
  }

  /** `operations.list`. */
  operations(caller: Caller, streamId: string, cursor: string | undefined, limit: number) {
    return this.#operations.list(caller, streamId, cursor, limit);
  }

  // ---- retention (retention.ts) -----------------------------------------------------------

  /** `streams.trim`. */
  trim(streamId: string, beforePosition: number, force: boolean): Promise<{ firstPosition: string }> {
    return this.#retention.trim(streamId, beforePosition, force);
  }

  /** The operator's retention policy, run in the background (retention-policy.ts). */
  retentionRunner(policy: RetentionPolicy, log: Logger): RetentionRunner {
    const { store, heads } = this.#ctx;
    return new RetentionRunner(policy, { store, heads, retention: this.#retention, log });
  }

  /** `streams.reset`. */
  reset(streamId: string, reason: string): Promise<StreamState> {
    return this.#retention.reset(streamId, reason);
  }
}
