// Coordinator (docs/protocol.md §8) against the real daemon, without crashes: receipts only on an
// explicit ack, reply+receipt as one operation, sends that never acknowledge, fencing by a
// replacing coordinator, observable states, and continuity breaks that stop it for a human.

import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ContinuityBreakError,
  Coordinator,
  FencedError,
  MemoryCursorStore,
  WriterActiveError,
  YelloClientError,
  type ChatBatchNotification,
  type PeerBatch,
} from '../../src/client/index.js';
import {
  RecordingAdapter,
  connectAgent,
  createChat,
  makeCoordinator,
  messageContents,
  readStream,
  rejectionOf,
  settledWithin,
  watchStates,
  type TestChat,
  tapCoordinators,
} from '../helpers/client-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

const { daemon, admin, coordinators, clients } = useClientDaemon();

afterEach(() => {
  vi.restoreAllMocks();
});

/** A started coordinator pair (alice and bob) in a fresh chat. */
async function startPair(): Promise<{
  chat: TestChat;
  alice: Coordinator;
  bob: Coordinator;
  aliceSees: RecordingAdapter;
  bobSees: RecordingAdapter;
  bobStore: MemoryCursorStore;
}> {
  const chat = await createChat(admin());
  const aliceSees = new RecordingAdapter();
  const bobSees = new RecordingAdapter();
  const bobStore = new MemoryCursorStore();
  // These tests count presentations from the start on: begin at the ends, not at the backlog
  // of unacknowledged records (the peer's claim fence) a first run is shown by default.
  const alice = makeCoordinator(daemon(), chat, chat.alice, { adapter: aliceSees, start: 'end' });
  const bob = makeCoordinator(daemon(), chat, chat.bob, { adapter: bobSees, cursorStore: bobStore, start: 'end' });
  coordinators.push(alice, bob);
  await alice.start();
  await bob.start();
  return { chat, alice, bob, aliceSees, bobSees, bobStore };
}

async function acknowledgedOf(streamId: string) {
  return (await admin().rpc.streams.get({ streamId })).acknowledged;
}

