// What keeps the console safe on a shared host: only the person holding the printed one-time
// secret gets a session; the session lives in an HttpOnly, SameSite=Strict cookie scoped to the
// console's own secret path (a browser sends cookies to every port of a host, so a server another
// local user runs on 127.0.0.1 would otherwise receive it); sessions expire and can be ended;
// requests naming another Host are refused (DNS rebinding); every state change must come from
// the console's own origin and carry the session's CSRF token.

import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const COOKIE_NAME = 'yello_console';

/** A browser session made by the secret exchange. */
export interface Session {
  readonly id: string;
  /** Sent back in every form (hidden field `csrf`) and checked on every POST. */
  readonly csrf: string;
  readonly createdAt: number;
  /** When a request last used it (monotonic ms), for the idle timeout. */
  lastUsedAt: number;
}

/** A session ends this long after sign-in, however busy (the cookie's Max-Age says the same). */
export const SESSION_LIFETIME_MS = 12 * 3600_000;
/** …and after this long without a request. */
export const SESSION_IDLE_MS = 2 * 3600_000;

/**
 * The path every page of one console lives under: 128 random bits, known only from the printed
 * URL. The session cookie is scoped to it, so a browser never sends it to another server on the
 * same host (cookies ignore ports, not paths), and the referrer policy keeps it from leaking.
 */
export function consolePrefix(): string {
  return `/${randomBytes(16).toString('base64url')}/`;
}

const token = (): string => randomBytes(32).toString('base64url');

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Wrong secrets answered 403 per window; later ones in the window 429 (log noise, not guessing: the secret has 256 bits). */
const EXCHANGE_ATTEMPTS = 10;
const EXCHANGE_WINDOW_MS = 60_000;

/** The one-time secret, the sessions it was exchanged for, and the limit on wrong secrets. */
export class Sessions {
  #secret: string | null = token();
  readonly #sessions = new Map<string, Session>();
  #attempts: number[] = [];
  readonly #now: () => number;

  /** `now` is a monotonic clock in ms (a wall-clock step must neither end nor stretch a session). */
  constructor(now: () => number = () => performance.now()) {
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
   * Exchange `secret` for a session. The right secret always works, however many wrong ones
   * others sent (a limit that counted every attempt let any local user keep the owner out);
   * wrong or used ones are `refused`, and past the window's allowance `rate-limited`.
   */
  exchange(secret: string): Session | 'refused' | 'rate-limited' {
    const now = this.#now();
    if (this.#secret !== null && sameSecret(secret, this.#secret)) {
      this.#secret = null;
      const session: Session = { id: token(), csrf: token(), createdAt: now, lastUsedAt: now };
      this.#sessions.set(session.id, session);
      return session;
    }
    this.#attempts = this.#attempts.filter((t) => now - t < EXCHANGE_WINDOW_MS);
    if (this.#attempts.length >= EXCHANGE_ATTEMPTS) return 'rate-limited';
    this.#attempts.push(now);
    return 'refused';
  }

  /**
   * The live session the request's cookie names: `expired` when it outlived its lifetime or
   * idle time (it is then forgotten), null when there is none.
   */
  fromRequest(req: IncomingMessage): Session | 'expired' | null {
    const id = cookie(req, COOKIE_NAME);
    const session = id === null ? undefined : this.#sessions.get(id);
    if (!session) return null;
    const now = this.#now();
    if (now - session.createdAt >= SESSION_LIFETIME_MS || now - session.lastUsedAt >= SESSION_IDLE_MS) {
      this.#sessions.delete(session.id);
      return 'expired';
    }
    session.lastUsedAt = now;
    return session;
  }

  /** Sign-out: the session stops working at once. */
  end(session: Session): void {
    this.#sessions.delete(session.id);
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

/** The Set-Cookie header for a session: not readable by scripts, never sent cross-site, sent only under the console's `prefix`. */
export function sessionCookie(session: Session, prefix: string): string {
  return `${COOKIE_NAME}=${session.id}; HttpOnly; SameSite=Strict; Path=${prefix}; Max-Age=${SESSION_LIFETIME_MS / 1000}`;
}

/** The Set-Cookie header that makes the browser forget the session (sign-out). */
export function clearedCookie(prefix: string): string {
  return `${COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=${prefix}; Max-Age=0`;
}

/** Whether `address` is a loopback address (what `--listen` accepts without `--allow-remote`). */
export function isLoopback(address: string): boolean {
  const a = address.replace(/^\[|\]$/g, '');
  return a === 'localhost' || a === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

/** Whether `address` listens on every interface (`0.0.0.0`, `::`). */
export function isWildcard(address: string): boolean {
  const a = address.replace(/^\[|\]$/g, '');
  return a === '0.0.0.0' || a === '::';
}

/** `host:port` as a Host header or URL writes it (IPv6 in brackets). */
export function hostPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * The Host header values the console answers to: the loopback names on its port, and the
 * listen address itself — on a wildcard address, each of `interfaceAddresses` (and `hostname`)
 * instead, since a browser names the address it reached. Anything else (a DNS-rebound name) is
 * refused before routing.
 */
export function allowedHosts(listenHost: string, port: number, interfaceAddresses: string[] = [], hostname?: string): Set<string> {
  const hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  if (!isWildcard(listenHost)) hosts.add(hostPort(listenHost, port));
  else for (const a of [...interfaceAddresses, ...(hostname ? [hostname] : [])]) hosts.add(hostPort(a, port));
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
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'self'",
  'X-Content-Type-Options': 'nosniff',
  // `no-referrer` would make the browser send `Origin: null` on the console's own form posts.
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};
