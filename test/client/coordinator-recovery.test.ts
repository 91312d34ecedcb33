// Coordinator (docs/protocol.md §8) across daemon crashes: it resumes from the stored compound
// cursor without loss or duplicate presentation, and an append of unknown outcome pauses it
// until resolveUncertain() has asked operations.get — never resending by itself.

import { rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ConnectionLostError,
  CoordinatorPausedError,
  FileCursorStore,
  TimeoutError,
  YelloClient,
  type AppendResult,
} from '../../src/client/index.js';
import {
  RecordingAdapter,
  connectAgent,
  createChat,
  freeze,
  makeCoordinator,
  makeTempDir,
  messageContents,
  readStream,
  rejectionOf,
  settledWithin,
  thaw,
  uniqueName,
  watchStates,
  type Participant,
  type TestChat,
  tapCoordinators,
} from '../helpers/client-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

// A process of its own: the tests SIGKILL and freeze (SIGSTOP) it.
const { daemon, admin, coordinators, clients } = useClientDaemon({ reconnect: { minDelayMs: 50, maxDelayMs: 300 }, process: true });
let tempDir = '';

beforeAll(async () => {
  tempDir = await makeTempDir('ylc-');
});

afterAll(() => rm(tempDir, { recursive: true, force: true }));

// Before the fixture's afterEach stops the coordinators: a test may leave the daemon stopped.
afterEach(async () => {
  vi.restoreAllMocks();
  if (!daemon().running) await daemon().restart();
});

/** Waits until the reconnecting admin client is usable again after a restart. */
async function adminReady(): Promise<YelloClient> {
  await waitFor(
    async () =>
      admin().connected &&
      (await admin()
        .rpc.daemon.status({})
        .then(
          () => true,
          () => false,
        )),
    'the admin client to reconnect',
    15_000,
    50,
  );
  return admin();
}

/** A plain writer for `who`: claims the outbound stream and appends one message per call. */
class Writer {
  client!: YelloClient;
  token = '';
  next = '0';
  constructor(readonly who: Participant) {}
  async open(): Promise<this> {
    this.client = await connectAgent(daemon(), this.who);
    clients.push(this.client);
    if (!this.token) {
      const claim = await this.client.rpc.streams.claim({ streamId: this.who.streamId });
      this.token = claim.coordinatorToken;
      this.next = claim.nextPosition;
    }
    return this;
  }
  async send(content: string): Promise<AppendResult> {
    const res = await this.client.rpc.streams.append({
      streamId: this.who.streamId,
      coordinatorToken: this.token,
      generation: '1',
      expectedPosition: this.next,
      operationId: uniqueName('op'),
      records: [{ type: 'chat.message', messageId: uniqueName('m'), content }],
    });
    this.next = res.nextPosition;
    return res;
  }
}

describe('Coordinator: resuming across a daemon SIGKILL', () => {
  it('presents every peer message exactly once and in order, before, during and after the crash', async () => {
    const chat = await createChat(admin());
    const alice = await new Writer(chat.alice).open();
    const cursorFile = path.join(tempDir, 'bob-cursors.json');
    const seen = new RecordingAdapter({ delayMs: 15 }); // slow enough to have a backlog when the daemon dies
    const bob = makeCoordinator(daemon(), chat, chat.bob, {
      adapter: seen,
      cursorStore: new FileCursorStore(cursorFile),
      reconnect: { minDelayMs: 200, maxDelayMs: 600 },
      start: 'end',
    });
    coordinators.push(bob);
    const log = watchStates(bob);
    await bob.start();
    const firstPosition = alice.next;

    const expected: string[] = [];
    const send = async (text: string) => {
      await alice.send(text);
      expected.push(text);
    };
    // bob is in the middle of presenting before-3 when the daemon dies, with more queued behind it.
    let crashed!: () => void;
    const crash = new Promise<void>((r) => (crashed = r));
    let holding = false;
    seen.hold = (batch) => {
      if (!messageContents(batch.records).includes('before-3')) return undefined;
      holding = true;
      return crash;
    };
    for (let i = 0; i < 8; i++) await send(`before-${i}`);
    await waitFor(() => holding, 'bob to be presenting before-3');
    await daemon().kill();
    crashed();
    await waitFor(() => bob.state === 'reconnecting', 'bob to notice the loss');

    await daemon().restart();
    await alice.open(); // the coordinator token survives the restart
    for (let i = 0; i < 8; i++) await send(`during-${i}`);
    await waitFor(() => bob.state === 'running', 'bob to be running again', 15_000);
    for (let i = 0; i < 8; i++) await send(`after-${i}`);

    await waitFor(() => seen.contents.length >= expected.length, `bob to be shown all ${expected.length} messages`, 15_000);
    await sleep(300); // anything duplicated would show up by now
    expect(seen.contents).toEqual(expected);

    // Batches are contiguous, start where bob started, and end at alice's head.
    const peer = seen.batches.filter((b) => b.streamId === chat.alice.streamId);
    expect(peer.length).toBe(seen.batches.length);
    expect(peer[0]!.fromPosition).toBe(firstPosition);
    for (let i = 1; i < peer.length; i++) expect(peer[i]!.fromPosition, `batch ${i}`).toBe(peer[i - 1]!.nextPosition);
    expect(peer.at(-1)!.nextPosition).toBe(alice.next);
    const positions = seen.records.map((r) => r.position);
    expect(new Set(positions).size).toBe(positions.length);

    expect(log.transitions).toEqual(['idle>starting', 'starting>running', 'running>reconnecting', 'reconnecting>running']);

    // A new coordinator process reading the same cursor file carries on from there: only new messages.
    await bob.stop();
    await alice.send('for the next run');
    const nextSeen = new RecordingAdapter();
    const next = makeCoordinator(daemon(), chat, chat.bob, { adapter: nextSeen, cursorStore: new FileCursorStore(cursorFile) });
    coordinators.push(next);
    await next.start();
    await waitFor(() => nextSeen.contents.length >= 1, 'the next run to be shown the new message');
    await sleep(200); // nothing else may be shown within 200 ms
    expect(nextSeen.contents).toEqual(['for the next run']);
  });
});