describe('Coordinator: receipts', () => {
  it('appends a receipt only when the adapter acknowledges the batch with ack(batch)', async () => {
    const { chat, alice, bob, bobSees } = await startPair();
    expect(bob.streamId).toBe(chat.bob.streamId);
    expect(bob.peerStreamId).toBe(chat.alice.streamId);
    expect(bob.agentId).toBe(chat.bob.id);
    const presented: PeerBatch[] = [];
    bob.on('presented', (b) => presented.push(b));

    await alice.send('first question');
    const batch = await waitFor(() => bobSees.batchWith('first question'), 'bob to be shown the question');
    expect(batch.streamId).toBe(chat.alice.streamId);
    await waitFor(() => presented.length === 1, 'the presented event');
    expect(presented[0]).toBe(batch);

    // Presented, then some time, then a history read: still nothing acknowledged.
    await sleep(300); // no receipt may appear within 300 ms of the presentation
    const bobClient = await connectAgent(daemon(), chat.bob);
    clients.push(bobClient);
    const history = await bobClient.rpc.chats.history({ chatId: chat.chatId });
    expect(messageContents(history.entries)).toEqual(['first question']);
    expect(await acknowledgedOf(chat.alice.streamId)).toBeNull();

    const res = await bob.ack(batch);
    expect(res.records).toHaveLength(1);
    expect(res.records[0]!.wrapper).toMatchObject({
      type: 'chat.receipt',
      receipt: {
        peerStreamId: chat.alice.streamId,
        peerGeneration: batch.generation,
        nextPosition: batch.nextPosition,
        batchId: batch.batchId,
      },
    });
    expect(await acknowledgedOf(chat.alice.streamId)).toEqual({ generation: '1', nextPosition: batch.nextPosition });
    // bob's own stream is untouched by his receipt.
    expect(await acknowledgedOf(chat.bob.streamId)).toBeNull();
  });

  it('reply(text, {ack}) appends the message and the receipt in one operation at consecutive positions', async () => {
    const { chat, alice, bob, bobSees, aliceSees } = await startPair();
    await alice.send('what time is it?');
    const batch = await waitFor(() => bobSees.batchWith('what time is it?'), 'bob to be shown the question');
    const head = (await admin().rpc.streams.get({ streamId: chat.bob.streamId })).nextPosition;

    const res = await bob.reply('noon', { ack: batch, messageId: 'reply-1' });
    // bob's first write: its claim's fence goes first, the reply right after it.
    const before = (BigInt(head) + 1n).toString();
    expect(res.firstPosition).toBe(before);
    expect(BigInt(res.nextPosition) - BigInt(res.firstPosition)).toBe(2n);

    const stored = (await readStream(admin(), chat.bob.streamId)).filter((r) => BigInt(r.position) >= BigInt(before));
    expect(stored.map((r) => r.position)).toEqual([before, (BigInt(before) + 1n).toString()]);
    expect(stored.map((r) => r.wrapper.type)).toEqual(['chat.message', 'chat.receipt']);
    expect(stored.map((r) => r.wrapper.operationId)).toEqual([res.operationId, res.operationId]);
    expect(stored.map((r) => r.wrapper.recordIndex)).toEqual([0, 1]);
    expect(messageContents(stored)).toEqual(['noon']);
    expect(await acknowledgedOf(chat.alice.streamId)).toEqual({ generation: '1', nextPosition: batch.nextPosition });

    const op = await admin().rpc.operations.get({ streamId: chat.bob.streamId, operationId: res.operationId });
    expect(op).toMatchObject({ state: 'committed', firstPosition: res.firstPosition, nextPosition: res.nextPosition });

    // alice is shown the reply and its receipt together, as they were committed.
    const shown = await waitFor(() => aliceSees.batchWith('noon'), 'alice to be shown the reply');
    expect(shown.records.map((r) => r.wrapper.type)).toEqual(['chat.message', 'chat.receipt']);
  });

  it('send() never acknowledges, even right after a presentation', async () => {
    const { chat, alice, bob, bobSees } = await startPair();
    await alice.send('one');
    const first = await waitFor(() => bobSees.batchWith('one'), 'bob to be shown "one"');
    await bob.ack(first);
    await alice.send('two');
    await waitFor(() => bobSees.batchWith('two'), 'bob to be shown "two"');

    const res = await bob.send('something unrelated');
    expect(res.records.map((r) => r.wrapper.type)).toEqual(['chat.message']);
    await sleep(200); // no receipt may appear within 200 ms of the send
    expect(await acknowledgedOf(chat.alice.streamId)).toEqual({ generation: '1', nextPosition: first.nextPosition });
    const receipts = (await readStream(admin(), chat.bob.streamId)).filter((r) => r.wrapper.type === 'chat.receipt');
    expect(receipts).toHaveLength(1);
  });
});

describe('Coordinator: ownership', () => {
  it('a second coordinator for the same agent starts (reading claims nothing) but cannot write while the first is connected: WriterActiveError', async () => {
    const { chat, bob } = await startPair();
    await bob.send('claims the stream');
    const second = makeCoordinator(daemon(), chat, chat.bob);
    coordinators.push(second);
    await second.start();
    const err = await rejectionOf(second.send('me too'));
    expect(err).toBeInstanceOf(WriterActiveError);
    expect(second.epoch).toBe('');
    // The first one is unaffected.
    expect(bob.state).toBe('running');
    await expect(bob.send('still mine')).resolves.toMatchObject({ duplicate: false });
  });

  it('with replace: true, a second coordinator fences the first on its first write: state fenced, done and send() reject with FencedError', async () => {
    const { chat, bob } = await startPair();
    await bob.send('claims the stream');
    const firstStates = watchStates(bob);
    const firstEpoch = bob.epoch;

    const second = makeCoordinator(daemon(), chat, chat.bob, { replace: true, reason: 'takeover test' });
    coordinators.push(second);
    await second.start();
    const res = await second.send('new owner');
    expect(BigInt(second.epoch)).toBeGreaterThan(BigInt(firstEpoch));

    await waitFor(() => bob.state === 'fenced', 'the first coordinator to be fenced', 5_000);
    expect(firstStates.transitions).toEqual(['running>fenced']);
    expect(firstStates.errors[0]).toBeInstanceOf(FencedError);
    const done = await settledWithin(bob.done, 1_000);
    expect(done.status).toBe('rejected');
    expect((done as { reason: unknown }).reason).toBeInstanceOf(FencedError);
    await expect(bob.send('too late')).rejects.toBeInstanceOf(FencedError);

    // The new owner wrote right after its fence; the stale send wrote nothing.
    const records = await readStream(admin(), chat.bob.streamId);
    const fence = records.findLast((r) => r.wrapper.type === 'chat.writer-fence')!;
    expect(fence.wrapper).toMatchObject({ fence: { epoch: second.epoch, replaced: true, reason: 'takeover test' } });
    expect(res.firstPosition).toBe((BigInt(fence.position) + 1n).toString());
    expect(messageContents(records)).toEqual(['claims the stream', 'new owner']);
  });
});

