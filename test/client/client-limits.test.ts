// The limits the client enforces itself (docs/security.md, "Client limits"): linear-time
// framing of big answers and a cap on one inbound line, a default call timeout whose error
// names the request, and the daemon's own request caps applied before anything is written.
// A fake daemon (test/helpers/fake-daemon.ts: a real Unix socket) plays the daemon that
// hangs or sends a huge line; everything the real daemon can show is shown on it.

import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { sleep } from '../helpers/wait.js';
import {
  FakeDaemon,
  FAKE_CHAT,
  FAKE_LIMITS,
  coordinatorStartResults,
  helloAnswer,
  helloThenHang,
  type FakeHandler,
} from '../helpers/fake-daemon.js';
import {
  ConnectionLostError,
  Coordinator,
  DEFAULT_CALL_TIMEOUT_MS,
  DEFAULT_MAX_INBOUND_LINE_BYTES,
  LineTooLargeError,
  MemoryCursorStore,
  RequestTooLargeError,
  TimeoutError,
  YelloClient,
  type ParamsIn,
  type StoredRecord,
} from '../../src/client/index.js';
import {
  connectAdmin,
  connectAgent,
  createChat,
  makeTempDir,
  rejectionOf,
  settledWithin,
  startDaemon,
  type TestChat,
  Teardown,
} from '../helpers/client-fixtures.js';

const MiB = 1024 * 1024;
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function fakeDaemon(handler?: FakeHandler): Promise<FakeDaemon> {
  const dir = await makeTempDir('ycl-');
  const fake = await FakeDaemon.start(path.join(dir, 'fake.sock'), handler);
  cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
  cleanups.push(() => fake.close());
  return fake;
}

async function connect(fake: FakeDaemon, options: Partial<Parameters<typeof YelloClient.connect>[0]> = {}): Promise<YelloClient> {
  const client = await YelloClient.connect({ socketPath: fake.socketPath, token: 'yello_admin_fake', ...options });
  cleanups.push(() => {
    client.close();
  });
  return client;
}

