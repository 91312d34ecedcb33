// Retention an operator sets once (issue 23, finding 4; docs/operations.md "Retention"): the
// daemon trims each stream to its policy by itself, only below what the peer acknowledged
// unless told to trim the unacknowledged too, never as a silent skip (PREFIX_UNAVAILABLE below
// the new start), and forgets the operation, operation-log and message-id entries of what it
// trimmed: operations.get answers `unknown` and a replayed append POSITION_MISMATCH (§6.7).
// A SIGKILL in the middle of a large trim leaves a store the doctor finds clean.

import { describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { testStoreIsPostgres } from '../helpers/test-store.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { waitFor } from '../helpers/wait.js';
import { claim, createPair, ok, type TestPair, type Wire } from '../helpers/wire-fixtures.js';

// daemon.check scans LevelDB; on PostgreSQL it answers UNSUPPORTED (docs/protocol.md) and the
// heads are checked against their records at start and on first use instead. So the full scan is
// asserted where it exists and the refusal where it does not; which operations a trim forgot is
// asserted through operations.get/operations.list, which both backends answer.
async function check(wire: Wire): Promise<{ problems: unknown[]; counts: { operations: number; records: number } } | null> {
  const res = await wire.call('daemon.check', { mark: false });
  if (testStoreIsPostgres()) {
    expect(res.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'UNSUPPORTED', outcome: 'not-written' });
    return null;
  }
  const out = ok(res) as { problems: unknown[]; counts: { operations: number; records: number } };
  expect(out.problems).toEqual([]);
  return out;
}

/** Appends `count` operations of `size` messages each from `from`; returns the operationIds by first position. */
async function appendMany(
  client: Wire,
  streamId: string,
  token: string,
  from: number,
  count: number,
  size = 1,
): Promise<Map<number, string>> {
  const ops = new Map<number, string>();
  let next = from;
  for (let i = 0; i < count; i++) {
    const operationId = `op-${next}`;
    const r = ok(
      await client.call('streams.append', {
        streamId,
        coordinatorToken: token,
        generation: '1',
        expectedPosition: String(next),
        operationId,
        records: Array.from({ length: size }, (_, k) => ({
          type: 'chat.message' as const,
          messageId: `m-${next + k}`,
          content: `m ${next + k}`,
        })),
      }),
    );
    ops.set(next, operationId);
    next = Number(r.nextPosition);
  }
  return ops;
}

/** b acknowledges a's stream up to `nextPosition` (read, then a receipt of that batch). */
async function acknowledge(pair: TestPair, bToken: string, bNext: number, nextPosition: number): Promise<void> {
  const read = ok(
    await pair.b.client.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: '0', limit: nextPosition }),
  );
  expect(read.nextPosition).toBe(String(nextPosition));
  ok(
    await pair.b.client.call('streams.append', {
      streamId: pair.streamB,
      coordinatorToken: bToken,
      generation: '1',
      expectedPosition: String(bNext),
      operationId: `ack-${nextPosition}`,
      records: [
        {
          type: 'chat.receipt',
          peerStreamId: pair.streamA,
          peerGeneration: '1',
          nextPosition: String(nextPosition),
          batchId: read.batchId,
        },
      ],
    }),
  );
}

const firstPosition = async (client: Wire, streamId: string) => Number(ok(await client.call('streams.get', { streamId })).firstPosition);

