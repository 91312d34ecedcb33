import { createHash, hash } from 'node:crypto';
import { ChainDigest as ChainDigestOver } from '../shared/checkpoint.js';
import type { StoredRecord } from '../shared/types.js';

// The SHA-256 that the encodings of src/shared (which has no crypto of its own) are hashed
// with on the client side; src/daemon/crypto/hashing.ts is the daemon's twin.

/** `contentSha256` of a message (docs/protocol.md §5): base64url of SHA-256 over its UTF-8 content, no padding. */
export function contentSha256(content: string): string {
  return hash('sha256', content, 'base64url');
}

/** The checkpoint chain digest (docs/protocol.md §5.9) on node:crypto's SHA-256. */
export class ChainDigest extends ChainDigestOver {
  constructor() {
    super(createHash('sha256'));
  }
}

/** The chain digest of records already in memory (tests, small ranges). */
export function chainDigest(records: Iterable<StoredRecord>): string {
  const d = new ChainDigest();
  for (const r of records) d.add(r);
  return d.digest();
}