/** Lets pending I/O callbacks and promise reactions run (not a timer: timers may be faked). */
function flush(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/** Tracks whether `p` has settled, without timers. */
function track<T>(p: Promise<T>): { settled: () => boolean; result: Promise<unknown> } {
  let settled = false;
  const result = p.then(
    (v) => {
      settled = true;
      return v;
    },
    (e: unknown) => {
      settled = true;
      return e;
    },
  );
  return { settled: () => settled, result };
}

async function untilReceived(fake: FakeDaemon, method: string): Promise<void> {
  for (let i = 0; i < 10_000 && !fake.requests.some((r) => r.method === method); i++) await flush();
  expect(fake.requests.map((r) => r.method)).toContain(method);
}

const appendParams = (content: string): ParamsIn<'streams.append'> => ({
  streamId: 'chat_x:agt_y',
  coordinatorToken: 'tok',
  generation: '1',
  expectedPosition: '0',
  operationId: 'op-big',
  records: [{ type: 'chat.message', messageId: 'm1', content }],
});

describe('inbound framing', () => {
  it('parses a 32 MiB answer in time linear in its size (the growing-string reader took ~35 s)', async () => {
    const big = 'x'.repeat(32 * MiB);
    const fake = await fakeDaemon((req) =>
      req.method === 'session.hello' ? helloAnswer(req) : { jsonrpc: '2.0', id: req.id, result: { big } },
    );
    const client = await connect(fake);
    const started = Date.now();
    const status = (await client.call('daemon.status', {})) as unknown as { big: string };
    const elapsed = Date.now() - started;
    expect(status.big.length).toBe(big.length);
    // Linear framing does this in well under a second; 10 s leaves room for a loaded machine.
    expect(elapsed).toBeLessThan(10_000);
  }, 90_000);

  it('a line over maxInboundLineBytes closes the connection; every pending call rejects with LineTooLargeError', async () => {
    const fake = await fakeDaemon((req) => {
      if (req.method === 'session.hello') return helloAnswer(req);
      if (req.method === 'daemon.status') return { jsonrpc: '2.0', id: req.id, result: { big: 'y'.repeat(2 * MiB) } };
      return undefined;
    });
    const client = await connect(fake, { maxInboundLineBytes: MiB });
    const disconnected: Error[] = [];
    client.on('disconnected', (e) => disconnected.push(e));
    const hung = client.call('keys.list', {});
    await untilReceived(fake, 'keys.list');
    const err = await rejectionOf(client.call('daemon.status', {}));
    expect(err).toBeInstanceOf(LineTooLargeError);
    expect(err).toBeInstanceOf(ConnectionLostError);
    const e = err as LineTooLargeError;
    expect(e.type).toBe('LINE_TOO_LARGE');
    expect(e.limit).toBe(MiB);
    expect(e.size).toBeGreaterThan(MiB);
    expect(e.outcomeUnknown).toBe(true);
    expect(e.transient).toBe(false);
    expect(await rejectionOf(hung)).toBeInstanceOf(LineTooLargeError);
    expect(client.connected).toBe(false);
    expect(disconnected[0]).toBeInstanceOf(LineTooLargeError);
    // Closed for good: a later call fails at once, nothing more is written.
    expect(await rejectionOf(client.call('daemon.status', {}))).toBeInstanceOf(ConnectionLostError);
  });

  it('a Coordinator that meets an over-size line stops for intervention instead of re-following into it', async () => {
    const { chatId } = FAKE_CHAT;
    const start = coordinatorStartResults('0');
    const fake = await fakeDaemon((req, socket) => {
      const ok = (result: unknown) => ({ jsonrpc: '2.0', id: req.id, result });
      switch (req.method) {
        case 'session.hello':
        case 'chats.get':
        case 'streams.claim':
          return ok(start[req.method]);
        case 'chats.follow':
          // The answer, then a batch far over the client's cap.
          socket.write(JSON.stringify(ok(start['chats.follow'])) + '\n');
          return { jsonrpc: '2.0', method: 'chats.batch', params: { subscriptionId: 'sub', pad: 'q'.repeat(2 * MiB) } };
        case undefined:
        default:
          return ok({});
      }
    });
    const coord = new Coordinator({
      token: 'yello_agent_fake',
      chatId,
      socketPath: fake.socketPath,
      adapter: { present: () => {} },
      cursorStore: new MemoryCursorStore(),
      maxInboundLineBytes: MiB,
      reconnect: { minDelayMs: 10, maxDelayMs: 10 },
    });
    cleanups.push(() => coord.stop({ release: false }));
    await coord.start().catch(() => {});
    const err = await rejectionOf(coord.done);
    expect(err).toBeInstanceOf(LineTooLargeError);
    expect(coord.state).toBe('needs-intervention');
    // No second dial within 100 ms: it stays down for a person instead of re-following.
    await sleep(100);
    expect(fake.connections).toBe(1);
  });

  it('the default inbound cap is 256 MiB, above the largest legitimate page (500 records near the append cap)', () => {
    expect(DEFAULT_MAX_INBOUND_LINE_BYTES).toBe(256 * MiB);
    expect(DEFAULT_MAX_INBOUND_LINE_BYTES).toBeGreaterThan(500 * FAKE_LIMITS.maxAppendRequestBytes);
  });
});

describe('call timeouts', () => {
  it(`by default a call to a hung daemon rejects with TimeoutError after ${DEFAULT_CALL_TIMEOUT_MS} ms`, async () => {
    expect(DEFAULT_CALL_TIMEOUT_MS).toBe(30_000);
    const fake = await fakeDaemon(helloThenHang);
    const client = await connect(fake);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const call = track(client.call('daemon.status', {}));
    await untilReceived(fake, 'daemon.status');
    vi.advanceTimersByTime(DEFAULT_CALL_TIMEOUT_MS - 1);
    await flush();
    expect(call.settled()).toBe(false);
    vi.advanceTimersByTime(1);
    const err = await call.result;
    expect(err).toBeInstanceOf(TimeoutError);
    expect((err as TimeoutError).timeoutMs).toBe(DEFAULT_CALL_TIMEOUT_MS);
  });

  it('session.hello to a daemon that accepts and never answers times out as well', async () => {
    const fake = await fakeDaemon(() => undefined);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const connecting = track(YelloClient.connect({ socketPath: fake.socketPath, token: 'yello_admin_fake' }));
    await untilReceived(fake, 'session.hello');
    vi.advanceTimersByTime(DEFAULT_CALL_TIMEOUT_MS);
    const err = await connecting.result;
    expect(err).toBeInstanceOf(TimeoutError);
    expect((err as TimeoutError).method).toBe('session.hello');
  });

  it('TimeoutError names the request: method, request id, and for streams.append its streamId and operationId', async () => {
    const fake = await fakeDaemon(helloThenHang);
    const client = await connect(fake, { callTimeoutMs: 100 });
    const err = await rejectionOf(client.rpc.streams.append(appendParams('hello')));
    expect(err).toBeInstanceOf(TimeoutError);
    const e = err as TimeoutError;
    const sent = fake.requests.find((r) => r.method === 'streams.append')!;
    expect(e.type).toBe('TIMEOUT');
    expect(e.method).toBe('streams.append');
    expect(e.requestId).toBe(sent.id);
    expect(e.streamId).toBe('chat_x:agt_y');
    expect(e.operationId).toBe('op-big');
    expect(e.outcomeUnknown).toBe(true);
    expect(e.transient).toBe(true);
    expect(e.timeoutMs).toBe(100);
    expect(e.message).toContain('op-big');
    // Other methods carry no operation.
    const other = (await rejectionOf(client.call('keys.list', {}))) as TimeoutError;
    expect(other.method).toBe('keys.list');
    expect(other.operationId).toBeNull();
    expect(other.requestId).toBe(fake.requests.find((r) => r.method === 'keys.list')!.id);
  });

  it('a per-call timeoutMs overrides the client default, in call() and in rpc.<ns>.<m>()', async () => {
    const fake = await fakeDaemon(helloThenHang);
    const client = await connect(fake, { callTimeoutMs: 0 });
    const a = (await rejectionOf(client.call('daemon.status', {}, { timeoutMs: 50 }))) as TimeoutError;
    expect(a).toBeInstanceOf(TimeoutError);
    expect(a.timeoutMs).toBe(50);
    const b = (await rejectionOf(client.rpc.keys.list({}, { timeoutMs: 60 }))) as TimeoutError;
    expect(b).toBeInstanceOf(TimeoutError);
    expect(b.timeoutMs).toBe(60);
  });

  for (const none of [0, Infinity]) {
    it(`callTimeoutMs ${none} means no timeout: the call waits until the connection ends`, async () => {
      const fake = await fakeDaemon(helloThenHang);
      const client = await connect(fake, { callTimeoutMs: none });
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const call = track(client.call('daemon.status', {}));
      await untilReceived(fake, 'daemon.status');
      vi.advanceTimersByTime(24 * 3600_000);
      await flush();
      expect(call.settled()).toBe(false);
      fake.dropConnections();
      expect(await call.result).toBeInstanceOf(ConnectionLostError);
    });
  }

  it('a long poll gets its waitMs on top of the timeout', async () => {
    const fake = await fakeDaemon(helloThenHang);
    const client = await connect(fake, { callTimeoutMs: 100 });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const call = track(client.rpc.streams.read({ streamId: 'chat_x:agt_y', generation: '1', fromPosition: '0', waitMs: 5_000 }));
    await untilReceived(fake, 'streams.read');
    vi.advanceTimersByTime(5_099);
    await flush();
    expect(call.settled()).toBe(false);
    vi.advanceTimersByTime(1);
    const err = (await call.result) as TimeoutError;
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err.timeoutMs).toBe(5_100);
  });
});

