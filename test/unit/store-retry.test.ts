// The PostgreSQL store's one retry loop (src/daemon/store/postgres/retry.ts): what leaving
// read-only and reading the heads again after a LISTEN reconnect both rely on.
import { describe, expect, it } from 'vitest';
import { retryUntilDone } from '../../src/daemon/store/postgres/retry.js';

describe('retryUntilDone', () => {
  it('tries at once, then after each backoff delay, until the work succeeds; tells the first failure and the recovery, once each', async () => {
    const waits: number[] = [];
    const failures: Array<[string, number]> = [];
    const recoveries: number[] = [];
    let tries = 0;
    await retryUntilDone({
      attempt: () => (++tries < 4 ? Promise.reject(Object.assign(new Error('down'), { code: 'ECONNREFUSED' })) : Promise.resolve()),
      stopped: () => false,
      failed: (err, attempt) => failures.push([(err as { code: string }).code, attempt]),
      recovered: (attempts) => recoveries.push(attempts),
      sleep: (ms) => {
        waits.push(ms);
        return Promise.resolve();
      },
    });
    expect(tries).toBe(4);
    // A database cut off for minutes is logged once, not once per try (issue 52).
    expect(failures).toEqual([['ECONNREFUSED', 1]]);
    expect(recoveries).toEqual([4]);
    // No wait before the first try; then 200, 400, 800 ms, jittered into [0.5, 1) of each.
    expect(waits).toHaveLength(3);
    for (const [i, ms] of waits.entries()) {
      expect(ms).toBeGreaterThanOrEqual(100 * 2 ** (i + 1) * 0.5);
      expect(ms).toBeLessThan(100 * 2 ** (i + 1));
    }
  });

  it('with delayFirst waits the first delay before the first try', async () => {
    const events: string[] = [];
    await retryUntilDone({
      delayFirst: true,
      attempt: () => {
        events.push('try');
        return Promise.resolve();
      },
      stopped: () => false,
      failed: () => events.push('failed'),
      sleep: (ms) => {
        events.push(ms < 100 && ms >= 50 ? 'wait ~100' : `wait ${ms}`);
        return Promise.resolve();
      },
    });
    expect(events).toEqual(['wait ~100', 'try']);
  });

  it('ends quietly once stopped: no try after a wait that ended stopped, no failure told after stopping', async () => {
    let stopped = false;
    let tries = 0;
    const failures: number[] = [];
    await retryUntilDone({
      attempt: () => {
        tries++;
        stopped = true; // close() began while this try was out
        return Promise.reject(new Error('cut off'));
      },
      stopped: () => stopped,
      failed: (_err, attempt) => failures.push(attempt),
      sleep: () => Promise.resolve(),
    });
    expect(tries).toBe(1);
    expect(failures).toEqual([]);

    let tries2 = 0;
    let s2 = false;
    await retryUntilDone({
      attempt: () => {
        tries2++;
        return Promise.reject(new Error('down'));
      },
      stopped: () => s2,
      failed: () => {},
      sleep: () => {
        s2 = true;
        return Promise.resolve();
      },
    });
    expect(tries2).toBe(1);
  });
});
