// Retention and generations (§6 streams.trim, streams.reset, streams.read with waitMs) and how
// readers see them: exact continuity or CONTINUITY_BREAK / chats.break, never a silent skip.

import { describe, expect, it } from 'vitest';
import { type Wire, connectAs, ok } from '../helpers/wire-fixtures.js';
import {
  followPaused,
  StreamWriter,
  batchesOf,
  breaksOf,
  expectContiguous,
  expectError,
  messages,
  reached,
  receipt,
  setupChat,
  streamState,
} from '../helpers/reading-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';

// vitest types its asymmetric matchers `any`; held as `unknown` they fit any expected shape.
const anyString: unknown = expect.any(String);

// Quotas off: the large-trim test appends 30,000 records as fast as it can, far past one agent's
// default append rate (quotas have their own tests in quotas.test.ts).
const { daemon, admin } = useDaemon({ extraArgs: ['--quota-append-records', '0', '--quota-append-bytes', '0'] });

function read(client: Wire, streamId: string, generation: string, fromPosition: string, extra: Record<string, unknown> = {}) {
  return client.call('streams.read', { streamId, generation, fromPosition, ...extra }, 40_000);
}

describe('streams.trim', () => {
  it("refuses to trim past the peer's acknowledged position without force (UNACKNOWLEDGED), trims with force, then fails reads below", async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('t', 10); // fence at 0, messages 1..10
    expect(c.wa.next).toBe('11');

    const none = expectError(
      await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '3' }),
      'PERMISSION_DENIED',
      'nothing acknowledged',
    );
    expect(none.reason).toBe('UNACKNOWLEDGED');

    const shown = ok(await read(c.bob.client, c.streamA, '1', '0', { limit: 5 }));
    expect(shown.nextPosition).toBe('5');
    await c.wb.append([receipt(c.streamA, '1', '5', shown.batchId)]);

    expect(ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '5' }))).toEqual({ firstPosition: '5' });
    const past = expectError(
      await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '8' }),
      'PERMISSION_DENIED',
      'past the receipt',
    );
    expect(past.reason).toBe('UNACKNOWLEDGED');
    expect((await streamState(admin(), c.streamA)).firstPosition).toBe('5');

    expect(ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '8', force: true }))).toEqual({
      firstPosition: '8',
    });
    const st = await streamState(c.bob.client, c.streamA);
    expect(st).toMatchObject({ firstPosition: '8', nextPosition: '11', generation: '1' });

    for (const from of ['0', '5', '7']) {
      const data = expectError(await read(c.bob.client, c.streamA, '1', from), 'CONTINUITY_BREAK', `read from ${from}`);
      expect(data).toMatchObject({ reason: 'PREFIX_UNAVAILABLE', streamId: c.streamA, expected: from, actual: '8' });
    }
    const rest = ok(await read(c.bob.client, c.streamA, '1', '8'));
    expect(rest.records.map((r) => r.position)).toEqual(['8', '9', '10']);
    expect(rest.sealed).toBe(false);
    // Above nextPosition is a parameter error, not a break.
    expectError(await read(c.bob.client, c.streamA, '1', '12'), 'INVALID_PARAMS', 'above nextPosition');
  });

  it('forgets the operations whose records all lie below the new start (operations.get unknown, not listed), keeps one cut in two, and frees trimmed messageIds', async () => {
    const c = await setupChat(daemon(), admin());
    // Fence at 0; operation a at 1..2, b at 3..4, c at 5..6.
    const opOf = async (prefix: string) => {
      const operationId = `op-${prefix}`;
      await c.wa.append(messages(prefix, 2), operationId);
      return operationId;
    };
    const [a, b, cut] = [await opOf('a'), await opOf('b'), await opOf('c')];
    const get = async (operationId: string) => ok(await admin().call('operations.get', { streamId: c.streamA, operationId })).state;
    expect(await get(a)).toBe('committed');

    expect(ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '4', force: true }))).toEqual({
      firstPosition: '4',
    });
    expect(await get(a)).toBe('unknown');
    expect(await get(b)).toBe('committed');
    expect(await get(cut)).toBe('committed');
    const listed = ok(await admin().call('operations.list', { streamId: c.streamA })).operations.map((o) => o.operationId);
    expect(listed).toEqual([b, cut]);
    // a.0 (position 1) and b.0 (position 3) were trimmed: usable again; b.1 (position 4) is retained.
    const again = await c.wa.append([...messages('a', 1), ...messages('b', 1)]);
    expect(again.nextPosition).toBe('9');
    const dup = await c.wa.tryAppend([{ type: 'chat.message', messageId: 'b.1', content: 'again' }]);
    expect(expectError(dup, 'DUPLICATE_MESSAGE', 'b.1 is retained').position).toBe('4');
  });

  it('ends a follower that stands below the trim with chats.break PREFIX_UNAVAILABLE; a caught-up follower continues', async () => {
    const c = await setupChat(daemon(), admin());
    const starts = { a: c.wa.next, b: c.wb.next };
    const { client: behind, ...lagging } = await followPaused(daemon().socketPath, c.bob.token, c.chatId); // stops reading: falls behind
    const current = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const live = ok(await current.call('chats.follow', { chatId: c.chatId }));
      // ~4 MB, far more than the socket buffers hold, so the paused follower is left behind.
      for (let i = 0; i < 18; i++) await c.wa.send(`bulk${i}`, 64, 3_400);
      const end = c.wa.next;
      await waitFor(
        () => reached(batchesOf(current, live.subscriptionId), c.streamA, starts.a) === end,
        'the live follower at the head',
        10_000,
      );

      expect(ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: end, force: true }))).toEqual({
        firstPosition: end,
      });
      behind.socket.resume();
      const brk = await waitFor(() => breaksOf(behind, lagging.subscriptionId)[0], 'chats.break', 15_000);
      expect(brk).toMatchObject({
        subscriptionId: lagging.subscriptionId,
        reason: 'PREFIX_UNAVAILABLE',
        streamId: c.streamA,
        expected: anyString,
        actual: end,
      });
      expect(BigInt(brk.expected as string)).toBeLessThan(BigInt(end));
      // What it did get is exact, and stops where the break says it stood (the batches before the
      // break came on the same connection ahead of it; anything after it fails the check below).
      const got = await waitFor(
        () => {
          const b = batchesOf(behind, lagging.subscriptionId);
          return reached(b, c.streamA, starts.a) === brk.expected ? b : null;
        },
        'the lagging batches up to where the break says it stood',
        5_000,
      );
      expectContiguous(got, c.streamA, '1', starts.a, brk.expected as string, 'lagging A');
      // The break is the last word of that subscription.
      const nBefore = behind.notifications.length;
      await c.wa.send('after-trim', 2);
      await c.wb.send('after-trim-b', 2);
      await waitFor(
        () => reached(batchesOf(current, live.subscriptionId), c.streamB, starts.b) === c.wb.next,
        'the live follower to see B',
        5_000,
      );
      await sleep(200); // ended by the break: nothing more for it may arrive within 200 ms
      expect(
        behind.notifications
          .slice(nBefore)
          .filter((n) => (n.params as { subscriptionId?: string } | undefined)?.subscriptionId === lagging.subscriptionId),
      ).toEqual([]);
      expect(breaksOf(behind, lagging.subscriptionId)).toHaveLength(1);
      expectError(await behind.call('chats.unfollow', { subscriptionId: lagging.subscriptionId }), 'NOT_FOUND', 'ended subscription');

      // The caught-up follower was not broken and kept receiving exactly.
      expect(breaksOf(current, live.subscriptionId)).toEqual([]);
      expectContiguous(batchesOf(current, live.subscriptionId), c.streamA, '1', starts.a, c.wa.next, 'live A');
    } finally {
      behind.close();
      current.close();
    }
  }, 60_000);

  it('a trim of 30,000 records (three delete chunks) answers streams.read below the new start with PREFIX_UNAVAILABLE while its deletes run, never a trimmed record', async () => {
    // Guards: "a fromPosition below the retained start is PREFIX_UNAVAILABLE" (§6.6 streams.read)
    // checked against the head, not left to the records' absence. Retention commits the new
    // firstPosition with the first chunk of 10,000 deletes (retention.ts TRIM_CHUNK) and deletes
    // the rest afterwards, so during a large trim trimmed records are still on disk: a read that
    // only looked for them would serve them. The last chunk is deleted last: read just below the
    // new start, where the records survive longest.
    const c = await setupChat(daemon(), admin());
    for (let i = 0; i < 470; i++) await c.wa.append(messages(`bulk${i}`, 64));
    expect(BigInt(c.wa.next)).toBeGreaterThan(30_000n);
    const before = '30000';
    const below = '29999';
    const reader = await connectAs(daemon().socketPath, c.bob.token);
    try {
      let answered = false;
      const trimAnswered = (): boolean => answered;
      const trim = admin()
        .call('streams.trim', { streamId: c.streamA, beforePosition: before, force: true }, 60_000)
        .finally(() => {
          answered = true;
        });
      let startMoved = false;
      let readsBeforeAnswer = 0;
      const answers: string[] = [];
      while (!trimAnswered()) {
        if (!startMoved) {
          startMoved = (await streamState(reader, c.streamA)).firstPosition === before;
          continue;
        }
        // The new start is committed: every read sent from now on is below it.
        const r = await read(reader, c.streamA, '1', below, { limit: 1 });
        if (!trimAnswered()) readsBeforeAnswer++;
        answers.push(
          r.result
            ? `records ${r.result.records.map((x) => x.position).join(',')}`
            : `${r.error?.data?.type}/${String(r.error?.data?.reason)}`,
        );
      }
      expect(ok(await trim)).toEqual({ firstPosition: before });
      expect(readsBeforeAnswer, 'no read landed while the trim was still deleting').toBeGreaterThan(0);
      expect(new Set(answers)).toEqual(new Set(['CONTINUITY_BREAK/PREFIX_UNAVAILABLE']));
      // And after it, the same.
      const after = expectError(await read(reader, c.streamA, '1', below), 'CONTINUITY_BREAK');
      expect(after).toMatchObject({ reason: 'PREFIX_UNAVAILABLE', expected: below, actual: before });
      expect(ok(await read(reader, c.streamA, '1', before, { limit: 1 })).records[0]!.position).toBe(before);
    } finally {
      reader.close();
    }
  }, 120_000);

  it('fails chats.follow with a cursor below the trim with CONTINUITY_BREAK PREFIX_UNAVAILABLE', async () => {
    const c = await setupChat(daemon(), admin());
    const probe = ok(await c.bob.client.call('chats.follow', { chatId: c.chatId }));
    ok(await c.bob.client.call('chats.unfollow', { subscriptionId: probe.subscriptionId }));
    const history = ok(await c.bob.client.call('chats.history', { chatId: c.chatId }));
    await c.wa.send('x', 6);
    ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '4', force: true }));
    for (const cursor of [probe.cursor, history.liveCursor]) {
      const data = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, cursor }), 'CONTINUITY_BREAK');
      expect(data).toMatchObject({ reason: 'PREFIX_UNAVAILABLE', streamId: c.streamA, actual: '4' });
    }
  });
});

