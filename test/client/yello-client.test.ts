// YelloClient (docs/protocol.md §8) against the real daemon: session info, typed `rpc.<ns>.<m>` and
// `call()`, errors as classes keyed by data.type, connection loss, reconnect without resend,
// and notifications as events and as an async iterator.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConnectionLostError,
  ContinuityBreakError,
  DuplicateMessageError,
  FencedError,
  InvalidParamsError,
  InvalidReceiptError,
  NotFoundError,
  OperationConflictError,
  PermissionDeniedError,
  PolicyRejectedError,
  PositionMismatchError,
  RemoteError,
  RequestTooLargeError,
  UnauthenticatedError,
  WriterActiveError,
  YelloClient,
  YelloClientError,
  remoteError,
  type ChatBatchNotification,
  type ChatBreakNotification,
  type HelloResult,
} from '../../src/client/index.js';
import {
  connectAgent,
  createChat,
  freeze,
  messageContents,
  rejectionOf,
  settledWithin,
  uniqueName,
  type TestChat,
  appendMessages,
  openChatOfTwo,
  type Hold,
} from '../helpers/client-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

// A process of its own: tests SIGKILL and freeze (SIGSTOP) it.
const { daemon, admin } = useClientDaemon({ process: true });
let chat: TestChat;
let alice: YelloClient;
let bob: YelloClient;
/** alice's claim on her outbound stream and where it stands. */
let hold: Hold;
const opened: YelloClient[] = [];

function track(c: YelloClient): YelloClient {
  opened.push(c);
  return c;
}

beforeAll(async () => {
  ({ chat, alice, bob, hold } = await openChatOfTwo(daemon(), admin()));
  track(alice);
  track(bob);
});

afterAll(() => {
  for (const c of opened) c.close();
});

/** alice appends `contents` as one operation at her stream's next position. */
const aliceAppends = (...contents: string[]) => appendMessages(alice, hold, contents);

/** Asserts that `err` is the typed remote error `Cls` for `type`/`code`, and returns it. */
function expectRemote<T extends RemoteError>(err: unknown, Cls: abstract new (...args: never[]) => T, type: string, code: number): T {
  expect(err, `expected ${type}, got ${String(err)}`).toBeInstanceOf(Cls);
  expect(err).toBeInstanceOf(RemoteError);
  expect(err).toBeInstanceOf(YelloClientError);
  expect(err).toBeInstanceOf(Error);
  const e = err as T;
  expect({ type: e.type, code: e.code, dataType: e.data.type, name: e.name }).toEqual({ type, code, dataType: type, name: Cls.name });
  expect(e.transient).toBe(false);
  return e;
}

