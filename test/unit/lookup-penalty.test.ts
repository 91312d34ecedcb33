// The per-author penalty of optimistic admission on PostgreSQL (appender.ts `#optimistic`):
// counted in appends, bounded in time on a monotonic clock, and never kept for good.
import { describe, expect, it } from 'vitest';
import { LOOKUP_FIRST_APPENDS, LOOKUP_FIRST_MS, LookupPenalty } from '../../src/daemon/streams/lookup-penalty.js';

function clocked(): { penalty: LookupPenalty; advance: (ms: number) => void } {
  let now = 1_000;
  return { penalty: new LookupPenalty(() => now), advance: (ms) => void (now += ms) };
}

describe('LookupPenalty', () => {
  it('an author never refused decides without the lookup', () => {
    expect(new LookupPenalty().lookupFirst('alice')).toBe(false);
  });

  it(`a refused author looks up first on exactly its next ${LOOKUP_FIRST_APPENDS} appends; others are not affected`, () => {
    const { penalty } = clocked();
    penalty.refused('alice');
    const answers = Array.from({ length: LOOKUP_FIRST_APPENDS + 2 }, () => penalty.lookupFirst('alice'));
    expect(answers.filter(Boolean)).toHaveLength(LOOKUP_FIRST_APPENDS);
    expect(answers.slice(LOOKUP_FIRST_APPENDS)).toEqual([false, false]);
    expect(penalty.lookupFirst('bob')).toBe(false);
    expect(penalty.size).toBe(0);
  });

  it('another refusal starts the count again', () => {
    const { penalty } = clocked();
    penalty.refused('alice');
    for (let i = 0; i < LOOKUP_FIRST_APPENDS - 1; i++) penalty.lookupFirst('alice');
    penalty.refused('alice');
    const answers = Array.from({ length: LOOKUP_FIRST_APPENDS + 1 }, () => penalty.lookupFirst('alice'));
    expect(answers.filter(Boolean)).toHaveLength(LOOKUP_FIRST_APPENDS);
  });

  it(`a penalty ends after ${LOOKUP_FIRST_MS} ms on the monotonic clock even if appends stop`, () => {
    const { penalty, advance } = clocked();
    penalty.refused('alice');
    advance(LOOKUP_FIRST_MS - 1);
    expect(penalty.lookupFirst('alice')).toBe(true);
    advance(1);
    expect(penalty.lookupFirst('alice')).toBe(false);
    expect(penalty.size).toBe(0);
  });

  it('authors that stop appending are swept: the map stays bounded by the recent ones', () => {
    const { penalty, advance } = clocked();
    for (let i = 0; i < 300; i++) penalty.refused(`old-${i}`);
    expect(penalty.size).toBe(300);
    advance(LOOKUP_FIRST_MS);
    penalty.refused('new');
    expect(penalty.size).toBe(1);
    expect(penalty.lookupFirst('new')).toBe(true);
    expect(penalty.lookupFirst('old-0')).toBe(false);
  });

  it('the sweep starts at 256 penalised authors, not below (it walks the whole map)', () => {
    const { penalty, advance } = clocked();
    for (let i = 0; i < 10; i++) penalty.refused(`few-${i}`);
    advance(LOOKUP_FIRST_MS);
    penalty.refused('x');
    expect(penalty.size).toBe(11); // expired, left for their next lookup
    for (let i = 0; i < 256 - 11; i++) penalty.refused(`more-${i}`);
    expect(penalty.size).toBe(256);
    advance(LOOKUP_FIRST_MS);
    penalty.refused('y');
    expect(penalty.size).toBe(1);
  });

  it('a sweep keeps the penalties still running', () => {
    const { penalty, advance } = clocked();
    for (let i = 0; i < 256; i++) penalty.refused(`a-${i}`);
    advance(LOOKUP_FIRST_MS - 1);
    penalty.refused('b');
    expect(penalty.size).toBe(257);
    expect(penalty.lookupFirst('a-0')).toBe(true);
  });
});
