// Pins behaviour of src/daemon/streams/chat-reader.ts (the long poll of `streams.read`,
// `chats.history` and the live cursors, docs/protocol.md §6.5, §6.6, §6.9) that the rest of the
// suite leaves unchecked. Over the real socket.

import { describe, expect, it } from 'vitest';
import { expectError, setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { messageOf, ok, uniq } from '../helpers/wire-fixtures.js';

const { daemon, admin } = useDaemon();

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function readA(c: ReadingChat, generation: string, fromPosition: string, waitMs: number) {
  return c.bob.client.call('streams.read', { streamId: c.streamA, generation, fromPosition, waitMs });
}

type HistoryParams = { cursor?: string; limit?: number; direction?: 'forward' | 'backward' };

async function history(c: ReadingChat, p: HistoryParams = {}) {
  return ok(await c.bob.client.call('chats.history', { chatId: c.chatId, ...p }), 'chats.history');
}

/** Every page of chats.history in `direction`, `limit` a page: the message contents in page order. */
async function allPages(c: ReadingChat, direction: 'forward' | 'backward', limit: number): Promise<{ pages: string[][] }> {
  const pages: string[][] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 50; i++) {
    const page = await history(c, cursor === undefined ? { direction, limit } : { cursor, limit });
    pages.push(page.entries.map((e) => messageOf(e).content));
    if (page.nextCursor === null) return { pages };
    cursor = page.nextCursor;
  }
  throw new Error('chats.history did not end');
}

describe('the long poll of streams.read, chats.history paging and live cursors', () => {
  it('a long poll at the head of a generation is woken by its reset and answers the sealed generation at once', async () => {
    // chat-reader.ts: the `discontinuity` listener wakes waiters; a sealed batch ends the wait.
    const c = await setupChat(daemon(), admin());
    await c.wa.send('w', 2);
    const t0 = Date.now();
    const pending = readA(c, '1', c.wa.next, 20_000);
    await sleep(300); // the long poll is held open before the reset wakes it
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'wake the poll' }), 'streams.reset');
    const r = ok(await pending, 'streams.read');
    expect(r).toMatchObject({ generation: '1', records: [], fromPosition: '3', nextPosition: '3', sealed: true });
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('a long poll on one stream is not answered by a commit on the other stream of the chat, only by its own', async () => {
    // chat-reader.ts #wake: waiters are kept per stream.
    const c = await setupChat(daemon(), admin());
    const from = c.wa.next;
    const pending = readA(c, '1', from, 20_000);
    let answered = false;
    void pending.then(
      () => (answered = true),
      () => (answered = true),
    );
    await sleep(200);
    await c.wb.send('other', 1);
    await sleep(500); // a wrongly woken poll would re-read, find nothing and wait again, or answer empty
    expect(answered).toBe(false);
    await c.wa.send('own', 1);
    const r = ok(await pending, 'streams.read');
    expect(r.records.map((x) => messageOf(x).content)).toEqual(['message own number 0']);
  });

  it('waitMs: 0 answers at once with an empty batch at the head', async () => {
    const c = await setupChat(daemon(), admin());
    const t0 = Date.now();
    const r = ok(await readA(c, '1', c.wa.next, 0), 'streams.read');
    expect(r).toMatchObject({ records: [], nextPosition: c.wa.next, sealed: false });
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  it('chats.history pages over both streams in transcript order, forward and backward, each entry exactly once', async () => {
    // chat-reader.ts history/#historySide/merge: limit, exhausted sides, `done`.
    const c = await setupChat(daemon(), admin());
    const sent: string[] = [];
    for (let i = 0; i < 4; i++) {
      for (const w of [c.wa, c.wb]) {
        const r = await w.send(uniq(`h${i}`), 1);
        sent.push(messageOf(r.records[0]).content);
      }
    }
    // Receipts and fences are not entries.
    const shown = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
    await c.wb.append([
      { type: 'chat.receipt', peerStreamId: c.streamA, peerGeneration: '1', nextPosition: shown.nextPosition, batchId: shown.batchId },
    ]);
    for (const limit of [1, 3, 8, 20]) {
      const fwd = await allPages(c, 'forward', limit);
      expect(fwd.pages.flat(), `forward ${limit}`).toEqual(sent);
      expect(
        fwd.pages.every((p) => p.length <= limit),
        `forward ${limit}`,
      ).toBe(true);
      const back = await allPages(c, 'backward', limit);
      expect(
        back.pages.every((p) => p.length <= limit),
        `backward ${limit}`,
      ).toBe(true);
      // Each backward page is in ascending order, the pages go back in time.
      expect(back.pages.reverse().flat(), `backward ${limit}`).toEqual(sent);
    }
    const latest = await history(c, { limit: 3 });
    expect(latest.entries.map((e) => messageOf(e).content)).toEqual(sent.slice(-3));
  });

  it('a history cursor keeps its direction: the other one is INVALID_PARAMS at direction, the same one is fine', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('d', 3);
    const first = await history(c, { direction: 'forward', limit: 1 });
    const data = expectError(
      await c.bob.client.call('chats.history', { chatId: c.chatId, cursor: first.nextCursor, direction: 'backward' }),
      'INVALID_PARAMS',
    );
    expect(data.path).toBe('direction');
    const same = await history(c, { cursor: first.nextCursor!, direction: 'forward', limit: 1 });
    expect(same.entries.map((e) => messageOf(e).content)).toEqual(['message d number 1']);
  });

  it('a history cursor of a stream reset since is GENERATION_CHANGED naming the generations', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('g', 3);
    const first = await history(c, { limit: 1 });
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'history cursor' }), 'streams.reset');
    const data = expectError(await c.bob.client.call('chats.history', { chatId: c.chatId, cursor: first.nextCursor }), 'CONTINUITY_BREAK');
    expect(data).toEqual({ type: 'CONTINUITY_BREAK', reason: 'GENERATION_CHANGED', streamId: c.streamA, expected: '1', actual: '2' });
  });

  it('the live cursor of chats.history names the snapshot head of both streams: chats.follow from it delivers exactly what came later', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('before', 2);
    await c.wb.send('before', 1);
    const h = await history(c, { limit: 1 });
    await c.wa.send('after', 1);
    await c.wb.send('after', 1);
    const follower = await daemon().connectAs(c.bob.token);
    try {
      const sub = ok(await follower.call('chats.follow', { chatId: c.chatId, cursor: h.liveCursor }), 'chats.follow');
      const got: string[] = [];
      const deadline = Date.now() + 10_000;
      while (got.length < 2 && Date.now() < deadline) {
        for (const n of follower.notifications.splice(0)) {
          if (n.method !== 'chats.batch') continue;
          const p = n.params as { subscriptionId: string; records: Parameters<typeof messageOf>[0][] };
          if (p.subscriptionId !== sub.subscriptionId) continue;
          for (const r of p.records) if (r?.wrapper?.type === 'chat.message') got.push(messageOf(r).content);
        }
        await sleep(50);
      }
      expect(got.sort()).toEqual(['message after number 0', 'message after number 0']);
    } finally {
      follower.close();
    }
  });
});
