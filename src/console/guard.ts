// What keeps the console safe on a shared host: only the person holding the printed one-time
// secret gets a session; the session lives in an HttpOnly, SameSite=Strict cookie; requests
// naming another Host are refused (DNS rebinding); every state change must come from the
// console's own origin and carry the session's CSRF token.

import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const COOKIE_NAME = 'yello_console';

/** A browser session made by the secret exchange. */
export interface Session {
  readonly id: string;
  /** Sent back in every form (hidden field `csrf`) and checked on every POST. */
  readonly csrf: string;
  readonly createdAt: number;
}

const token = (): string => randomBytes(32).toString('base64url');

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Failed exchanges allowed per window: enough for typos, far too few to guess 256 bits. */
const EXCHANGE_ATTEMPTS = 10;
const EXCHANGE_WINDOW_MS = 60_000;

/** The one-time secret, the sessions it was exchanged for, and the exchange's rate limit. */
export class Sessions {
  #secret: string | null = token();
  readonly #sessions = new Map<string, Session>();
  #attempts: number[] = [];
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** The secret to print, until it has been exchanged. */
  get secret(): string | null {
    return this.#secret;
  }

  /** A fresh one-time secret (the old one, if unused, stops working). */
  renew(): string {
    this.#secret = token();
    return this.#secret;
  }

  /**
   * Exchange `secret` for a session: `rate-limited` after too many attempts in a minute,
   * `refused` for a wrong or already used secret.
   */
  exchange(secret: string): Session | 'refused' | 'rate-limited' {
    const now = this.#now();
    this.#attempts = this.#attempts.filter((t) => now - t < EXCHANGE_WINDOW_MS);
    if (this.#attempts.length >= EXCHANGE_ATTEMPTS) return 'rate-limited';
    this.#attempts.push(now);
    if (this.#secret === null || !sameSecret(secret, this.#secret)) return 'refused';
    this.#secret = null;
    const session: Session = { id: token(), csrf: token(), createdAt: now };
    this.#sessions.set(session.id, session);
    return session;
  }

  /** The session the request's cookie names, if any. */
  fromRequest(req: IncomingMessage): Session | null {
    const id = cookie(req, COOKIE_NAME);
    return id === null ? null : (this.#sessions.get(id) ?? null);
  }
}

/** The value of cookie `name` in the request, or null. */
export function cookie(req: IncomingMessage, name: string): string | null {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

/** The Set-Cookie header for a session: not readable by scripts, never sent cross-site. */
export function sessionCookie(session: Session): string {
  return `${COOKIE_NAME}=${session.id}; HttpOnly; SameSite=Strict; Path=/`;
}

/** Whether `address` is a loopback address (what `--listen` accepts without `--allow-remote`). */
export function isLoopback(address: string): boolean {
  const a = address.replace(/^\[|\]$/g, '');
  return a === 'localhost' || a === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

/**
 * The Host header values the console answers to: the loopback names on its port, and the
 * listen address itself. Anything else (a DNS-rebound name) is refused before routing.
 */
export function allowedHosts(listenHost: string, port: number): Set<string> {
  const hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  hosts.add(listenHost.includes(':') && !listenHost.startsWith('[') ? `[${listenHost}]:${port}` : `${listenHost}:${port}`);
  return hosts;
}

/** Whether a state-changing request comes from the console's own page (its Origin is the Host it was sent to). */
export function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  return typeof origin === 'string' && origin === `http://${req.headers.host ?? ''}`;
}

/** Whether the form's `csrf` field is the session's token. */
export function csrfOk(session: Session, sent: string | undefined): boolean {
  return typeof sent === 'string' && sameSecret(sent, session.csrf);
}

/** Headers on every answer: a strict CSP (scripts and styles only from the console, no inline), no caching, no framing. */
export const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  // `no-referrer` would make the browser send `Origin: null` on the console's own form posts.
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};
