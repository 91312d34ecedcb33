// chats.follow / chats.unfollow and the chats.batch notifications (§6 "Chats", §3 backpressure):
// start at the ends, every record type of both directions, per-direction order, catch-up of a
// long backlog with a seamless switch to live, exact resume from any batch's cursor, limits,
// and a reader that never reads its socket not holding anyone else up.

import { describe, expect, it } from 'vitest';
import { connectAs, createAgent, ok, messageOf, receiptOf, fenceOf, type WireNotification } from '../helpers/wire-fixtures.js';
import {
  followPaused,
  batchesOf,
  expectContiguous,
  expectError,
  messages,
  reached,
  receipt,
  setupChat,
  type ReadingChat,
} from '../helpers/reading-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';

const { daemon, admin } = useDaemon();

// vitest types its asymmetric matchers `any`; held as `unknown` they fit any expected shape.
const anyString: unknown = expect.any(String);
const anyArray: unknown = expect.any(Array);

/** Waits until subscription `sub` on `client` delivered both streams up to the writers' heads. */
async function waitCaughtUp(
  client: { notifications: WireNotification[] },
  sub: string,
  c: ReadingChat,
  starts: { a: string; b: string },
  timeoutMs = 10_000,
): Promise<void> {
  await waitFor(
    () => {
      const b = batchesOf(client, sub);
      return reached(b, c.streamA, starts.a) === c.wa.next && reached(b, c.streamB, starts.b) === c.wb.next;
    },
    `subscription ${sub} to reach A=${c.wa.next} B=${c.wb.next}`,
    timeoutMs,
  );
}

