// Pins behaviour of src/client/chat-writer.ts that test/client/chat-writer.test.ts and
// test/client/chat-writer.test.ts leave unchecked: ack(), settled(), the wait for a reconnect
// before an append and before a release (and their deadlines), an append or a release the daemon
// refuses outright, a release after being replaced unawares, a takeover that finds nothing (or more
// than a page) to report, and resolveUncertain() when the append never reached the daemon, when the
// writer was replaced or released while paused, and without a connection. A real daemon (restarted,
// frozen with SIGSTOP, killed with SIGKILL) and the public client API; the one spy
// (YelloClient.connect) only counts the writer's own dials.

import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ChatWriter,
  ConnectionLostError,
  Conversation,
  FencedError,
  TimeoutError,
  YelloClient,
  YelloClientError,
  type UncertainOutcome,
  type Unsettled,
} from '../../src/client/index.js';
import { clientMessageId } from '../../src/daemon/crypto/hashing.js';
import {
  appendMessages,
  connectAgent,
  createChat,
  freeze,
  readStream,
  rejectionOf,
  thaw,
  type Participant,
} from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { sleep, waitFor } from '../helpers/wait.js';

// The admin dials again by itself after a restart.
// A process of its own: the tests freeze (SIGSTOP) it.
const { daemon, admin, clients } = useClientDaemon({ reconnect: { minDelayMs: 20, maxDelayMs: 100 }, process: true });
afterEach(async () => {
  vi.restoreAllMocks();
  if (daemon().running) thaw(daemon());
  else await daemon().restart();
  await waitFor(() => admin().connected, 'the admin to reconnect');
});

async function agent(who: Participant, extra: Partial<Parameters<typeof YelloClient.connect>[0]> = {}): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 100 }, ...extra });
  clients.push(c);
  return c;
}

