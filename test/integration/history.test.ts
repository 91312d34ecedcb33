// chats.history (§6): transcript order across both streams, backward/forward snapshot paging,
// the live hand-off to chats.follow, opaque tamper-evident cursors that survive restarts, and
// continuity breaks after reset and trim.

import { beforeAll, describe, expect, it } from 'vitest';
import type { StoredRecord } from '../../src/shared/types.js';
import { type Wire, connectAs, createAgent, ok, readAll, messageOf, type Result } from '../helpers/wire-fixtures.js';
import {
  batchesOf,
  expectContiguous,
  expectError,
  receipt,
  recKey,
  reconnectChat,
  reached,
  setupChat,
  transcriptCompare,
  type ReadingChat,
} from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';

// vitest types its asymmetric matchers `any`; held as `unknown` they fit any expected shape.
const anyString: unknown = expect.any(String);

const { daemon, admin, restart } = useDaemon();
/** A chat whose two sides wrote concurrently, so timestamps collide. */
let main: ReadingChat;
/** Its transcript, computed independently from streams.read. */
let expected: StoredRecord[];
/** Rounds in which both authors got the same createdAt. */
let crossTies = 0;

/** Every chat.message of both streams, in transcript order. */
async function transcript(c: ReadingChat): Promise<StoredRecord[]> {
  const all = [...(await readAll(admin(), c.streamA)), ...(await readAll(admin(), c.streamB))];
  return all.filter((r) => r.wrapper.type === 'chat.message').sort(transcriptCompare);
}

/** Pages through chats.history from a first call; returns the pages. */
async function pageAll(client: Wire, params: Record<string, unknown>, between?: () => Promise<void>): Promise<Result<'chats.history'>[]> {
  const pages: Result<'chats.history'>[] = [];
  let r = ok(await client.call('chats.history', params), 'chats.history');
  pages.push(r);
  for (let i = 0; r.nextCursor !== null && i < 1000; i++) {
    if (between) await between();
    r = ok(await client.call('chats.history', { chatId: params.chatId, cursor: r.nextCursor, limit: params.limit }), 'chats.history page');
    pages.push(r);
  }
  expect(pages.at(-1)!.nextCursor).toBeNull();
  return pages;
}

function tamper(token: string): string {
  const i = Math.floor(token.length / 3);
  return token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
}

beforeAll(async () => {
  main = await setupChat(daemon(), admin());
  // Both sides append fast and in parallel: 5 messages per operation (so one operation spans
  // positions like 6..10 with a single timestamp), 30 operations each.
  // Each round sends both appends at the same instant, so the daemon signs them back to back
  // and now and then within one millisecond. First a few 5-message operations (one operation
  // spans positions 6..10 under one timestamp), then small ones until enough ties were seen.
  const stampsOf = (r: Result<'streams.append'>): string[] => r.records.map((x) => messageOf(x).signature.createdAt);
  for (let i = 0; i < 4; i++) await Promise.all([main.wa.send(`a5-${i}`, 5), main.wb.send(`b5-${i}`, 5)]);
  const until = Date.now() + 10_000;
  for (let i = 0; (i < 100 || crossTies < 5) && i < 1500 && Date.now() < until; i++) {
    const [ra, rb] = await Promise.all([main.wa.send(`a${i}`, 2), main.wb.send(`b${i}`, 1)]);
    if (stampsOf(ra).some((t) => stampsOf(rb).includes(t))) crossTies += 1;
  }
  // A receipt and the claim fences live in the streams too; history must skip them.
  const b = ok(await main.bob.client.call('streams.read', { streamId: main.streamA, generation: '1', fromPosition: '0', limit: 7 }));
  await main.wb.append([receipt(main.streamA, '1', b.nextPosition, b.batchId)]);
  expected = await transcript(main);
}, 60_000);