describe('Coordinator: claim() before any write', () => {
  it('claims at once (one fence, the connection attached); an append under its token by another connection adds no fence; a later claim by anyone else stops it', async () => {
    const { chat, alice, bob, bobSees } = await startPair();
    const before = await admin().rpc.streams.get({ streamId: chat.bob.streamId });
    const { epoch, coordinatorToken } = await bob.claim();
    expect(bob.epoch).toBe(epoch);
    expect(BigInt(epoch)).toBe(BigInt(before.writer.epoch) + 1n);
    // Held by a live connection: a takeover 'if-abandoned' is refused.
    expect((await admin().rpc.streams.get({ streamId: chat.bob.streamId })).writer).toMatchObject({ active: true, connected: true });
    const other = makeCoordinator(daemon(), chat, chat.bob);
    coordinators.push(other);
    await other.start();
    await expect(other.send('not while bob holds it')).rejects.toBeInstanceOf(WriterActiveError);
    // Claiming again returns the same claim.
    expect(await bob.claim()).toEqual({ epoch, coordinatorToken });

    // Another process appends under the handed-over token: no fence, bob still presents.
    const helper = await connectAgent(daemon(), chat.bob);
    clients.push(helper);
    const head = await helper.rpc.streams.get({ streamId: chat.bob.streamId });
    await helper.rpc.streams.append({
      streamId: chat.bob.streamId,
      coordinatorToken,
      generation: head.generation,
      expectedPosition: head.nextPosition,
      operationId: 'op-handed-over',
      records: [{ type: 'chat.message', messageId: 'm-handed-over', content: 'from the pane' }],
    });
    await alice.send('Q1');
    await waitFor(() => bobSees.contents.includes('Q1'), 'bob to be shown Q1');
    expect(bob.state).toBe('running');

    const successor = makeCoordinator(daemon(), chat, chat.bob, { replace: true });
    coordinators.push(successor);
    await successor.start();
    await successor.send('taking over');
    await waitFor(() => bob.state === 'fenced', 'the claimed coordinator to see the replacement', 5_000);
    await alice.send('Q2');
    await sleep(200);
    expect(bobSees.contents).toEqual(['Q1']);
    await expect(bob.claim()).rejects.toBeInstanceOf(FencedError);
  });
});

describe('Coordinator: replaced while presenting', () => {
  it('a replaced coordinator presents nothing more, not even batches it had already received', async () => {
    const tap = tapCoordinators();
    const { chat, alice, bob, bobSees } = await startPair();
    await bob.send('claims the stream');
    let release: (() => void) | null = null;
    bobSees.hold = (batch) => (messageContents(batch.records).includes('P1') ? new Promise<void>((r) => (release = r)) : undefined);
    await alice.send('P1');
    await waitFor(() => release, 'bob to be presenting P1');
    await alice.send('P2');
    await waitFor(
      () => tap.received('P2', { token: chat.bob.token, streamId: chat.alice.streamId }),
      "P2 to be queued in bob's coordinator",
    );

    const successorSees = new RecordingAdapter();
    const successor = makeCoordinator(daemon(), chat, chat.bob, { replace: true, adapter: successorSees });
    coordinators.push(successor);
    await successor.start();
    await successor.send('taking over');
    await waitFor(() => bob.state === 'fenced', 'the replaced coordinator to stop', 5_000);
    release!();
    await sleep(200); // fenced: nothing more may be presented within 200 ms
    expect(bobSees.contents).toEqual(['P1']);
    await expect(bob.done).rejects.toBeInstanceOf(FencedError);
    // The successor carries on.
    await alice.send('P3');
    await waitFor(() => successorSees.contents.includes('P3'), 'the successor to be shown P3');
  });
});

