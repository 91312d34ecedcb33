// Every answer is bounded in bytes (docs/protocol.md §3.2): a `chats.history` page is cut at
// 1 MiB of records (always at least one) without losing its snapshot and cursor semantics; a
// batch is bounded in elements (64; 16 before session.hello) and in answer bytes (elements after
// the answers reach 1 MiB are not run and answer REQUEST_TOO_LARGE).

import { beforeAll, describe, expect, it } from 'vitest';
import { ok, readAll, uniq, type Wire, type WireResponse, messageOf, type Result } from '../helpers/wire-fixtures.js';
import { recKey, setupChat, transcriptCompare, type ReadingChat, batchesOf } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';

const MiB = 1_048_576;
/** Sizes cycled through by the messages of both directions: tiny ones between big ones. */
const SIZES = [12, 180_000, 40, 250_000, 3_000, 90_000, 250_000, 7];

const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open'] });
let chat: ReadingChat;

const bytesOf = (records: unknown[]): number => records.reduce<number>((n, r) => n + Buffer.byteLength(JSON.stringify(r)), 0);

/** Pages `chats.history` to the end; returns the pages. */
async function pageAll(
  client: Wire,
  chatId: string,
  direction: 'forward' | 'backward',
  between?: () => Promise<void>,
): Promise<Result<'chats.history'>[]> {
  const pages: Result<'chats.history'>[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1_000; i++) {
    const params = cursor === undefined ? { chatId, limit: 500, direction } : { chatId, limit: 500, cursor };
    const page = ok(await client.call('chats.history', params), 'chats.history');
    pages.push(page);
    if (i === 0 && between) await between();
    if (page.nextCursor === null) return pages;
    cursor = page.nextCursor;
  }
  throw new Error('history paging did not end');
}

beforeAll(async () => {
  chat = await setupChat(daemon(), admin());
  // Interleaved directions, big and tiny messages, and receipts between them (which history skips).
  for (let i = 0; i < 24; i++) {
    const size = SIZES[i % SIZES.length]!;
    const content = `${i} ${'x'.repeat(size)}`;
    if (i % 3 === 2) await chat.wb.append([{ type: 'chat.message', messageId: `b.${i}`, content }]);
    else await chat.wa.append([{ type: 'chat.message', messageId: `a.${i}`, content }]);
  }
}, 120_000);

describe('chats.history cut by bytes', () => {
  for (const direction of ['forward', 'backward'] as const) {
    it(`${direction}: each page stops at 1 MiB of records, and the pages tile the snapshot exactly once, in transcript order`, async () => {
      const all = [...(await readAll(chat.alice.client, chat.streamA)), ...(await readAll(chat.alice.client, chat.streamB))]
        .filter((r) => r.wrapper.type === 'chat.message')
        .sort(transcriptCompare);
      const late = uniq('late');
      const pages = await pageAll(chat.bob.client, chat.chatId, direction, async () => {
        // Appended after the snapshot: never part of these pages.
        await chat.wa.append([{ type: 'chat.message', messageId: late, content: `late ${'y'.repeat(200_000)}` }]);
      });
      expect(pages.length, 'the ~3 MB transcript takes several pages').toBeGreaterThan(2);
      for (const page of pages) {
        expect(page.entries.length, 'a page always holds at least one record').toBeGreaterThanOrEqual(1);
        expect(bytesOf(page.entries) - bytesOf(page.entries.slice(-1)), 'page bytes before its last record').toBeLessThan(MiB);
        const keys = page.entries.map(recKey);
        expect([...page.entries].sort(transcriptCompare).map(recKey), 'a page lists its entries in ascending order').toEqual(keys);
      }
      const seen = (direction === 'forward' ? pages : [...pages].reverse()).flatMap((p) => p.entries.map(recKey));
      expect(seen, 'every message of the snapshot exactly once, in order').toEqual(all.map(recKey));
      // The live cursor of the snapshot continues exactly after it: the late message comes next.
      const follower = await daemon().connectAs(chat.bob.token);
      const sub = ok(await follower.call('chats.follow', { chatId: chat.chatId, cursor: pages[0]!.liveCursor }), 'chats.follow');
      const delivered = () => batchesOf(follower, sub.subscriptionId).flatMap((b) => b.records);
      // Not failing on a timeout: the assertion below says what arrived instead.
      await waitFor(
        () => delivered().some((r) => r.wrapper.type === 'chat.message' && messageOf(r).content.startsWith('late')),
        'the late message',
        10_000,
        20,
      ).catch(() => undefined);
      const messages = delivered().filter((r) => r.wrapper.type === 'chat.message');
      expect(
        messages.map((r) => messageOf(r).content.slice(0, 5)),
        'after the snapshot: only the late message',
      ).toEqual(['late ']);
    });
  }
});

