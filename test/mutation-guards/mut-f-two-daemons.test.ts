// Kills mutants of src/daemon/streams/appender.ts's retry after a stale commit that no
// single-daemon test can reach (test/MUTATION.md, "mut (fifth round)"): on one daemon an append
// is decided and admitted in one turn, so its commit is never stale; with two daemons on one
// PostgreSQL database the other daemon can move the head between the decision and the commit,
// and the append is then decided again on the new head (appender.ts `append`, MAX_ATTEMPTS).
// What the retry must answer is the contract's answer for the new head (docs/protocol.md §6.6):
// an operationId already committed replays (duplicate: true), whichever daemon committed it.
// Two real yellod daemons on one database of the run's cluster (test/helpers/run-pg.ts).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { messages, StreamWriter } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { connectAs, createAgent, ok, uniq, type Wire } from '../helpers/wire-fixtures.js';

let cluster: FileDatabases;
let a: DaemonProcess;
let b: DaemonProcess;
let adminA: Wire;

describe.skipIf(!pgAvailable())('the retry of a stale append (two daemons, one PostgreSQL database)', () => {
  beforeAll(async () => {
    cluster = await FileDatabases.open();
    await cluster.createDatabase('retry');
    const store = ['--store', cluster.url('retry'), '--policy', 'open'];
    // One at a time: the second finds the schema migrated by the first.
    a = await DaemonProcess.start({ extraArgs: store });
    b = await DaemonProcess.start({ extraArgs: store });
    adminA = await a.connectAs();
  }, 90_000);

  afterAll(async () => {
    adminA.close();
    await a.cleanup();
    await b.cleanup();
    await cluster.stop();
  }, 60_000);

  it('the same append sent through both daemons at once commits once; the other answer is its replay (duplicate: true), not POSITION_MISMATCH', async () => {
    // Both daemons decide on the same head; the one that commits second finds the head moved
    // (stale) and decides again, where the operationId is now known: a replay. Answering the
    // stale commit with POSITION_MISMATCH at once (no retry) would tell a client that resent
    // through another daemon that its committed append failed.
    const alice = await createAgent(adminA, a.socketPath);
    const bob = await createAgent(adminA, a.socketPath);
    const opened = ok(await alice.client.call('chats.open', { peerAgentId: bob.id }), 'chats.open');
    const streamId = `${opened.chat.id}:${alice.id}`;
    const wa = await StreamWriter.claim(alice.client, streamId);
    // B must know alice and the chat's heads before it can take her append.
    const onB = await connectAs(b.socketPath, alice.token);
    try {
      await waitFor(async () => (await onB.call('streams.get', { streamId })).result?.nextPosition === wa.next, 'B sees the claim', 10_000);
      for (let round = 0; round < 3; round++) {
        const operationId = uniq(`op-both-${round}`);
        const params = {
          streamId,
          coordinatorToken: wa.token,
          generation: wa.generation,
          expectedPosition: wa.next,
          operationId,
          records: messages(operationId, 2),
        };
        const [ra, rb] = await Promise.all([alice.client.call('streams.append', params), onB.call('streams.append', params)]);
        const answers = [ok(ra, `round ${round} via A`), ok(rb, `round ${round} via B`)];
        expect(answers.map((r) => r.duplicate).sort(), `round ${round}`).toEqual([false, true]);
        const [first, second] = answers;
        expect({ ...second!, duplicate: false }).toEqual({ ...first!, duplicate: false });
        expect(first!.firstPosition).toBe(wa.next);
        wa.next = first!.nextPosition;
        expect(ok(await alice.client.call('streams.get', { streamId })).nextPosition).toBe(wa.next);
        // Both daemons' next round starts from the committed head.
        await waitFor(
          async () => (await onB.call('streams.get', { streamId })).result?.nextPosition === wa.next,
          'B sees the append',
          10_000,
        );
      }
    } finally {
      onB.close();
    }
  }, 60_000);
});
