import { createHmac } from 'node:crypto';
import { safeEqual } from './tokens.js';

/**
 * Opaque, HMAC-protected tokens (batch ids, cursors). The body is base64url JSON so a token
 * is self-contained and survives restarts; the MAC (key in `secret.key`, or derived from the
 * deployment secret on a shared store; domain-separated per kind) makes any change detectable.
 */
export class TokenCodec {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    this.#key = key;
  }

  /**
   * The codec of a deployment whose daemons share `secret` (PostgreSQL: a row of the shared
   * database). The MAC key is derived from it under its own label, so the stored value is never
   * itself the key, and a token sealed under one daemon's `secret.key` never opens here.
   */
  static forDeployment(secret: Buffer): TokenCodec {
    return new TokenCodec(createHmac('sha256', secret).update('yello deployment seal v1').digest());
  }

  #mac(kind: string, body: string): string {
    return createHmac('sha256', this.#key).update(`${kind}\n${body}`).digest('base64url').slice(0, 32);
  }

  /** A token of `kind` carrying `value`, which only a codec with the same key opens (this daemon, or every daemon of its deployment). */
  seal(kind: string, value: unknown): string {
    const body = Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
    return `${body}.${this.#mac(kind, body)}`;
  }

  /**
   * The sealed value, or null when the token is malformed, of another kind, or tampered with.
   * It is `unknown`: the caller checks its shape before trusting it, like any other input.
   */
  open(kind: string, token: string): unknown {
    const dot = token.indexOf('.');
    if (dot <= 0) return null;
    const body = token.slice(0, dot);
    if (!safeEqual(token.slice(dot + 1), this.#mac(kind, body))) return null;
    try {
      return JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as unknown;
    } catch {
      return null;
    }
  }
}