describe('batches', () => {
  it('a batch of more than 64 requests is one -32600 with id null, and none of it runs', async () => {
    const names = Array.from({ length: 65 }, () => uniq('batch'));
    admin().sendRaw(
      JSON.stringify(
        names.map((username, i) => ({ jsonrpc: '2.0', id: `b${i}`, method: 'agents.create', params: { username, name: 'x' } })),
      ) + '\n',
    );
    const r = await admin().nextOrphan(10_000);
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(-32600);
    const got = await admin().call('agents.get', { username: names[0] });
    expect(got.error?.data?.type, 'the first element did not run').toBe('NOT_FOUND');
    // 64 is fine.
    const answers = await admin().batchRaw<Result<'daemon.status'>>(
      Array.from({ length: 64 }, (_, i) => ({ jsonrpc: '2.0', id: `s${i}`, method: 'daemon.status' })),
    );
    expect(answers).toHaveLength(64);
    expect(answers.every((a) => a.result?.version)).toBe(true);
  });

  it('before session.hello a batch holds at most 16 requests; its elements run in order, so it may start with the hello', async () => {
    const c = await daemon().connect();
    c.sendRaw(JSON.stringify(Array.from({ length: 17 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'daemon.status' }))) + '\n');
    const r = await c.nextOrphan(10_000);
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(-32600);
    const answers = await c.batchRaw<{ role?: string; version?: string }>([
      { jsonrpc: '2.0', id: 'h', method: 'session.hello', params: { token: daemon().adminToken } },
      { jsonrpc: '2.0', id: 's', method: 'daemon.status' },
    ]);
    expect(answers.find((a) => a.id === 'h')?.result?.role).toBe('admin');
    expect(answers.find((a) => a.id === 's')?.result?.version, 'the element after the hello ran with its session').toBeDefined();
  });

  it('once the answers of a batch reach 1 MiB, the remaining elements are not run and each answers REQUEST_TOO_LARGE', async () => {
    const read = (i: number) => ({
      jsonrpc: '2.0',
      id: `r${i}`,
      method: 'streams.read',
      params: { streamId: chat.streamA, generation: '1', fromPosition: '0' },
    });
    const username = uniq('after-budget');
    const elements = [
      read(0),
      read(1),
      read(2),
      read(3),
      { jsonrpc: '2.0', id: 'create', method: 'agents.create', params: { username, name: 'late' } },
      read(4),
      { jsonrpc: '2.0', method: 'daemon.status' },
    ];
    const answers: WireResponse[] = await admin().batchRaw(elements, 20_000);
    const bytes = Buffer.byteLength(JSON.stringify(answers));
    const ids = answers.map((a) => a.id);
    expect(ids, 'answers in request order, none for the notification').toEqual(['r0', 'r1', 'r2', 'r3', 'create', 'r4']);
    const ran = answers.filter((a) => a.result !== undefined);
    const refused = answers.filter((a) => a.error !== undefined);
    expect(ran.length, 'at least the first element ran').toBeGreaterThanOrEqual(1);
    expect(answers.slice(0, ran.length), 'the elements that ran are a prefix').toEqual(ran);
    expect(bytes - Buffer.byteLength(JSON.stringify(ran.at(-1))), 'answer bytes before the element that reached the budget').toBeLessThan(
      MiB,
    );
    for (const e of refused) {
      expect(e.error?.code).toBe(4013);
      expect(e.error?.data).toMatchObject({ type: 'REQUEST_TOO_LARGE', limit: MiB });
      expect(e.error?.data?.size).toBeGreaterThanOrEqual(MiB);
    }
    expect(refused.map((a) => a.id)).toContain('create');
    const got = await admin().call('agents.get', { username });
    expect(got.error?.data?.type, 'an element past the budget did not run').toBe('NOT_FOUND');
  });
});
