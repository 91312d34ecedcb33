// Pins src/shared/positions.ts (the one order of stream places) and src/shared/chat-peers.ts
// (the one "other side of me" of a chat): every view that compares positions or names a peer
// goes through them.

import { describe, expect, it } from 'vitest';
import { peerIdOf, peerOf, selfOf, streamSides } from '../../src/shared/chat-peers.js';
import { comparePlaces, isAfter } from '../../src/shared/positions.js';

const at = (generation: string, position: string) => ({ generation, position });

describe('comparePlaces', () => {
  it('orders generations first, then positions, as numbers (not text)', () => {
    expect(comparePlaces(at('2', '0'), at('1', '9'))).toBe(1);
    expect(comparePlaces(at('1', '9'), at('2', '0'))).toBe(-1);
    expect(comparePlaces(at('1', '10'), at('1', '9'))).toBe(1);
    expect(comparePlaces(at('1', '9'), at('1', '10'))).toBe(-1);
    expect(comparePlaces(at('10', '0'), at('9', '0'))).toBe(1);
    expect(comparePlaces(at('3', '5'), at('3', '5'))).toBe(0);
  });

  it('holds u64 values exactly (past Number.MAX_SAFE_INTEGER)', () => {
    expect(comparePlaces(at('1', '9007199254740993'), at('1', '9007199254740992'))).toBe(1);
    expect(comparePlaces(at('18446744073709551615', '0'), at('18446744073709551614', '0'))).toBe(1);
  });

  it('isAfter compares ends (nextPosition); equal is not after', () => {
    const end = (generation: string, nextPosition: string) => ({ generation, nextPosition });
    expect(isAfter(end('1', '6'), end('1', '5'))).toBe(true);
    expect(isAfter(end('1', '5'), end('1', '5'))).toBe(false);
    expect(isAfter(end('1', '50'), end('2', '0'))).toBe(false);
  });
});

describe('chat peers', () => {
  const chat = { agentAId: 'agt_a', agentBId: 'agt_b', agentA: { username: 'alice' }, agentB: { username: 'bob' } };

  it('the peer is the other side, whichever side asks', () => {
    expect(peerIdOf(chat, 'agt_a')).toBe('agt_b');
    expect(peerIdOf(chat, 'agt_b')).toBe('agt_a');
    expect(peerOf(chat, 'agt_a').username).toBe('bob');
    expect(peerOf(chat, 'agt_b').username).toBe('alice');
  });

  it('self is the asking side', () => {
    expect(selfOf(chat, 'agt_a').username).toBe('alice');
    expect(selfOf(chat, 'agt_b').username).toBe('bob');
  });

  it("a chat's streams split into the asker's own and its peer's, whatever their order; a missing one is absent", () => {
    const a = { streamId: 'cht_1:agt_a', authorAgentId: 'agt_a' };
    const b = { streamId: 'cht_1:agt_b', authorAgentId: 'agt_b' };
    expect(streamSides([a, b], 'agt_a')).toEqual({ own: a, peer: b });
    expect(streamSides([a, b], 'agt_b')).toEqual({ own: b, peer: a });
    expect(streamSides([b, a], 'agt_a')).toEqual({ own: a, peer: b });
    expect(streamSides([b], 'agt_a')).toEqual({ own: undefined, peer: b });
    expect(streamSides([a], 'agt_a')).toEqual({ own: a, peer: undefined });
  });
});
