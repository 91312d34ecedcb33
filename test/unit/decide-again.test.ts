// How a head change decided on the head in memory is decided again (src/daemon/streams/decide-again.ts):
// appends, claims, releases, trims and resets all take this many attempts, the last one told so.
import { describe, expect, it } from 'vitest';
import { decideAgain, MAX_ATTEMPTS, stale } from '../../src/daemon/streams/decide-again.js';

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
    expect(thrown).toMatchObject({ type: 'POSITION_MISMATCH', details: { nextPosition: '7' } });
  });

  it('a duplicate of a head change without a unique key is a broken invariant, not an answer', () => {
    expect(() => stale({ status: 'duplicate', what: 'messageId', clientMessageId: 'm', position: 1 }, false)).toThrow(
      /duplicate messageId/,
    );
  });
});
