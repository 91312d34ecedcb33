import { canonicalJson } from './canonical-json.js';
import type { StoredRecord } from './types.js';

/**
 * The encodings of a stream checkpoint (docs/protocol.md §5.9) that the daemon (to sign) and
 * every verifier (to check an export) compute byte for byte. No keys, no I/O, and no crypto of
 * its own: the runtime passes in the SHA-256 (src/daemon/crypto/hashing.ts and
 * src/client/hashing.ts, both on node:crypto).
 */

/** An incremental SHA-256 over UTF-8 text; node:crypto's `Hash` is one. */
export interface Sha256Stream {
  update(text: string): unknown;
  digest(encoding: 'base64url'): string;
}

/** `type` of a checkpoint and the first line of its signed payload (domain separation). */
export const CHECKPOINT_TYPE = 'yello.checkpoint.v1';

/**
 * SHA-256 over the canonical bytes of a range of records, fed one record at a time in position
 * order: `UTF-8(canonicalJson(record)) + "\n"` for each. Incremental, so neither the daemon nor
 * a verifier holds a whole stream in memory. `digest()` ends it.
 */
export class ChainDigest {
  readonly #hash: Sha256Stream;
  #count = 0;

  /** `hash`: a fresh SHA-256 that this digest alone feeds. */
  constructor(hash: Sha256Stream) {
    this.#hash = hash;
  }

  /** Add the next record of the range. */
  add(record: StoredRecord): void {
    this.#hash.update(`${canonicalJson(record)}\n`);
    this.#count++;
  }

  /** Records added so far. */
  get count(): number {
    return this.#count;
  }

  /** base64url (no padding) of the SHA-256; call once. */
  digest(): string {
    return this.#hash.digest('base64url');
  }
}

/** The fields a checkpoint signature covers; numbers are canonical decimal strings. */
export interface CheckpointFields {
  streamId: string;
  generation: string;
  firstPosition: string;
  nextPosition: string;
  recordCount: string;
  chainDigest: string;
  createdAt: string;
}

/** The exact UTF-8 text that is signed: the type tag and the fields joined with `\n`, no trailing newline. */
export function checkpointPayload(f: CheckpointFields): string {
  return [CHECKPOINT_TYPE, f.streamId, f.generation, f.firstPosition, f.nextPosition, f.recordCount, f.chainDigest, f.createdAt].join('\n');
}
