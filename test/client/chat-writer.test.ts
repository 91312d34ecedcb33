// ChatWriter (docs/protocol.md §8): claims on the first write, not before (reads never write);
// takes over an abandoned claim by default (issue 20, finding 4) and reports what the displaced
// holder committed; pauses on an unknown outcome and never resends; release() always releases,
// over a connection of its own when the client is gone.

import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import {
  ChatWriter,
  Conversation,
  CoordinatorPausedError,
  remoteError,
  TimeoutError,
  WriterActiveError,
  YelloClient,
  type Unsettled,
  FencedError,
  YelloClientError,
  type OperationInfo,
} from '../../src/client/index.js';
import {
  connectAgent,
  createChat,
  freeze,
  readStream,
  rejectionOf,
  thaw,
  type Participant,
  connectAdmin,
} from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { waitFor } from '../helpers/wait.js';
import { fileURLToPath } from 'node:url';
import { useDaemon } from '../helpers/use-daemon.js';

// A process of its own: a test freezes (SIGSTOP) it.
const { daemon, admin, clients } = useClientDaemon({ process: true });
afterEach(() => {
  if (daemon().running) thaw(daemon());
});

async function agent(who: Participant, extra: Partial<Parameters<typeof YelloClient.connect>[0]> = {}): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 }, ...extra });
  clients.push(c);
  return c;
}

const types = async (who: Participant) => (await readStream(admin(), who.streamId)).map((r) => r.wrapper.type);

