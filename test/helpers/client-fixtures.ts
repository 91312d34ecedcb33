// Fixtures for the client-library tests (test/client): the real daemon (through
// daemon-process.ts), agents and chats made through the public client API, a toy native
// adapter that records what a Coordinator presents, and small waiting helpers.

import { DaemonProcess, makeTempDir } from './daemon-process.js';
import { vi } from 'vitest';
import { sleep } from './wait.js';
import { jsonPreview } from './wire-fixtures.js';
import {
  Coordinator,
  MemoryCursorStore,
  YelloClient,
  type CoordinatorOptions,
  type CoordinatorState,
  type CursorStore,
  type NativeAdapter,
  type PeerBatch,
  type StoredRecord,
  type UncertainOutcome,
  type AppendResult,
  type ChatBatchNotification,
} from '../../src/client/index.js';

export { makeTempDir };
export { Teardown } from './teardown.js';

let counter = 0;
/** A unique id-safe string (`^[A-Za-z0-9_-]+$`). */
export function uniqueName(prefix = 'u'): string {
  counter += 1;
  return `${prefix}-${process.pid.toString(36)}-${Date.now().toString(36)}-${counter}`;
}

/**
 * Starts the real daemon with `--policy open`, so agents need no grants: in this worker, or in a
 * process of its own with `{ process: true }` (for a test that SIGKILLs or freezes it).
 */
export function startDaemon(extraArgs: string[] = [], options: { process?: boolean } = {}): Promise<DaemonProcess> {
  return DaemonProcess.start({ extraArgs: ['--policy', 'open', ...extraArgs], ...options });
}

/** A client hello'd with the daemon's admin token. */
export function connectAdmin(
  daemon: DaemonProcess,
  extra: { reconnect?: boolean | { minDelayMs?: number; maxDelayMs?: number } } = {},
): Promise<YelloClient> {
  return YelloClient.connect({ socketPath: daemon.socketPath, token: daemon.adminToken, clientName: 'client-tests', ...extra });
}

/** One participant of a test chat. */
export interface Participant {
  id: string;
  username: string;
  token: string;
  /** This agent's outbound stream (`chatId:agentId`). */
  streamId: string;
}

/** Two agents, alice and bob, in one chat. */
export interface TestChat {
  chatId: string;
  alice: Participant;
  bob: Participant;
}

/** A writer's hold on its stream: the coordinator token and the next position to append at. */
export interface Hold {
  streamId: string;
  token: string;
  next: string;
}

/** alice and bob of a fresh chat, each connected, alice holding the claim on her outbound stream. */
export async function openChatOfTwo(
  daemon: DaemonProcess,
  admin: YelloClient,
): Promise<{ chat: TestChat; alice: YelloClient; bob: YelloClient; hold: Hold }> {
  const chat = await createChat(admin);
  const alice = await connectAgent(daemon, chat.alice);
  const bob = await connectAgent(daemon, chat.bob);
  const claim = await alice.rpc.streams.claim({ streamId: chat.alice.streamId });
  return { chat, alice, bob, hold: { streamId: chat.alice.streamId, token: claim.coordinatorToken, next: claim.nextPosition } };
}

/** Appends `contents` as one operation at `hold.next` and moves `hold.next` past it. */
export async function appendMessages(client: YelloClient, hold: Hold, contents: string[]): Promise<AppendResult> {
  const res = await client.rpc.streams.append({
    streamId: hold.streamId,
    coordinatorToken: hold.token,
    generation: '1',
    expectedPosition: hold.next,
    operationId: uniqueName('op'),
    records: contents.map((content) => ({ type: 'chat.message' as const, messageId: uniqueName('m'), content })),
  });
  hold.next = res.nextPosition;
  return res;
}