describe('chats.history order', () => {
  it('orders entries by signature.createdAt, then fromAgentId, then numeric position, across both streams', async () => {
    expect(expected.length).toBeGreaterThan(100);
    expect(crossTies, 'rounds with a createdAt shared by both authors').toBeGreaterThan(0);
    // The setup really produced ties: across authors and within one author past a digit boundary.
    const stamps = new Map<string, Set<string>>();
    for (const r of expected) {
      const t = messageOf(r).signature.createdAt;
      stamps.set(t, (stamps.get(t) ?? new Set()).add(messageOf(r).fromAgentId));
    }
    expect(
      [...stamps.values()].some((s) => s.size === 2),
      'both authors share a createdAt',
    ).toBe(true);

    // Pages of 500: how many rounds the setup needs for its ties depends on the backend's speed
    // (a faster PostgreSQL made it more than one page).
    const pages = await pageAll(main.bob.client, { chatId: main.chatId, direction: 'forward', limit: 500 });
    const r = { ...pages.at(-1)!, entries: pages.flatMap((p) => p.entries) };
    expect(typeof r.liveCursor).toBe('string');
    expect(r.entries.every((e) => e.wrapper.type === 'chat.message')).toBe(true);
    expect(r.entries.map(recKey)).toEqual(expected.map(recKey));
    // Full stored records.
    expect(r.entries[0]).toMatchObject({
      streamId: anyString,
      generation: '1',
      position: anyString,
      wrapper: { version: 2, chatId: main.chatId },
    });
  });

  it('returns the latest page in ascending order by default (backward), and pages back over everything once', async () => {
    const byDefault = ok(await main.alice.client.call('chats.history', { chatId: main.chatId }));
    expect(byDefault.entries.map(recKey), 'default limit 50, latest first page').toEqual(expected.slice(-50).map(recKey));
    const first = ok(await main.alice.client.call('chats.history', { chatId: main.chatId, limit: 20 }));
    expect(first.entries.map(recKey)).toEqual(expected.slice(-20).map(recKey));
    const pages = await pageAll(main.alice.client, { chatId: main.chatId, limit: 20 });
    for (const p of pages) {
      const keys = p.entries.map(recKey);
      expect(keys).toEqual([...p.entries].sort(transcriptCompare).map(recKey));
    }
    const all = pages.reverse().flatMap((p) => p.entries.map(recKey));
    expect(all).toEqual(expected.map(recKey));
    expect(new Set(all).size).toBe(all.length);
  });

  it('pages forward from the oldest entry with nextCursor covering everything exactly once', async () => {
    const pages = await pageAll(main.bob.client, { chatId: main.chatId, direction: 'forward', limit: 37 });
    expect(pages[0]!.entries.map(recKey)).toEqual(expected.slice(0, 37).map(recKey));
    expect(pages.flatMap((p) => p.entries.map(recKey))).toEqual(expected.map(recKey));
  });

  it('is readable by admin and denied to a non-participant agent', async () => {
    const r = ok(await admin().call('chats.history', { chatId: main.chatId, limit: 5 }));
    expect(r.entries.map(recKey)).toEqual(expected.slice(-5).map(recKey));
    const outsider = await createAgent(admin(), daemon().socketPath);
    try {
      expectError(await outsider.client.call('chats.history', { chatId: main.chatId }), 'PERMISSION_DENIED');
    } finally {
      outsider.client.close();
    }
  });

  it('rejects limit above 500 and below 1 with INVALID_PARAMS; 500 is fine', async () => {
    for (const limit of [501, 0, 10_000]) {
      const data = expectError(
        await main.bob.client.call('chats.history', { chatId: main.chatId, limit }),
        'INVALID_PARAMS',
        `limit ${limit}`,
      );
      expect(String(data.path)).toContain('limit');
    }
    ok(await main.bob.client.call('chats.history', { chatId: main.chatId, limit: 500 }));
  });
});

