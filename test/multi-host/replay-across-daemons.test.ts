// Permanent idempotency across daemons (issue 24, optimistic admission). On PostgreSQL an append
// is decided first without looking its operation id and message ids up (appender.ts
// `#optimistic`): the commit's unique keys refuse what is taken, and a refusal is decided again
// with the lookup, because a replay answers before every refusal but the author's (§6). These
// tests send through daemon B what was committed through daemon A, which B has never seen in
// memory, so only the database can answer: every answer must be what §6 says, and nothing may be
// written twice.

import type { AppendResult } from '../../src/shared/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, resolveStoreUrl } from '../../src/daemon/store/postgres/connection.js';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { PgCluster, pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { expectError, StreamWriter, messages } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { connectAs, createAgent, ok, uniq, type Wire } from '../helpers/wire-fixtures.js';

let cluster: PgCluster;
let a: DaemonProcess;
let b: DaemonProcess;
let adminA: Wire;
let adminB: Wire;
const wires: Wire[] = [];

/**
 * Races of the same operation through both daemons. Once in about 100 rounds, before a refusal
 * on the last attempt was confirmed by a last lookup (appender.ts `#unlessReplay`), one side
 * answered POSITION_MISMATCH instead of the replay; this test is not a reliable reproducer of it.
 */
const ROUNDS = 30;

const msg = (messageId: string, content: string) => ({ type: 'chat.message' as const, messageId, content });