/** Creates alice and bob through the admin client and opens their chat. */
export async function createChat(admin: YelloClient): Promise<TestChat> {
  const a = await admin.rpc.agents.create({ username: uniqueName('alice'), name: 'Alice' });
  const b = await admin.rpc.agents.create({ username: uniqueName('bob'), name: 'Bob' });
  const { chat } = await admin.rpc.chats.open({ agentAId: a.agent.id, agentBId: b.agent.id });
  const part = (x: typeof a): Participant => ({
    id: x.agent.id,
    username: x.agent.username,
    token: x.token,
    streamId: `${chat.id}:${x.agent.id}`,
  });
  return { chatId: chat.id, alice: part(a), bob: part(b) };
}

/** A client hello'd as `who`. */
export function connectAgent(
  daemon: DaemonProcess,
  who: Participant,
  extra: Partial<Parameters<typeof YelloClient.connect>[0]> = {},
): Promise<YelloClient> {
  return YelloClient.connect({ socketPath: daemon.socketPath, token: who.token, clientName: 'client-tests', ...extra });
}

/**
 * A toy native adapter: records every presented batch (and every `resolved` outcome). An
 * optional per-batch delay makes presentation slow enough for a backlog to build up, and a
 * `hold` hook lets a test keep a presentation open until it says so.
 */
export class RecordingAdapter implements NativeAdapter {
  readonly batches: PeerBatch[] = [];
  readonly outcomes: UncertainOutcome[] = [];
  delayMs: number;
  /** Called at the start of each presentation; the presentation waits for it. */
  hold: ((batch: PeerBatch) => Promise<void> | void) | null = null;

  constructor(options: { delayMs?: number } = {}) {
    this.delayMs = options.delayMs ?? 0;
  }

  async present(batch: PeerBatch): Promise<void> {
    this.batches.push(batch);
    if (this.hold) await this.hold(batch);
    if (this.delayMs > 0) await sleep(this.delayMs);
  }

  resolved(outcome: UncertainOutcome): void {
    this.outcomes.push(outcome);
  }

  /** Every presented record, in presentation order. */
  get records(): StoredRecord[] {
    return this.batches.flatMap((b) => b.records);
  }

  /** Contents of the presented chat messages, in presentation order. */
  get contents(): string[] {
    return messageContents(this.records);
  }

  /** The last presented batch that holds a message with `content`. */
  batchWith(content: string): PeerBatch | undefined {
    return [...this.batches].reverse().find((b) => messageContents(b.records).includes(content));
  }
}

/** Contents of the chat.message records among `records`. */
export function messageContents(records: StoredRecord[]): string[] {
  return records.flatMap((r) => (r.wrapper.type === 'chat.message' ? [r.wrapper.message.content] : []));
}

/** Records every `state` event of a coordinator: `['idle>starting', 'starting>running', …]` and the states alone. */
export function watchStates(coord: Coordinator): { states: CoordinatorState[]; transitions: string[]; errors: (Error | undefined)[] } {
  const log = { states: [] as CoordinatorState[], transitions: [] as string[], errors: [] as (Error | undefined)[] };
  coord.on('state', (e) => {
    log.states.push(e.state);
    log.transitions.push(`${e.previous}>${e.state}`);
    log.errors.push(e.error);
  });
  return log;
}

/** A coordinator for `who` in `chat` on `daemon`, with quick reconnects. Not started. */
export function makeCoordinator(
  daemon: DaemonProcess,
  chat: TestChat,
  who: Participant,
  options: Partial<CoordinatorOptions> & { adapter?: NativeAdapter; cursorStore?: CursorStore } = {},
): Coordinator {
  const { adapter, cursorStore, ...rest } = options;
  return new Coordinator({
    token: who.token,
    chatId: chat.chatId,
    socketPath: daemon.socketPath,
    reconnect: { minDelayMs: 50, maxDelayMs: 500 },
    ...rest,
    adapter: adapter ?? new RecordingAdapter(),
    cursorStore: cursorStore ?? new MemoryCursorStore(),
  });
}