describe('streams.reset', () => {
  it('starts generation 2 at position 0, fences the writer, seals generation 1 readable, and breaks followers and old cursors', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('g1', 5);
    await c.wb.send('g1b', 2);
    const oldEnd = c.wa.next;
    const follower = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await follower.call('chats.follow', { chatId: c.chatId }));
      const history = ok(await c.bob.client.call('chats.history', { chatId: c.chatId, limit: 2 }));

      ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'integration test' }));
      const st = await streamState(c.alice.client, c.streamA);
      expect(st).toMatchObject({ generation: '2', firstPosition: '0', nextPosition: '0' });
      expect(st.writer.active).toBe(false);
      // The other direction is untouched.
      expect(await streamState(admin(), c.streamB)).toMatchObject({ generation: '1', nextPosition: c.wb.next });

      // The old coordinator token is fenced, whatever generation it names.
      for (const [generation, expectedPosition] of [
        ['2', '0'],
        ['1', oldEnd],
      ]) {
        const r = await c.alice.client.call('streams.append', {
          streamId: c.streamA,
          coordinatorToken: c.wa.token,
          generation,
          expectedPosition,
          operationId: `after-reset-${generation}`,
          records: [{ type: 'chat.message', messageId: `late-${generation}`, content: 'too late' }],
        });
        const data = expectError(r, 'FENCED', `generation ${generation}`);
        expect(data.streamId).toBe(c.streamA);
        expect(typeof data.epoch).toBe('string');
      }

      // Generation 1 stays readable, sealed; at its end too, and a long poll there does not wait.
      const old = ok(await read(c.bob.client, c.streamA, '1', '0'));
      expect(old).toMatchObject({ generation: '1', fromPosition: '0', nextPosition: oldEnd, sealed: true });
      expect(old.records.map((r) => r.wrapper.type)).toEqual(['chat.writer-fence', ...Array<string>(5).fill('chat.message')]);
      const t0 = Date.now();
      const atEnd = ok(await read(c.bob.client, c.streamA, '1', oldEnd, { waitMs: 5_000 }));
      expect(atEnd).toMatchObject({ records: [], nextPosition: oldEnd, sealed: true });
      expect(Date.now() - t0).toBeLessThan(2_000);
      const fresh = ok(await read(c.bob.client, c.streamA, '2', '0'));
      expect(fresh).toMatchObject({ generation: '2', records: [], nextPosition: '0', sealed: false });
      expectError(await read(c.bob.client, c.streamA, '3', '0'), 'CONTINUITY_BREAK', 'a generation that does not exist yet');

      // The follower got chats.break and its subscription ended.
      const brk = await waitFor(() => breaksOf(follower, sub.subscriptionId)[0], 'chats.break', 5_000);
      expect(brk).toMatchObject({
        subscriptionId: sub.subscriptionId,
        reason: 'GENERATION_CHANGED',
        streamId: c.streamA,
        expected: '1',
        actual: '2',
      });
      await c.wb.send('after-reset', 1);
      await sleep(200); // ended by the break: nothing more may arrive within 200 ms
      expect(batchesOf(follower, sub.subscriptionId)).toEqual([]);

      // Old cursors fail closed.
      for (const cursor of [sub.cursor, history.liveCursor]) {
        const data = expectError(
          await c.bob.client.call('chats.follow', { chatId: c.chatId, cursor }),
          'CONTINUITY_BREAK',
          'old live cursor',
        );
        expect(data).toMatchObject({ reason: 'GENERATION_CHANGED', streamId: c.streamA, expected: '1', actual: '2' });
      }

      // A new claim writes generation 2 from position 0.
      const w2 = await StreamWriter.claim(c.alice.client, c.streamA);
      expect(w2.generation).toBe('2');
      expect(w2.next).toBe('1');
      const res = await w2.send('g2', 1);
      expect(res).toMatchObject({ generation: '2', firstPosition: '1', nextPosition: '2' });
      const g2 = ok(await read(c.bob.client, c.streamA, '2', '0'));
      expect(g2.records.map((r) => r.wrapper.type)).toEqual(['chat.writer-fence', 'chat.message']);
    } finally {
      follower.close();
    }
  });
});

