// Kills a mutant of src/daemon/streams/retention-policy.ts that r1-arguments.md ("The r1
// survivors matched to their arguments") calls killable: 136:19, the range given to
// `streams.opLog` in `#olderThan` replaced by `{}`. Without the range the whole operation log is
// read, every generation in order; a reset keeps the sealed generations' operations, so an old
// operation of generation 1 would raise the age limit's end to its own nextPosition, and the
// current generation would be trimmed up to there (capped at its head) though all of its
// records are young. The maxAgeMs guards of mut-b-retention.test.ts use one generation only,
// where the range and no range read the same entries. In-process, on a real LevelDB in a temp
// dir (test/helpers/in-process-store.ts), with the wall clock (Date only) faked: committedAt
// and the cutoff both come from it.

import { afterEach, describe, expect, it, vi } from 'vitest';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import type { RetentionPolicy } from '../../src/daemon/streams/retention-policy.js';
import { appendOperation, chatWithWriter, openInProcess, silentLog, type InProcessStore } from '../helpers/in-process-store.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

const policy = (p: Partial<RetentionPolicy>): RetentionPolicy => ({
  maxRecords: null,
  maxAgeMs: null,
  force: true,
  intervalMs: 3_600_000,
  ...p,
});

const HOUR = 3_600_000;

describe('RetentionRunner maxAgeMs reads the current generation’s operations only (retention-policy.ts #olderThan)', () => {
  it('old operations of a sealed generation do not trim the young current one', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2030-03-03T10:00:00.000Z'));
    const s = await openInProcess();
    open.push(s);
    const w = await chatWithWriter(s);
    await appendOperation(s, w, 6, 'g1'); // generation 1: fence 0, messages 1..6 (nextPosition 7)
    vi.setSystemTime(new Date('2030-03-03T12:00:00.000Z'));
    await s.streams.reset(w.streamId, 'to generation 2');
    w.token = (await s.streams.claim(w.alice, { streamId: w.streamId, replace: true })).coordinatorToken;
    await appendOperation(s, w, 3, 'g2'); // generation 2: fence 0, messages 1..3 (nextPosition 4), all committed at 12:00
    expect(s.streams.get(w.alice, w.streamId)).toMatchObject({ generation: '2', firstPosition: '0', nextPosition: '4' });
    vi.setSystemTime(new Date('2030-03-03T12:00:10.000Z'));
    // Cutoff 11:00:10: every operation of generation 1 is older, none of generation 2.
    const run = await s.streams.retentionRunner(policy({ maxAgeMs: HOUR }), silentLog).runOnce();
    expect(run).toEqual({ streams: 0, trimmed: 0 });
    expect(s.streams.get(w.alice, w.streamId)).toMatchObject({ generation: '2', firstPosition: '0', nextPosition: '4' });
    const g2 = await s.streams.read(w.bob, { streamId: w.streamId, generation: 2, fromPosition: 0, limit: 100, maxBytes: PAGE_BYTES });
    expect(g2.records.map((r) => r.position)).toEqual(['0', '1', '2', '3']);
  });
});
