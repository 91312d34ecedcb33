// The secret exchange's rules without a server: one use, and a rate limit that a right secret
// does not pass either (so guessing cannot be mixed with the real secret to reset the count).

import { describe, expect, it } from 'vitest';
import { allowedHosts, isLoopback, Sessions } from '../../src/console/guard.js';

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

  it('refuses every attempt after ten in a minute, the right secret too, and allows again after the minute', () => {
    let now = 1_000_000;
    const s = new Sessions(() => now);
    const secret = s.secret!;
    for (let i = 0; i < 10; i++) expect(s.exchange(`guess-${i}`)).toBe('refused');
    expect(s.exchange(secret)).toBe('rate-limited');
    now += 60_001;
    expect(typeof s.exchange(secret)).toBe('object');
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
});
