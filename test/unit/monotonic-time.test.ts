// Durations in the daemon run on a monotonic clock (src/daemon/runtime/clock.ts): a wall clock
// stepped back must not lock hellos out for the length of the step, nor make uptime negative
// (issue 21, finding 5). Two checks: the hello limiter under a wall clock stepped back an hour,
// and a scan of src/daemon for wall-clock reads outside the timestamps meant to be wall-clock.

import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HelloLimiter } from '../../src/daemon/rpc/hello-limiter.js';
import { repoRoot } from '../helpers/daemon-process.js';

/**
 * Files of src/daemon that read the wall clock, and why that is right there. Each may only use
 * `new Date().toISOString()`: a timestamp stored or shown, never subtracted.
 */
const WALL_CLOCK_TIMESTAMPS: Record<string, string> = {
  'crypto/signer.ts': 'createdAt of a signing key (JWKS)',
  'store/leveldb/recovery-check.ts': 'detectedAt of a WAL incident (daemon.status)',
  'store/leveldb/doctor.ts': 'checkedAt of a doctor report',
  'store/integrity.ts': 'detectedAt of a corruption mark',
  'directory/grants.ts': 'grantedAt of a grant',
  'directory/chats.ts': 'createdAt of a chat',
  'directory/agents.ts': 'createdAt of an agent',
  'streams/retention.ts': 'sealedAt of a sealed generation',
  'streams/appender.ts': 'committedAt of an append (signed records)',
  'streams/fencing.ts': 'claimedAt of a writer claim (signed fence records)',
  'streams/checkpoints.ts': 'createdAt of a signed checkpoint',
  'streams/retention-policy.ts': 'the age of stored records for --retention-max-age-seconds (their committedAt is wall-clock)',
  'store/leveldb/backup.ts': 'createdAt of a backup manifest',
  'store/leveldb/restore.ts': 'the name of the directory a restore sets the old state aside in',
  'runtime/lock-info.ts': 'startedAt of the lock holder (named in the exit-73 error)',
};

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('monotonic time in the daemon', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('21 failed hellos, then the wall clock stepped back an hour: a valid hello on another connection is not refused', () => {
    const limiter = new HelloLimiter();
    for (let conn = 1; conn <= 21; conn++) limiter.failed(conn);
    const real = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(real - 3_600_000);
    expect(() => {
      limiter.check(1000);
    }).not.toThrow();
    // The failing connection itself waits its own back-off, not an hour.
    let retryAfterMs = 0;
    try {
      limiter.check(21);
    } catch (err) {
      retryAfterMs = (err as { details: { retryAfterMs: number } }).details.retryAfterMs;
    }
    expect(retryAfterMs).toBeLessThanOrEqual(HelloLimiter.MAX_WAIT_MS);
  });

  it('a back-off lasts its length on the injected monotonic clock, whatever the wall clock does', () => {
    let t = 1_000;
    const limiter = new HelloLimiter(() => t);
    for (let i = 0; i < HelloLimiter.FREE_FAILURES; i++) limiter.failed(7);
    expect(() => {
      limiter.check(7);
    }).toThrow(/retry after 250 ms/);
    t += 250;
    expect(() => {
      limiter.check(7);
    }).not.toThrow();
  });

  it('src/daemon reads the wall clock only for timestamps (allow-list with reasons)', () => {
    const root = path.join(repoRoot, 'src/daemon');
    const problems: string[] = [];
    for (const file of sources(root)) {
      const rel = path.relative(root, file);
      const text = fs.readFileSync(file, 'utf8');
      for (const [i, line] of text.split('\n').entries()) {
        const code = line.replace(/\/\/.*$/, '');
        if (/Date\.now\(|process\.uptime\(|hrtime\(\)/.test(code)) problems.push(`${rel}:${i + 1}: ${line.trim()}`);
        const dates = code.match(/new Date\([^)]*\)(\.\w+\(\))?/g) ?? [];
        for (const d of dates) {
          if (d !== 'new Date().toISOString()' || !(rel in WALL_CLOCK_TIMESTAMPS)) problems.push(`${rel}:${i + 1}: ${line.trim()}`);
        }
      }
    }
    expect(problems, 'use monotonicMs() (runtime/clock.ts) for durations; add true timestamps to the allow-list').toEqual([]);
  });
});
