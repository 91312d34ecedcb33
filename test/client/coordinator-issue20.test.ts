// The Coordinator's share of issue 20, each a finding that failed on 32fc3a5: a fresh Coordinator
// after a reset with unread messages stops with ContinuityBreakError (finding 2); present() never
// gets a receipt-only or fence-only batch, so two coordinators acknowledging each other write no
// receipts while nobody sends (finding 1); start() appends nothing (finding 5); stop() after a
// break releases the claim (finding 4); it rides through daemon SIGTERM/restarts while reading
// (finding 3).

import { describe, expect, it } from 'vitest';
import { ContinuityBreakError, type Coordinator, type PeerBatch } from '../../src/client/index.js';
import { RecordingAdapter, createChat, makeCoordinator, readStream, settledWithin, type TestChat } from '../helpers/client-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

const { daemon, admin, coordinators } = useClientDaemon({ reconnect: { minDelayMs: 50, maxDelayMs: 300 } });

async function adminReady(): Promise<void> {
  await waitFor(
    () =>
      admin()
        .rpc.daemon.status({})
        .then(
          () => true,
          () => false,
        ),
    'the admin client to reconnect',
    15_000,
    50,
  );
}

function started(c: Coordinator): Promise<Coordinator> {
  coordinators.push(c);
  return c.start().then(() => c);
}

const receiptsOf = async (streamId: string) =>
  (await readStream(admin(), streamId)).filter((r) => r.wrapper.type === 'chat.receipt').length;

describe('Coordinator (issue 20)', () => {
  it('a fresh Coordinator after a reset with unread messages stops with ContinuityBreakError (finding 2)', async () => {
    const chat = await createChat(admin());
    const alice = await started(makeCoordinator(daemon(), chat, chat.alice, { start: 'end' }));
    const bobSees = new RecordingAdapter();
    const bob = await started(makeCoordinator(daemon(), chat, chat.bob, { adapter: bobSees }));
    await alice.send('m1');
    await bob.ack(await waitFor(() => bobSees.batchWith('m1'), 'bob to be shown m1'));
    await bob.stop();
    await alice.send('m2'); // never shown to bob
    await alice.stop();
    await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'test reset' });

    const fresh = makeCoordinator(daemon(), chat, chat.bob, { adapter: new RecordingAdapter() });
    coordinators.push(fresh);
    const err = await fresh.start().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ContinuityBreakError);
    expect((err as ContinuityBreakError).data).toMatchObject({
      reason: 'GENERATION_CHANGED',
      streamId: chat.alice.streamId,
      expected: '1',
      actual: '2',
    });
    expect(fresh.state).toBe('needs-intervention');
    await expect(fresh.done).rejects.toBeInstanceOf(ContinuityBreakError);
  });

  it('present() gets only batches holding a message, and two coordinators acknowledging each other write no receipts while nobody sends (finding 1)', async () => {
    const chat = await createChat(admin());
    const shown: PeerBatch[][] = [[], []];
    const pair: Coordinator[] = [];
    // Each acknowledges every batch it is shown, as an agent following the docs would.
    for (const [i, who] of [chat.alice, chat.bob].entries()) {
      const c = makeCoordinator(daemon(), chat, who, {
        adapter: {
          present: (b) => {
            shown[i]!.push(b);
            void pair[i]!.ack(b).catch(() => undefined);
          },
        },
      });
      pair.push(c);
      await started(c);
    }
    await pair[0]!.send('hello bob');
    await pair[1]!.send('hello alice');
    await sleep(3000); // time is the subject: nobody sends for 3 s
    expect(shown.map((s) => s.length)).toEqual([1, 1]);
    for (const s of shown) for (const b of s) expect(b.messages.length).toBeGreaterThan(0);
    expect([await receiptsOf(chat.alice.streamId), await receiptsOf(chat.bob.streamId)]).toEqual([1, 1]);
  });

  it('start() appends nothing: the claim and its fence come with the first write (finding 5)', async () => {
    const chat = await createChat(admin());
    const bob = await started(makeCoordinator(daemon(), chat, chat.bob));
    await sleep(200); // time is the subject: nothing is appended after start() either
    expect(await readStream(admin(), chat.bob.streamId)).toEqual([]);
    expect(bob.epoch).toBe('');
    await bob.send('first write');
    expect((await readStream(admin(), chat.bob.streamId)).map((r) => r.wrapper.type)).toEqual(['chat.writer-fence', 'chat.message']);
  });

  it('stop() after a break releases the claim: the writer is inactive (finding 4)', async () => {
    const chat = await createChat(admin());
    const alice = await started(makeCoordinator(daemon(), chat, chat.alice, { start: 'end' }));
    const bob = await started(makeCoordinator(daemon(), chat, chat.bob, { start: 'end' }));
    await bob.send('bob holds his stream');
    await alice.send('something');
    await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'test reset' });
    await waitFor(() => bob.state === 'needs-intervention', 'bob to stop for the break');
    await bob.stop();
    expect((await admin().rpc.streams.get({ streamId: chat.bob.streamId })).writer.active).toBe(false);
    expect((await settledWithin(bob.done, 500)).status).toBe('rejected');
  });

  it('rides through 20 daemon SIGTERM restarts while reading: every message once, in order, never needs-intervention (finding 3)', async () => {
    const chat: TestChat = await createChat(admin());
    const alice = await started(makeCoordinator(daemon(), chat, chat.alice, { start: 'end' }));
    const bobSees = new RecordingAdapter();
    const bob = await started(makeCoordinator(daemon(), chat, chat.bob, { adapter: bobSees }));
    const states = new Set<string>();
    bob.on('state', (e) => states.add(e.state));
    for (let i = 0; i < 20; i++) {
      await waitFor(() => alice.state === 'running', `alice running again (round ${i})`, 15_000);
      await alice.send(`m${i}`);
      await daemon().restart(); // SIGTERM, then start again
      await adminReady();
    }
    await waitFor(() => alice.state === 'running', 'alice running again', 15_000);
    await alice.send('last');
    await waitFor(() => bobSees.contents.includes('last'), 'bob to be shown the last message', 20_000);
    expect(bobSees.contents).toEqual([...Array.from({ length: 20 }, (_, i) => `m${i}`), 'last']);
    expect(states.has('needs-intervention')).toBe(false);
    expect(bob.state).toBe('running');
  }, 120_000);
});