describe('chats.follow', () => {
  it('starts at the current ends without a cursor, then pushes every record type of both directions with a cursor after each batch', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('old-a', 3);
    await c.wb.send('old-b', 2);
    const starts = { a: c.wa.next, b: c.wb.next };

    const follower = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await follower.call('chats.follow', { chatId: c.chatId }));
      expect(sub).toMatchObject({ subscriptionId: anyString, cursor: anyString });
      await sleep(150); // a follow at the ends: nothing from before it may arrive within 150 ms
      expect(batchesOf(follower, sub.subscriptionId), 'nothing from before the follow').toEqual([]);

      await c.wa.send('live-a', 2);
      await c.wa.reclaim(); // writer fence
      await c.wa.send('live-a2', 1);
      const shown = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: starts.a }));
      await c.wb.append([...messages('reply', 1), receipt(c.streamA, '1', shown.nextPosition, shown.batchId)]);
      await c.wb.send('live-b', 2);
      await waitCaughtUp(follower, sub.subscriptionId, c, starts);

      const batches = batchesOf(follower, sub.subscriptionId);
      for (const b of batches) {
        expect(b).toMatchObject({
          subscriptionId: sub.subscriptionId,
          batchId: anyString,
          streamId: anyString,
          generation: '1',
          fromPosition: anyString,
          nextPosition: anyString,
          records: anyArray,
          cursor: anyString,
        });
      }
      const recA = expectContiguous(batches, c.streamA, '1', starts.a, c.wa.next, 'A');
      const recB = expectContiguous(batches, c.streamB, '1', starts.b, c.wb.next, 'B');
      expect(recA.map((r) => r.wrapper.type)).toEqual(['chat.message', 'chat.message', 'chat.writer-fence', 'chat.message']);
      expect(recB.map((r) => r.wrapper.type)).toEqual(['chat.message', 'chat.receipt', 'chat.message', 'chat.message']);
      expect(fenceOf(recA[2])).toMatchObject({ epoch: anyString, replaced: true });
      expect(JSON.stringify(recA[2])).not.toContain(c.wa.token);
      expect(receiptOf(recB[1])).toEqual({
        peerStreamId: c.streamA,
        peerGeneration: '1',
        nextPosition: shown.nextPosition,
        batchId: shown.batchId,
      });

      // The cursor of every batch resumes right after that batch (checked on a new connection).
      const last = batches.at(-1)!;
      const again = await connectAs(daemon().socketPath, c.alice.token);
      try {
        const sub2 = ok(await again.call('chats.follow', { chatId: c.chatId, cursor: last.cursor }));
        await c.wb.send('after', 1);
        await waitCaughtUp(again, sub2.subscriptionId, c, { a: c.wa.next, b: reached(batches, c.streamB, starts.b) });
        expect(batchesOf(again, sub2.subscriptionId).filter((b) => b.streamId === c.streamA)).toEqual([]);
      } finally {
        again.close();
      }
    } finally {
      follower.close();
    }
  });

  it('catches up 10,000 records from a cursor at the start, then continues live with no gap or duplicate; resumes from any batch cursor', async () => {
    const c = await setupChat(daemon(), admin());
    const starts = { a: c.wa.next, b: c.wb.next };
    const probe = ok(await c.bob.client.call('chats.follow', { chatId: c.chatId }));
    ok(await c.bob.client.call('chats.unfollow', { subscriptionId: probe.subscriptionId }));
    const startCursor = probe.cursor;

    // 10,000 records in operations of 64 (the last one 16), both directions in parallel.
    const ops: Array<{ w: typeof c.wa; n: number; tag: string }> = [];
    for (let i = 0; i < 157; i++) ops.push({ w: i % 2 === 0 ? c.wa : c.wb, n: i === 156 ? 16 : 64, tag: `bulk${i}` });
    expect(ops.reduce((s, o) => s + o.n, 0)).toBe(10_000);
    await Promise.all(ops.map((o) => o.w.send(o.tag, o.n)));

    const follower = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await follower.call('chats.follow', { chatId: c.chatId, cursor: startCursor }));
      // Live appends while the backlog is still being delivered.
      const live = (async () => {
        for (let i = 0; i < 10; i++) await Promise.all([c.wa.send(`live-a${i}`, 3), c.wb.send(`live-b${i}`, 2)]);
      })();
      await live;
      await waitCaughtUp(follower, sub.subscriptionId, c, starts, 30_000);
      await sleep(100); // no duplicate: nothing more may arrive within 100 ms of catching up
      const batches = batchesOf(follower, sub.subscriptionId);
      const recA = expectContiguous(batches, c.streamA, '1', starts.a, c.wa.next, 'A');
      const recB = expectContiguous(batches, c.streamB, '1', starts.b, c.wb.next, 'B');
      expect(recA.length + recB.length).toBe(10_000 + 50);
      expect(messageOf(recA.at(-1)).content).toContain('live-a9');

      // Resume on a new connection from a batch in the middle: the compound cursor holds both
      // directions' positions as of that batch.
      const k = Math.floor(batches.length / 2);
      const upTo = batches.slice(0, k + 1);
      const mid = { a: reached(upTo, c.streamA, starts.a), b: reached(upTo, c.streamB, starts.b) };
      const lastCursor = batches.at(-1)!.cursor;
      const ends = { a: reached(batches, c.streamA, starts.a), b: reached(batches, c.streamB, starts.b) };
      follower.close();

      await Promise.all([c.wa.send('gone-a', 4), c.wb.send('gone-b', 4)]);
      const resumed = await connectAs(daemon().socketPath, c.alice.token);
      try {
        const s1 = ok(await resumed.call('chats.follow', { chatId: c.chatId, cursor: batches[k]!.cursor }));
        const s2 = ok(await resumed.call('chats.follow', { chatId: c.chatId, cursor: lastCursor }));
        await waitCaughtUp(resumed, s1.subscriptionId, c, mid, 30_000);
        await waitCaughtUp(resumed, s2.subscriptionId, c, ends);
        expectContiguous(batchesOf(resumed, s1.subscriptionId), c.streamA, '1', mid.a, c.wa.next, 'resume mid A');
        expectContiguous(batchesOf(resumed, s1.subscriptionId), c.streamB, '1', mid.b, c.wb.next, 'resume mid B');
        const tailA = expectContiguous(batchesOf(resumed, s2.subscriptionId), c.streamA, '1', ends.a, c.wa.next, 'resume last A');
        expectContiguous(batchesOf(resumed, s2.subscriptionId), c.streamB, '1', ends.b, c.wb.next, 'resume last B');
        expect(tailA.map((r) => messageOf(r).content)).toEqual(messages('gone-a', 4).map((m) => m.content));
      } finally {
        resumed.close();
      }
    } finally {
      follower.close();
    }
  }, 90_000);

  it('stops pushing after chats.unfollow; unknown subscription ids are NOT_FOUND', async () => {
    const c = await setupChat(daemon(), admin());
    const follower = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await follower.call('chats.follow', { chatId: c.chatId }));
      const starts = { a: c.wa.next, b: c.wb.next };
      await c.wa.send('before-unfollow', 1);
      await waitFor(() => batchesOf(follower, sub.subscriptionId).length === 1, 'first batch', 5_000);
      ok(await follower.call('chats.unfollow', { subscriptionId: sub.subscriptionId }));
      await c.wa.send('after-unfollow', 2);
      await c.wb.send('after-unfollow-b', 2);
      await sleep(300); // unfollowed: nothing more may arrive within 300 ms
      expect(batchesOf(follower, sub.subscriptionId)).toHaveLength(1);
      expect(batchesOf(follower, sub.subscriptionId)[0]!.fromPosition).toBe(starts.a);

      const again = expectError(
        await follower.call('chats.unfollow', { subscriptionId: sub.subscriptionId }),
        'NOT_FOUND',
        'second unfollow',
      );
      expect(again).toMatchObject({ kind: anyString });
      const unknown = expectError(
        await follower.call('chats.unfollow', { subscriptionId: 'sub_does_not_exist' }),
        'NOT_FOUND',
        'unknown id',
      );
      expect(unknown).toMatchObject({ kind: anyString, id: 'sub_does_not_exist' });
    } finally {
      follower.close();
    }
  });

  it('allows at most 64 subscriptions per connection (RATE_LIMITED after that)', async () => {
    const c = await setupChat(daemon(), admin());
    const conn = await connectAs(daemon().socketPath, c.bob.token);
    const other = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const subs: string[] = [];
      for (let i = 0; i < 64; i++) subs.push(ok(await conn.call('chats.follow', { chatId: c.chatId }), `follow ${i}`).subscriptionId);
      expect(new Set(subs).size).toBe(64);
      const data = expectError(await conn.call('chats.follow', { chatId: c.chatId }), 'RATE_LIMITED', '65th follow');
      expect(typeof data.retryAfterMs).toBe('number');
      // Another connection is not affected; freeing one makes room again.
      ok(await other.call('chats.follow', { chatId: c.chatId }));
      ok(await conn.call('chats.unfollow', { subscriptionId: subs[0] }));
      ok(await conn.call('chats.follow', { chatId: c.chatId }));
      // All the live ones still deliver.
      await c.wa.send('fanout', 1);
      await waitFor(() => conn.notifications.filter((n) => n.method === 'chats.batch').length === 64, '64 batches', 5_000);
    } finally {
      conn.close();
      other.close();
    }
  });

  it('denies a non-participant agent', async () => {
    const c = await setupChat(daemon(), admin());
    const outsider = await createAgent(admin(), daemon().socketPath);
    try {
      const data = expectError(await outsider.client.call('chats.follow', { chatId: c.chatId }), 'PERMISSION_DENIED');
      expect(typeof data.reason).toBe('string');
      const cur = ok(await c.bob.client.call('chats.history', { chatId: c.chatId })).liveCursor;
      expectError(await outsider.client.call('chats.follow', { chatId: c.chatId, cursor: cur }), 'PERMISSION_DENIED', 'with a cursor');
    } finally {
      outsider.client.close();
    }
  });

  it('never lets a connection that stops reading hold up other followers or the daemon (~20 MB of appends)', async () => {
    const c = await setupChat(daemon(), admin());
    const starts = { a: c.wa.next, b: c.wb.next };
    const { client: slow, ...slowSub } = await followPaused(daemon().socketPath, c.bob.token, c.chatId); // paused right after the response
    const fast = await connectAs(daemon().socketPath, c.alice.token);
    const status = await daemon().connectAs();
    try {
      const fastSub = ok(await fast.call('chats.follow', { chatId: c.chatId }));
      const readBefore = slow.bytesReceived;

      // 90 operations of 64 records × ~3.5 KB ≈ 20 MB, both directions in parallel.
      const statusLatencies: number[] = [];
      // A property, not a local: inside the immediately invoked prober TypeScript would hold a local at its initial `true`.
      const load = { running: true };
      const prober = (async () => {
        while (load.running) {
          const t0 = Date.now();
          ok(await status.call('daemon.status', {}));
          statusLatencies.push(Date.now() - t0);
          await sleep(100); // pacing: one status probe every 100 ms during the load
        }
      })();
      const lag: number[] = [];
      const writer = async (w: typeof c.wa, tag: string): Promise<void> => {
        for (let i = 0; i < 45; i++) {
          await w.send(`${tag}${i}`, 64, 3_400);
          const t0 = Date.now();
          const target = w.next;
          // The fast follower sees each operation promptly.
          await waitFor(
            () => BigInt(reached(batchesOf(fast, fastSub.subscriptionId), w.streamId, '0')) >= BigInt(target),
            `fast follower at ${target}`,
            10_000,
            2,
          );
          lag.push(Date.now() - t0);
        }
      };
      const t0 = Date.now();
      await Promise.all([writer(c.wa, 'big-a'), writer(c.wb, 'big-b')]);
      const elapsed = Date.now() - t0;
      load.running = false;
      await prober;

      const fastBatches = batchesOf(fast, fastSub.subscriptionId);
      const bytes = fastBatches.reduce(
        (s, b) => s + b.records.reduce((t, r) => t + (r.wrapper.type === 'chat.message' ? r.wrapper.message.content.length : 0), 0),
        0,
      );
      expect(bytes).toBeGreaterThan(19_000_000);
      expectContiguous(fastBatches, c.streamA, '1', starts.a, c.wa.next, 'fast A');
      expectContiguous(fastBatches, c.streamB, '1', starts.b, c.wb.next, 'fast B');
      expect(Math.max(...lag), `fast follower lag per operation (ms), total ${elapsed} ms`).toBeLessThan(3_000);
      expect(Math.max(...statusLatencies), 'daemon.status latency during the load (ms)').toBeLessThan(2_000);
      const tStatus = Date.now();
      ok(await status.call('daemon.status', {}));
      expect(Date.now() - tStatus).toBeLessThan(500);

      // The slow reader got (almost) nothing while paused, and its connection is intact: once it
      // reads again it receives everything, in order, with nothing dropped.
      expect(slow.bytesReceived - readBefore).toBe(0);
      slow.socket.resume();
      await waitFor(
        () => {
          const b = batchesOf(slow, slowSub.subscriptionId);
          return reached(b, c.streamA, starts.a) === c.wa.next && reached(b, c.streamB, starts.b) === c.wb.next;
        },
        'the slow reader to catch up after resuming',
        30_000,
      );
      expectContiguous(batchesOf(slow, slowSub.subscriptionId), c.streamA, '1', starts.a, c.wa.next, 'slow A');
      expectContiguous(batchesOf(slow, slowSub.subscriptionId), c.streamB, '1', starts.b, c.wb.next, 'slow B');
    } finally {
      slow.close();
      fast.close();
      status.close();
    }
  }, 90_000);
});