const PENDING = 'still pending';
/** What `p` settled with (its value, or its rejection as a value), or PENDING after `ms`. */
async function within(p: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise((r) => {
    timer = setTimeout(() => {
      r(PENDING);
    }, ms);
  });
  try {
    return await Promise.race([
      p.then(
        (v) => v ?? 'resolved',
        (e: unknown) => e,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const contents = async (who: Participant) =>
  (await readStream(admin(), who.streamId)).flatMap((r) => (r.wrapper.type === 'chat.message' ? [r.wrapper.message.content] : []));
const head = (who: Participant) => admin().rpc.streams.get({ streamId: who.streamId });

/** Open agent connections, as the daemon's `yello_connections` gauge counts them. */
async function agentConnections(): Promise<number> {
  const { text } = await admin().rpc.daemon.metrics({});
  const m = /^yello_connections\{role="agent"\} (\d+)$/m.exec(text);
  return m ? Number(m[1]) : 0;
}

async function restartDaemon(): Promise<void> {
  await daemon().restart();
  await waitFor(() => admin().connected, 'the admin to reconnect');
}

describe('ChatWriter when the daemon refuses, goes away or freezes', () => {
  it('send with a messageId, ack() of a batch, settled() once every append handed out is answered', async () => {
    const chat = await createChat(admin());
    const alice = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    await alice.send('hi bob', { messageId: 'm-guard-h1' });
    const bobClient = await agent(chat.bob);
    const conv = await Conversation.open(bobClient, { chatId: chat.chatId });
    const bob = new ChatWriter(bobClient, { chatId: chat.chatId, conversation: conv });
    const batch = (await conv.next({ waitMs: 5000 }))!;
    const answered: string[] = [];
    void bob.send('hi alice').then(() => answered.push('send'));
    void bob.ack(batch).then(() => answered.push('ack'));
    await bob.settled();
    expect(answered).toEqual(['send', 'ack']);
    expect(conv.pending()).toEqual([]);
    const aliceRecords = await readStream(admin(), chat.alice.streamId);
    expect(aliceRecords.flatMap((r) => (r.wrapper.type === 'chat.message' ? [r.wrapper.message.clientMessageId] : []))).toEqual([
      clientMessageId(chat.chatId, chat.alice.id, 'm-guard-h1'),
    ]);
    const bobRecords = (await readStream(admin(), chat.bob.streamId)).map((r) => r.wrapper);
    expect(bobRecords.map((w) => w.type)).toEqual(['chat.writer-fence', 'chat.message', 'chat.receipt']);
    expect(bobRecords[2]).toMatchObject({
      receipt: { peerStreamId: chat.alice.streamId, peerGeneration: batch.generation, nextPosition: batch.nextPosition },
    });
    await conv.close();
    await bob.release();
    await alice.release();
  });

  it('an append or a release the daemon refuses outright (INVALID_PARAMS) is thrown at once; the writer stays claimed, not fenced', async () => {
    const chat = await createChat(admin());
    // A kept claim resumed with a token the daemon's schema refuses (over 256 characters).
    const w = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId, coordinatorToken: 'x'.repeat(300) });
    const fenced: FencedError[] = [];
    w.on('fenced', (e) => fenced.push(e));
    const err = await rejectionOf(w.send('refused'));
    expect(err).toBeInstanceOf(YelloClientError);
    expect((err as YelloClientError).type).toBe('INVALID_PARAMS');
    expect([w.state, w.uncertainOperationId, fenced]).toEqual(['claimed', null, []]);
    // Not retried until the release's deadline (10 s): refused at once.
    const refused = await within(w.release(), 3000);
    expect(refused).toBeInstanceOf(YelloClientError);
    expect((refused as YelloClientError).type).toBe('INVALID_PARAMS');
    expect(await contents(chat.alice)).toEqual([]);
  });

  it('BAD_TOKEN and BAD_STATE say why; resolveUncertain() without an uncertain append, release() before any claim', async () => {
    const chat = await createChat(admin());
    const nobody = new ChatWriter(admin(), { chatId: chat.chatId });
    const noToken = await rejectionOf(nobody.send('nope'));
    expect([(noToken as YelloClientError).type, (noToken as Error).message]).toEqual(['BAD_TOKEN', 'a chat writer needs an agent token']);
    const w = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    await w.release();
    expect([w.state, w.epoch]).toEqual(['unclaimed', null]);
    const unclaimed = await rejectionOf(w.resolveUncertain());
    expect([(unclaimed as YelloClientError).type, (unclaimed as Error).message]).toEqual(['BAD_STATE', 'no append of unknown outcome']);
    await w.send('claimed now');
    const claimed = await rejectionOf(w.resolveUncertain());
    expect([(claimed as YelloClientError).type, (claimed as Error).message]).toEqual(['BAD_STATE', 'no append of unknown outcome']);
    expect(w.state).toBe('claimed');
    await w.release();
  });

  it('release() of a writer replaced unawares: FENCED is left alone (fenced once), the new claim stays; a write after is BAD_STATE', async () => {
    const chat = await createChat(admin());
    const w = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const fenced: FencedError[] = [];
    w.on('fenced', (e) => fenced.push(e));
    await w.send('mine');
    const taken = await (await agent(chat.alice)).rpc.streams.claim({ streamId: chat.alice.streamId, replace: true });
    await w.release();
    expect(w.state).toBe('fenced');
    expect(fenced).toHaveLength(1);
    expect(fenced[0]).toBeInstanceOf(FencedError);
    const h = await head(chat.alice);
    expect([h.writer.active, h.writer.epoch]).toEqual([true, taken.epoch]);
    const after = await rejectionOf(w.send('after'));
    expect((after as YelloClientError).type).toBe('BAD_STATE');
    expect((after as Error).message).toBe(`the writer of ${chat.chatId} was replaced by another claim: nothing more is appended`);
  });

  it('a takeover of a claim that committed nothing reports no unsettled; one past a page of operations.list reports them all', async () => {
    const chat = await createChat(admin());
    const holder = await agent(chat.alice);
    await holder.rpc.streams.claim({ streamId: chat.alice.streamId });
    const first = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId, replace: true });
    const unsettled: Unsettled[] = [];
    const claimed: Array<{ tookOver: boolean }> = [];
    first.on('unsettled', (u) => unsettled.push(u));
    first.on('claimed', (c) => claimed.push(c));
    await first.send('after an empty claim');
    expect(claimed).toMatchObject([{ tookOver: true }]);
    expect(unsettled).toEqual([]);

    // The displaced holder commits 501 operations: operations.list pages hold 500.
    const bobHolder = await agent(chat.bob);
    const claim = await bobHolder.rpc.streams.claim({ streamId: chat.bob.streamId });
    const hold = { streamId: chat.bob.streamId, token: claim.coordinatorToken, next: claim.nextPosition };
    for (let i = 0; i < 501; i++) await appendMessages(bobHolder, hold, [`m${i}`]);
    const second = new ChatWriter(await agent(chat.bob), { chatId: chat.chatId, replace: true });
    second.on('unsettled', (u) => unsettled.push(u));
    await second.send('after 501');
    expect(unsettled).toHaveLength(1);
    expect(unsettled[0]!.previousEpoch).toBe(claim.epoch);
    const positions = unsettled[0]!.operations.map((o) => Number(o.firstPosition));
    expect(positions).toEqual(Array.from({ length: 501 }, (_, i) => Number(claim.nextPosition) + i));
    await first.release();
    await second.release();
  });

  it('while the client dials again: an append waits (default connectWaitMs) and is written once back, connectWaitMs bounds the wait, release() waits for the client instead of dialling', async () => {
    const chat = await createChat(admin());
    const a = await agent(chat.alice);
    const b = await agent(chat.bob);
    const w = new ChatWriter(a, { chatId: chat.chatId });
    const bw = new ChatWriter(b, { chatId: chat.chatId });
    const short = new ChatWriter(b, { chatId: chat.chatId, connectWaitMs: 300 });
    await w.send('before');
    await bw.send('bob before');
    const dials = vi.spyOn(YelloClient, 'connect');
    await daemon().stop();
    await waitFor(() => !a.connected && a.reconnecting && !b.connected && b.reconnecting, 'both clients to dial again');
    const refused = await within(short.send('refused'), 3000);
    expect(refused).toBeInstanceOf(ConnectionLostError);
    expect((refused as ConnectionLostError).outcomeUnknown).toBe(false);
    expect((refused as Error).message).toBe('not connected to yellod; nothing was written');
    expect(short.state).toBe('unclaimed');
    const during = w.send('during').then(
      (r) => r.nextPosition,
      (e: unknown) => e,
    );
    const released = bw.release().then(
      () => 'released',
      (e: unknown) => e,
    );
    // The subject is waiting while the daemon is down: let both wait a while before it is back.
    await sleep(300);
    await restartDaemon();
    expect(await during).toBe('3');
    expect(await released).toBe('released');
    expect(dials).not.toHaveBeenCalled();
    expect((await head(chat.bob)).writer.active).toBe(false);
    expect(await contents(chat.alice)).toEqual(['before', 'during']);
    await w.release();
  });

  it('a closed client: an append is refused at once; release() of a fenced or unclaimed writer returns at once, of a claim retries until timeoutMs', async () => {
    const chat = await createChat(admin());
    const closed = await agent(chat.alice, { reconnect: false });
    const w = new ChatWriter(closed, { chatId: chat.chatId });
    const fencedW = new ChatWriter(await agent(chat.bob), { chatId: chat.chatId });
    await fencedW.send('bob');
    await (await agent(chat.bob)).rpc.streams.claim({ streamId: chat.bob.streamId, replace: true });
    expect(await rejectionOf(fencedW.send('too late'))).toBeInstanceOf(FencedError);
    const unclaimedW = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const chat2 = await createChat(admin());
    const dialling = await agent(chat2.alice);
    const claimedW = new ChatWriter(dialling, { chatId: chat2.chatId });
    await claimedW.send('claimed');
    await w.send('before the close');
    closed.close();
    await waitFor(() => !closed.connected, 'the client to close');
    // Not waited for (connectWaitMs 10 s): the client is not dialling again.
    const refused = await within(w.send('refused'), 3000);
    expect(refused).toBeInstanceOf(ConnectionLostError);
    expect((refused as Error).message).toBe('not connected to yellod; nothing was written');
    await daemon().stop();
    expect(await within(fencedW.release({ timeoutMs: 500 }), 2000)).toBe('resolved');
    expect(await within(unclaimedW.release({ timeoutMs: 500 }), 2000)).toBe('resolved');
    // A client that dials again is waited for until timeoutMs, then the release dials its own (refused).
    await waitFor(() => dialling.reconnecting, 'the client to dial again');
    const notBack = await within(claimedW.release({ timeoutMs: 500 }), 3000);
    expect(notBack).toBeInstanceOf(ConnectionLostError);
    expect(claimedW.state).toBe('claimed');
    const gaveUp = await within(w.release({ timeoutMs: 500 }), 3000);
    expect(gaveUp).toBeInstanceOf(ConnectionLostError);
    expect(w.state).toBe('claimed');
    await restartDaemon();
    expect((await head(chat.alice)).writer.active).toBe(true);
    expect(await contents(chat.alice)).toEqual(['before the close']);
  });

  it('release() through a closed client: over a connection of its own, retried while the daemon is down, closed after', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice, { reconnect: false });
    const w = new ChatWriter(c, { chatId: chat.chatId });
    await w.send('then the connection goes');
    c.close();
    await waitFor(() => !c.connected, 'the client to close');
    await daemon().stop();
    const released = w.release({ timeoutMs: 5000 }).then(
      () => 'released',
      (e: unknown) => e,
    );
    // The subject is retrying while the daemon is down: let it fail to dial a while.
    await sleep(300);
    await restartDaemon();
    expect(await released).toBe('released');
    expect(w.state).toBe('released');
    expect((await head(chat.alice)).writer.active).toBe(false);
    await waitFor(async () => (await agentConnections()) === 0, 'the connection of its own to be closed', 3000);
  });

  it('release() retries a TimeoutError (a frozen daemon) and releases once it answers', async () => {
    const chat = await createChat(admin());
    const w = new ChatWriter(await agent(chat.alice, { callTimeoutMs: 300 }), { chatId: chat.chatId });
    await w.send('first');
    freeze(daemon());
    const released = w.release().then(
      () => 'released',
      (e: unknown) => e,
    );
    // The subject is a call timing out: keep the daemon frozen past callTimeoutMs.
    await sleep(700);
    thaw(daemon());
    expect(await released).toBe('released');
    expect((await head(chat.alice)).writer.active).toBe(false);
  });

  it('an uncertain append the daemon never read: the uncertain event, resolveUncertain() waits for the reconnect and says not committed', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice, { callTimeoutMs: 300 });
    const w = new ChatWriter(c, { chatId: chat.chatId });
    const uncertain: Array<{ operationId: string; error: Error }> = [];
    const resolved: UncertainOutcome[] = [];
    w.on('uncertain', (u) => uncertain.push(u));
    w.on('resolved', (o) => resolved.push(o));
    await w.send('first');
    freeze(daemon());
    const err = await rejectionOf(w.send('lost'));
    expect(err).toBeInstanceOf(TimeoutError);
    const operationId = w.uncertainOperationId!;
    expect(operationId).toMatch(/^op-/);
    expect(uncertain).toEqual([{ operationId, error: err }]);
    // SIGKILL while stopped: the request it never read is gone.
    await daemon().kill();
    await waitFor(() => !c.connected && c.reconnecting, 'the client to dial again');
    const outcome = w.resolveUncertain();
    // The subject is waiting while the daemon is down.
    await sleep(200);
    await restartDaemon();
    const o = await outcome;
    expect(o).toMatchObject({ operationId, committed: false, operation: { state: 'unknown' } });
    expect(resolved).toEqual([o]);
    expect([w.state, w.uncertainOperationId]).toEqual(['claimed', null]);
    await w.send('after');
    expect(await contents(chat.alice)).toEqual(['first', 'after']);
    await w.release();
  });

  it('paused, then replaced or released by the admin: resolveUncertain() is FencedError (the event once); without a connection, ConnectionLostError', async () => {
    const chat = await createChat(admin());
    const chat2 = await createChat(admin());
    const replacedW = new ChatWriter(await agent(chat.alice, { callTimeoutMs: 300 }), { chatId: chat.chatId });
    const releasedW = new ChatWriter(await agent(chat.bob, { callTimeoutMs: 300 }), { chatId: chat.chatId });
    const lone = await agent(chat2.alice, { callTimeoutMs: 300, reconnect: false });
    const closedW = new ChatWriter(lone, { chatId: chat2.chatId });
    const rotatedW = new ChatWriter(await agent(chat2.bob, { callTimeoutMs: 300 }), { chatId: chat2.chatId });
    const fenced: FencedError[] = [];
    replacedW.on('fenced', (e) => fenced.push(e));
    const writers = [replacedW, releasedW, closedW, rotatedW];
    for (const w of writers) await w.send('first');
    freeze(daemon());
    for (const e of await Promise.all(writers.map((w) => rejectionOf(w.send('maybe'))))) expect(e).toBeInstanceOf(TimeoutError);
    thaw(daemon());
    expect(writers.map((w) => w.state)).toEqual(['paused', 'paused', 'paused', 'paused']);

    const taken = await (await agent(chat.alice)).rpc.streams.claim({ streamId: chat.alice.streamId, replace: true });
    const e1 = await rejectionOf(replacedW.resolveUncertain());
    expect(e1).toBeInstanceOf(FencedError);
    expect((e1 as Error).message).toBe(`stream ${chat.alice.streamId} was claimed by epoch ${taken.epoch} while paused`);
    expect([replacedW.state, fenced]).toEqual(['fenced', [e1]]);
    expect(await rejectionOf(replacedW.resolveUncertain())).toBeInstanceOf(FencedError);
    expect(fenced).toHaveLength(1);

    const epoch = releasedW.epoch;
    await admin().rpc.streams.release({ streamId: chat.bob.streamId });
    expect((await head(chat.bob)).writer).toMatchObject({ active: false, epoch });
    expect(await rejectionOf(releasedW.resolveUncertain())).toBeInstanceOf(FencedError);
    expect(releasedW.state).toBe('fenced');

    lone.close();
    await waitFor(() => !lone.connected, 'the client to close');
    const lost = await within(closedW.resolveUncertain(), 3000);
    expect(lost).toBeInstanceOf(ConnectionLostError);
    expect((lost as ConnectionLostError).outcomeUnknown).toBe(false);
    expect((lost as Error).message).toBe('not connected to yellod; the outcome is still unknown');
    expect(closedW.state).toBe('paused');

    // A refusal that asking again cannot change (the session's token was rotated): thrown, not asked again.
    await admin().rpc.agents.rotateToken({ agentId: chat2.bob.id });
    const refused = await within(rotatedW.resolveUncertain(), 3000);
    expect(refused).toBeInstanceOf(YelloClientError);
    expect((refused as YelloClientError).type).toBe('UNAUTHENTICATED');
    expect(rotatedW.state).toBe('paused');
  });

  it('release() over a connection of its own keeps it while it is up (a timeout) and dials again once it is lost', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice, { reconnect: false, callTimeoutMs: 300 });
    const w = new ChatWriter(c, { chatId: chat.chatId });
    await w.send('then the connection goes');
    c.close();
    await waitFor(() => !c.connected, 'the client to close');
    // The real connect; once the writer's own connection is up the daemon is frozen, so that its
    // streams.release times out on a connection that stays open.
    const realConnect = YelloClient.connect.bind(YelloClient);
    const dials = vi.spyOn(YelloClient, 'connect').mockImplementation(async (options) => {
      const own = await realConnect(options);
      if (dials.mock.calls.length === 1) freeze(daemon());
      return own;
    });
    const released = w.release({ timeoutMs: 8000 }).then(
      () => 'released',
      (e: unknown) => e,
    );
    await waitFor(() => dials.mock.calls.length === 1, 'the connection of its own');
    // The subject is a call timing out on that connection: keep the daemon frozen past callTimeoutMs, twice.
    await sleep(800);
    expect(dials).toHaveBeenCalledTimes(1);
    // SIGKILL while stopped: the connection of its own is lost, and the requests it sent were never read.
    await daemon().kill();
    await restartDaemon();
    expect(await released).toBe('released');
    expect(dials.mock.calls.length).toBeGreaterThanOrEqual(2);
    expect(w.state).toBe('released');
    expect((await head(chat.alice)).writer.active).toBe(false);
  });
});

