// Pins src/shared/unread.ts, the one meaning of "unread" behind the inbox's and the console's
// counts: the current generation from the reader's receipt of it, never before what is retained.

import { describe, expect, it } from 'vitest';
import type { StoredRecord, StreamState } from '../../src/shared/types.js';
import { isUnreadMessage, unreadFrom } from '../../src/shared/unread.js';

const stream = (generation: string, firstPosition: string, acknowledged: StreamState['acknowledged']): StreamState => ({
  streamId: 'chat_x:agt_b',
  chatId: 'chat_x',
  authorAgentId: 'agt_b',
  generation,
  firstPosition,
  nextPosition: '100',
  acknowledged,
  writer: { epoch: '1', claimedAt: null, active: false, connected: false },
});

const record = (type: 'chat.message' | 'chat.receipt', position: string) => ({ position, wrapper: { type } }) as unknown as StoredRecord;

describe('unreadFrom', () => {
  it('starts at the first retained position without a receipt', () => {
    expect(unreadFrom(stream('1', '0', null))).toBe(0n);
    expect(unreadFrom(stream('1', '30', null))).toBe(30n);
  });

  it('starts where the receipt of the current generation leaves off', () => {
    expect(unreadFrom(stream('2', '0', { generation: '2', nextPosition: '12' }))).toBe(12n);
  });

  it('ignores a receipt of an older generation, even one at a higher position', () => {
    expect(unreadFrom(stream('3', '5', { generation: '2', nextPosition: '90' }))).toBe(5n);
  });

  it('starts at the first retained position when a trim passed the receipt', () => {
    expect(unreadFrom(stream('1', '40', { generation: '1', nextPosition: '12' }))).toBe(40n);
  });

  it('compares positions as numbers, not text', () => {
    expect(unreadFrom(stream('1', '9', { generation: '1', nextPosition: '10' }))).toBe(10n);
  });
});

describe('isUnreadMessage', () => {
  it('counts messages at or after the start, never receipts', () => {
    expect(isUnreadMessage(record('chat.message', '10'), 10n)).toBe(true);
    expect(isUnreadMessage(record('chat.message', '9'), 10n)).toBe(false);
    expect(isUnreadMessage(record('chat.receipt', '11'), 10n)).toBe(false);
  });
});