describe('request caps from session.hello', () => {
  it('refuses a streams.append over maxAppendRequestBytes before writing a byte; the connection stays usable', async () => {
    const fake = await fakeDaemon((req) =>
      req.method === 'session.hello'
        ? helloAnswer(req)
        : req.method === 'daemon.status'
          ? { jsonrpc: '2.0', id: req.id, result: { ok: true } }
          : undefined,
    );
    const client = await connect(fake);
    const bytesAfterHello = fake.bytes;
    const params = appendParams('z'.repeat(300 * 1024));
    const err = await rejectionOf(client.rpc.streams.append(params));
    expect(err).toBeInstanceOf(RequestTooLargeError);
    const e = err as RequestTooLargeError;
    // The daemon's shape: data {type, limit, size}; size is the line's UTF-8 bytes without its newline.
    const line = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'streams.append', params });
    expect(e.data).toEqual({ type: 'REQUEST_TOO_LARGE', limit: FAKE_LIMITS.maxAppendRequestBytes, size: Buffer.byteLength(line) });
    expect(e.type).toBe('REQUEST_TOO_LARGE');
    expect(e.code).toBe(4013);
    expect(e.limit).toBe(FAKE_LIMITS.maxAppendRequestBytes);
    expect(e.sent).toBe(false);
    expect(e.outcomeUnknown).toBe(false);
    await flush();
    expect(fake.bytes).toBe(bytesAfterHello);
    expect(fake.requests.map((r) => r.method)).toEqual(['session.hello']);
    expect(await client.call('daemon.status', {})).toEqual({ ok: true });
  });

  it('sends an append of exactly maxAppendRequestBytes, and refuses one byte more', async () => {
    const fake = await fakeDaemon(helloThenHang);
    const client = await connect(fake, { callTimeoutMs: 50 });
    // ids: hello 1, then 2 and 3 (single digits, so both lines have the same overhead).
    const overhead = Buffer.byteLength(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'streams.append', params: appendParams('') }));
    const exact = appendParams('a'.repeat(FAKE_LIMITS.maxAppendRequestBytes - overhead));
    expect(await rejectionOf(client.rpc.streams.append(exact))).toBeInstanceOf(TimeoutError);
    expect(Buffer.byteLength(fake.lines.at(-1)!)).toBe(FAKE_LIMITS.maxAppendRequestBytes);
    const over = appendParams('a'.repeat(FAKE_LIMITS.maxAppendRequestBytes - overhead + 1));
    const err = (await rejectionOf(client.rpc.streams.append(over))) as RequestTooLargeError;
    expect(err).toBeInstanceOf(RequestTooLargeError);
    expect(err.size).toBe(FAKE_LIMITS.maxAppendRequestBytes + 1);
  });

  it('refuses any request over maxLineBytes, counting UTF-8 bytes', async () => {
    const fake = await fakeDaemon((req) =>
      req.method === 'session.hello' ? helloAnswer(req, { maxLineBytes: 4096, maxAppendRequestBytes: 2048 }) : undefined,
    );
    const client = await connect(fake, { callTimeoutMs: 50 });
    // 1,500 three-byte characters: 1,500 UTF-16 units, 4,500 bytes.
    const err = (await rejectionOf(client.rpc.agents.create({ username: 'u', name: '€'.repeat(1500) }))) as RequestTooLargeError;
    expect(err).toBeInstanceOf(RequestTooLargeError);
    expect(err.limit).toBe(4096);
    expect(err.size).toBeGreaterThan(4500);
    expect(err.sent).toBe(false);
    await flush();
    expect(fake.requests.map((r) => r.method)).toEqual(['session.hello']);
  });
});

