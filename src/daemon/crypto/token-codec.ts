import { createHmac } from 'node:crypto';
import { safeEqual } from './tokens.js';

/**
 * Opaque, HMAC-protected tokens (batch ids, cursors). The body is base64url JSON so a token
 * is self-contained and survives restarts; the MAC (key in `secret.key`, domain-separated
 * per kind) makes any change detectable.
 */
export class TokenCodec {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    this.#key = key;
  }

  #mac(kind: string, body: string): string {
    return createHmac('sha256', this.#key).update(`${kind}\n${body}`).digest('base64url').slice(0, 32);
  }

  /** A token of `kind` carrying `value`, which only this daemon's key opens. */
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
