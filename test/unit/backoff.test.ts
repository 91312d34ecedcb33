import { describe, expect, it } from 'vitest';
import { Backoff } from '../../src/shared/backoff.js';

describe('Backoff', () => {
  it('doubles from minDelayMs up to maxDelayMs, numbering attempts from 1', () => {
    const b = new Backoff({ minDelayMs: 50, maxDelayMs: 300 });
    const steps = Array.from({ length: 6 }, () => b.next());
    expect(steps).toEqual([
      { attempt: 1, delayMs: 50 },
      { attempt: 2, delayMs: 100 },
      { attempt: 3, delayMs: 200 },
      { attempt: 4, delayMs: 300 },
      { attempt: 5, delayMs: 300 },
      { attempt: 6, delayMs: 300 },
    ]);
    expect(b.attempt).toBe(6);
  });

  it('gives up after maxAttempts', () => {
    const b = new Backoff({ minDelayMs: 10, maxDelayMs: 10, maxAttempts: 2 });
    expect([b.next(), b.next(), b.next(), b.next()].map((s) => s?.attempt ?? null)).toEqual([1, 2, null, null]);
  });

  it('with jitter, waits between half and all of each delay', () => {
    const b = new Backoff({ minDelayMs: 100, maxDelayMs: 1600, jitter: true });
    for (let i = 0; i < 200; i++) {
      const step = b.next();
      if (!step) throw new Error('no maxAttempts: never null');
      const { attempt, delayMs } = step;
      const full = Math.min(1600, 100 * 2 ** (attempt - 1));
      expect(delayMs).toBeGreaterThanOrEqual(full / 2);
      expect(delayMs).toBeLessThan(full);
    }
  });
});
