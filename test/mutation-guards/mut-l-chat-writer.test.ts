// Kills mutants of src/client/chat-writer.ts that survived mut-h-chat-writer.test.ts and
// test/client/chat-writer.test.ts (r1, see r1-arguments.md, "src/client/chat-writer.ts").
// (1) The deadlines of the wait for a reconnect: `Date.now() < deadline` before an append (179:68)
// and before a release (319:53), and `Date.now() >= deadline` after a failed release (337:25).
// mut-h gives them 300 or 500 ms, so `<=` or `>` differ from the code only in the deadline's own
// millisecond, which a test with a running clock never hits. With `connectWaitMs: 0` or
// `timeoutMs: 0` and Date standing still (only Date faked, timers real) the deadline is the
// current millisecond for as long as the test wants: the code gives up after no wait or one dial,
// the mutants wait or dial again for as long as the daemon is down. (2) release()'s retry delay,
// `backoff.next()?.delayMs ?? 1000` (339:23): `&&` makes every delay 1 s. mut-h's releases either
// succeed once the daemon is back or have a 500 ms timeout whose outcome is the same either way;
// here a 300 ms timeout counts the writer's own dials while the daemon is down (four with the
// 50/100/200 ms backoff, two with the mutant). (3) resolveUncertain()'s catch of a transient
// error (266:13): lookUpOperation turns only operations.get's lost connection or timeout into
// null, so a TimeoutError of the streams.get after it reaches that catch. Every earlier test
// froze the daemon before operations.get, never between the two calls; here a spy on the
// client's `call` (passing every call through) freezes it as streams.get is sent.

import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChatWriter, ConnectionLostError, TimeoutError, YelloClient, type UncertainOutcome } from '../../src/client/index.js';
import { connectAgent, createChat, freeze, readStream, rejectionOf, thaw, type Participant } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { waitFor } from '../helpers/wait.js';

// The admin dials again by itself after a restart.
// A process of its own: the tests freeze (SIGSTOP) it.
const { daemon, admin, clients } = useClientDaemon({ reconnect: { minDelayMs: 20, maxDelayMs: 100 }, process: true });
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