describe('against the real daemon', () => {
  let daemon: DaemonProcess;
  let admin: YelloClient;
  let chat: TestChat;
  let alice: YelloClient;
  let token = '';
  const teardown = new Teardown();

  beforeAll(async () => {
    daemon = teardown.add(await startDaemon(['--max-line-bytes', '400000']), (d) => d.cleanup());
    admin = teardown.add(await connectAdmin(daemon), (c) => {
      c.close();
    });
    chat = await createChat(admin);
    alice = teardown.add(await connectAgent(daemon, chat.alice), (c) => {
      c.close();
    });
    token = (await alice.rpc.streams.claim({ streamId: chat.alice.streamId })).coordinatorToken;
  }, 30_000);

  afterAll(() => teardown.run());

  it('takes its caps from session.hello and refuses an append over 256 KiB locally: no record, no operation, the token still works', async () => {
    expect(alice.session.limits).toEqual({ maxLineBytes: 400_000, maxAppendRequestBytes: 262_144 });
    const before = await alice.rpc.streams.get({ streamId: chat.alice.streamId });
    const big = {
      streamId: chat.alice.streamId,
      coordinatorToken: token,
      generation: before.generation,
      expectedPosition: before.nextPosition,
      operationId: 'op-too-big',
      records: [{ type: 'chat.message' as const, messageId: 'big', content: 'b'.repeat(300_000) }],
    };
    const err = (await rejectionOf(alice.rpc.streams.append(big))) as RequestTooLargeError;
    expect(err).toBeInstanceOf(RequestTooLargeError);
    expect(err.sent).toBe(false);
    expect(err.limit).toBe(262_144);
    expect(await alice.rpc.operations.get({ streamId: chat.alice.streamId, operationId: 'op-too-big' })).toMatchObject({
      state: 'unknown',
    });
    expect((await alice.rpc.streams.get({ streamId: chat.alice.streamId })).nextPosition).toBe(before.nextPosition);
    const ok = await alice.rpc.streams.append({
      ...big,
      operationId: 'op-small',
      records: [{ type: 'chat.message', messageId: 'small', content: 'small' }],
    });
    expect(ok.firstPosition).toBe(before.nextPosition);
  });

  it("refuses a request over the daemon's --max-line-bytes locally; the session stays usable", async () => {
    const err = (await rejectionOf(
      admin.rpc.agents.create({ username: 'too-long-line', name: 'n'.repeat(450_000) }),
    )) as RequestTooLargeError;
    expect(err).toBeInstanceOf(RequestTooLargeError);
    expect(err.sent).toBe(false);
    expect(err.limit).toBe(400_000);
    expect((await admin.rpc.daemon.status({})).storage).toBe('ok');
  });

  it('a long poll longer than callTimeoutMs is not cut short by the timeout', async () => {
    const poller = await connectAgent(daemon, chat.bob, { callTimeoutMs: 200 });
    try {
      const state = await poller.rpc.streams.get({ streamId: chat.alice.streamId });
      const read = poller.rpc.streams.read({
        streamId: chat.alice.streamId,
        generation: state.generation,
        fromPosition: state.nextPosition,
        waitMs: 800,
      });
      const outcome = await settledWithin(read, 5_000);
      expect(outcome.status).toBe('fulfilled');
    } finally {
      poller.close();
    }
  });

  it('pages a 24 MiB transcript (120 messages of 200 KiB) in pages of about 1 MiB, all of it, in time linear in its size', async () => {
    const bob = await connectAgent(daemon, chat.bob);
    try {
      const state = await alice.rpc.streams.get({ streamId: chat.alice.streamId });
      let next = state.nextPosition;
      for (let i = 0; i < 120; i++) {
        const r = await alice.rpc.streams.append({
          streamId: chat.alice.streamId,
          coordinatorToken: token,
          generation: state.generation,
          expectedPosition: next,
          operationId: `op-page-${i}`,
          records: [{ type: 'chat.message', messageId: `page-${i}`, content: `${i} `.padEnd(200 * 1024, 'p') }],
        });
        next = r.nextPosition;
      }
      const started = Date.now();
      // The daemon cuts a page once its records reach 1 MiB (docs/protocol.md §3.2), so the
      // 120 messages come in pages of 5–6, not as one 24 MiB line.
      const isBig = (e: StoredRecord): boolean => e.wrapper.type === 'chat.message' && e.wrapper.message.content.length === 200 * 1024;
      const entries: StoredRecord[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await bob.rpc.chats.history(
          cursor === undefined ? { chatId: chat.chatId, limit: 120, direction: 'backward' } : { chatId: chat.chatId, limit: 120, cursor },
        );
        pages++;
        expect(page.entries.filter(isBig).length).toBeLessThanOrEqual(6);
        entries.push(...page.entries);
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
      const elapsed = Date.now() - started;
      expect(entries.filter(isBig)).toHaveLength(120);
      expect(pages).toBeGreaterThanOrEqual(20);
      // One 24 MiB page took ~1.5 s (the growing-string reader ~19 s); paging the same bytes
      // costs about the same. 8 s leaves room for a loaded machine.
      expect(elapsed).toBeLessThan(8_000);
    } finally {
      bob.close();
    }
  }, 120_000);
});