describe('Coordinator: a slow daemon', () => {
  it('a daemon frozen while a batch waits behind a presentation does not make it skip that batch', async () => {
    const chat = await createChat(admin());
    const alice = await new Writer(chat.alice).open();
    const seen = new RecordingAdapter();
    const tap = tapCoordinators();
    const bob = makeCoordinator(daemon(), chat, chat.bob, { adapter: seen, callTimeoutMs: 800 });
    coordinators.push(bob);
    await bob.start();

    // Hold P0's presentation while P1 queues up behind it; then freeze the daemon for longer
    // than a call may take.
    let release: (() => void) | null = null;
    seen.hold = (batch) => (messageContents(batch.records).includes('P0') ? new Promise<void>((r) => (release = r)) : undefined);
    await alice.send('P0');
    await waitFor(() => release, 'bob to be presenting P0');
    await alice.send('P1');
    await waitFor(() => tap.received('P1'), "P1 to be queued in bob's coordinator");
    freeze(daemon());
    try {
      release!();
      await sleep(1_300); // frozen longer than callTimeoutMs (time is the subject)
    } finally {
      thaw(daemon());
    }
    await alice.send('P2');
    await waitFor(() => seen.contents.includes('P2') || bob.state !== 'running', 'bob to go on', 10_000);
    await sleep(300); // whatever else would be shown shows within 300 ms
    // Either P1 comes before P2, or the coordinator stops for attention; never P0 then P2.
    if (bob.state === 'running') expect(seen.contents).toEqual(['P0', 'P1', 'P2']);
    else expect(seen.contents).not.toContain('P2');
  });
});

describe('Coordinator: stop() during a reconnect', () => {
  it('stays stopped when a dial that was in flight completes afterwards', async () => {
    const chat = await createChat(admin());
    // One dial DIAL_DELAY_MS after the loss: by then the daemon is back, but frozen, so the dial
    // hangs in hello. The delay leaves a slow restart (PostgreSQL on a loaded machine) time to
    // end before the dial is due; a restart that outlasts it would let the dial through unfrozen.
    const DIAL_DELAY_MS = 6_000;
    const bob = makeCoordinator(daemon(), chat, chat.bob, { reconnect: { minDelayMs: DIAL_DELAY_MS, maxDelayMs: DIAL_DELAY_MS } });
    coordinators.push(bob);
    const log = watchStates(bob);
    await bob.start();
    await daemon().kill();
    await waitFor(() => bob.state === 'reconnecting', 'bob to notice the loss');
    const lostAt = performance.now();
    await daemon().restart();
    freeze(daemon());
    try {
      const frozenAfter = performance.now() - lostAt;
      expect(frozenAfter, 'the restart ended after the dial was due: the test proves nothing then').toBeLessThan(DIAL_DELAY_MS - 500);
      await sleep(DIAL_DELAY_MS + 500 - frozenAfter); // time is the subject: the client's dial, due now, hangs in hello
      expect(bob.state).toBe('reconnecting');
      await bob.stop();
      expect(bob.state).toBe('stopped');
    } finally {
      thaw(daemon());
    }
    await sleep(500); // time is the subject: the dial's hello is answered now, and must change nothing
    expect(bob.state).toBe('stopped');
    expect(log.states.at(-1)).toBe('stopped');
    expect((await settledWithin(bob.done, 500)).status).toBe('fulfilled');
  });
});

