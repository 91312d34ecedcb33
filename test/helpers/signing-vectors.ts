// The signing vectors of docs/protocol.md §5, kept in the repository as
// test/fixtures/signing-vectors.json (a byte-for-byte copy of the contract's vector file).
// Every test that checks the signing encoding loads them through here, so there is one path
// and one type for the file.

import { readFileSync } from 'node:fs';
import path from 'node:path';

/** One message of the vector file: its inputs and every value derived from them. */
export interface SigningVector {
  name: string;
  chatId: string;
  fromAgentId: string;
  toAgentId: string;
  createdAt: string;
  messageId: string;
  content: string;
  contentSha256: string;
  payload: string;
  clientMessageId: string;
  signature: { kid: string; alg: string; value: string; createdAt: string };
}

/**
 * The P-256 public JWK members RFC 7638 hashes. A type alias, not an interface, so it is
 * assignable to node:crypto's `JsonWebKey` (which has an index signature).
 */
export type VectorPublicJwk = {
  kty: string;
  crv: string;
  x: string;
  y: string;
};

/** The whole file. `mustFail` entries are tampered messages that no verifier may accept. */
export interface SigningVectors {
  description: string;
  testKey: { privateJwk: VectorPublicJwk & { d: string }; publicJwk: VectorPublicJwk; kid: string; thumbprintInput: string };
  vectors: SigningVector[];
  mustFail: SigningVector[];
}

/** Absolute path of the fixture. */
export const signingVectorsPath = path.resolve(import.meta.dirname, '../fixtures/signing-vectors.json');

/** Parse the fixture. */
export function loadSigningVectors(): SigningVectors {
  return JSON.parse(readFileSync(signingVectorsPath, 'utf8')) as SigningVectors;
}