describe('Coordinator: lifecycle', () => {
  it('reports idle → starting → running → stopped through on("state") and resolves done on stop()', async () => {
    const chat = await createChat(admin());
    const coord = makeCoordinator(daemon(), chat, chat.alice);
    coordinators.push(coord);
    const log = watchStates(coord);
    expect(coord.state).toBe('idle');
    await coord.start();
    expect(coord.state).toBe('running');
    await coord.stop();
    expect(log.transitions).toEqual(['idle>starting', 'starting>running', 'running>stopped']);
    expect(await settledWithin(coord.done, 1_000)).toEqual({ status: 'fulfilled', value: undefined });
    // stop() released the stream: another coordinator claims it without replace.
    const state = await admin().rpc.streams.get({ streamId: chat.alice.streamId });
    expect(state.writer.active).toBe(false);
    await expect(coord.start()).rejects.toBeInstanceOf(YelloClientError);
    await expect(coord.send('after stop')).rejects.toBeInstanceOf(YelloClientError);
  });

  it('an unsubscribe via the returned function stops delivery of state events', async () => {
    const chat = await createChat(admin());
    const coord = makeCoordinator(daemon(), chat, chat.alice);
    coordinators.push(coord);
    const seen: string[] = [];
    const off = coord.on('state', (e) => seen.push(e.state));
    await coord.start();
    off();
    await coord.stop();
    expect(seen).toEqual(['starting', 'running']);
  });
});

describe('Coordinator: continuity breaks', () => {
  it('starting from a stored cursor behind a forced trim stops with ContinuityBreakError (PREFIX_UNAVAILABLE) and needs intervention', async () => {
    const { chat, alice, bob, bobSees, bobStore } = await startPair();
    await alice.send('one');
    await alice.send('two');
    await waitFor(() => bobSees.contents.length === 2, 'bob to be shown both messages');
    const shown = bobSees.batches.at(-1)!;
    await waitFor(async () => (await bobStore.load(chat.chatId)) === shown.cursor, "bob's cursor to be saved after the presentation");
    await bob.stop();

    await alice.send('three');
    await alice.send('four');
    const head = (await admin().rpc.streams.get({ streamId: chat.alice.streamId })).nextPosition;
    await admin().rpc.streams.trim({ streamId: chat.alice.streamId, beforePosition: (BigInt(head) - 1n).toString(), force: true });

    const laterSees = new RecordingAdapter();
    const later = makeCoordinator(daemon(), chat, chat.bob, { cursorStore: bobStore, adapter: laterSees });
    coordinators.push(later);
    const log = watchStates(later);
    const started = await settledWithin(later.start(), 10_000);
    expect(started.status).toBe('rejected');
    const err = (started as { reason: unknown }).reason;
    expect(err).toBeInstanceOf(ContinuityBreakError);
    expect((err as ContinuityBreakError).reason).toBe('PREFIX_UNAVAILABLE');
    // Nothing was skipped to: 'four' was never shown.
    expect(laterSees.batches).toEqual([]);

    expect(later.state).toBe('needs-intervention');
    expect(log.states.at(-1)).toBe('needs-intervention');
    const done = await settledWithin(later.done, 1_000);
    expect(done.status).toBe('rejected');
    expect((done as { reason: unknown }).reason).toBeInstanceOf(ContinuityBreakError);
  });

  it('a reset of the peer stream while running stops it with ContinuityBreakError (GENERATION_CHANGED)', async () => {
    const { chat, alice, bob, bobSees } = await startPair();
    const log = watchStates(bob);
    const errors: Error[] = [];
    bob.on('error', (e) => errors.push(e));
    await alice.send('before the reset');
    await waitFor(() => bobSees.batchWith('before the reset'), 'bob to be shown the message');

    await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'client test reset' });
    await waitFor(() => bob.state === 'needs-intervention', 'bob to need intervention', 5_000);
    expect(log.transitions).toEqual(['running>needs-intervention']);
    const done = await settledWithin(bob.done, 1_000);
    expect(done.status).toBe('rejected');
    const err = (done as { reason: unknown }).reason as ContinuityBreakError;
    expect(err).toBeInstanceOf(ContinuityBreakError);
    expect(err.reason).toBe('GENERATION_CHANGED');
    expect(err.data.streamId).toBe(chat.alice.streamId);
    expect(errors).toEqual([err]);
    // Terminal: it appends nothing more and presents nothing of the new generation.
    await expect(bob.send('after the break')).rejects.toBeInstanceOf(ContinuityBreakError);
    expect(bobSees.batches.every((b) => b.generation === '1')).toBe(true);
  });
});

