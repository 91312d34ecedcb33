// The secret exchange's rules without a server: one use, a limit on wrong secrets that never
// keeps the owner's right one out, and sessions that expire and can be ended.

import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  allowedHosts,
  COOKIE_NAME,
  isLoopback,
  SESSION_IDLE_MS,
  SESSION_LIFETIME_MS,
  Sessions,
  type Session,
} from '../../src/console/guard.js';

// fromRequest reads only the Cookie header.
const requestWith = (session: Session): IncomingMessage =>
  ({ headers: { cookie: `other=1; ${COOKIE_NAME}=${session.id}` } }) as unknown as IncomingMessage;

function signedIn(now: () => number): { s: Sessions; session: Session } {
  const s = new Sessions(now);
  const session = s.exchange(s.secret!);
  if (typeof session === 'string') throw new Error(`refused: ${session}`);
  return { s, session };
}

describe('the secret exchange', () => {
  it('works once', () => {
    const s = new Sessions();
    const secret = s.secret!;
    const session = s.exchange(secret);
    if (typeof session === 'string') throw new Error(`refused: ${session}`);
    expect(session.id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session.csrf).not.toBe(session.id);
    expect(s.exchange(secret)).toBe('refused');
    expect(s.secret).toBeNull();
  });

  it('answers wrong secrets rate-limited after ten in a minute, but the right one always works (nobody can keep the owner out)', () => {
    let now = 1_000_000;
    const s = new Sessions(() => now);
    const secret = s.secret!;
    for (let i = 0; i < 10; i++) expect(s.exchange(`guess-${i}`)).toBe('refused');
    for (let i = 0; i < 50; i++) expect(s.exchange(`guess-more-${i}`)).toBe('rate-limited');
    expect(typeof s.exchange(secret)).toBe('object');
    expect(s.exchange(secret)).toBe('rate-limited');
    now += 60_001;
    expect(s.exchange(secret)).toBe('refused');
  });
});

describe('sessions', () => {
  it('end after the idle time without a request, and are forgotten', () => {
    let now = 5_000;
    const { s, session } = signedIn(() => now);
    now += SESSION_IDLE_MS - 1;
    expect(s.fromRequest(requestWith(session))).toBe(session);
    now += SESSION_IDLE_MS - 1; // a request just now kept it alive
    expect(s.fromRequest(requestWith(session))).toBe(session);
    now += SESSION_IDLE_MS;
    expect(s.fromRequest(requestWith(session))).toBe('expired');
    expect(s.fromRequest(requestWith(session))).toBeNull();
  });

  it('end after their lifetime however busy', () => {
    let now = 5_000;
    const { s, session } = signedIn(() => now);
    for (let t = 0; t < SESSION_LIFETIME_MS - 60_000; t += 30 * 60_000) {
      now = 5_000 + t;
      expect(s.fromRequest(requestWith(session))).toBe(session);
    }
    now = 5_000 + SESSION_LIFETIME_MS;
    expect(s.fromRequest(requestWith(session))).toBe('expired');
  });

  it('stop at once on sign-out, and a renewed secret signs in again', () => {
    const { s, session } = signedIn(() => 0);
    s.end(session);
    expect(s.fromRequest(requestWith(session))).toBeNull();
    const again = s.exchange(s.renew());
    expect(typeof again).toBe('object');
  });
});

describe('addresses', () => {
  it('knows loopback', () => {
    for (const a of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost']) expect(isLoopback(a), a).toBe(true);
    for (const a of ['0.0.0.0', '10.0.0.1', '::', 'example.com', '127.0.0.1.example.com']) expect(isLoopback(a), a).toBe(false);
  });

  it('allows the loopback names on the port and the listen address', () => {
    expect([...allowedHosts('127.0.0.1', 8080)].sort()).toEqual(['127.0.0.1:8080', '[::1]:8080', 'localhost:8080']);
    expect(allowedHosts('::1', 80).has('[::1]:80')).toBe(true);
  });

  it("on a wildcard listen address allows the host's own addresses and name, never 0.0.0.0 itself", () => {
    const hosts = allowedHosts('0.0.0.0', 8080, ['192.0.2.2', 'fd00::2'], 'vm');
    for (const h of ['192.0.2.2:8080', '[fd00::2]:8080', 'vm:8080', '127.0.0.1:8080']) expect(hosts.has(h), h).toBe(true);
    for (const h of ['0.0.0.0:8080', '192.0.2.3:8080', 'evil.example:8080']) expect(hosts.has(h), h).toBe(false);
    expect(allowedHosts('::', 80, ['192.0.2.2']).has('192.0.2.2:80')).toBe(true);
  });
});