describe('YelloClient.connect', () => {
  it('says hello and exposes the session (role, agentId, protocol, limits, signing kid)', () => {
    const s: HelloResult = alice.session;
    expect(s).toMatchObject({ role: 'agent', agentId: chat.alice.id, protocol: 'yello.chat.v1', signing: { alg: 'ES256' } });
    expect(s.limits.maxAppendRequestBytes).toBe(262_144);
    expect(s.limits.maxLineBytes).toBeGreaterThanOrEqual(262_144);
    expect(typeof s.daemon.version).toBe('string');
    expect(s.signing.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(admin().session.role).toBe('admin');
    expect(admin().session.agentId ?? null).toBeNull();
    expect(alice.connected).toBe(true);
  });

  it('rejects a bad token with UnauthenticatedError and leaves nothing connected', async () => {
    const err = await rejectionOf(YelloClient.connect({ socketPath: daemon().socketPath, token: 'not-a-real-token' }));
    expectRemote(err, UnauthenticatedError, 'UNAUTHENTICATED', 4001);
  });

  it('fails with ConnectionLostError (outcome known: nothing was sent) when no daemon listens', async () => {
    const err = await rejectionOf(YelloClient.connect({ socketPath: `${daemon().dir}/nobody.sock`, token: 'x' }));
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect((err as ConnectionLostError).outcomeUnknown).toBe(false);
  });
});

describe('typed methods', () => {
  it('answers the same through rpc.<namespace>.<method> and call(method, params)', async () => {
    const viaRpc = await bob.rpc.chats.get({ chatId: chat.chatId });
    const viaCall = await bob.call('chats.get', { chatId: chat.chatId });
    expect(viaRpc).toEqual(viaCall);
    expect(viaRpc.chat.id).toBe(chat.chatId);
    expect(viaRpc.streams.map((s) => s.streamId).sort()).toEqual([chat.alice.streamId, chat.bob.streamId].sort());

    const status = await admin().rpc.daemon.status({});
    expect(status.storage).toBe('ok');
    expect(status.kid).toBe(admin().session.signing.kid);
  });

  it('appends through rpc.streams.append and reads back through call("streams.read")', async () => {
    const res = await aliceAppends('typed one', 'typed two');
    expect(res).toMatchObject({ streamId: chat.alice.streamId, generation: '1', duplicate: false, redactions: [] });
    expect(BigInt(res.nextPosition) - BigInt(res.firstPosition)).toBe(2n);
    const read = await bob.call('streams.read', { streamId: chat.alice.streamId, generation: '1', fromPosition: res.firstPosition });
    expect(messageContents(read.records)).toEqual(['typed one', 'typed two']);
    expect(read.records.map((r) => r.wrapper.operationId)).toEqual([res.operationId, res.operationId]);

    const op = await bob.rpc.operations.get({ streamId: chat.alice.streamId, operationId: res.operationId });
    expect(op).toMatchObject({ state: 'committed', firstPosition: res.firstPosition, nextPosition: res.nextPosition });
  });

  it('has a method on rpc for every namespace the protocol lists', () => {
    for (const [ns, fns] of Object.entries({
      session: ['hello'],
      daemon: ['status'],
      keys: ['list', 'rotate'],
      agents: ['create', 'list', 'get', 'rotateToken', 'disable', 'setPolicy'],
      grants: ['add', 'remove', 'list'],
      chats: ['open', 'get', 'list', 'permissions', 'history', 'follow', 'unfollow'],
      streams: ['get', 'claim', 'release', 'append', 'read', 'trim', 'reset'],
      operations: ['get', 'list'],
    })) {
      for (const fn of fns)
        expect(typeof (alice.rpc as unknown as Record<string, Record<string, unknown>>)[ns]?.[fn], `${ns}.${fn}`).toBe('function');
    }
  });
});

describe('errors as classes keyed by data.type', () => {
  it('INVALID_PARAMS is InvalidParamsError with the path of the bad field', async () => {
    const err = await rejectionOf(bob.rpc.streams.read({ streamId: chat.alice.streamId, generation: '1', fromPosition: '01' }));
    const e = expectRemote(err, InvalidParamsError, 'INVALID_PARAMS', -32602);
    expect(e.path).toBe('fromPosition');
    expect(typeof e.data.reason).toBe('string');
  });

  it('NOT_FOUND is NotFoundError', async () => {
    const err = await rejectionOf(bob.rpc.chats.get({ chatId: 'chat_doesnotexist' }));
    const e = expectRemote(err, NotFoundError, 'NOT_FOUND', 4004);
    expect(e.data.kind).toBe('chat');
  });

  it('PERMISSION_DENIED is PermissionDeniedError (an agent may not rotate keys)', async () => {
    expectRemote(await rejectionOf(alice.rpc.keys.rotate({})), PermissionDeniedError, 'PERMISSION_DENIED', 4003);
  });

  it('WRITER_ACTIVE is WriterActiveError, FENCED is FencedError with the current epoch', async () => {
    const held = await rejectionOf(alice.rpc.streams.claim({ streamId: chat.alice.streamId }));
    expectRemote(held, WriterActiveError, 'WRITER_ACTIVE', 4092);

    const old = hold.token;
    const again = await alice.rpc.streams.claim({ streamId: chat.alice.streamId, replace: true, reason: 'client test' });
    hold.token = again.coordinatorToken;
    hold.next = again.nextPosition;
    const err = await rejectionOf(
      alice.rpc.streams.append({
        streamId: chat.alice.streamId,
        coordinatorToken: old,
        generation: '1',
        expectedPosition: hold.next,
        operationId: uniqueName('op'),
        records: [{ type: 'chat.message', messageId: uniqueName('m'), content: 'stale' }],
      }),
    );
    const e = expectRemote(err, FencedError, 'FENCED', 4090);
    expect(e.data.epoch).toBe(again.epoch);
  });

  it('POSITION_MISMATCH is PositionMismatchError carrying nextPosition', async () => {
    const err = await rejectionOf(
      alice.rpc.streams.append({
        streamId: chat.alice.streamId,
        coordinatorToken: hold.token,
        generation: '1',
        expectedPosition: '999',
        operationId: uniqueName('op'),
        records: [{ type: 'chat.message', messageId: uniqueName('m'), content: 'misplaced' }],
      }),
    );
    const e = expectRemote(err, PositionMismatchError, 'POSITION_MISMATCH', 4091);
    expect(e.nextPosition).toBe(hold.next);
  });

  it('OPERATION_CONFLICT and DUPLICATE_MESSAGE are their own classes', async () => {
    const operationId = uniqueName('op');
    const messageId = uniqueName('m');
    const first = await alice.rpc.streams.append({
      streamId: chat.alice.streamId,
      coordinatorToken: hold.token,
      generation: '1',
      expectedPosition: hold.next,
      operationId,
      records: [{ type: 'chat.message', messageId, content: 'once' }],
    });
    hold.next = first.nextPosition;
    const conflict = await rejectionOf(
      alice.rpc.streams.append({
        streamId: chat.alice.streamId,
        coordinatorToken: hold.token,
        generation: '1',
        expectedPosition: hold.next,
        operationId,
        records: [{ type: 'chat.message', messageId: uniqueName('m'), content: 'different' }],
      }),
    );
    expectRemote(conflict, OperationConflictError, 'OPERATION_CONFLICT', 4093);
    const dup = await rejectionOf(
      alice.rpc.streams.append({
        streamId: chat.alice.streamId,
        coordinatorToken: hold.token,
        generation: '1',
        expectedPosition: hold.next,
        operationId: uniqueName('op'),
        records: [{ type: 'chat.message', messageId, content: 'once' }],
      }),
    );
    const e = expectRemote(dup, DuplicateMessageError, 'DUPLICATE_MESSAGE', 4094);
    expect(e.data.position).toBe(first.firstPosition);
  });

  it('INVALID_RECEIPT is InvalidReceiptError', async () => {
    const bobClaim = await bob.rpc.streams.claim({ streamId: chat.bob.streamId });
    const err = await rejectionOf(
      bob.rpc.streams.append({
        streamId: chat.bob.streamId,
        coordinatorToken: bobClaim.coordinatorToken,
        generation: '1',
        expectedPosition: bobClaim.nextPosition,
        operationId: uniqueName('op'),
        records: [
          {
            type: 'chat.receipt',
            peerStreamId: chat.alice.streamId,
            peerGeneration: '1',
            nextPosition: hold.next,
            batchId: 'forged-batch-id',
          },
        ],
      }),
    );
    expectRemote(err, InvalidReceiptError, 'INVALID_RECEIPT', 4095);
    await bob.rpc.streams.release({ streamId: chat.bob.streamId, coordinatorToken: bobClaim.coordinatorToken });
  });

  it('CONTINUITY_BREAK is ContinuityBreakError with its reason', async () => {
    const err = await rejectionOf(bob.rpc.streams.read({ streamId: chat.alice.streamId, generation: '2', fromPosition: '0' }));
    const e = expectRemote(err, ContinuityBreakError, 'CONTINUITY_BREAK', 4100);
    expect(e.reason).toBe('GENERATION_CHANGED');
    expect(e.data.streamId).toBe(chat.alice.streamId);
  });

  it('REQUEST_TOO_LARGE is RequestTooLargeError and the connection stays usable', async () => {
    const err = await rejectionOf(
      alice.rpc.streams.append({
        streamId: chat.alice.streamId,
        coordinatorToken: hold.token,
        generation: '1',
        expectedPosition: hold.next,
        operationId: uniqueName('op'),
        records: [{ type: 'chat.message', messageId: uniqueName('m'), content: 'x'.repeat(262_144) }],
      }),
    );
    expectRemote(err, RequestTooLargeError, 'REQUEST_TOO_LARGE', 4013);
    await aliceAppends('still usable');
  });

  it('POLICY_REJECTED is PolicyRejectedError with the matched kinds', async () => {
    const other = await createChat(admin());
    await admin().rpc.agents.setPolicy({ agentId: other.alice.id, pii: 'reject' });
    const c = track(await connectAgent(daemon(), other.alice));
    const claim = await c.rpc.streams.claim({ streamId: other.alice.streamId });
    const err = await rejectionOf(
      c.rpc.streams.append({
        streamId: other.alice.streamId,
        coordinatorToken: claim.coordinatorToken,
        generation: '1',
        expectedPosition: claim.nextPosition,
        operationId: uniqueName('op'),
        records: [{ type: 'chat.message', messageId: uniqueName('m'), content: 'mail me at someone@example.com' }],
      }),
    );
    const e = expectRemote(err, PolicyRejectedError, 'POLICY_REJECTED', 4220);
    expect(JSON.stringify(e.data.kinds)).toMatch(/mail/i);
  });

  it('an error without a known data.type stays a plain RemoteError (unknown method, unknown type)', async () => {
    const err = await rejectionOf(bob.call('nope.nothing' as never, {} as never));
    expect(err).toBeInstanceOf(RemoteError);
    const e = err as RemoteError;
    expect(e.constructor).toBe(RemoteError);
    expect(e.code).toBe(-32601);
    expect(e.type).toBe('JSONRPC_-32601');

    const future = remoteError({ code: 4999, message: 'from a newer daemon', data: { type: 'SOMETHING_NEW', detail: 1 } });
    expect(future.constructor).toBe(RemoteError);
    expect({ type: future.type, code: future.code, data: future.data }).toEqual({
      type: 'SOMETHING_NEW',
      code: 4999,
      data: { type: 'SOMETHING_NEW', detail: 1 },
    });
    // A known type still maps to its class, whatever the message says.
    expect(remoteError({ code: 4090, message: 'x', data: { type: 'FENCED' } })).toBeInstanceOf(FencedError);
    // data.type is looked up as an own key only.
    expect(remoteError({ code: 1, message: 'x', data: { type: 'toString' } }).constructor).toBe(RemoteError);
  });

  it('the connection survives every error above', async () => {
    expect(alice.connected && bob.connected).toBe(true);
    await expect(bob.rpc.daemon.status({})).resolves.toMatchObject({ storage: 'ok' });
  });
});

/** The value of an iterator step that must not be the end of the iteration. */
function yielded<T>(step: IteratorResult<T>): T {
  if (step.done) throw new Error('the notifications ended');
  return step.value;
}

describe('notifications', () => {
  it('arrive as chats.batch events and through the notifications() iterator, then a chats.break', async () => {
    const c = await createChat(admin());
    const a = track(await connectAgent(daemon(), c.alice));
    const b = track(await connectAgent(daemon(), c.bob));
    const claim = await a.rpc.streams.claim({ streamId: c.alice.streamId });

    const events: ChatBatchNotification[] = [];
    const breaks: ChatBreakNotification[] = [];
    b.on('chats.batch', (n) => events.push(n));
    b.on('chats.break', (n) => breaks.push(n));
    const iter = b.notifications();
    const first = iter.next(); // starts listening before anything is sent

    const { subscriptionId } = await b.rpc.chats.follow({ chatId: c.chatId });
    const res = await a.rpc.streams.append({
      streamId: c.alice.streamId,
      coordinatorToken: claim.coordinatorToken,
      generation: '1',
      expectedPosition: claim.nextPosition,
      operationId: uniqueName('op'),
      records: [{ type: 'chat.message', messageId: uniqueName('m'), content: 'ping' }],
    });

    const n1 = yielded(await first);
    expect(n1.method).toBe('chats.batch');
    const batch = n1.params as ChatBatchNotification;
    expect(batch).toMatchObject({
      subscriptionId,
      streamId: c.alice.streamId,
      generation: '1',
      fromPosition: res.firstPosition,
      nextPosition: res.nextPosition,
    });
    expect(messageContents(batch.records)).toEqual(['ping']);
    await waitFor(() => events.length >= 1, 'the chats.batch event');
    expect(events[0]).toEqual(batch);

    await admin().rpc.streams.reset({ streamId: c.alice.streamId, reason: 'client test' });
    const n2 = yielded(await iter.next());
    expect(n2.method).toBe('chats.break');
    expect(n2.params).toMatchObject({ subscriptionId, reason: 'GENERATION_CHANGED', streamId: c.alice.streamId });
    await waitFor(() => breaks.length === 1, 'the chats.break event');
    await iter.return(undefined);
  });

  it('the notifications() iterator ends when the client is closed', async () => {
    const c = track(await connectAgent(daemon(), chat.bob));
    const iter = c.notifications();
    const next = iter.next();
    c.close();
    const outcome = await settledWithin(next, 2_000);
    expect(outcome).toEqual({ status: 'fulfilled', value: { done: true, value: undefined } });
  });
});

describe('connection loss and reconnect (the daemon is killed)', () => {
  it('rejects a pending call with a transient ConnectionLostError whose outcome is unknown', async () => {
    const c = track(await connectAgent(daemon(), chat.bob));
    const disconnected: Error[] = [];
    c.on('disconnected', (e) => disconnected.push(e));
    const iter = c.notifications();
    const iterNext = iter.next();
    // A long poll keeps the call pending until the daemon dies.
    // (rejectionOf attaches its handler now, before the loss, so nothing goes unhandled.)
    const pending = rejectionOf(
      c.rpc.streams.read({ streamId: chat.alice.streamId, generation: '1', fromPosition: hold.next, waitMs: 30_000 }),
    );
    // Time for the request to reach the daemon: nothing observable says a long poll is waiting.
    await sleep(150);
    await daemon().kill();

    const err = await pending;
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect(err).toBeInstanceOf(YelloClientError);
    expect(err).not.toBeInstanceOf(RemoteError);
    const e = err as ConnectionLostError;
    expect({ type: e.type, transient: e.transient, outcomeUnknown: e.outcomeUnknown }).toEqual({
      type: 'CONNECTION_LOST',
      transient: true,
      outcomeUnknown: true,
    });

    await waitFor(() => disconnected.length === 1, 'the disconnected event');
    expect(c.connected).toBe(false);
    // The iterator ends with the connection.
    expect(await settledWithin(iterNext, 2_000)).toEqual({ status: 'fulfilled', value: { done: true, value: undefined } });
    // Without reconnect, later calls fail at once; nothing was written, so the outcome is known.
    const later = await rejectionOf(c.rpc.daemon.status({}));
    expect(later).toBeInstanceOf(ConnectionLostError);
    expect((later as ConnectionLostError).outcomeUnknown).toBe(false);
  });

  it('with reconnect: true, says hello again after a restart (reconnected) and never resends a request', async () => {
    if (!daemon().running) await daemon().restart();
    const a = track(await connectAgent(daemon(), chat.alice, { reconnect: { minDelayMs: 50, maxDelayMs: 300 } }));
    const firstHello = a.session;
    const seen: string[] = [];
    let reconnected: HelloResult | null = null;
    a.on('disconnected', () => seen.push('disconnected'));
    a.on('reconnecting', (r) => seen.push(`reconnecting#${r.attempt}`));
    a.on('reconnected', (h) => {
      seen.push('reconnected');
      reconnected = h;
    });

    // Freeze the daemon so the append sits unread in the socket, then kill it: the request is
    // lost with the process, and the client must not send it again after reconnecting.
    const before = (await a.rpc.streams.get({ streamId: chat.alice.streamId })).nextPosition;
    const operationId = uniqueName('op-lost');
    freeze(daemon());
    const append = rejectionOf(
      a.rpc.streams.append({
        streamId: chat.alice.streamId,
        coordinatorToken: hold.token,
        generation: '1',
        expectedPosition: before,
        operationId,
        records: [{ type: 'chat.message', messageId: uniqueName('m'), content: 'lost with the daemon' }],
      }),
    );
    // Time for the request to leave the client into the frozen daemon's socket (not observable).
    await sleep(150);
    await daemon().kill();
    const err = await append;
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect((err as ConnectionLostError).outcomeUnknown).toBe(true);

    await daemon().restart();
    await waitFor(() => reconnected, 'the reconnected event', 15_000);
    expect(a.connected).toBe(true);
    expect(reconnected!).toMatchObject({ role: 'agent', agentId: chat.alice.id, protocol: 'yello.chat.v1' });
    expect(a.session).toEqual(reconnected);
    expect(a.session.signing.kid).toBe(firstHello.signing.kid);
    expect(seen[0]).toBe('disconnected');
    expect(seen).toContain('reconnecting#1');
    expect(seen.at(-1)).toBe('reconnected');

    // Calls work on the new connection; the lost append was never resent (a resend would
    // have landed within 300 ms).
    await sleep(300);
    const op = await a.rpc.operations.get({ streamId: chat.alice.streamId, operationId });
    expect(op.state).toBe('unknown');
    expect((await a.rpc.streams.get({ streamId: chat.alice.streamId })).nextPosition).toBe(before);
    // The token stays valid across the restart.
    const res = await a.rpc.streams.append({
      streamId: chat.alice.streamId,
      coordinatorToken: hold.token,
      generation: '1',
      expectedPosition: before,
      operationId: uniqueName('op'),
      records: [{ type: 'chat.message', messageId: uniqueName('m'), content: 'after the restart' }],
    });
    expect(res.firstPosition).toBe(before);
  });
});