describe('Coordinator: cursor saving', () => {
  it('never stores a cursor past a peer batch it has not presented, even when own-stream batches arrive meanwhile', async () => {
    const tap = tapCoordinators();
    const { chat, alice, bob, bobSees, bobStore } = await startPair();
    // Hold bob's presentation of P1 open while P2 (peer) and then O1 (bob's own) arrive.
    let release: (() => void) | null = null;
    bobSees.hold = (batch) => {
      if (messageContents(batch.records).includes('P1')) return new Promise<void>((r) => (release = r));
      return undefined;
    };
    await alice.send('P1');
    await waitFor(() => release, 'bob to be presenting P1');
    await alice.send('P2');
    await waitFor(
      () => tap.received('P2', { token: chat.bob.token, streamId: chat.alice.streamId }),
      "P2 to be queued in bob's coordinator",
    );
    await bob.send('O1');
    await waitFor(() => tap.received('O1', { token: chat.bob.token, streamId: chat.bob.streamId }), "bob's own O1 to be queued behind P2");

    // When P2's presentation begins, take the cursor a crash at that moment would resume from.
    let snapshot: string | null | undefined;
    bobSees.hold = async (batch) => {
      if (messageContents(batch.records).includes('P2')) snapshot = await bobStore.load(chat.chatId);
    };
    release!();
    await waitFor(() => snapshot !== undefined, 'bob to start presenting P2');
    expect(snapshot).toBeTruthy();

    // Following from that cursor must bring P2 again.
    const c = await connectAgent(daemon(), chat.bob);
    clients.push(c);
    const batches: ChatBatchNotification[] = [];
    c.on('chats.batch', (b) => batches.push(b));
    const head = (await admin().rpc.streams.get({ streamId: chat.alice.streamId })).nextPosition;
    await c.rpc.chats.follow({ chatId: chat.chatId, cursor: snapshot! });
    await waitFor(
      () => batches.some((b) => b.streamId === chat.alice.streamId && b.nextPosition === head),
      "the follow from that cursor to deliver alice's stream up to her head (P2 again)",
    );
    const redelivered = batches.filter((b) => b.streamId === chat.alice.streamId).flatMap((b) => messageContents(b.records));
    expect(redelivered, 'a crash while P2 is being presented must not lose P2').toContain('P2');
  });

  it('a cursor store that fails once does not silently stop all later presentations', async () => {
    const chat = await createChat(admin());
    const alice = makeCoordinator(daemon(), chat, chat.alice);
    coordinators.push(alice);
    await alice.start();
    // A store whose next save (after the initial one) fails once, like a full disk that recovers.
    const inner = new MemoryCursorStore();
    let failNext = false;
    let failedSaves = 0;
    const flaky = {
      load: (chatId: string) => inner.load(chatId),
      save: async (chatId: string, cursor: string) => {
        if (failNext) {
          failNext = false;
          failedSaves += 1;
          throw new Error('disk full (once)');
        }
        await inner.save(chatId, cursor);
      },
    };
    const seen = new RecordingAdapter();
    const bob = makeCoordinator(daemon(), chat, chat.bob, { adapter: seen, cursorStore: flaky, start: 'end' });
    coordinators.push(bob);
    const errors: Error[] = [];
    bob.on('error', (e) => errors.push(e));
    await bob.start();

    failNext = true;
    await alice.send('first');
    await waitFor(() => seen.contents.includes('first'), 'bob to be shown "first"');
    await waitFor(() => failedSaves === 1, 'the save after "first" to fail');
    await alice.send('second');
    // Either "second" is presented, or the failure is surfaced (an error event / a non-running state).
    await waitFor(
      () => seen.contents.includes('second') || errors.length > 0 || bob.state !== 'running',
      'bob to present "second" or to report the failed save',
      3_000,
    ).catch(() => undefined);
    const surfaced = errors.length > 0 || bob.state !== 'running';
    expect(
      seen.contents.includes('second') || surfaced,
      `state ${bob.state}, shown ${JSON.stringify(seen.contents)}, errors ${errors.length}`,
    ).toBe(true);
  });
});
