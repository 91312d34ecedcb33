// chats.follow `from` (docs/protocol.md §6.5): without a cursor, `from: "acknowledged"` starts
// the peer stream where the caller's own latest receipt left off (position 0 when it has none
// for the current generation) and the caller's own stream at its end, so a first-run agent is
// shown every message it has not acknowledged; trimmed unacknowledged records are a break,
// never a skip; the admin, and `from` together with a cursor, are INVALID_PARAMS.

import { describe, expect, it } from 'vitest';
import { batchesOf, connectAs, expectContiguous, expectError, ok, receipt, setupChat } from '../helpers/reading-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { messageOf } from '../helpers/wire-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';

const { daemon, admin } = useDaemon();

describe('chats.follow from', () => {
  it('"acknowledged" without a receipt delivers the peer stream from 0 and the own stream from its end', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('before-follow', 3);
    await c.wb.send('own-before', 2);
    const ownEnd = c.wb.next;
    const bob = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await bob.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }));
      await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.nextPosition === c.wa.next), 'the backlog of alice', 10_000);
      await c.wb.send('own-after', 1);
      await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.streamId === c.streamB), 'own live batch', 10_000);
      const batches = batchesOf(bob, sub.subscriptionId);
      const fromAlice = expectContiguous(batches, c.streamA, '1', '0', c.wa.next, 'peer');
      expect(fromAlice.filter((r) => r.wrapper.type === 'chat.message').map((r) => messageOf(r).content)).toEqual([
        'message before-follow number 0',
        'message before-follow number 1',
        'message before-follow number 2',
      ]);
      expectContiguous(batches, c.streamB, '1', ownEnd, c.wb.next, 'own');
    } finally {
      bob.close();
    }
  });

  it('"acknowledged" starts after the caller\'s latest receipt; the default ("end") and "end" start at the ends', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('seen', 2);
    const shown = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
    await c.wb.append([receipt(c.streamA, '1', shown.nextPosition, shown.batchId)]);
    await c.wa.send('unseen', 2);
    const bob = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const acked = ok(await bob.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }));
      const byDefault = ok(await bob.call('chats.follow', { chatId: c.chatId }));
      const atEnd = ok(await bob.call('chats.follow', { chatId: c.chatId, from: 'end' }));
      await waitFor(
        () => batchesOf(bob, acked.subscriptionId).some((b) => b.nextPosition === c.wa.next),
        'the unacknowledged messages',
        10_000,
      );
      const records = expectContiguous(batchesOf(bob, acked.subscriptionId), c.streamA, '1', shown.nextPosition, c.wa.next);
      expect(records.map((r) => messageOf(r).content)).toEqual(['message unseen number 0', 'message unseen number 1']);
      await sleep(200); // the subscriptions at the ends: nothing may arrive on them within 200 ms
      expect(batchesOf(bob, byDefault.subscriptionId)).toEqual([]);
      expect(batchesOf(bob, atEnd.subscriptionId)).toEqual([]);
    } finally {
      bob.close();
    }
  });

  it('unacknowledged records that were trimmed away are CONTINUITY_BREAK/PREFIX_UNAVAILABLE, not skipped', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('lost', 3);
    ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '2', force: true }));
    const data = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'CONTINUITY_BREAK');
    expect(data).toMatchObject({ reason: 'PREFIX_UNAVAILABLE', streamId: c.streamA, expected: '0', actual: '2' });
  });

  it('a receipt of a sealed generation does not carry over a reset: the new generation starts at 0', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('old', 2);
    const shown = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
    await c.wb.append([receipt(c.streamA, '1', shown.nextPosition, shown.batchId)]);
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'test' }));
    await c.wa.reclaim();
    await c.wa.send('new', 1);
    const bob = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await bob.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }));
      await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.nextPosition === c.wa.next), 'generation 2', 10_000);
      const records = expectContiguous(batchesOf(bob, sub.subscriptionId), c.streamA, '2', '0', c.wa.next);
      expect(records.filter((r) => r.wrapper.type === 'chat.message').map((r) => messageOf(r).content)).toEqual(['message new number 0']);
    } finally {
      bob.close();
    }
  });

  it('"acknowledged" is agents only, and does not combine with a cursor: INVALID_PARAMS at from', async () => {
    const c = await setupChat(daemon(), admin());
    const asAdmin = expectError(await admin().call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'INVALID_PARAMS');
    expect(asAdmin.path).toBe('from');
    const cursor = ok(await c.bob.client.call('chats.history', { chatId: c.chatId })).liveCursor;
    const both = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, cursor, from: 'acknowledged' }), 'INVALID_PARAMS');
    expect(both.path).toBe('from');
    const bad = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'start' }), 'INVALID_PARAMS');
    expect(bad.path).toBe('from');
    // The admin may still ask for the default explicitly.
    ok(await admin().call('chats.follow', { chatId: c.chatId, from: 'end' }));
  });
});
