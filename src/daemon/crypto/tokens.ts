import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Base64url } from './hashing.js';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** 26 random base32 characters (130 bits), for daemon-made ids such as `agt_…`. */
export function randomId(prefix: string): string {
  const bytes = randomBytes(26);
  let out = prefix;
  for (const b of bytes) out += BASE32.charAt(b & 31);
  return out;
}

/** A fresh bearer secret with a readable prefix (256 bits of entropy). */
export function newToken(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

/**
 * Tokens are stored as SHA-256 hashes only. They carry 256 random bits, so a fast hash is
 * enough: there is nothing to brute-force that a slow KDF would protect.
 */
export function hashToken(token: string): string {
  return sha256Base64url(token);
}

/** Constant-time string equality for secrets. */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}