describe('streams.read waitMs', () => {
  it('returns a long poll as soon as a record is appended', async () => {
    const c = await setupChat(daemon(), admin());
    const from = c.wa.next;
    const t0 = Date.now();
    const pending = read(c.bob.client, c.streamA, '1', from, { waitMs: 10_000 });
    await sleep(300); // the long poll is held open 300 ms before the append wakes it
    await c.wa.send('wake', 1);
    const r = ok(await pending);
    const elapsed = Date.now() - t0;
    expect(r.records).toHaveLength(1);
    expect(r).toMatchObject({ fromPosition: from, nextPosition: c.wa.next });
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(3_000);
  });

  it('returns an empty batch after waitMs when nothing comes', async () => {
    const c = await setupChat(daemon(), admin());
    const from = c.wa.next;
    const t0 = Date.now();
    const r = ok(await read(c.bob.client, c.streamA, '1', from, { waitMs: 800 }));
    const elapsed = Date.now() - t0;
    expect(r).toMatchObject({ records: [], fromPosition: from, nextPosition: from, sealed: false });
    expect(elapsed).toBeGreaterThanOrEqual(750);
    expect(elapsed).toBeLessThan(5_000);
    // With records already there it does not wait at all.
    await c.wa.send('ready', 1);
    const t1 = Date.now();
    ok(await read(c.bob.client, c.streamA, '1', from, { waitMs: 10_000 }));
    expect(Date.now() - t1).toBeLessThan(1_000);
  });

  it('rejects waitMs above 30000 with INVALID_PARAMS', async () => {
    const c = await setupChat(daemon(), admin());
    for (const waitMs of [30_001, 60_000, -1]) {
      const data = expectError(await read(c.bob.client, c.streamA, '1', '0', { waitMs }), 'INVALID_PARAMS', `waitMs ${waitMs}`);
      expect(String(data.path)).toContain('waitMs');
    }
  });
});

describe('retention is admin-only', () => {
  it('denies streams.trim and streams.reset to agents, even the author', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('keep', 3);
    const shown = ok(await read(c.bob.client, c.streamA, '1', '0'));
    await c.wb.append([receipt(c.streamA, '1', shown.nextPosition, shown.batchId)]);
    for (const agent of [c.alice, c.bob]) {
      for (const force of [false, true]) {
        const d = expectError(
          await agent.client.call('streams.trim', { streamId: c.streamA, beforePosition: '2', force }),
          'PERMISSION_DENIED',
          'trim',
        );
        expect(typeof d.reason).toBe('string');
      }
      const d = expectError(
        await agent.client.call('streams.reset', { streamId: c.streamA, reason: 'nope' }),
        'PERMISSION_DENIED',
        'reset',
      );
      expect(typeof d.reason).toBe('string');
    }
    expect(await streamState(admin(), c.streamA)).toMatchObject({ generation: '1', firstPosition: '0', nextPosition: c.wa.next });
    // The writer still holds the stream.
    await c.wa.send('still', 1);
  });
});
