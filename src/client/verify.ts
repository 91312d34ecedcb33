import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { checkpointPayload } from '../shared/checkpoint.js';
import { messagePayload } from '../shared/message-signing.js';
import { contentSha256 } from './hashing.js';
import type { Checkpoint, Jwks, StoredRecord } from '../shared/types.js';
import { VerificationError } from './errors.js';

/** What a failed check found; `kind` is one of the stable problem kinds of `verifyExport`. */
export interface CheckFailure {
  kind: 'CONTENT_HASH' | 'SIGNATURE' | 'UNKNOWN_KID' | 'WRONG_STREAM';
  problem: string;
}

/** The public keys of a JWKS by kid, imported once each. */
export class KeyRing {
  readonly #jwks: Jwks;
  readonly #imported = new Map<string, KeyObject>();

  constructor(jwks: Jwks) {
    this.#jwks = jwks;
  }

  /** The key `kid` names, or undefined when the JWKS has none. */
  get(kid: string): KeyObject | undefined {
    let key = this.#imported.get(kid);
    if (key) return key;
    const jwk = this.#jwks.keys.find((k) => k.kid === kid);
    if (!jwk) return undefined;
    key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
    this.#imported.set(kid, key);
    return key;
  }
}

/**
 * Check an ES256 signature `{kid, alg, value}` over `payload`: the alg, the key by kid, the
 * canonical 86-character base64url form (a lax decoder would accept altered text that decodes
 * to the same bytes), then the signature itself.
 */
export function signatureFailure(keys: KeyRing, sig: { kid: string; alg: string; value: string }, payload: string): CheckFailure | null {
  if (sig.alg !== 'ES256') return { kind: 'SIGNATURE', problem: `unsupported alg ${sig.alg}` };
  const key = keys.get(sig.kid);
  if (!key) return { kind: 'UNKNOWN_KID', problem: `unknown kid ${sig.kid}` };
  if (!/^[A-Za-z0-9_-]{86}$/.test(sig.value)) return { kind: 'SIGNATURE', problem: 'signature is not 64 bytes of unpadded base64url' };
  const bytes = Buffer.from(sig.value, 'base64url');
  if (bytes.toString('base64url') !== sig.value) return { kind: 'SIGNATURE', problem: 'signature is not canonical base64url' };
  if (bytes.length !== 64 || !verify('sha256', Buffer.from(payload, 'utf8'), { key, dsaEncoding: 'ieee-p1363' }, bytes)) {
    return { kind: 'SIGNATURE', problem: 'signature does not verify' };
  }
  return null;
}

/** A message's own checks: contentSha256 matches the content, and the signature verifies. */
export function messageFailure(
  m: Extract<StoredRecord['wrapper'], { type: 'chat.message' }>['message'],
  keys: KeyRing,
): CheckFailure | null {
  if (contentSha256(m.content) !== m.contentSha256) return { kind: 'CONTENT_HASH', problem: 'contentSha256 does not match the content' };
  const payload = messagePayload({
    chatId: m.chatId,
    fromAgentId: m.fromAgentId,
    toAgentId: m.toAgentId,
    createdAt: m.signature.createdAt,
    contentSha256: m.contentSha256,
  });
  return signatureFailure(keys, m.signature, payload);
}

/** A checkpoint's signature over its §5.9 payload. */
export function checkpointFailure(c: Checkpoint, keys: KeyRing): CheckFailure | null {
  return signatureFailure(keys, c.signature, checkpointPayload(c));
}

/**
 * Check a stored message record offline: its contentSha256 matches its content, and its
 * signature (ES256 over the §5 payload) verifies with the key `kid` names in `jwks`.
 * Receipts and fences carry no signature and pass as they are. Throws `VerificationError`.
 * One record proves nothing about its position or its neighbours: `verifyExport` does that.
 */
export function verifyRecord(record: StoredRecord, jwks: Jwks): void {
  const w = record.wrapper;
  if (w.type !== 'chat.message') return;
  const m = w.message;
  const where = record.position;
  if (contentSha256(m.content) !== m.contentSha256)
    throw new VerificationError(`position ${where}: contentSha256 does not match the content`, where);
  if (m.chatId !== w.chatId || m.fromAgentId !== w.authorAgentId)
    throw new VerificationError(`position ${where}: message does not match its wrapper`, where);
  const failure = messageFailure(m, new KeyRing(jwks));
  if (failure) throw new VerificationError(`position ${where}: ${failure.problem}`, where);
}

/**
 * Check a checkpoint's signature offline against `jwks`, and that its `chatId`/`authorAgentId`
 * are those of its `streamId`. Says nothing about records: `verifyExport` compares them with
 * it. Throws `VerificationError`.
 */
export function verifyCheckpoint(checkpoint: Checkpoint, jwks: Jwks): void {
  if (`${checkpoint.chatId}:${checkpoint.authorAgentId}` !== checkpoint.streamId) {
    throw new VerificationError(`checkpoint of ${checkpoint.streamId}: chatId and authorAgentId do not make its streamId`, null);
  }
  const failure = checkpointFailure(checkpoint, new KeyRing(jwks));
  if (failure)
    throw new VerificationError(`checkpoint of ${checkpoint.streamId} generation ${checkpoint.generation}: ${failure.problem}`, null);
}