describe('ChatWriter', () => {
  it('claims on the first write, not before; a receipt it writes clears the conversation’s pending batch', async () => {
    const chat = await createChat(admin());
    const alice = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const bobClient = await agent(chat.bob);
    const conv = await Conversation.open(bobClient, { chatId: chat.chatId });
    const bob = new ChatWriter(bobClient, { chatId: chat.chatId, conversation: conv });
    expect(await types(chat.bob)).toEqual([]);
    expect(bob.state).toBe('unclaimed');
    await alice.send('hi bob');
    expect(await types(chat.alice)).toEqual(['chat.writer-fence', 'chat.message']);
    const batch = (await conv.next({ waitMs: 5000 }))!;
    expect(conv.pending()).toHaveLength(1);
    await bob.send('hi alice', { ack: batch });
    expect(conv.pending()).toEqual([]);
    expect(await types(chat.bob)).toEqual(['chat.writer-fence', 'chat.message', 'chat.receipt']);
    expect(bob.state).toBe('claimed');
    await bob.release();
    await alice.release();
    const { streams } = await admin().rpc.chats.get({ chatId: chat.chatId });
    expect(streams.map((s) => s.writer.active)).toEqual([false, false]);
    await conv.close();
  });

  it('takes over an abandoned claim without replace, and reports what the displaced holder committed (finding 4)', async () => {
    const chat = await createChat(admin());
    const first = await agent(chat.alice, { reconnect: false });
    const w1 = new ChatWriter(first, { chatId: chat.chatId });
    await w1.send('sent by the first process');
    first.close(); // a crash: the claim stays, but nothing holds it any more
    const w2 = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const unsettled: Unsettled[] = [];
    w2.on('unsettled', (u) => unsettled.push(u));
    await waitFor(async () => {
      const s = await admin().rpc.streams.get({ streamId: chat.alice.streamId });
      return !s.writer.connected;
    }, 'the first claim to be abandoned');
    await w2.send('sent by the second');
    expect(unsettled).toHaveLength(1);
    expect(unsettled[0]!.previousEpoch).toBe('1');
    expect(unsettled[0]!.operations.map((o) => o.state)).toEqual(['committed']);
    const fences = (await readStream(admin(), chat.alice.streamId)).flatMap((r) =>
      r.wrapper.type === 'chat.writer-fence' ? [r.wrapper.fence] : [],
    );
    expect(fences.at(-1)).toMatchObject({ epoch: '2', replaced: true, reason: 'abandoned' });
    await w2.release();
  });

  it('a connected holder keeps its claim: WRITER_ACTIVE, and the advice names yello streams release', async () => {
    const chat = await createChat(admin());
    const w1 = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    await w1.send('I am alive');
    const w2 = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const err = await rejectionOf(w2.send('me too'));
    expect(err).toBeInstanceOf(WriterActiveError);
    expect((err as WriterActiveError).data).toMatchObject({ connected: true });
    await w1.release();
    await w2.send('now me');
    await w2.release();
  });

  it('an append of unknown outcome pauses the writer; resolveUncertain() settles it and nothing is resent', async () => {
    const chat = await createChat(admin());
    const w = new ChatWriter(await agent(chat.alice, { callTimeoutMs: 300 }), { chatId: chat.chatId });
    await w.send('first');
    freeze(daemon());
    const err = await rejectionOf(w.send('maybe'));
    expect(err).toBeInstanceOf(TimeoutError);
    expect(w.state).toBe('paused');
    expect(await rejectionOf(w.send('refused while paused'))).toBeInstanceOf(CoordinatorPausedError);
    thaw(daemon());
    const outcome = await w.resolveUncertain();
    expect(outcome.committed).toBe(true);
    expect(w.state).toBe('claimed');
    await w.send('after');
    const contents = (await readStream(admin(), chat.alice.streamId)).flatMap((r) =>
      r.wrapper.type === 'chat.message' ? [r.wrapper.message.content] : [],
    );
    expect(contents).toEqual(['first', 'maybe', 'after']);
    await w.release();
  });

  it('resolveUncertain() backs off while operations.get is refused for now (RATE_LIMITED waits its retryAfterMs, SHUTTING_DOWN the backoff): no hot loop (issue 52, 13b)', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice, { callTimeoutMs: 300 });
    const w = new ChatWriter(c, { chatId: chat.chatId });
    await w.send('first');
    freeze(daemon());
    expect(await rejectionOf(w.send('maybe'))).toBeInstanceOf(TimeoutError);
    thaw(daemon());
    // The refusals a live daemon cannot be made to give on demand, injected at the call: the
    // daemon, the connection and the operation are real. Two RATE_LIMITED, then three
    // SHUTTING_DOWN, then the daemon answers.
    const refusals = [
      { code: 4290, message: 'slow down', data: { type: 'RATE_LIMITED', retryAfterMs: 250 } },
      { code: 4290, message: 'slow down', data: { type: 'RATE_LIMITED', retryAfterMs: 250 } },
      { code: 5000, message: 'stopping', data: { type: 'STORAGE_FAILURE', reason: 'SHUTTING_DOWN' } },
      { code: 5000, message: 'stopping', data: { type: 'STORAGE_FAILURE', reason: 'SHUTTING_DOWN' } },
      { code: 5000, message: 'stopping', data: { type: 'STORAGE_FAILURE', reason: 'SHUTTING_DOWN' } },
    ];
    const asked: number[] = [];
    const real = c.call.bind(c);
    vi.spyOn(c, 'call').mockImplementation(((method: string, ...rest: unknown[]) => {
      if (method === 'operations.get') {
        asked.push(performance.now());
        const refusal = refusals.shift();
        if (refusal) return Promise.reject(remoteError(refusal));
      }
      return (real as (m: string, ...r: unknown[]) => Promise<unknown>)(method, ...rest);
    }) as typeof c.call);
    const outcome = await w.resolveUncertain();
    expect(outcome.committed).toBe(true);
    // Five refusals, then an answer (a `pending` one asks once more).
    expect(asked.length).toBeGreaterThanOrEqual(6);
    const gaps = asked.slice(1, 6).map((t, i) => t - asked[i]!);
    // After a RATE_LIMITED at least its retryAfterMs; after SHUTTING_DOWN the backoff, whose
    // delays (jittered to half at least) only grow.
    expect(gaps[0]).toBeGreaterThanOrEqual(245);
    expect(gaps[1]).toBeGreaterThanOrEqual(245);
    for (const gap of gaps.slice(2)) expect(gap).toBeGreaterThanOrEqual(20);
    expect(gaps[2]! + gaps[3]! + gaps[4]!).toBeGreaterThanOrEqual(100);
    await w.send('after');
    await w.release();
  });

  it('release() releases over a connection of its own when the client is closed', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice, { reconnect: false });
    const w = new ChatWriter(c, { chatId: chat.chatId });
    await w.send('then the connection goes');
    c.close();
    await w.release();
    expect((await admin().rpc.streams.get({ streamId: chat.alice.streamId })).writer.active).toBe(false);
  });

  it('release() of a claim already released (the admin, or an attempt that timed out but was done) ends released, not fenced; a later epoch fences', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice);
    const w = new ChatWriter(c, { chatId: chat.chatId });
    const fenced: unknown[] = [];
    w.on('fenced', (e) => fenced.push(e));
    await w.send('before the admin releases');
    await admin().rpc.streams.release({ streamId: chat.alice.streamId });
    await w.release();
    expect(w.state).toBe('released');
    expect(fenced).toEqual([]);
    // The next write claims again; a claim by someone else afterwards does fence this writer.
    await w.send('claimed again');
    const other = await agent(chat.alice);
    await other.rpc.streams.claim({ streamId: chat.alice.streamId, replace: true });
    await w.release();
    expect(w.state).toBe('fenced');
    expect(fenced).toHaveLength(1);
  });
});

