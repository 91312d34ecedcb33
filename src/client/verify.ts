import { createPublicKey, verify } from 'node:crypto';
import { contentSha256, messagePayload } from '../shared/message-signing.js';
import type { Jwks, StoredRecord } from '../shared/types.js';
import { VerificationError } from './errors.js';

/**
 * Check a stored message record offline: its contentSha256 matches its content, and its
 * signature (ES256 over the §5 payload) verifies with the key `kid` names in `jwks`.
 * Receipts and fences carry no signature and pass as they are. Throws `VerificationError`.
 */
export function verifyRecord(record: StoredRecord, jwks: Jwks): void {
  const w = record.wrapper;
  if (w.type !== 'chat.message') return;
  const m = w.message;
  const where = record.position ?? null;
  if (contentSha256(m.content) !== m.contentSha256) throw new VerificationError(`position ${where}: contentSha256 does not match the content`, where);
  if (m.chatId !== w.chatId || m.fromAgentId !== w.authorAgentId) throw new VerificationError(`position ${where}: message does not match its wrapper`, where);
  if (m.signature.alg !== 'ES256') throw new VerificationError(`position ${where}: unsupported alg ${m.signature.alg}`, where);
  const jwk = jwks.keys.find((k) => k.kid === m.signature.kid);
  if (!jwk) throw new VerificationError(`position ${where}: unknown kid ${m.signature.kid}`, where);
  const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
  const payload = messagePayload({ chatId: m.chatId, fromAgentId: m.fromAgentId, toAgentId: m.toAgentId, createdAt: m.signature.createdAt, contentSha256: m.contentSha256 });
  if (!/^[A-Za-z0-9_-]{86}$/.test(m.signature.value)) throw new VerificationError(`position ${where}: signature is not 64 bytes of unpadded base64url`, where);
  const sig = Buffer.from(m.signature.value, 'base64url');
  if (sig.toString('base64url') !== m.signature.value) throw new VerificationError(`position ${where}: signature is not canonical base64url`, where);
  if (sig.length !== 64 || !verify('sha256', Buffer.from(payload, 'utf8'), { key, dsaEncoding: 'ieee-p1363' }, sig)) {
    throw new VerificationError(`position ${where}: signature does not verify`, where);
  }
}
