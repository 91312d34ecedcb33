// Pins behaviour of src/daemon/streams/quotas.ts. In-process: the Quotas the daemon builds, on a
// real LevelDB in a temp dir, with the monotonic clock injected (its constructor takes one) so
// rates are tested by value, without sleeps. test/integration/quotas.test.ts shows the same
// refusals over the socket.

import { afterEach, describe, expect, it } from 'vitest';
import { K, prefixEnd } from '../../src/daemon/store/leveldb/key-layout.js';
import { Quotas, type QuotaOptions } from '../../src/daemon/streams/quotas.js';
import { YelloError } from '../../src/shared/errors.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore, appendOperation } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';
import { randomBytes } from 'node:crypto';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

async function fresh(): Promise<InProcessStore> {
  const s = await openInProcess();
  open.push(s);
  return s;
}

const off: QuotaOptions = { appendRecordsPerSecond: 0, appendBytesPerSecond: 0, storedBytes: 0, claimsPerMinute: 0 };

/** A clock the test moves. */
function clock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

function refusal(fn: () => void): Record<string, unknown> {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(YelloError);
    return { type: (err as YelloError).type, ...(err as YelloError).details };
  }
  throw new Error('expected a refusal, the call was admitted');
}

describe('append rate (records)', () => {
  it('admits a burst of 10 s of the rate, refuses the next record with the wait for one token, and refills with time', async () => {
    const s = await fresh();
    const t = clock();
    const hits: string[] = [];
    const q = new Quotas({ ...off, appendRecordsPerSecond: 2 }, s.port, t.now);
    q.onHit((quota) => hits.push(quota));
    q.admitAppend('a', 20, 1); // the whole burst (2/s × 10 s)
    expect(
      refusal(() => {
        q.admitAppend('a', 1, 1);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 500 });
    expect(hits).toEqual(['appendRate']);
    // Nothing was taken by the refusal: after 250 ms half a token is there, after 500 all of it.
    t.advance(250);
    expect(
      refusal(() => {
        q.admitAppend('a', 1, 1);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 250 });
    t.advance(250);
    q.admitAppend('a', 1, 1);
    expect(
      refusal(() => {
        q.admitAppend('a', 2, 1);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 1000 });
    // Another agent has its own bucket.
    q.admitAppend('b', 20, 1);
  });

  it('an append larger than the burst waits for a full bucket only, then is admitted', async () => {
    const s = await fresh();
    const t = clock();
    const q = new Quotas({ ...off, appendRecordsPerSecond: 1 }, s.port, t.now);
    q.admitAppend('a', 4, 1); // 6 of 10 left
    expect(
      refusal(() => {
        q.admitAppend('a', 50, 1);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 4000 });
    t.advance(4000);
    q.admitAppend('a', 50, 1); // the bucket was full: admitted, and it is now 40 in debt
    t.advance(10_000);
    expect(
      refusal(() => {
        q.admitAppend('a', 1, 1);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 31_000 });
  });

  it('the bucket holds no more than its capacity however long it rests', async () => {
    const s = await fresh();
    const t = clock();
    const q = new Quotas({ ...off, appendRecordsPerSecond: 1 }, s.port, t.now);
    q.admitAppend('a', 1, 1);
    t.advance(3_600_000);
    q.admitAppend('a', 10, 1);
    expect(
      refusal(() => {
        q.admitAppend('a', 1, 1);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 1000 });
  });
});

describe('append rate (bytes)', () => {
  it('refuses past the byte rate with the longer of the two waits', async () => {
    const s = await fresh();
    const t = clock();
    const hits: string[] = [];
    const q = new Quotas({ ...off, appendRecordsPerSecond: 1, appendBytesPerSecond: 100 }, s.port, t.now);
    q.onHit((quota) => hits.push(quota));
    q.admitAppend('a', 1, 1000); // bytes bucket: 1000 (100/s × 10 s), now empty; records 9 left
    expect(
      refusal(() => {
        q.admitAppend('a', 1, 250);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 2500 });
    q.admitAppend('a', 9, 0); // records bucket empty as well, bytes still empty
    expect(
      refusal(() => {
        q.admitAppend('a', 3, 50);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 3000 });
    expect(
      refusal(() => {
        q.admitAppend('a', 1, 500);
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 5000 });
    expect(hits).toEqual(['appendRate', 'appendRate', 'appendRate']);
    t.advance(5000);
    q.admitAppend('a', 1, 500);
  });

  it('with every quota off, admits anything and never calls the listener', async () => {
    const s = await fresh();
    const q = new Quotas(off, s.port, clock().now);
    const hits: string[] = [];
    q.onHit((quota) => hits.push(quota));
    for (let i = 0; i < 100; i++) q.admitAppend('a', 10_000, 10_000_000);
    for (let i = 0; i < 1000; i++) q.admitClaim('a');
    expect(hits).toEqual([]);
  });
});

describe('claims per minute', () => {
  it('admits the per-minute count at once, refuses the next with the wait for one, refills', async () => {
    const s = await fresh();
    const t = clock();
    const hits: string[] = [];
    const q = new Quotas({ ...off, claimsPerMinute: 3 }, s.port, t.now);
    q.onHit((quota) => hits.push(quota));
    q.admitClaim('a');
    q.admitClaim('a');
    q.admitClaim('a');
    expect(
      refusal(() => {
        q.admitClaim('a');
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 20_000 });
    expect(hits).toEqual(['claimRate']);
    t.advance(10_000);
    expect(
      refusal(() => {
        q.admitClaim('a');
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 10_000 });
    t.advance(10_000);
    q.admitClaim('a');
    expect(
      refusal(() => {
        q.admitClaim('a');
      }),
    ).toEqual({ type: 'RATE_LIMITED', retryAfterMs: 20_000 });
    q.admitClaim('b');
    // Claims and appends are separate buckets.
    q.admitAppend('a', 1, 1);
  });
});

describe('stored bytes', () => {
  it('counts what was appended since start against the quota: up to the limit is admitted, one byte more is QUOTA_EXCEEDED', async () => {
    const s = await fresh();
    const hits: string[] = [];
    const q = new Quotas({ ...off, storedBytes: 1000 }, s.port, clock().now);
    q.onHit((quota) => hits.push(quota));
    q.admitAppend('a', 1, 600);
    q.appended('a', 600);
    q.admitAppend('a', 1, 400); // 600 + 400 = 1000: at the limit
    expect(
      refusal(() => {
        q.admitAppend('a', 1, 401);
      }),
    ).toEqual({
      type: 'QUOTA_EXCEEDED',
      quota: 'storedBytes',
      limit: 1000,
      used: 600,
      retryAfterMs: null,
    });
    expect(hits).toEqual(['storedBytes']);
    q.appended('a', 400);
    expect(
      refusal(() => {
        q.admitAppend('a', 1, 1);
      }),
    ).toMatchObject({ type: 'QUOTA_EXCEEDED', used: 1000 });
    // Another agent's count is its own.
    q.admitAppend('b', 1, 1000);
  });

  it('starts from LevelDB’s estimate of the records in the streams the agent writes, over all its chats', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 300, 'a-one-long-enough-message-id-prefix-to-take-some-space');
    const second = await s.directory.openChat(w.alice, (w.alice as { agentId: string }).agentId, (w.bob as { agentId: string }).agentId);
    expect(second.chat.id).toBe(w.chatId); // one chat per pair: make a third agent for a second chat
    const c = await s.directory.createAgent(`carol${Date.now()}`, 'Carol', undefined);
    const { chat } = await s.directory.openChat(w.alice, (w.alice as { agentId: string }).agentId, c.agent.id);
    const other = `${chat.id}:${(w.alice as { agentId: string }).agentId}`;
    const claim = await s.streams.claim(w.alice, { streamId: other, replace: false });
    await appendMessages(
      s,
      { alice: w.alice, streamId: other, token: claim.coordinatorToken },
      300,
      'another-long-enough-prefix-for-the-second-chat',
    );
    const sizeOf = async (streamId: string) => {
      const prefix = K.recordsOfStream(streamId);
      await s.store.storage.compactRange(prefix, prefixEnd(prefix));
      return s.store.storage.approximateSize(prefix, prefixEnd(prefix));
    };
    const one = await sizeOf(w.streamId);
    const two = await sizeOf(other);
    expect(one).toBeGreaterThan(1000);
    expect(two).toBeGreaterThan(1000);
    const limit = one + two + 500;
    const q = new Quotas({ ...off, storedBytes: limit }, s.port, clock().now);
    // Admitted at once: the estimate has not arrived yet (admission never waits for it).
    q.admitAppend((w.alice as { agentId: string }).agentId, 1, limit);
    let used: unknown;
    await waitFor(
      () => {
        try {
          q.admitAppend((w.alice as { agentId: string }).agentId, 1, 501);
          return false;
        } catch (err) {
          used = (err as YelloError).details.used;
          return true;
        }
      },
      'the estimate to arrive',
      5_000,
    );
    expect(used).toBe(one + two);
    q.admitAppend((w.alice as { agentId: string }).agentId, 1, 500);
    // Bob writes no stream with records: nothing stored.
    q.admitAppend((w.bob as { agentId: string }).agentId, 1, limit);
    await new Promise((r) => setTimeout(r, 50)); // let bob's estimate (0) arrive
    q.admitAppend((w.bob as { agentId: string }).agentId, 1, limit);
  });
});

describe('quota refusals without a listener, and the stored-bytes quota off', () => {
  it('with the stored-bytes quota off, no estimate ever counts: appends are still admitted after it would have arrived', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 50);
    const prefix = K.recordsOfStream(w.streamId);
    await s.store.storage.compactRange(prefix, prefixEnd(prefix));
    const q = new Quotas(off, s.port, clock().now);
    const alice = (w.alice as { agentId: string }).agentId;
    q.admitAppend(alice, 1, 1);
    // Time is the subject: an estimate, if one were asked for, would be back by then.
    await new Promise((r) => setTimeout(r, 100));
    q.admitAppend(alice, 1, 1);
    q.appended(alice, 10_000_000);
    q.admitAppend(alice, 1, 1);
  });

  it('refuses without a listener, and the message names the quota', async () => {
    const s = await fresh();
    const t = clock();
    const q = new Quotas(
      { ...off, appendRecordsPerSecond: 3, appendBytesPerSecond: 5000, claimsPerMinute: 1, storedBytes: 10 },
      s.port,
      t.now,
    );
    q.admitClaim('a');
    const claim = (() => {
      try {
        q.admitClaim('a');
      } catch (err) {
        return err;
      }
      return null;
    })();
    expect(claim).toBeInstanceOf(YelloError);
    expect((claim as YelloError).type).toBe('RATE_LIMITED');
    expect((claim as YelloError).message).toMatch(/streams\.claim.*1 per minute/);
    q.admitAppend('b', 30, 1);
    const append = (() => {
      try {
        q.admitAppend('b', 1, 1);
      } catch (err) {
        return err;
      }
      return null;
    })();
    expect((append as YelloError).type).toBe('RATE_LIMITED');
    expect((append as YelloError).message).toMatch(/appends.*3 records\/s.*5000 bytes\/s/);
    expect(
      refusal(() => {
        q.admitAppend('c', 1, 11);
      }),
    ).toMatchObject({ type: 'QUOTA_EXCEEDED', limit: 10 });
  });
});

// Pins behaviour of src/daemon/streams/quotas.ts that the tests above leave
// unchecked: lines 115–118 of `#storedOnDisk`, which pages through the agent's
// chats with `directory.chatIds`, 500 a page, and adds up the estimate of its stream in each. The
// mutants drop the page request, its `limit` or its `after` (115:68, 115:74, 115:96: the first page
// is asked for again and again, so the estimate never arrives), start the next page after the
// page's second id instead of its last (117:26: chats 3 to 500 are counted twice), or stop after a
// first page that is full (118:11: the chats past the 500th are not counted). No earlier test had
// an agent in more than 500 chats with the stored-bytes quota on, so the second page was never
// read: the estimate test above has alice in two chats. Here alice is in 501 chats
// and has records in two of her streams, one of a chat whose id sorts in the middle and the one of
// the chat whose id sorts last; the estimate must arrive, and count each once. In process, on a
// real LevelDB in a temp dir (test/helpers/in-process-store.ts), as above.
describe('stored bytes over more chats than a page of the directory', () => {
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
});