// Pins behaviour of src/client/chat-writer.ts that test/client/chat-writer.test.ts and
// the tests above leave unchecked. (1) The deadlines of the wait for a
// reconnect: `Date.now() < deadline` before an append (179:68) and before a release (319:53), and
// `Date.now() >= deadline` after a failed release (337:25). The tests above give them 300 or 500 ms, so `<=`
// or `>` differ from the code only in the deadline's own millisecond, which a test with a running
// clock never hits. With `connectWaitMs: 0` or `timeoutMs: 0` and Date standing still (only Date
// faked, timers real) the deadline is the current millisecond for as long as the test wants: the
// code gives up after no wait or one dial, the mutants wait or dial again for as long as the daemon
// is down. (2) release()'s retry delay, `backoff.next()?.delayMs ?? 1000` (339:23): `&&` makes
// every delay 1 s. The releases above either succeed once the daemon is back or have a 500 ms timeout
// whose outcome is the same either way; here a 300 ms timeout counts the writer's own dials while
// the daemon is down (four with the 50/100/200 ms backoff, two with the mutant). (3)
// resolveUncertain()'s catch of a transient error (266:13): lookUpOperation turns only
// operations.get's lost connection or timeout into null, so a TimeoutError of the streams.get after
// it reaches that catch. Every earlier test froze the daemon before operations.get, never between
// the two calls; here a spy on the client's `call` (passing every call through) freezes it as
// streams.get is sent.
describe('deadlines of no time at all, the release backoff, a streams.get timing out while resolving', () => {
  // The admin dials again by itself after a restart.
  const { daemon, admin, clients } = useClientDaemon({ reconnect: { minDelayMs: 20, maxDelayMs: 100 }, process: true }); // frozen (SIGSTOP) below
  afterEach(async () => {
    vi.useRealTimers();
    vi.restoreAllMocks();
    if (daemon().running) thaw(daemon());
    else await daemon().restart();
    await waitFor(() => admin().connected, 'the admin to reconnect');
  });

  async function agent(who: Participant, extra: Partial<Parameters<typeof YelloClient.connect>[0]> = {}): Promise<YelloClient> {
    const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 100 }, ...extra });
    clients.push(c);
    return c;
  }

  const PENDING = 'still pending';
  /** What `p` settled with (its value, or its rejection as a value), or PENDING after `ms`. */
  async function within(p: Promise<unknown>, ms: number): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise((r) => {
      timer = setTimeout(() => {
        r(PENDING);
      }, ms);
    });
    try {
      return await Promise.race([
        p.then(
          (v) => v ?? 'resolved',
          (e: unknown) => e,
        ),
        late,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  const contents = async (who: Participant) =>
    (await readStream(admin(), who.streamId)).flatMap((r) => (r.wrapper.type === 'chat.message' ? [r.wrapper.message.content] : []));
  const head = (who: Participant) => admin().rpc.streams.get({ streamId: who.streamId });

  async function restartDaemon(): Promise<void> {
    await daemon().restart();
    await waitFor(() => admin().connected, 'the admin to reconnect');
  }

  /** Date.now() stands still from here until vi.useRealTimers() (timers stay real). */
  function stopTheClock(): void {
    vi.useFakeTimers({ toFake: ['Date'] });
  }

  describe('ChatWriter: deadlines of no time at all, the release backoff, a timeout of streams.get while resolving', () => {
    it('while the client dials again, with Date standing still: an append with connectWaitMs 0 is refused at once, nothing written', async () => {
      const chat = await createChat(admin());
      const c = await agent(chat.alice);
      const w = new ChatWriter(c, { chatId: chat.chatId, connectWaitMs: 0 });
      await w.send('before');
      await daemon().stop();
      await waitFor(() => !c.connected && c.reconnecting, 'the client to dial again');
      stopTheClock();
      let refused: unknown;
      try {
        // The deadline is the current millisecond, which never passes: waiting at all would never end.
        refused = await within(w.send('refused'), 1000);
      } finally {
        vi.useRealTimers();
      }
      expect(refused).toBeInstanceOf(ConnectionLostError);
      expect((refused as ConnectionLostError).outcomeUnknown).toBe(false);
      expect((refused as Error).message).toBe('not connected to yellod; nothing was written');
      await restartDaemon();
      await waitFor(() => c.connected, 'the client to reconnect');
      expect([w.state, w.uncertainOperationId]).toEqual(['claimed', null]);
      expect(await contents(chat.alice)).toEqual(['before']);
    });

    it('release({ timeoutMs: 0 }) with Date standing still and the daemon down: one dial of its own, then ConnectionLostError; the claim stays', async () => {
      const chat = await createChat(admin());
      // One client that dials again (the release does not wait for it) and one closed for good.
      const dialling = await agent(chat.alice);
      const waiter = new ChatWriter(dialling, { chatId: chat.chatId });
      const closed = await agent(chat.bob, { reconnect: false });
      const lone = new ChatWriter(closed, { chatId: chat.chatId });
      await waiter.send('alice');
      await lone.send('bob');
      closed.close();
      await daemon().stop();
      await waitFor(() => !dialling.connected && dialling.reconnecting && !closed.connected, 'the clients to lose the daemon');
      const dials = vi.spyOn(YelloClient, 'connect');
      stopTheClock();
      let notWaited: unknown;
      let notRetried: unknown;
      let dialsOfWaiter: number;
      try {
        notWaited = await within(waiter.release({ timeoutMs: 0 }), 1000);
        dialsOfWaiter = dials.mock.calls.length;
        notRetried = await within(lone.release({ timeoutMs: 0 }), 1000);
      } finally {
        vi.useRealTimers();
      }
      // Not waited for the client to come back (319), not dialled again after the refused dial (337).
      expect(notWaited).toBeInstanceOf(ConnectionLostError);
      expect(dialsOfWaiter).toBe(1);
      expect(notRetried).toBeInstanceOf(ConnectionLostError);
      expect(dials).toHaveBeenCalledTimes(2);
      expect([waiter.state, lone.state]).toEqual(['claimed', 'claimed']);
      await restartDaemon();
      expect((await head(chat.alice)).writer.active).toBe(true);
      expect((await head(chat.bob)).writer.active).toBe(true);
      await waitFor(() => dialling.connected, 'the client to reconnect');
      await waiter.release();
      expect(waiter.state).toBe('released');
      expect((await head(chat.alice)).writer.active).toBe(false);
    });

    it('release({ timeoutMs: 300 }) of a closed client with the daemon down dials again after 50, 100, 200 ms backoff before it gives up', async () => {
      const chat = await createChat(admin());
      const c = await agent(chat.alice, { reconnect: false });
      const w = new ChatWriter(c, { chatId: chat.chatId });
      await w.send('then the connection goes');
      c.close();
      await daemon().stop();
      const dials = vi.spyOn(YelloClient, 'connect');
      const gaveUp = await within(w.release({ timeoutMs: 300 }), 3000);
      expect(gaveUp).toBeInstanceOf(ConnectionLostError);
      // Dials at about 0, 50, 150 and 350 ms; with 1 s between them only at 0 and 1000 ms.
      expect(dials.mock.calls.length).toBeGreaterThanOrEqual(3);
      expect(w.state).toBe('claimed');
    });

    it('resolveUncertain(): a streams.get that times out (the daemon frozen after operations.get answered) is asked again, and the outcome resolved', async () => {
      const chat = await createChat(admin());
      const c = await agent(chat.alice, { callTimeoutMs: 300 });
      const w = new ChatWriter(c, { chatId: chat.chatId });
      await w.send('first');
      freeze(daemon());
      try {
        expect(await rejectionOf(w.send('maybe'))).toBeInstanceOf(TimeoutError);
      } finally {
        thaw(daemon());
      }
      const operationId = w.uncertainOperationId!;
      expect(w.state).toBe('paused');
      // Every call passes through; the first streams.get finds the daemon frozen, thawed once that call timed out.
      const realCall = c.call.bind(c) as (...args: unknown[]) => Promise<unknown>;
      const heads: Array<'answered' | Error> = [];
      const calls = vi.spyOn(c, 'call').mockImplementation(((...args: unknown[]) => {
        const frozen = args[0] === 'streams.get' && heads.length === 0;
        if (frozen) freeze(daemon());
        const p = realCall(...args);
        if (args[0] === 'streams.get')
          void p.then(
            () => heads.push('answered'),
            (e: unknown) => {
              heads.push(e as Error);
              if (frozen) thaw(daemon());
            },
          );
        return p;
      }) as typeof c.call);
      const outcome = await within(w.resolveUncertain(), 5000);
      expect(outcome).toMatchObject({ operationId, committed: true, operation: { state: 'committed' } });
      expect(heads[0]).toBeInstanceOf(TimeoutError);
      expect(heads.slice(1)).toEqual(['answered']);
      expect(calls.mock.calls.filter((a) => a[0] === 'operations.get').length).toBeGreaterThanOrEqual(2);
      expect((outcome as UncertainOutcome).operation.nextPosition).toBe((await head(chat.alice)).nextPosition);
      expect([w.state, w.uncertainOperationId]).toEqual(['claimed', null]);
      calls.mockRestore();
      await w.send('after');
      expect(await contents(chat.alice)).toEqual(['first', 'maybe', 'after']);
      await w.release();
    });
  });
});