/** Settles with `p`'s outcome, or with `'pending'` if it has not settled within `ms`. */
export async function settledWithin<T>(
  p: Promise<T>,
  ms: number,
): Promise<{ status: 'fulfilled'; value: T } | { status: 'rejected'; reason: unknown } | { status: 'pending' }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ status: 'pending' }>((r) => {
    timer = setTimeout(() => {
      r({ status: 'pending' });
    }, ms);
  });
  try {
    return await Promise.race([
      p.then(
        (value) => ({ status: 'fulfilled' as const, value }),
        (reason: unknown) => ({ status: 'rejected' as const, reason }),
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The rejection of `p`; throws (failing the test) if it resolves instead. */
export async function rejectionOf(p: Promise<unknown>): Promise<unknown> {
  let value: unknown;
  try {
    value = await p;
  } catch (err) {
    return err;
  }
  // Outside the try: this error is the test's failure, never mistaken for the rejection.
  throw new Error(`expected a rejection, got ${jsonPreview(value)}`);
}

/** Every record of a stream generation, read from its first retained position. */
export async function readStream(client: YelloClient, streamId: string, generation = '1'): Promise<StoredRecord[]> {
  const state = await client.rpc.streams.get({ streamId });
  const out: StoredRecord[] = [];
  let from = state.generation === generation ? state.firstPosition : '0';
  for (;;) {
    const batch = await client.rpc.streams.read({ streamId, generation, fromPosition: from });
    if (batch.records.length === 0) return out;
    out.push(...batch.records);
    from = batch.nextPosition;
  }
}

/** Sends SIGSTOP / SIGCONT to the daemon this test started (by its pid: a daemon started with `process: true`). */
export function freeze(daemon: DaemonProcess): void {
  signalRunning(daemon, 'SIGSTOP');
}
/** Resumes a daemon stopped by {@link freeze}. */
export function thaw(daemon: DaemonProcess): void {
  signalRunning(daemon, 'SIGCONT');
}

/** A daemon that died under a test says how (a bare `kill ESRCH` said nothing, and hid the test's own failure in a `finally`). */
function signalRunning(daemon: DaemonProcess, signal: NodeJS.Signals): void {
  if (!daemon.running) {
    throw new Error(`cannot send ${signal}: the daemon exited ${JSON.stringify(daemon.exitInfo)}\n${daemon.outputTail()}`);
  }
  process.kill(daemon.pid!, signal);
}

/**
 * What the coordinators' connections do, observed (not changed) through YelloClient.connect:
 * each dial a coordinator makes from now on (answered once its hello was), and each chats.batch
 * that arrives on such a connection. The tap's listener is added before the coordinator's own,
 * so a batch seen here is already queued in that coordinator. Undo with vi.restoreAllMocks().
 */
export function tapCoordinators(): {
  dials: { answered: boolean }[];
  /** Whether a batch holding message `content` reached a coordinator (of `token`, for `streamId`). */
  received(content: string, where?: { token?: string; streamId?: string }): boolean;
} {
  const dials: { answered: boolean }[] = [];
  const seen: { token: string; batch: ChatBatchNotification }[] = [];
  const connect = YelloClient.connect.bind(YelloClient);
  vi.spyOn(YelloClient, 'connect').mockImplementation(async (options) => {
    if (options.clientName !== 'yello-coordinator') return connect(options);
    const dial = { answered: false };
    dials.push(dial);
    const client = await connect(options);
    dial.answered = true;
    client.on('chats.batch', (batch) => seen.push({ token: options.token, batch }));
    return client;
  });
  return {
    dials,
    received: (content, where = {}) =>
      seen.some(
        (s) =>
          (where.token === undefined || s.token === where.token) &&
          (where.streamId === undefined || s.batch.streamId === where.streamId) &&
          messageContents(s.batch.records).includes(content),
      ),
  };
}