describe('chats.history snapshot and hand-off', () => {
  for (const direction of ['forward', 'backward'] as const) {
    it(`never shows records appended after the first call while paging ${direction}, and its liveCursor follows on exactly`, async () => {
      const c = await setupChat(daemon(), admin());
      for (let i = 0; i < 3; i++) await Promise.all([c.wa.send(`a${i}`, 4), c.wb.send(`b${i}`, 3)]);
      const snapshot = await transcript(c);
      const heads = { a: c.wa.next, b: c.wb.next };

      let n = 0;
      const pages = await pageAll(c.bob.client, { chatId: c.chatId, direction, limit: 4 }, async () => {
        // Appends (messages and a receipt) while paging.
        n += 1;
        await Promise.all([c.wa.send(`late-a${n}`, 2), c.wb.send(`late-b${n}`, 1)]);
      });
      expect(pages.length).toBeGreaterThan(3);
      const keys = (direction === 'forward' ? pages : [...pages].reverse()).flatMap((p) => p.entries.map(recKey));
      expect(keys).toEqual(snapshot.map(recKey));
      // Every page's liveCursor is the snapshot's end.
      const follower = await connectAs(daemon().socketPath, c.bob.token);
      try {
        const subs = [];
        for (const p of [pages[0], pages.at(-1)]) {
          subs.push(ok(await follower.call('chats.follow', { chatId: c.chatId, cursor: p!.liveCursor })));
        }
        await c.wb.append([
          receipt(
            c.streamA,
            '1',
            heads.a,
            ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0', limit: Number(heads.a) }))
              .batchId,
          ),
        ]);
        await c.wa.send('after-follow', 2);
        for (const sub of subs) {
          await waitFor(
            () =>
              reached(batchesOf(follower, sub.subscriptionId), c.streamA, heads.a) === c.wa.next &&
              reached(batchesOf(follower, sub.subscriptionId), c.streamB, heads.b) === c.wb.next,
            'the follower to reach both heads',
            5_000,
          );
          const batches = batchesOf(follower, sub.subscriptionId);
          const recA = expectContiguous(batches, c.streamA, '1', heads.a, c.wa.next, 'A');
          const recB = expectContiguous(batches, c.streamB, '1', heads.b, c.wb.next, 'B');
          // Exactly the records appended after the snapshot: none of them is in the snapshot.
          const inSnapshot = new Set(snapshot.map(recKey));
          expect([...recA, ...recB].filter((r) => inSnapshot.has(recKey(r)))).toEqual([]);
          expect(recB.some((r) => r.wrapper.type === 'chat.receipt')).toBe(true);
        }
      } finally {
        follower.close();
      }
    });
  }
});

describe('chats.history cursors', () => {
  it('rejects a tampered cursor with INVALID_PARAMS at path "cursor"', async () => {
    const r = ok(await main.bob.client.call('chats.history', { chatId: main.chatId, limit: 10 }));
    expect(r.nextCursor).toEqual(anyString);
    for (const bad of [tamper(r.nextCursor!), r.nextCursor!.slice(0, -1), `${r.nextCursor}x`, 'not-a-cursor']) {
      const data = expectError(await main.bob.client.call('chats.history', { chatId: main.chatId, cursor: bad }), 'INVALID_PARAMS', bad);
      expect(data.path).toBe('cursor');
    }
  });

  it('rejects a live cursor passed to chats.history, and a history cursor passed to chats.follow (wrong kind)', async () => {
    const r = ok(await main.bob.client.call('chats.history', { chatId: main.chatId, limit: 10 }));
    const sub = ok(await main.bob.client.call('chats.follow', { chatId: main.chatId }));
    ok(await main.bob.client.call('chats.unfollow', { subscriptionId: sub.subscriptionId }));
    for (const live of [r.liveCursor, sub.cursor]) {
      const data = expectError(
        await main.bob.client.call('chats.history', { chatId: main.chatId, cursor: live }),
        'INVALID_PARAMS',
        'live cursor in history',
      );
      expect(data.path).toBe('cursor');
    }
    const data = expectError(
      await main.bob.client.call('chats.follow', { chatId: main.chatId, cursor: r.nextCursor }),
      'INVALID_PARAMS',
      'history cursor in follow',
    );
    expect(data.path).toBe('cursor');
  });

  it('rejects a cursor made for another chat', async () => {
    const other = await setupChat(daemon(), admin());
    await other.wa.send('o', 5);
    const r = ok(await admin().call('chats.history', { chatId: other.chatId, limit: 2 }));
    expect(r.nextCursor).toEqual(anyString);
    const d1 = expectError(
      await admin().call('chats.history', { chatId: main.chatId, cursor: r.nextCursor }),
      'INVALID_PARAMS',
      'history cursor of another chat',
    );
    expect(d1.path).toBe('cursor');
    const d2 = expectError(
      await admin().call('chats.follow', { chatId: main.chatId, cursor: r.liveCursor }),
      'INVALID_PARAMS',
      'live cursor of another chat',
    );
    expect(d2.path).toBe('cursor');
  });
});

