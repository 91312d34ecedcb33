// A trim interrupted between its commit and its sweep, on PostgreSQL (test/MUTATION.md,
// sixteenth round: retention-policy.ts 104, killed on LevelDB only). The trim's commit deletes
// the records below the new start, but the operations and message ids below it go in
// `sweepTrimmed`, a transaction after it: a daemon killed between the two leaves
// `operations.get` answering `committed` for an operation whose records are all gone (§6.7 says
// `unknown`), and it is the retention policy's next run that compacts them. On LevelDB
// retention-policy.test.ts kills a daemon inside that window (its chunked deletes take seconds)
// and checks with `daemon.check`, which PostgreSQL does not answer; here the window is
// milliseconds, so the sweep is made to fail as a kill would cut it, in-process.

import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { silentLog } from '../helpers/in-process-store.js';
import { useTwoDaemons, type InProcessDaemon } from '../helpers/in-process-pg-daemons.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';

describe.skipIf(!pgAvailable())('a trim cut off between its commit and its sweep, on PostgreSQL', () => {
  const pg = useTwoDaemons('compaction');
  let a: InProcessDaemon;
  beforeAll(() => {
    a = pg.a();
  });

  it("leaves trimmed operations behind, and the retention policy's next run forgets them", async () => {
    const tag = randomBytes(3).toString('hex');
    const ca = await a.directory.createAgent(`alice${tag}`, 'Alice', undefined);
    const cb = await a.directory.createAgent(`bob${tag}`, 'Bob', undefined);
    await a.directory.setPolicy(ca.agent.id, 'off');
    const alice = a.directory.authenticate(ca.token)!;
    const { chat } = await a.directory.openChat(alice, ca.agent.id, cb.agent.id);
    const streamId = `${chat.id}:${ca.agent.id}`;
    const { coordinatorToken } = await a.streams.claim(alice, { streamId, replace: false });
    for (let i = 0; i < 6; i++) {
      const head = a.streams.get(alice, streamId);
      await a.streams.append(alice, {
        streamId,
        coordinatorToken,
        generation: Number(head.generation),
        expectedPosition: Number(head.nextPosition),
        operationId: `op-${i}`,
        records: [{ type: 'chat.message', messageId: `m-${i}`, content: `m ${i}` }],
      });
    }
    const state = async (operationId: string) => (await a.streams.operation(alice, streamId, operationId)).state;
    const first = (await a.streams.operation(alice, streamId, 'op-1')).firstPosition;

    // The trim commits its new start (past op-0 .. op-3); the sweep after it is cut off.
    const sweep = a.port.streams.sweepTrimmed.bind(a.port.streams);
    a.port.streams.sweepTrimmed = () => Promise.reject(new Error('the daemon was killed here'));
    const cutAt = Number(first) + 3;
    try {
      await expect(a.streams.trim(streamId, cutAt, true)).rejects.toThrow('the daemon was killed here');
    } finally {
      a.port.streams.sweepTrimmed = sweep;
    }
    expect(a.streams.get(alice, streamId).firstPosition).toBe(String(cutAt));
    expect(await state('op-1')).toBe('committed');

    // A policy whose target is the start already: nothing more to trim, what was left is compacted.
    const runner = a.streams.retentionRunner({ maxRecords: 2, maxAgeMs: null, force: true, intervalMs: 3_600_000 }, silentLog);
    expect(await runner.runOnce()).toMatchObject({ trimmed: 0 });
    await runner.stop();
    for (const op of ['op-0', 'op-1', 'op-2', 'op-3']) expect(await state(op), op).toBe('unknown');
    expect(await state('op-4')).toBe('committed');
  });
});
