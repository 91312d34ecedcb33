// Pins behaviour of src/daemon/streams/chat-cursors.ts (the shape checks that open a cursor token
// after its MAC was verified) and src/daemon/streams/access.ts (who reads, who writes a stream).
// Both are pure functions, tested in-process by value; the socket tests (streams.test.ts,
// history.test.ts) show the same answers end to end.

import { describe, expect, it } from 'vitest';
import type { Caller } from '../../src/daemon/caller.js';
import type { StreamMeta } from '../../src/daemon/store/stream-meta.js';
import { assertAuthor, assertReader } from '../../src/daemon/streams/access.js';
import { isHistoryCursor, isLiveBody, isPair } from '../../src/daemon/streams/chat-cursors.js';
import { YelloError } from '../../src/shared/errors.js';

describe('chat cursor shapes', () => {
  it('isPair: exactly two numbers', () => {
    expect(isPair([1, 2])).toBe(true);
    expect(isPair([0, 0])).toBe(true);
    expect(isPair([1])).toBe(false);
    expect(isPair([1, 2, 3])).toBe(false);
    expect(isPair(['1', 2])).toBe(false);
    expect(isPair([1, '2'])).toBe(false);
    expect(isPair({ 0: 1, 1: 2, length: 2 })).toBe(false);
    expect(isPair(null)).toBe(false);
    expect(isPair(undefined)).toBe(false);
  });

  it('isLiveBody: a string chat and an object of streams', () => {
    expect(isLiveBody({ c: 'chat', s: {} })).toBe(true);
    expect(isLiveBody({ c: '', s: { a: [1, 2] } })).toBe(true);
    expect(isLiveBody({ c: 1, s: {} })).toBe(false);
    expect(isLiveBody({ s: {} })).toBe(false);
    expect(isLiveBody({ c: 'chat' })).toBe(false);
    expect(isLiveBody({ c: 'chat', s: null })).toBe(false);
    expect(isLiveBody({ c: 'chat', s: 'streams' })).toBe(false);
    expect(isLiveBody(null)).toBe(false);
    expect(isLiveBody('{"c":"chat","s":{}}')).toBe(false);
    expect(isLiveBody(undefined)).toBe(false);
  });

  it('isHistoryCursor: every member present and of its type, either direction', () => {
    const good = { c: 'chat', d: 'backward', g: [1, 1], h: [3, 4], f: [0, 0], p: [3, 4] };
    expect(isHistoryCursor(good)).toBe(true);
    expect(isHistoryCursor({ ...good, d: 'forward' })).toBe(true);
    expect(isHistoryCursor({ ...good, d: 'sideways' })).toBe(false);
    expect(isHistoryCursor({ ...good, d: '' })).toBe(false);
    expect(isHistoryCursor({ ...good, c: 7 })).toBe(false);
    for (const member of ['c', 'd', 'g', 'h', 'f', 'p'] as const) {
      const rest = Object.fromEntries(Object.entries(good).filter(([k]) => k !== member));
      expect(isHistoryCursor(rest), `without ${member}`).toBe(false);
    }
    for (const member of ['g', 'h', 'f', 'p'] as const) {
      expect(isHistoryCursor({ ...good, [member]: [1] }), `${member} not a pair`).toBe(false);
      expect(isHistoryCursor({ ...good, [member]: ['1', 2] }), `${member} not numbers`).toBe(false);
    }
    expect(isHistoryCursor(null)).toBe(false);
    expect(isHistoryCursor('cursor')).toBe(false);
    expect(isHistoryCursor(undefined)).toBe(false);
  });
});

const meta = { streamId: 'chat1:alice', chatId: 'chat1', authorAgentId: 'alice', peerAgentId: 'bob' } as StreamMeta;
const agent = (agentId: string): Caller => ({ role: 'agent', agentId, tokenHash: 'h' });
const admin: Caller = { role: 'admin' };

function denial(fn: () => void): Record<string, unknown> {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(YelloError);
    return { type: (err as YelloError).type, ...(err as YelloError).details };
  }
  throw new Error('expected PERMISSION_DENIED, the call passed');
}

describe('stream access', () => {
  it('assertReader: the author, the peer and the admin read; any other agent is NOT_PARTICIPANT', () => {
    expect(() => {
      assertReader(agent('alice'), meta);
    }).not.toThrow();
    expect(() => {
      assertReader(agent('bob'), meta);
    }).not.toThrow();
    expect(() => {
      assertReader(admin, meta);
    }).not.toThrow();
    expect(
      denial(() => {
        assertReader(agent('carol'), meta);
      }),
    ).toEqual({ type: 'PERMISSION_DENIED', reason: 'NOT_PARTICIPANT' });
  });

  it('assertAuthor: only the agent the stream id names; the peer, another agent, the admin and a malformed id are NOT_AUTHOR', () => {
    expect(() => {
      assertAuthor(agent('alice'), 'chat1:alice');
    }).not.toThrow();
    expect(
      denial(() => {
        assertAuthor(agent('bob'), 'chat1:alice');
      }),
    ).toEqual({ type: 'PERMISSION_DENIED', reason: 'NOT_AUTHOR' });
    expect(
      denial(() => {
        assertAuthor(agent('carol'), 'chat1:alice');
      }),
    ).toEqual({ type: 'PERMISSION_DENIED', reason: 'NOT_AUTHOR' });
    expect(
      denial(() => {
        assertAuthor(admin, 'chat1:alice');
      }),
    ).toEqual({ type: 'PERMISSION_DENIED', reason: 'NOT_AUTHOR' });
    expect(
      denial(() => {
        assertAuthor(agent('alice'), 'not-a-stream-id');
      }),
    ).toEqual({ type: 'PERMISSION_DENIED', reason: 'NOT_AUTHOR' });
  });
});
