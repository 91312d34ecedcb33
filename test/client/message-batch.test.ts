// Pins behaviour of src/client/message-batch.ts: the one receipt builder and what a MessageBatch
// is. The coordinator and inbox tests use them through a daemon; here each rule is asserted on real
// records (the export fixture of core-verify-export.test.ts).

import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isAfter, messagesOf, receiptFor, toMessageBatch } from '../../src/client/message-batch.js';
import type { StoredRecord } from '../../src/shared/types.js';

const records = fs
  .readFileSync(new URL('../fixtures/export-chat/export.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l !== '')
  .map((l) => JSON.parse(l) as StoredRecord & { checkpoint?: unknown })
  .filter((r) => !r.checkpoint);
// B/1: #0 fence, #1 message, #2 message, #3 receipt, #4 message.
const b1 = records.filter((r) => r.streamId === records.at(-1)!.streamId && r.generation === '1');

describe('MessageBatch', () => {
  it('messagesOf keeps the chat.message records, in order', () => {
    expect(messagesOf(b1).map((r) => r.position)).toEqual(['1', '2', '4']);
    expect(messagesOf([])).toEqual([]);
  });

  it('toMessageBatch: the range with its messages and all its records, the cursor or ""; null without a message', () => {
    const batch = { streamId: b1[0]!.streamId, generation: '1', fromPosition: '0', nextPosition: '5', batchId: 'bid', records: b1 };
    expect(toMessageBatch('chat', { ...batch, cursor: 'cur' })).toEqual({
      chatId: 'chat',
      ...batch,
      messages: messagesOf(b1),
      cursor: 'cur',
    });
    expect(toMessageBatch('chat', batch)?.cursor).toBe('');
    expect(toMessageBatch('chat', { ...batch, records: [b1[0]!, b1[3]!] })).toBeNull();
    expect(toMessageBatch('chat', { ...batch, records: [] })).toBeNull();
  });

  it('receiptFor acknowledges the batch: its stream, generation, nextPosition and batchId', () => {
    expect(receiptFor({ streamId: 's', generation: '2', nextPosition: '7', batchId: 'b' })).toEqual({
      type: 'chat.receipt',
      peerStreamId: 's',
      peerGeneration: '2',
      nextPosition: '7',
      batchId: 'b',
    });
  });

  it('isAfter: a later generation first, then a higher position; equal is not after; compared as numbers', () => {
    const p = (generation: string, nextPosition: string) => ({ generation, nextPosition });
    expect(isAfter(p('2', '0'), p('1', '9'))).toBe(true);
    expect(isAfter(p('1', '9'), p('2', '0'))).toBe(false);
    expect(isAfter(p('1', '10'), p('1', '9'))).toBe(true);
    expect(isAfter(p('1', '9'), p('1', '10'))).toBe(false);
    expect(isAfter(p('1', '5'), p('1', '5'))).toBe(false);
    expect(isAfter(p('10', '0'), p('9', '0'))).toBe(true);
  });
});