// Pins behaviour of src/client/chat-writer.ts: the writer's promises through the public client API
// against a real daemon, asserted by value: its state and claim (epoch, token, the `claimed` event,
// the fence's reason), claiming again after a release, resuming a kept claim by its token, what a
// non-agent client gets, and being replaced (FencedError once, then BAD_STATE, release leaves it
// alone).
describe('claims, epochs, tokens and fences, by value', () => {
  const { daemon, admin, clients } = useClientDaemon();

  async function agent(who: Participant): Promise<YelloClient> {
    const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
    clients.push(c);
    return c;
  }

  const fences = async (who: Participant) =>
    (await readStream(admin(), who.streamId)).flatMap((r) => (r.wrapper.type === 'chat.writer-fence' ? [r.wrapper.fence] : []));
  const contents = async (who: Participant) =>
    (await readStream(admin(), who.streamId)).flatMap((r) => (r.wrapper.type === 'chat.message' ? [r.wrapper.message.content] : []));

  describe('ChatWriter', () => {
    it('state, epoch and token through claim, release and a second claim; the claimed event and the fence reason', async () => {
      const chat = await createChat(admin());
      const w = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId, reason: 'guard test' });
      expect([w.chatId, w.streamId, w.state, w.epoch, w.coordinatorToken, w.uncertainOperationId]).toEqual([
        chat.chatId,
        chat.alice.streamId,
        'unclaimed',
        null,
        null,
        null,
      ]);
      const claimed: unknown[] = [];
      w.on('claimed', (c) => claimed.push(c));
      const first = await w.send('one');
      expect(first.nextPosition).toBe('2');
      expect(w.state).toBe('claimed');
      expect(w.epoch).toBe('1');
      expect(w.coordinatorToken).toMatch(/^yello_ct_/);
      expect(claimed).toEqual([{ epoch: '1', generation: '1', nextPosition: '1', tookOver: false }]);
      await w.send('two');
      await w.settled();
      expect(await fences(chat.alice)).toMatchObject([{ epoch: '1', replaced: false, reason: 'guard test' }]);
      await w.release();
      expect([w.state, w.epoch, w.coordinatorToken]).toEqual(['released', null, null]);
      expect((await admin().rpc.streams.get({ streamId: chat.alice.streamId })).writer.active).toBe(false);
      // Released claims again on the next write.
      await w.send('three');
      expect([w.state, w.epoch]).toEqual(['claimed', '2']);
      expect(claimed).toEqual([
        { epoch: '1', generation: '1', nextPosition: '1', tookOver: false },
        { epoch: '2', generation: '1', nextPosition: '4', tookOver: false },
      ]);
      expect(await contents(chat.alice)).toEqual(['one', 'two', 'three']);
      await w.release();
    });

    it('coordinatorToken resumes a kept claim: no claim, no fence, appends at the head', async () => {
      const chat = await createChat(admin());
      const c = await agent(chat.alice);
      const first = new ChatWriter(c, { chatId: chat.chatId });
      await first.send('before');
      const token = first.coordinatorToken!;
      const resumed = new ChatWriter(c, { chatId: chat.chatId, coordinatorToken: token });
      const claimed: unknown[] = [];
      resumed.on('claimed', (x) => claimed.push(x));
      const res = await resumed.send('after');
      expect(res.nextPosition).toBe('3');
      expect([resumed.state, resumed.epoch, resumed.coordinatorToken]).toEqual(['claimed', '1', token]);
      expect(claimed).toEqual([{ epoch: '1', generation: '1', nextPosition: '2', tookOver: false }]);
      expect((await fences(chat.alice)).map((f) => f.epoch)).toEqual(['1']);
      expect(await contents(chat.alice)).toEqual(['before', 'after']);
      await resumed.release();
    });

    it('an admin client has no stream: streamId is empty and the first write is BAD_TOKEN, nothing written', async () => {
      const chat = await createChat(admin());
      const w = new ChatWriter(admin(), { chatId: chat.chatId });
      expect(w.streamId).toBe('');
      const err = await rejectionOf(w.send('nope'));
      expect(err).toBeInstanceOf(YelloClientError);
      expect((err as YelloClientError).type).toBe('BAD_TOKEN');
      expect(w.state).toBe('unclaimed');
    });

    it('replaced by another claim: FencedError and the fenced event once, then BAD_STATE; release() leaves the new claim', async () => {
      const chat = await createChat(admin());
      const w = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
      const fenced: FencedError[] = [];
      w.on('fenced', (e) => fenced.push(e));
      await w.send('mine');
      const other = await agent(chat.alice);
      const taken = await other.rpc.streams.claim({ streamId: chat.alice.streamId, replace: true });
      const err = await rejectionOf(w.send('too late'));
      expect(err).toBeInstanceOf(FencedError);
      expect(w.state).toBe('fenced');
      expect(fenced).toEqual([err]);
      const after = await rejectionOf(w.send('again'));
      expect(after).toBeInstanceOf(YelloClientError);
      expect(after).not.toBeInstanceOf(FencedError);
      expect((after as YelloClientError).type).toBe('BAD_STATE');
      expect(fenced).toHaveLength(1);
      await w.release();
      const head = await admin().rpc.streams.get({ streamId: chat.alice.streamId });
      expect([head.writer.active, head.writer.epoch]).toEqual([true, taken.epoch]);
      expect(await contents(chat.alice)).toEqual(['mine']);
    });

    it("replace: false refuses a stream another writer holds; a takeover's unsettled lists only operations since the displaced claim", async () => {
      const chat = await createChat(admin());
      const c1 = await agent(chat.alice);
      const w1 = new ChatWriter(c1, { chatId: chat.chatId });
      await w1.send('old, before the claim');
      await w1.release();
      const w2 = new ChatWriter(c1, { chatId: chat.chatId });
      await w2.send('by epoch 2');
      const polite = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId, replace: false });
      const refused = await rejectionOf(polite.send('refused'));
      expect(refused).toBeInstanceOf(YelloClientError);
      expect(polite.state).toBe('unclaimed');
      const forcing = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId, replace: true });
      const unsettled: unknown[] = [];
      const claimed: unknown[] = [];
      forcing.on('unsettled', (u) => unsettled.push(u));
      forcing.on('claimed', (x) => claimed.push(x));
      await forcing.send('by epoch 3');
      expect(claimed).toMatchObject([{ epoch: '3', tookOver: true }]);
      expect(unsettled).toHaveLength(1);
      const u = unsettled[0] as { previousEpoch: string; operations: Array<{ state: string; firstPosition: string }> };
      expect(u.previousEpoch).toBe('2');
      // Only w2's append (at 3, after its fence at 2), not w1's (at 1).
      expect(u.operations.map((o) => [o.state, o.firstPosition])).toEqual([['committed', '3']]);
      expect(await contents(chat.alice)).toEqual(['old, before the claim', 'by epoch 2', 'by epoch 3']);
      await forcing.release();
    });
  });
});