describe('Coordinator: appends of unknown outcome', () => {
  /** Checks what resolveUncertain() said against operations.get and streams.read. */
  async function expectOutcomeMatchesDaemon(chat: TestChat, operationId: string, committed: boolean, content: string): Promise<void> {
    const a = await adminReady();
    const op = await a.rpc.operations.get({ streamId: chat.bob.streamId, operationId });
    expect(op.state).toBe(committed ? 'committed' : 'unknown');
    const records = await readStream(a, chat.bob.streamId);
    const mine = records.filter((r) => r.wrapper.operationId === operationId);
    expect(messageContents(mine)).toEqual(committed ? [content] : []);
    if (committed) expect(mine[0]!.position).toBe(op.firstPosition);
  }

  async function startBob(callTimeoutMs?: number) {
    const chat = await createChat(admin());
    const adapter = new RecordingAdapter();
    const bob = makeCoordinator(daemon(), chat, chat.bob, { adapter, ...(callTimeoutMs ? { callTimeoutMs } : {}) });
    coordinators.push(bob);
    await bob.start();
    await bob.send('a known message');
    return { chat, bob, adapter };
  }

  it('pauses when the daemon is SIGKILLed right after send(); resolveUncertain() answers what the daemon shows', async () => {
    const { chat, bob, adapter } = await startBob();
    const log = watchStates(bob);
    const sending = rejectionOf(bob.send('maybe stored'));
    await daemon().kill();
    const err = await sending;
    expect(err instanceof ConnectionLostError || err instanceof TimeoutError, String(err)).toBe(true);
    expect((err as ConnectionLostError).outcomeUnknown).toBe(true);
    expect(bob.state).toBe('paused');
    const operationId = bob.uncertainOperationId!;
    expect(operationId).toMatch(/^[A-Za-z0-9_-]+$/);

    const paused = await rejectionOf(bob.send('while paused'));
    expect(paused).toBeInstanceOf(CoordinatorPausedError);
    expect((paused as CoordinatorPausedError).operationId).toBe(operationId);

    await daemon().restart();
    const outcome = await bob.resolveUncertain();
    expect(outcome.operationId).toBe(operationId);
    expect(outcome.operation.state).toBe(outcome.committed ? 'committed' : 'unknown');
    expect(adapter.outcomes).toEqual([outcome]);
    await expectOutcomeMatchesDaemon(chat, operationId, outcome.committed, 'maybe stored');

    expect(bob.state).toBe('running');
    expect(bob.uncertainOperationId).toBeNull();
    expect(log.states).toContain('paused');
    expect(log.states.at(-1)).toBe('running');
    const head = (await admin().rpc.streams.get({ streamId: chat.bob.streamId })).nextPosition;
    const res = await bob.send('after resolving');
    expect(res.firstPosition).toBe(head);
  });

  it('a timed-out append that did commit resolves as committed, and sending resumes after it', async () => {
    const { chat, bob, adapter } = await startBob(3_000);
    const log = watchStates(bob);
    freeze(daemon()); // the request waits, unread, in the socket
    let err: unknown;
    try {
      err = await rejectionOf(bob.send('slow but stored'));
      expect(bob.state).toBe('paused');
      await expect(bob.send('while paused')).rejects.toBeInstanceOf(CoordinatorPausedError);
    } finally {
      thaw(daemon());
    }
    expect(err).toBeInstanceOf(TimeoutError);
    expect((err as TimeoutError).outcomeUnknown).toBe(true);
    expect((err as TimeoutError).transient).toBe(true);
    const operationId = bob.uncertainOperationId!;
    expect(log.transitions[0]).toBe('running>paused');

    const outcome = await bob.resolveUncertain();
    expect(outcome).toMatchObject({ operationId, committed: true, operation: { state: 'committed' } });
    expect(adapter.outcomes).toEqual([outcome]);
    await expectOutcomeMatchesDaemon(chat, operationId, true, 'slow but stored');

    expect(bob.state).toBe('running');
    const res = await bob.send('next one');
    expect(res.firstPosition).toBe(outcome.operation.nextPosition);
    // Nothing was resent: the message is stored once.
    expect(messageContents(await readStream(admin(), chat.bob.streamId))).toEqual(['a known message', 'slow but stored', 'next one']);
  });

  it('a timed-out append lost with the daemon resolves as not committed, and sending resumes at the same position', async () => {
    const { chat, bob } = await startBob(3_000);
    const head = (await admin().rpc.streams.get({ streamId: chat.bob.streamId })).nextPosition;
    freeze(daemon());
    const err = await rejectionOf(bob.send('never stored'));
    expect(err).toBeInstanceOf(TimeoutError);
    expect(bob.state).toBe('paused');
    const operationId = bob.uncertainOperationId!;
    await daemon().kill(); // the unread request dies with the process

    await expect(bob.send('while paused')).rejects.toBeInstanceOf(CoordinatorPausedError);
    await daemon().restart();
    const outcome = await bob.resolveUncertain();
    expect(outcome).toMatchObject({ operationId, committed: false, operation: { state: 'unknown' } });
    await expectOutcomeMatchesDaemon(chat, operationId, false, 'never stored');

    expect(bob.state).toBe('running');
    const res = await bob.send('sent again by the caller');
    expect(res.firstPosition).toBe(head);
    expect(messageContents(await readStream(admin(), chat.bob.streamId))).toEqual(['a known message', 'sent again by the caller']);
  });
});
