// A daemon that has not heard another daemon's commit yet (issue 24): its cached head is old,
// and the database decides. Two real yellod processes on one PostgreSQL database; A's LISTEN
// session is frozen (SIGSTOP of its server process: the notices queue up in the server, the
// connection stays open, A hears nothing) so that A answers from a head B has moved, every time,
// not only when the notice happens to be late. What A answers must be what the contract says for
// the head as it is in the database: a token fenced by a claim through B is FENCED with the
// current epoch (never POSITION_MISMATCH), a position another daemon moved is POSITION_MISMATCH
// with the real next position.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { expectError, messages, receipt, StreamWriter } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { connectAs, createAgent, ok, type TestAgent, type Wire } from '../helpers/wire-fixtures.js';

let cluster: FileDatabases;
let a: DaemonProcess;
let b: DaemonProcess;
let adminA: Wire;
let adminB: Wire;

/** The server pid of a daemon's LISTEN session (its last statement was a LISTEN). */
async function listenPid(app: string): Promise<number> {
  const pid = await waitFor(
    async () => {
      const out = await cluster.psql(
        `select pid from pg_stat_activity where datname = current_database() and application_name = '${app}' and query ilike 'listen %' order by backend_start desc limit 1`,
        'multi',
      );
      return out === '' ? undefined : Number(out);
    },
    `the LISTEN session of ${app}`,
    10_000,
  );
  return pid;
}

