// The PostgreSQL store's one retry loop (src/daemon/store/postgres/retry.ts): what leaving
// read-only and reading the heads again after a LISTEN reconnect both rely on; and its one
// bounded wait, with the waits a daemon uses (tests give stores shorter ones).
import { describe, expect, it } from 'vitest';
import { PG_WAITS, retryUntilDone, within, withinDeadline } from '../../src/daemon/store/postgres/retry.js';

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

describe("the store's bounded waits", () => {
  it("a daemon's waits are the documented ones: 5 s for an answer (docs/protocol.md UNAVAILABLE), 15 s for a recovery's own commit (docs/multi-host.md), 5 s for queries in flight at close", () => {
    expect(PG_WAITS).toEqual({ answerDeadlineMs: 5_000, recoverWaitMs: 15_000, closeWaitMs: 5_000 });
  });

  it('within: the value or the rejection of work answered in time; past the time, the given error (the work goes on)', async () => {
    const never = new Promise<number>(() => {});
    expect(await within(Promise.resolve(7), 50, () => new Error('late'))).toBe(7);
    await expect(within(Promise.reject(new Error('refused')), 50, () => new Error('late'))).rejects.toThrow('refused');
    const t0 = performance.now();
    await expect(within(never, 40, () => new Error('late'))).rejects.toThrow('late');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(35);
    let done = false;
    const slow = new Promise<void>((r) => setTimeout(r, 60)).then(() => (done = true));
    await expect(within(slow, 10, () => new Error('late'))).rejects.toThrow('late');
    await slow;
    expect(done).toBe(true);
  });

  it('withinDeadline: past the deadline, an error with code DEADLINE naming what waited and for how long', async () => {
    const err = (await withinDeadline(new Promise(() => {}), 'a stream group commit', 30).catch((e: unknown) => e)) as Error & {
      code?: string;
    };
    expect(err.code).toBe('DEADLINE');
    expect(err.message).toBe('a stream group commit: no answer from PostgreSQL within 0.03 s');
    expect(await withinDeadline(Promise.resolve('answered'), 'the session check', 30)).toBe('answered');
  });
});