describe.skipIf(!pgAvailable())('replays and duplicates decided by the database, through a daemon that never saw the first append', () => {
  beforeAll(async () => {
    cluster = await PgCluster.start();
    await cluster.psql('create database replay');
    const store = ['--store', cluster.url('replay'), '--policy', 'grants'];
    a = await DaemonProcess.start({ extraArgs: store });
    b = await DaemonProcess.start({ extraArgs: store });
    adminA = await a.connectAs();
    adminB = await b.connectAs();
  }, 90_000);

  afterAll(async () => {
    for (const w of wires) w.close();
    adminA.close();
    adminB.close();
    await a.cleanup();
    await b.cleanup();
    await cluster.stop();
  }, 60_000);

  /** alice's stream claimed through A, one append through A, and alice connected to B too. */
  async function setup(): Promise<{ agentId: string; streamId: string; wa: StreamWriter; onB: StreamWriter; first: AppendResult }> {
    const alice = await createAgent(adminA, a.socketPath);
    const bob = await createAgent(adminA, a.socketPath);
    wires.push(alice.client, bob.client);
    ok(await adminA.call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    ok(await adminA.call('agents.setPolicy', { agentId: alice.id, pii: 'off' }));
    const opened = ok(await alice.client.call('chats.open', { peerAgentId: bob.id }));
    const streamId = `${opened.chat.id}:${alice.id}`;
    const wa = await StreamWriter.claim(alice.client, streamId);
    const opB = await connectAs(b.socketPath, alice.token);
    wires.push(opB);
    const onB = new StreamWriter(opB, streamId, wa.token, wa.generation, wa.next);
    const first = ok(await wa.tryAppend([msg('m-first', 'hello')], 'op-first'));
    await waitFor(async () => ok(await opB.call('streams.get', { streamId })).nextPosition === wa.next, 'B hears the append');
    return { agentId: alice.id, streamId, wa, onB, first };
  }

  async function recordsOf(w: Wire, streamId: string): Promise<Array<{ position: string; operationId: string }>> {
    const r = ok(await w.call('streams.read', { streamId, generation: '1', fromPosition: '0', limit: 1000 }));
    return r.records.map((x: { position: string; wrapper: { operationId: string } }) => ({
      position: x.position,
      operationId: x.wrapper.operationId,
    }));
  }

  it('a replay at its old position (the head has moved since) answers the first result with duplicate:true', async () => {
    const { streamId, onB, first } = await setup();
    onB.next = first.firstPosition;
    const again = ok(await onB.tryAppend([msg('m-first', 'hello')], 'op-first'));
    expect(again).toEqual({ ...first, duplicate: true });
    expect((await recordsOf(onB.client, streamId)).filter((r) => r.operationId === 'op-first')).toHaveLength(1);
  });

  it('a replay with a token fenced since (a claim through B) still answers duplicate:true, not FENCED', async () => {
    const { onB, first, streamId } = await setup();
    const old = onB.token;
    await onB.reclaim();
    onB.token = old;
    onB.next = first.firstPosition;
    const again = ok(await onB.tryAppend([msg('m-first', 'hello')], 'op-first'));
    expect(again).toEqual({ ...first, duplicate: true });
    // And a new operation with that token is FENCED: the replay was not a free pass.
    onB.next = ok(await onB.client.call('streams.get', { streamId })).nextPosition;
    expectError(await onB.tryAppend([msg(uniq('m'), 'new')]), 'FENCED');
  });

  it('the same operation id with other content is OPERATION_CONFLICT, at its old position and at the current one', async () => {
    const { onB, first, wa } = await setup();
    onB.next = first.firstPosition;
    expectError(await onB.tryAppend([msg('m-first', 'changed')], 'op-first'), 'OPERATION_CONFLICT');
    onB.next = wa.next;
    expectError(await onB.tryAppend([msg('m-first', 'changed')], 'op-first'), 'OPERATION_CONFLICT');
  });

  it('a message id used through A, in a new operation at the current position through B, is DUPLICATE_MESSAGE with its position; nothing is written', async () => {
    const { onB, first, streamId, wa } = await setup();
    onB.next = wa.next;
    const dup = expectError(await onB.tryAppend([msg(uniq('m'), 'fresh'), msg('m-first', 'again')]), 'DUPLICATE_MESSAGE');
    expect(dup.position).toBe(first.firstPosition);
    expect(ok(await onB.client.call('streams.get', { streamId })).nextPosition).toBe(wa.next);
    // The ids of the refused request were not consumed: the fresh one is accepted now.
    ok(await onB.tryAppend([msg('m-next', 'next')]));
  });

  it('a duplicate message id answers before the PII policy (reject), through B', async () => {
    const { agentId, onB, first, wa } = await setup();
    ok(await adminB.call('agents.setPolicy', { agentId, pii: 'reject' }));
    onB.next = wa.next;
    const dup = expectError(await onB.tryAppend([msg('m-first', 'now with dave@example.com')]), 'DUPLICATE_MESSAGE');
    expect(dup.position).toBe(first.firstPosition);
    expectError(await onB.tryAppend([msg(uniq('m'), 'now with dave@example.com')]), 'POLICY_REJECTED');
  });

  it("an author resending old message ids looks up first: the first refusal aborts a group's transaction, the next ones are refused before admission", async () => {
    const { onB, first, wa } = await setup();
    const taken = () => cluster.serverLog.split('duplicate key value violates unique constraint').length - 1;
    const before = taken();
    for (let i = 0; i < 8; i++) {
      onB.next = wa.next;
      const dup = expectError(await onB.tryAppend([msg(uniq('m'), `fresh ${i}`), msg('m-first', 'again')]), 'DUPLICATE_MESSAGE');
      expect(dup.position).toBe(first.firstPosition);
    }
    await new Promise((r) => setTimeout(r, 200)); // the server's stderr, read by this process
    // Without the penalty every one of them is decided without the lookup and refused by the
    // unique key (16 lines); with it only the first, which the server logs twice: the group's
    // statement and its savepoint retry (stream-store.ts).
    expect(taken() - before).toBe(2);
    // The penalty is 16 appends from the first refusal, 7 of them spent on the other refused
    // ones: after 9 more, an append is decided without the lookup again.
    for (let i = 0; i < 9; i++) {
      onB.next = wa.next;
      wa.next = ok(await onB.tryAppend([msg(uniq('m'), `good ${i}`)])).nextPosition;
    }
    onB.next = wa.next;
    expectError(await onB.tryAppend([msg('m-first', 'once more')]), 'DUPLICATE_MESSAGE');
    await new Promise((r) => setTimeout(r, 200));
    expect(taken() - before).toBe(4);
  });

  it("another agent sending the author's operation is PERMISSION_DENIED, never its replay", async () => {
    const { streamId, first } = await setup();
    const mallory = await createAgent(adminB, b.socketPath);
    wires.push(mallory.client);
    const r = await mallory.client.call('streams.append', {
      streamId,
      coordinatorToken: 'x',
      generation: '1',
      expectedPosition: first.firstPosition,
      operationId: 'op-first',
      records: [msg('m-first', 'hello')],
    });
    expectError(r, 'PERMISSION_DENIED');
  });

  it('the same new operation sent through A and B at once is written once; both answer it, one as a duplicate', async () => {
    const { streamId, wa, onB } = await setup();
    for (let round = 0; round < ROUNDS; round++) {
      onB.next = wa.next;
      const opId = uniq('op-race');
      const records = [msg(uniq('m-race'), `race ${round}`)];
      const [ra, rb] = await Promise.all([wa.tryAppend(records, opId), onB.tryAppend(records, opId)]);
      const x = ok(ra);
      const y = ok(rb);
      expect([x.duplicate, y.duplicate].sort()).toEqual([false, true]);
      expect({ ...x, duplicate: null }).toEqual({ ...y, duplicate: null });
    }
    const recs = await recordsOf(wa.client, streamId);
    expect(recs.map((r) => Number(r.position))).toEqual(recs.map((_, i) => i));
    expect(recs.filter((r) => r.operationId.startsWith('op-race'))).toHaveLength(ROUNDS);
  });
  // Last: it leaves daemon B read-only until it recovers by itself.
  it('a commit cut off under an optimistic append is an unknown outcome (WRITE_FAILED), never decided again as "not written"; operations.get settles it', async () => {
    const { streamId, onB, wa } = await setup();
    const holder = openPool(resolveStoreUrl(cluster.url('replay')), { max: 2 });
    try {
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const locking = holder.begin(async (tx) => {
        await tx`lock table heads in exclusive mode`;
        locked();
        await released;
      });
      await isLocked;
      onB.next = wa.next;
      const opId = uniq('op-cut');
      const answer = onB.tryAppend([msg(uniq('m'), 'cut off')], opId);
      // B's commit waits on the lock: cut its session off.
      await waitFor(
        async () =>
          (
            await holder<{ n: number }[]>`
              select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
              where wait_event_type = 'Lock' and datname = 'replay' and pid <> pg_backend_pid()`
          )[0]!.n > 0,
        "B's commit waiting on the lock",
      );
      const data = expectError(await answer, 'STORAGE_FAILURE');
      expect(data).toMatchObject({ reason: 'WRITE_FAILED', outcome: 'unknown', operationId: opId });
      release();
      await locking;
      // B leaves read-only by itself; the operation was not written (its session was cut off
      // before COMMIT), and sent again it is written once.
      const settled = await waitFor(async () => {
        const r = await onB.client.call('operations.get', { streamId, operationId: opId });
        return r.result && r.result.state !== 'pending' ? r.result : undefined;
      }, 'operations.get settles');
      expect(settled.state).toBe('unknown');
      const again = await waitFor(async () => {
        onB.next = wa.next;
        const r = await onB.tryAppend([msg(uniq('m'), 'cut off')], opId);
        return r.result;
      }, 'B accepts the append again');
      expect(again.duplicate).toBe(false);
    } finally {
      await holder.end({ timeout: 1 });
    }
  });
});

// Pins behaviour of src/daemon/streams/appender.ts's retry after a stale commit that no
// single-daemon test can reach: on one daemon an append is decided and admitted in one turn, so its
// commit is never stale; with two daemons on one PostgreSQL database the other daemon can move the
// head between the decision and the commit, and the append is then decided again on the new head
// (appender.ts `append`, MAX_ATTEMPTS). What the retry must answer is the contract's answer for the
// new head (docs/protocol.md §6.6): an operationId already committed replays (duplicate: true),
// whichever daemon committed it. Two real yellod on a database of the run's cluster
// (test/helpers/run-pg.ts).
describe('an append decided again after a stale commit', () => {
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
        await waitFor(
          async () => (await onB.call('streams.get', { streamId })).result?.nextPosition === wa.next,
          'B sees the claim',
          10_000,
        );
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
});
