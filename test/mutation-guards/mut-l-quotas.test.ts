// Kills mutants of src/daemon/streams/quotas.ts that r1-arguments.md ("src/daemon/streams/
// quotas.ts") calls killable: lines 115–118 of `#storedOnDisk`, which pages through the agent's
// chats with `directory.chatIds`, 500 a page, and adds up the estimate of its stream in each.
// The mutants drop the page request, its `limit` or its `after` (115:68, 115:74, 115:96: the
// first page is asked for again and again, so the estimate never arrives), start the next page
// after the page's second id instead of its last (117:26: chats 3 to 500 are counted twice), or
// stop after a first page that is full (118:11: the chats past the 500th are not counted). No
// earlier test had an agent in more than 500 chats with the stored-bytes quota on, so the second
// page was never read: mut-b-quotas.test.ts's estimate test has alice in two chats. Here alice
// is in 501 chats and has records in two of her streams, one of a chat whose id sorts in the
// middle and the one of the chat whose id sorts last; the estimate must arrive, and count each
// once. In process, on a real LevelDB in a temp dir (test/helpers/in-process-store.ts), as
// mut-b-quotas.test.ts does.

import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { K, prefixEnd } from '../../src/daemon/store/leveldb/key-layout.js';
import { Quotas, type QuotaOptions } from '../../src/daemon/streams/quotas.js';
import { YelloError } from '../../src/shared/errors.js';
import { appendOperation, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

const off: QuotaOptions = { appendRecordsPerSecond: 0, appendBytesPerSecond: 0, storedBytes: 0, claimsPerMinute: 0 };

/** Chats alice is in: one more than a page of `directory.chatIds` in `#storedOnDisk`. */
const CHATS = 501;

describe('stored bytes: the estimate over more than one page of chats', () => {
  it('an agent in 501 chats: the estimate arrives and counts the stream of a middle chat and of the last chat once each', async () => {
    const s = await openInProcess();
    open.push(s);
    const w = await chatWithWriter(s); // alice and her first chat
    const alice = (w.alice as { agentId: string }).agentId;
    const tag = randomBytes(3).toString('hex');
    // 500 more peers and chats, in batches (each a synced write of its own).
    const chatIds = [w.chatId];
    for (let start = 1; start < CHATS; start += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, CHATS - start) }, async (_, k) => {
          const peer = await s.directory.createAgent(`peer${tag}n${start + k}`, 'Peer', undefined);
          return (await s.directory.openChat(w.alice, alice, peer.agent.id)).chat.id;
        }),
      );
      chatIds.push(...batch);
    }
    expect(new Set(chatIds).size).toBe(CHATS);
    // In the order of the member keys (`m/<agent>/<chat>`), which is the order of the pages.
    const sorted = [...chatIds].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    const middle = `${sorted[250]!}:${alice}`; // 3rd to 500th: counted twice if a page starts after its second id
    const last = `${sorted[CHATS - 1]!}:${alice}`; // 501st: only on the second page

    const writer = async (streamId: string) =>
      streamId === w.streamId
        ? w
        : { alice: w.alice, streamId, token: (await s.streams.claim(w.alice, { streamId, replace: false })).coordinatorToken };
    await appendOperation(s, await writer(middle), 200, `middle-chat-message-with-a-long-enough-id-${'x'.repeat(40)}`);
    await appendOperation(s, await writer(last), 120, `last-chat-message-with-an-id-of-another-length-${'y'.repeat(20)}`);
    const estimate = (streamId: string) => {
      const prefix = K.recordsOfStream(streamId);
      return s.store.storage.approximateSize(prefix, prefixEnd(prefix));
    };
    const sizeOf = async (streamId: string) => {
      const prefix = K.recordsOfStream(streamId);
      await s.store.storage.compactRange(prefix, prefixEnd(prefix));
      return estimate(streamId);
    };
    const mid = await sizeOf(middle);
    const end = await sizeOf(last);
    expect(mid).toBeGreaterThan(1000);
    expect(end).toBeGreaterThan(1000);
    expect(mid).not.toBe(end);
    // Precondition: alice's other 499 streams are empty and LevelDB estimates them at 0.
    let all = 0;
    for (const chatId of chatIds) all += await estimate(`${chatId}:${alice}`);
    expect(all).toBe(mid + end);

    const limit = mid + end + 500;
    const q = new Quotas({ ...off, storedBytes: limit }, s.port);
    // Admitted at once: the estimate has not arrived (admission never waits for it), nothing was
    // appended since the start, and `limit` bytes are at the limit. The same append is refused
    // as soon as any estimate above 0 has arrived, and the refusal says what it counted.
    q.admitAppend(alice, 1, limit);
    let used: unknown;
    await waitFor(
      () => {
        try {
          q.admitAppend(alice, 1, limit);
          return false;
        } catch (err) {
          expect(err).toBeInstanceOf(YelloError);
          expect((err as YelloError).type).toBe('QUOTA_EXCEEDED');
          used = (err as YelloError).details.used;
          return true;
        }
      },
      'the stored-bytes estimate over 501 chats to arrive',
      10_000,
    );
    expect(used).toBe(mid + end);
    q.admitAppend(alice, 1, 500); // at the limit, not over it
  }, 120_000);
});