/** Run `fn` while daemon `app`'s LISTEN session is stopped (SIGSTOP): it hears no notice meanwhile. */
async function deaf<T>(app: string, fn: () => Promise<T>): Promise<T> {
  const pid = await listenPid(app);
  process.kill(pid, 'SIGSTOP');
  try {
    return await fn();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}

describe.skipIf(!pgAvailable())('a daemon that has not heard the other daemon yet answers from the database', () => {
  beforeAll(async () => {
    cluster = await FileDatabases.open();
    await cluster.createDatabase('multi');
    const store = (app: string) => ['--store', `${cluster.url('multi')}&application_name=${app}`, '--policy', 'grants'];
    a = await DaemonProcess.start({ extraArgs: store('yellod-a') });
    b = await DaemonProcess.start({ extraArgs: store('yellod-b') });
    adminA = await a.connectAs();
    adminB = await b.connectAs();
  }, 90_000);

  afterAll(async () => {
    adminA.close();
    adminB.close();
    await a.cleanup();
    await b.cleanup();
    await cluster.stop();
  }, 60_000);

  /** alice (registered on A) and bob (on B), granted both ways, their chat; alice's stream. */
  async function chat(): Promise<{ alice: TestAgent; bob: TestAgent; streamA: string }> {
    const alice = await createAgent(adminA, a.socketPath);
    const bob = await createAgent(adminB, b.socketPath);
    await waitFor(async () => (await adminA.call('agents.get', { agentId: bob.id })).result !== undefined, 'A knows bob');
    await waitFor(async () => (await adminB.call('agents.get', { agentId: alice.id })).result !== undefined, 'B knows alice');
    ok(await adminA.call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    ok(await adminB.call('grants.add', { agentId: bob.id, peerAgentId: alice.id }));
    ok(await adminA.call('agents.setPolicy', { agentId: alice.id, pii: 'off' }));
    const opened = await waitFor(async () => (await alice.client.call('chats.open', { peerAgentId: bob.id })).result, 'alice opens');
    // B must know the chat's heads before alice claims through it.
    await waitFor(async () => (await bob.client.call('chats.open', { peerAgentId: alice.id })).result, 'bob opens on B');
    return { alice, bob, streamA: `${opened.chat.id}:${alice.id}` };
  }

  /** A stream claimed through A, one append through A, and alice connected to B too. */
  async function claimedThroughA(): Promise<{ alice: TestAgent; streamA: string; wa: StreamWriter; onB: Wire }> {
    const { alice, streamA } = await chat();
    const wa = await StreamWriter.claim(alice.client, streamA);
    await wa.send('first', 1);
    const onB = await connectAs(b.socketPath, alice.token);
    // B has heard A's append (else B's own claim would be decided on an old head and retried).
    await waitFor(async () => ok(await onB.call('streams.get', { streamId: streamA })).nextPosition === wa.next, 'B sees the append');
    return { alice, streamA, wa, onB };
  }

  it('an append with a token fenced by a claim through B is FENCED on A with the current epoch, every time', async () => {
    const rounds = 8;
    const answers: string[] = [];
    for (let i = 0; i < rounds; i++) {
      const { streamA, wa, onB } = await claimedThroughA();
      try {
        await deaf('yellod-a', async () => {
          const taken = ok(await onB.call('streams.claim', { streamId: streamA, replace: true }));
          // Immediately, with the old token, at the position A still believes in.
          const r = await wa.tryAppend(messages(`stale-${i}`, 1));
          answers.push(r.error?.data?.type ?? 'written');
          const e = expectError(r, 'FENCED', `round ${i}`);
          expect(e.epoch).toBe(taken.epoch);
          // Nothing of it was written: the stream ends with B's fence.
          expect(ok(await onB.call('streams.get', { streamId: streamA })).nextPosition).toBe(taken.nextPosition);
          // And again, now that A refreshed its head from the refusal.
          expect(expectError(await wa.tryAppend(messages(`stale-again-${i}`, 1)), 'FENCED').epoch).toBe(taken.epoch);
        });
      } finally {
        onB.close();
      }
    }
    expect(answers).toEqual(Array.from({ length: rounds }, () => 'FENCED'));
  });

  it('pipelined appends with a token fenced through B are all FENCED on A, whatever A has in flight', async () => {
    const rounds = 12;
    const answers: string[] = [];
    for (let i = 0; i < rounds; i++) {
      const { streamA, wa, onB } = await claimedThroughA();
      try {
        await deaf('yellod-a', async () => {
          const taken = ok(await onB.call('streams.claim', { streamId: streamA, replace: true }));
          // A coordinator that pipelines: the second append is sent before the first is answered,
          // at the position after it; a few rounds let the second reach A while the first commits.
          const at = (k: number) => ({
            streamId: streamA,
            coordinatorToken: wa.token,
            generation: wa.generation,
            expectedPosition: String(BigInt(wa.next) + BigInt(k)),
            operationId: `pipe-${i}-${k}`,
            records: messages(`pipe-${i}-${k}`, 1),
          });
          const first = wa.client.call('streams.append', at(0));
          if (i % 3 > 0) await new Promise((r) => setTimeout(r, i % 3 === 1 ? 0 : 2));
          const second = wa.client.call('streams.append', at(1));
          for (const [k, r] of (await Promise.all([first, second])).entries()) {
            answers.push(r.error?.data?.type ?? 'written');
            expect(expectError(r, 'FENCED', `round ${i} append ${k}`).epoch).toBe(taken.epoch);
          }
        });
      } finally {
        onB.close();
      }
    }
    expect(answers).toEqual(Array.from({ length: rounds * 2 }, () => 'FENCED'));
  });

  it('a release with a token fenced through B is FENCED on A, and the writer B claimed stays active', async () => {
    const { streamA, wa, onB } = await claimedThroughA();
    try {
      await deaf('yellod-a', async () => {
        const taken = ok(await onB.call('streams.claim', { streamId: streamA, replace: true }));
        const r = await wa.client.call('streams.release', { streamId: streamA, coordinatorToken: wa.token });
        expect(expectError(r, 'FENCED').epoch).toBe(taken.epoch);
        const state = ok(await onB.call('streams.get', { streamId: streamA }));
        expect(state.writer.active).toBe(true);
        expect(state.writer.epoch).toBe(taken.epoch);
      });
    } finally {
      onB.close();
    }
  });

  it('an append at a position another daemon moved is POSITION_MISMATCH on A with the real next position', async () => {
    const { alice, streamA, wa, onB } = await claimedThroughA();
    try {
      await deaf('yellod-a', async () => {
        // The same coordinator token through B: the position moves, the epoch does not.
        const viaB = new StreamWriter(onB, streamA, wa.token, wa.generation, wa.next);
        const moved = await viaB.send('via-b', 2);
        const e = expectError(await wa.tryAppend(messages('late', 1)), 'POSITION_MISMATCH');
        expect(e.nextPosition).toBe(moved.nextPosition);
        expect(e.generation).toBe('1');
        // Decided on the real head, the next append through A goes through at once.
        wa.next = moved.nextPosition;
        await wa.send('after', 1);
      });
      expect(ok(await alice.client.call('streams.get', { streamId: streamA })).nextPosition).toBe(wa.next);
    } finally {
      onB.close();
    }
  });

  it('what B made current works through A at once: its new token, its position, its release', async () => {
    const { streamA, wa, onB } = await claimedThroughA();
    try {
      await deaf('yellod-a', async () => {
        // A coordinator that claimed through B and then writes through A (it moved hosts).
        const taken = ok(await onB.call('streams.claim', { streamId: streamA, replace: true }));
        const viaB = new StreamWriter(onB, streamA, taken.coordinatorToken, taken.generation, taken.nextPosition);
        const moved = await viaB.send('via-b', 2);
        const throughA = new StreamWriter(wa.client, streamA, viaB.token, viaB.generation, moved.nextPosition);
        const written = await throughA.send('through-a', 1);
        expect(written.firstPosition).toBe(moved.nextPosition);
        // Released through B: a claim through A needs no replace.
        ok(await onB.call('streams.release', { streamId: streamA, coordinatorToken: viaB.token }), 'release through B');
        const again = ok(await wa.client.call('streams.claim', { streamId: streamA }), 'claim through A after the release through B');
        expect(BigInt(again.epoch)).toBe(BigInt(taken.epoch) + 1n);
      });
    } finally {
      onB.close();
    }
  });

  it('a trim through A up to a head B moved is done, and a reset through A after a claim through B seals the real head', async () => {
    const { alice, streamA, wa, onB } = await claimedThroughA();
    try {
      await deaf('yellod-a', async () => {
        const viaB = new StreamWriter(onB, streamA, wa.token, wa.generation, wa.next);
        const moved = await viaB.send('via-b', 3);
        // A cached nextPosition wa.next; the database has moved.nextPosition: a trim up to there is valid.
        const trimmed = ok(
          await adminA.call('streams.trim', { streamId: streamA, beforePosition: moved.nextPosition, force: true }),
          'trim through A up to the head B wrote',
        );
        expect(trimmed.firstPosition).toBe(moved.nextPosition);
        const taken = ok(await onB.call('streams.claim', { streamId: streamA, replace: true }));
        const reset = ok(await adminA.call('streams.reset', { streamId: streamA, reason: 'test' }), 'reset through A');
        expect(reset.generation).toBe('2');
        expect(BigInt(reset.writer.epoch)).toBe(BigInt(taken.epoch) + 1n);
        // The sealed generation ends after B's fence, not where A's cached head ended.
        const sealed = ok(
          await alice.client.call('streams.read', { streamId: streamA, generation: '1', fromPosition: moved.nextPosition }),
        );
        expect(sealed.nextPosition).toBe(taken.nextPosition);
        // And the old token is FENCED through A with the reset's epoch.
        expect(expectError(await wa.tryAppend(messages('after-reset', 1)), 'FENCED').epoch).toBe(reset.writer.epoch);
      });
    } finally {
      onB.close();
    }
  });

  it('a receipt for a peer generation begun through B (a reset A has not heard) is accepted through A', async () => {
    const { alice, bob, streamA } = await chat();
    const streamB = `${streamA.split(':')[0]}:${bob.id}`;
    const wb = await StreamWriter.claim(bob.client, streamB);
    await wb.send('before-reset', 1);
    const wa = await StreamWriter.claim(alice.client, streamA);
    const onB = await connectAs(b.socketPath, alice.token);
    // A has heard bob's append: its cached head of bob's stream is generation 1, position 2.
    await waitFor(async () => ok(await adminA.call('streams.get', { streamId: streamB })).nextPosition === wb.next, 'A sees bob');
    try {
      await deaf('yellod-a', async () => {
        const reset = ok(await adminB.call('streams.reset', { streamId: streamB, reason: 'test' }), 'reset through B');
        expect(reset.generation).toBe('2');
        const wb2 = await StreamWriter.claim(bob.client, streamB);
        await wb2.send('after-reset', 1);
        // alice reads generation 2 through B, and acknowledges it through A, which still has generation 1.
        const batch = ok(await onB.call('streams.read', { streamId: streamB, generation: '2', fromPosition: '0' }), 'read on B');
        expect(batch.nextPosition).toBe(wb2.next);
        const r = await wa.tryAppend([receipt(streamB, '2', batch.nextPosition, batch.batchId)]);
        expect(r.error?.data, 'the receipt through A').toBeUndefined();
        // And B shows the acknowledgement of generation 2, once it has heard A's commit (a
        // notice: B may answer before it arrives, as 'B sees the append' above waits for).
        const seen = await waitFor(async () => {
          const head = ok(await onB.call('streams.get', { streamId: streamB }));
          return head.acknowledged !== null ? head : undefined;
        }, "B hears the receipt's commit through A");
        expect(seen.acknowledged).toEqual({ generation: '2', nextPosition: batch.nextPosition });
      });
    } finally {
      onB.close();
    }
  });
});