describe('chats.history across restart, reset and trim', () => {
  it('keeps history and live cursors valid across a daemon restart', async () => {
    const first = ok(await main.bob.client.call('chats.history', { chatId: main.chatId, direction: 'forward', limit: 25 }));
    const second = ok(await main.bob.client.call('chats.history', { chatId: main.chatId, cursor: first.nextCursor, limit: 25 }));
    const back = ok(await main.bob.client.call('chats.history', { chatId: main.chatId, limit: 25 }));
    const backSecond = ok(await main.bob.client.call('chats.history', { chatId: main.chatId, cursor: back.nextCursor, limit: 25 }));
    const heads = { a: main.wa.next, b: main.wb.next };

    await restart();
    await reconnectChat(daemon(), main);

    const again = ok(await main.bob.client.call('chats.history', { chatId: main.chatId, cursor: first.nextCursor, limit: 25 }));
    expect(again.entries.map(recKey)).toEqual(second.entries.map(recKey));
    expect(again.entries.map(recKey)).toEqual(expected.slice(25, 50).map(recKey));
    const backAgain = ok(await main.bob.client.call('chats.history', { chatId: main.chatId, cursor: back.nextCursor, limit: 25 }));
    expect(backAgain.entries.map(recKey)).toEqual(backSecond.entries.map(recKey));

    const sub = ok(await main.bob.client.call('chats.follow', { chatId: main.chatId, cursor: first.liveCursor }));
    await main.wa.send('after-restart', 2);
    await waitFor(
      () => reached(batchesOf(main.bob.client, sub.subscriptionId), main.streamA, heads.a) === main.wa.next,
      'the post-restart batch',
      5_000,
    );
    expectContiguous(batchesOf(main.bob.client, sub.subscriptionId), main.streamA, '1', heads.a, main.wa.next);
    ok(await main.bob.client.call('chats.unfollow', { subscriptionId: sub.subscriptionId }));
  });

  it('answers an old cursor with CONTINUITY_BREAK GENERATION_CHANGED after streams.reset of one stream', async () => {
    const c = await setupChat(daemon(), admin());
    await Promise.all([c.wa.send('a', 10), c.wb.send('b', 10)]);
    const cursors: Record<string, string | null> = {};
    for (const direction of ['forward', 'backward']) {
      const r = ok(await c.bob.client.call('chats.history', { chatId: c.chatId, direction, limit: 5 }));
      expect(r.nextCursor).toEqual(anyString);
      cursors[direction] = r.nextCursor;
    }
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'test reset' }));
    for (const direction of ['forward', 'backward']) {
      const data = expectError(
        await c.bob.client.call('chats.history', { chatId: c.chatId, cursor: cursors[direction] }),
        'CONTINUITY_BREAK',
        direction,
      );
      expect(data).toMatchObject({ reason: 'GENERATION_CHANGED', streamId: c.streamA, expected: '1', actual: '2' });
    }
    // A new snapshot starts over on the new generation.
    const fresh = ok(await c.bob.client.call('chats.history', { chatId: c.chatId, limit: 500 }));
    expect(fresh.entries.every((e) => e.streamId === c.streamB)).toBe(true);
    expect(fresh.entries).toHaveLength(10);
  });

  it('answers the next forward page with CONTINUITY_BREAK PREFIX_UNAVAILABLE after a forced trim of the snapshot range', async () => {
    const c = await setupChat(daemon(), admin());
    await Promise.all([c.wa.send('a', 20), c.wb.send('b', 20)]);
    const r = ok(await c.bob.client.call('chats.history', { chatId: c.chatId, direction: 'forward', limit: 5 }));
    expect(r.nextCursor).toEqual(anyString);
    ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '15', force: true }));
    const data = expectError(await c.bob.client.call('chats.history', { chatId: c.chatId, cursor: r.nextCursor }), 'CONTINUITY_BREAK');
    expect(data).toMatchObject({ reason: 'PREFIX_UNAVAILABLE', streamId: c.streamA });
    // Backward paging over a trimmed stream simply ends at the retained start.
    const pages = await pageAll(c.bob.client, { chatId: c.chatId, limit: 7 });
    const keys = pages.reverse().flatMap((p) => p.entries.map(recKey));
    const retained = (await transcript(c)).map(recKey);
    expect(keys).toEqual(retained);
    expect(retained.filter((k) => k.startsWith(`${c.streamA}@`))).toHaveLength(6); // positions 15..20
  });
});