// Pins two behaviours of src/client/chat-writer.ts's takeover report (`unsettled`: what the
// displaced holder committed since its claim) that need every stamp of the daemon in one
// millisecond. The daemon child preloads test/helpers/wall-clock-step.mjs with
// YELLO_TEST_CLOCK_FROZEN=1: its `Date` stands still.
//   231:78 `committedAt >= since` → `>`: the displaced holder's append in its claim's own
//          millisecond is left out of `unsettled`;
//   231:13 `op.generation === claim.generation` → true: an operation of the sealed generation,
//          committed in the millisecond of the displaced claim, is listed as the holder's.
// The same millisecond also shows what the report cannot tell: an append of an earlier holder in
// the displaced claim's millisecond (same generation) is listed too.
describe('the takeover report to the millisecond', () => {
  const shim = fileURLToPath(new URL('../helpers/wall-clock-step.mjs', import.meta.url));
  // Keep what NODE_OPTIONS already carries (the mutation run's coverage preload).
  const env = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${shim}`.trim(), YELLO_TEST_CLOCK_FROZEN: '1' };
  const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open'], env, process: true }, (d) => connectAdmin(d)); // the clock shim needs a process
  const clients: YelloClient[] = [];
  afterAll(() => {
    for (const c of clients) c.close();
  });

  async function clientOf(who: Participant): Promise<YelloClient> {
    const c = await connectAgent(daemon(), who);
    clients.push(c);
    return c;
  }

  interface Unsettled {
    previousEpoch: string;
    operations: OperationInfo[];
  }

  /** A writer of `who` that forces a takeover (`replace: true`), with the `unsettled` reports it makes. */
  async function forcing(who: Participant, chatId: string): Promise<{ w: ChatWriter; unsettled: Unsettled[] }> {
    const w = new ChatWriter(await clientOf(who), { chatId, replace: true });
    const unsettled: Unsettled[] = [];
    w.on('unsettled', (u) => unsettled.push(u));
    return { w, unsettled };
  }

  describe('a takeover report when every stamp is in one millisecond (the daemon’s clock stands still)', () => {
    it("lists the displaced holder's append made in its claim's own millisecond", async () => {
      const chat = await createChat(admin());
      const held = new ChatWriter(await clientOf(chat.alice), { chatId: chat.chatId });
      const sent = await held.send('by the holder');
      const state = await admin().rpc.streams.get({ streamId: chat.alice.streamId });
      const { w, unsettled } = await forcing(chat.alice, chat.chatId);
      await w.send('by the new writer');
      expect(unsettled).toHaveLength(1);
      expect(unsettled[0]!.previousEpoch).toBe(state.writer.epoch);
      // Claim and append share the millisecond: the append counts as after the claim.
      expect(unsettled[0]!.operations.map((o) => [o.committedAt, o.firstPosition])).toEqual([[state.writer.claimedAt, sent.firstPosition]]);
      await w.release();
    });

    it('does not list an operation of the sealed generation committed in the millisecond of the displaced claim', async () => {
      const chat = await createChat(admin());
      const first = new ChatWriter(await clientOf(chat.alice), { chatId: chat.chatId });
      await first.send('generation 1');
      await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'guard' });
      // A holder in generation 2 that commits nothing, displaced.
      const idle = await (await clientOf(chat.alice)).rpc.streams.claim({ streamId: chat.alice.streamId });
      expect(idle.generation).toBe('2');
      const { w, unsettled } = await forcing(chat.alice, chat.chatId);
      await w.send('generation 2');
      expect(unsettled).toEqual([]);
      await w.release();
    });

    it("also lists an earlier holder's append in the displaced claim's millisecond: the report is to the millisecond", async () => {
      const chat = await createChat(admin());
      const earlier = new ChatWriter(await clientOf(chat.alice), { chatId: chat.chatId });
      const old = await earlier.send('by an earlier holder');
      await earlier.release();
      const idle = await (await clientOf(chat.alice)).rpc.streams.claim({ streamId: chat.alice.streamId });
      const { w, unsettled } = await forcing(chat.alice, chat.chatId);
      await w.send('by the new writer');
      // The idle holder committed nothing; the earlier holder's append shares its claim's stamp.
      expect(unsettled.map((u) => [u.previousEpoch, u.operations.map((o) => o.firstPosition)])).toEqual([
        [idle.epoch, [old.firstPosition]],
      ]);
      await w.release();
    });
  });
});
