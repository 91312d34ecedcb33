// Cursors and batch ids outlive the build that issued them (docs/protocol.md §6.9: "they
// survive daemon restarts as long as that key does", an upgrade too; on PostgreSQL daemons of
// two versions share them during a rolling upgrade). Their kind is the MAC's domain separation,
// so the kind strings are part of the stored format: a build that renamed one would refuse every
// cursor or receipt an older one issued. test/MUTATION.md, sixteenth round: the kinds are
// constants at the top of their modules, which Stryker cannot attribute to in-process tests, so
// this file guards them outside the mutation set.

import { createHmac } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { openBatchId, sealBatchId } from '../../src/daemon/crypto/batch-codec.js';
import { TokenCodec } from '../../src/daemon/crypto/token-codec.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

/** The token as §6.9 describes it, built without TokenCodec: base64url JSON, '.', HMAC of "kind\nbody". */
function sealedBy(key: Buffer, kind: string, value: unknown): string {
  const body = Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${body}.${createHmac('sha256', key).update(`${kind}\n${body}`).digest('base64url').slice(0, 32)}`;
}

describe('token kinds', () => {
  it('seals a batch id under the kind "batch", and opens one sealed so by another build', () => {
    const key = Buffer.alloc(32, 7);
    const binding = { reader: 'agent-1', streamId: 'c1:agent-2', generation: 2, fromPosition: 5, nextPosition: 9 };
    const expected = sealedBy(key, 'batch', ['agent-1', 'c1:agent-2', 2, 5, 9]);
    expect(sealBatchId(new TokenCodec(key), binding)).toBe(expected);
    expect(openBatchId(new TokenCodec(key), expected)).toEqual(binding);
  });

  it('seals history cursors under "history" and live cursors under "live", and takes a history cursor another build sealed', async () => {
    const s = await openInProcess();
    open.push(s);
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 2, 'k');
    const page = await s.reader.history(w.bob, { chatId: w.chatId, limit: 1 });
    expect(page.nextCursor).not.toBeNull();
    const body = s.codec.open('history', page.nextCursor!);
    expect(body).toHaveProperty('p');
    expect(s.codec.open('live', page.liveCursor)).toMatchObject({ c: w.chatId });
    expect(s.codec.open('live', page.nextCursor!)).toBeNull();
    expect(s.codec.open('history', page.liveCursor)).toBeNull();
    const older = s.codec.seal('history', body);
    const next = await s.reader.history(w.bob, { chatId: w.chatId, limit: 1, cursor: older });
    expect(next.entries.map((r) => (r.wrapper.type === 'chat.message' ? r.wrapper.message.content : r.wrapper.type))).toEqual(['k 0']);
  });
});