describe('retention policy: --retention-max-records, only what the peer acknowledged', () => {
  const { daemon, admin } = useDaemon({ extraArgs: ['--retention-max-records', '5', '--retention-interval-seconds', '1'] });

  it(
    'trims to the limit only below the acknowledgment; trimmed operations are forgotten and answered honestly',
    { timeout: 60_000 },
    async () => {
      const pair = await createPair(admin(), daemon().socketPath);
      const a = await claim(pair.a.client, pair.streamA);
      const b = await claim(pair.b.client, pair.streamB);
      const ops = await appendMany(pair.a.client, pair.streamA, a.coordinatorToken, Number(a.nextPosition), 20);
      const before = await check(admin());
      // Nothing acknowledged yet: two runs later the stream is whole.
      const runs = () =>
        daemon()
          .logs()
          .filter((l) => l.msg === 'retention: run').length;
      const seen = runs();
      await waitFor(() => runs() >= seen + 2, 'two retention runs');
      expect(await firstPosition(pair.a.client, pair.streamA)).toBe(0);

      await acknowledge(pair, b.coordinatorToken, Number(b.nextPosition), 15);
      await waitFor(
        async () => (await firstPosition(pair.a.client, pair.streamA)) === 15,
        'the trim to the acknowledgment (15, not 21 - 5)',
      );

      // Never a silent skip: below the retained start is PREFIX_UNAVAILABLE.
      const below = await pair.b.client.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: '3' });
      expect(below.error?.data).toMatchObject({ type: 'CONTINUITY_BREAK', reason: 'PREFIX_UNAVAILABLE' });

      // A trimmed operation: operations.get says unknown, a replay cannot commit it again.
      const trimmedOp = ops.get(3)!;
      await waitFor(
        async () => ok(await pair.a.client.call('operations.get', { streamId: pair.streamA, operationId: trimmedOp })).state === 'unknown',
        'the compaction of trimmed operations',
      );
      const replay = await pair.a.client.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: a.coordinatorToken,
        generation: '1',
        expectedPosition: '3',
        operationId: trimmedOp,
        records: [{ type: 'chat.message', messageId: 'm-3', content: 'm 3' }],
      });
      expect(replay.error?.data).toMatchObject({ type: 'POSITION_MISMATCH', nextPosition: '21' });
      // A retained operation is still answered.
      expect(ok(await pair.a.client.call('operations.get', { streamId: pair.streamA, operationId: ops.get(15)! })).state).toBe('committed');
      const listed = ok(await pair.a.client.call('operations.list', { streamId: pair.streamA }));
      expect(listed.operations.map((o) => o.operationId)).toEqual([...ops.entries()].filter(([p]) => p >= 15).map(([, id]) => id));

      const after = await check(admin());
      // 14 operations (positions 1..14) went; b's receipt added one.
      if (before && after) expect(before.counts.operations - after.counts.operations, 'the 14 operations below 15 are gone').toBe(13);
    },
  );
});

describe('retention policy: --retention-unacknowledged trim, --retention-max-age-seconds', () => {
  const { daemon, admin } = useDaemon({
    extraArgs: ['--retention-max-age-seconds', '2', '--retention-unacknowledged', 'trim', '--retention-interval-seconds', '1'],
  });

  it('trims what is older than the age, acknowledged or not', { timeout: 60_000 }, async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const a = await claim(pair.a.client, pair.streamA);
    await appendMany(pair.a.client, pair.streamA, a.coordinatorToken, Number(a.nextPosition), 4);
    // Time is the subject here: the records must grow older than 2 s.
    await waitFor(async () => (await firstPosition(pair.a.client, pair.streamA)) === 5, 'the age trim of all 5 records', 20_000, 200);
    const fresh = await appendMany(pair.a.client, pair.streamA, a.coordinatorToken, 5, 1);
    expect(await firstPosition(pair.a.client, pair.streamA), 'a fresh record stays').toBe(5);
    expect(ok(await pair.a.client.call('operations.get', { streamId: pair.streamA, operationId: fresh.get(5)! })).state).toBe('committed');
    await check(admin());
  });
});

describe('retention: a SIGKILL in the middle of a large trim', () => {
  const { daemon, admin, restart } = useDaemon({ extraArgs: ['--quota-append-records', '0', '--quota-append-bytes', '0'] });

  it('leaves a store the doctor finds clean, and the next run finishes the compaction', { timeout: 240_000 }, async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const a = await claim(pair.a.client, pair.streamA);
    await appendMany(pair.a.client, pair.streamA, a.coordinatorToken, Number(a.nextPosition), 200, 64);
    const total = 1 + 200 * 64;
    // Restart with a policy that trims all but one record, unacknowledged included, and kill it
    // as soon as the new start is committed (the deletes and the compaction are still running).
    const d = daemon();
    await d.stop();
    const withPolicy = await DaemonProcess.start({
      dir: d.dir,
      dataDir: d.dataDir,
      extraArgs: ['--retention-max-records', '1', '--retention-unacknowledged', 'trim'],
      process: true,
    });
    const watcher = await withPolicy.connectAs();
    await waitFor(
      async () => Number(ok(await watcher.call('streams.get', { streamId: pair.streamA })).firstPosition) > 0,
      'the trim to commit its new start',
      60_000,
      1,
    );
    await withPolicy.kill();
    watcher.close();

    // Without the policy: consistent, fail-closed below the start.
    await restart();
    await check(admin());
    const state = ok(await admin().call('streams.get', { streamId: pair.streamA }));
    expect(state.firstPosition).toBe(String(total - 1));
    await d.stop();

    // The policy again: whatever the kill left is compacted; still clean.
    const again = await DaemonProcess.start({
      dir: d.dir,
      dataDir: d.dataDir,
      extraArgs: ['--retention-max-records', '1', '--retention-unacknowledged', 'trim'],
    });
    const w2 = await again.connectAs();
    await waitFor(() => again.logs().some((l) => l.msg === 'retention: run'), 'a retention run');
    const final = await check(w2);
    if (final) {
      expect(final.counts.operations, 'only the last operation (cut in two) is left').toBe(1);
      expect(final.counts.records).toBeGreaterThanOrEqual(1);
    }
    w2.close();
    await again.stop();
    await restart();
  });
});
