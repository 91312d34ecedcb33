import { CHECKPOINT_TYPE, type CheckpointFields } from '../../shared/checkpoint.js';
import { ChainDigest } from '../crypto/hashing.js';
import { errors } from '../../shared/errors.js';
import { formatDecimal } from '../../shared/ids.js';
import type { Checkpoint } from '../../shared/types.js';
import type { Caller } from '../caller.js';
import type { CheckpointRequest } from '../requests.js';
import type { Signer } from '../crypto/signer.js';
import type { StreamStore } from './stream-store.js';

/** Records hashed per storage read, so a long stream is digested page by page, never all at once. */
const PAGE_RECORDS = 1000;
const PAGE_BYTES = 1_048_576;

/**
 * `streams.checkpoint` (docs/protocol.md §5.9): the daemon reads the range itself through the
 * verified scan and signs what it found. A client-supplied digest is never trusted, and a
 * range that reaches a corruption mark is refused (STORAGE_FAILURE/CORRUPT, with the mark's
 * `fromPosition`) rather than vouched for; a range below the retained start is
 * PREFIX_UNAVAILABLE, as for `streams.read`.
 */
export async function streamCheckpoint(streams: StreamStore, signer: Signer, caller: Caller, p: CheckpointRequest): Promise<Checkpoint> {
  const meta = streams.readableMeta(caller, p.streamId);
  const generation = p.generation;
  const b = streams.bounds(meta, generation);
  if (!b) throw errors.continuityBreak('GENERATION_CHANGED', p.streamId, formatDecimal(generation), formatDecimal(meta.generation));
  const from = p.fromPosition ?? b.firstPosition;
  const next = p.nextPosition ?? b.nextPosition;
  if (from < b.firstPosition)
    throw errors.continuityBreak('PREFIX_UNAVAILABLE', p.streamId, formatDecimal(from), formatDecimal(b.firstPosition));
  if (next > b.nextPosition)
    throw errors.invalidParams('nextPosition', `nextPosition is beyond the generation's nextPosition ${b.nextPosition}`);
  if (from > next) throw errors.invalidParams('fromPosition', `fromPosition is beyond nextPosition ${next}`);
  // The default range claims to reach the head: a mark inside it or exactly at its end (the
  // head rolled back over acknowledged records) refuses it. An explicit nextPosition at or below
  // the mark is a statement about that sub-range only (the exporter's part below the damage).
  if (p.nextPosition === undefined) streams.assertReadable(p.streamId, generation, next);
  else if (next > from) streams.assertReadable(p.streamId, generation, next - 1);

  const digest = new ChainDigest();
  for (let at = from; at < next;) {
    // range() ends a page early at damage it finds; the next page starts there and throws.
    const page = await streams.range(p.streamId, generation, at, next, PAGE_RECORDS, PAGE_BYTES);
    for (const r of page) digest.add(r);
    at += page.length;
  }
  const fields: CheckpointFields = {
    streamId: meta.streamId,
    generation: formatDecimal(generation),
    firstPosition: formatDecimal(from),
    nextPosition: formatDecimal(next),
    recordCount: formatDecimal(digest.count),
    chainDigest: digest.digest(),
    createdAt: new Date().toISOString(),
  };
  return {
    type: CHECKPOINT_TYPE,
    streamId: fields.streamId,
    chatId: meta.chatId,
    authorAgentId: meta.authorAgentId,
    generation: fields.generation,
    firstPosition: fields.firstPosition,
    nextPosition: fields.nextPosition,
    recordCount: fields.recordCount,
    chainDigest: fields.chainDigest,
    createdAt: fields.createdAt,
    signature: signer.signCheckpoint(fields),
  };
}
