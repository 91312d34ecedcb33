// How a head change decided on the head in memory is decided again (src/daemon/streams/decide-again.ts):
// appends, claims, releases, trims and resets all take this many attempts, the last one told so.
import { describe, expect, it } from 'vitest';
import { decideAgain, MAX_ATTEMPTS, refuseUnlessMoved, stale } from '../../src/daemon/streams/decide-again.js';
import type { StreamHeads } from '../../src/daemon/streams/heads.js';
import type { StreamMeta } from '../../src/daemon/store/stream-meta.js';

describe('decideAgain', () => {
  it('tries again while stale, telling only the last attempt that it is the last', async () => {
    const seen: boolean[] = [];
    const answer = await decideAgain((last) => {
      seen.push(last);
      return Promise.resolve(last ? 'done' : 'stale');
    });
    expect(answer).toBe('done');
    expect(MAX_ATTEMPTS).toBe(3);
    expect(seen).toEqual([false, false, true]);
  });

  it('stops at the first answer that is not stale', async () => {
    let tries = 0;
    expect(await decideAgain(() => Promise.resolve(++tries))).toBe(1);
  });
});

describe('stale', () => {
  it('ok goes on; stale with attempts left decides again; stale on the last attempt is POSITION_MISMATCH with the head found', () => {
    expect(stale({ status: 'ok' }, true)).toBe(false);
    expect(stale({ status: 'stale', head: undefined }, false)).toBe(true);
    const head = { generation: 2, nextPosition: 7 } as never;
    let thrown: unknown;
    try {
      stale({ status: 'stale', head }, true);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ type: 'POSITION_MISMATCH', details: { nextPosition: '7', generation: '2' } });
    // The store found no head at all: position and generation 0, still POSITION_MISMATCH.
    let none: unknown;
    try {
      stale({ status: 'stale', head: undefined }, true);
    } catch (err) {
      none = err;
    }
    expect(none).toMatchObject({ type: 'POSITION_MISMATCH', details: { nextPosition: '0', generation: '0' } });
  });

  it('a duplicate of a head change without a unique key is a broken invariant, not an answer', () => {
    expect(() => stale({ status: 'duplicate', what: 'messageId', clientMessageId: 'm', position: 1 }, false)).toThrow(
      /duplicate messageId/,
    );
  });
});

describe('refuseUnlessMoved', () => {
  const decidedOn = { streamId: 'chat_x:agt_a', generation: 1, nextPosition: 4 } as StreamMeta;
  /** The one method refuseUnlessMoved asks of the heads, answering `moved`, with the calls it got. */
  function heads(moved: boolean): { heads: StreamHeads; calls: Array<[string, StreamMeta]> } {
    const calls: Array<[string, StreamMeta]> = [];
    const movedSince = (streamId: string, meta: StreamMeta) => {
      calls.push([streamId, meta]);
      return Promise.resolve(moved);
    };
    return { heads: { movedSince } as unknown as StreamHeads, calls };
  }
  const refusal = new Error('FENCED, decided in memory');

  it("decides again when the store's head moved since the decision, with attempts left", async () => {
    const h = heads(true);
    expect(await refuseUnlessMoved(h.heads, 'chat_x:agt_a', decidedOn, false, refusal)).toBe('stale');
    expect(h.calls).toEqual([['chat_x:agt_a', decidedOn]]);
  });

  it("answers the refusal when the store's head says the same", async () => {
    const h = heads(false);
    await expect(refuseUnlessMoved(h.heads, 'chat_x:agt_a', decidedOn, false, refusal)).rejects.toBe(refusal);
    expect(h.calls).toHaveLength(1);
  });

  it('answers the refusal on the last attempt without asking the store', async () => {
    const h = heads(true);
    await expect(refuseUnlessMoved(h.heads, 'chat_x:agt_a', decidedOn, true, refusal)).rejects.toBe(refusal);
    expect(h.calls).toEqual([]);
  });
});
