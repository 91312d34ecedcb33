// The one resume policy of `chats.follow {from: "acknowledged"}` across a reset
// (docs/protocol.md §6.5, issue 20 finding 2): a message the agent has not acknowledged in a
// sealed generation is CONTINUITY_BREAK/GENERATION_CHANGED (expected: the oldest generation
// with unread messages, actual: the current one), never a silent start in the new generation;
// with nothing unread behind (receipts and fences are not unread messages) it starts at "0" of
// the current generation. `from: "generation-start"` is the explicit act of §6.10 rule 3.

import { describe, expect, it } from 'vitest';
import {
  batchesOf,
  connectAs,
  expectContiguous,
  expectError,
  ok,
  receipt,
  setupChat,
  type ReadingChat,
  reconnectChat,
} from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { messageOf } from '../helpers/wire-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { testStoreIsPostgres } from '../helpers/test-store.js';

const { daemon, admin } = useDaemon();

/** bob reads alice's stream from `from` to its end and acknowledges what he was shown. */
async function bobAcknowledges(c: ReadingChat, generation: string, from: string): Promise<string> {
  const shown = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation, fromPosition: from }));
  await c.wb.append([receipt(c.streamA, generation, shown.nextPosition, shown.batchId)]);
  return shown.nextPosition;
}

/** alice acknowledges everything of bob's stream: a receipt in alice's stream (not a message). */
async function aliceAcknowledges(c: ReadingChat): Promise<void> {
  const shown = ok(await c.alice.client.call('streams.read', { streamId: c.streamB, generation: '1', fromPosition: '0' }));
  await c.wa.append([receipt(c.streamB, '1', shown.nextPosition, shown.batchId)]);
}

async function reset(c: ReadingChat): Promise<void> {
  ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'test' }), 'streams.reset');
}

/** bob's follow from `from`; returns the message texts of alice's stream it delivered once at `to`. */
async function followAsBob(
  c: ReadingChat,
  from: 'acknowledged' | 'generation-start',
  generation: string,
  start: string,
): Promise<string[]> {
  const bob = await connectAs(daemon().socketPath, c.bob.token);
  try {
    const sub = ok(await bob.call('chats.follow', { chatId: c.chatId, from }));
    await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.nextPosition === c.wa.next), 'alice to the end', 10_000);
    const records = expectContiguous(batchesOf(bob, sub.subscriptionId), c.streamA, generation, start, c.wa.next, 'peer');
    return records.filter((r) => r.wrapper.type === 'chat.message').map((r) => messageOf(r).content);
  } finally {
    bob.close();
  }
}

describe('chats.follow from "acknowledged" over sealed generations', () => {
  it('an unacknowledged message in the sealed generation is GENERATION_CHANGED (expected "1", actual "2"), not a silent start', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('m1');
    await bobAcknowledges(c, '1', '0');
    await c.wa.send('m2');
    await reset(c);
    const data = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'CONTINUITY_BREAK');
    expect(data).toEqual({ type: 'CONTINUITY_BREAK', reason: 'GENERATION_CHANGED', streamId: c.streamA, expected: '1', actual: '2' });
    // Still so once the new generation has messages of its own.
    await c.wa.reclaim();
    await c.wa.send('m3');
    const again = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'CONTINUITY_BREAK');
    expect(again).toMatchObject({ reason: 'GENERATION_CHANGED', expected: '1', actual: '2' });
  });

  it('with everything of the sealed generation acknowledged, it starts at "0" of the new one without a break', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('m1');
    await c.wa.send('m2');
    await bobAcknowledges(c, '1', '0');
    await reset(c);
    await c.wa.reclaim();
    await c.wa.send('m3');
    expect(await followAsBob(c, 'acknowledged', '2', '0')).toEqual(['message m3 number 0']);
  });

  it('receipts and fences left unacknowledged in the sealed generation do not cause a break', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('m1');
    await bobAcknowledges(c, '1', '0');
    // After bob's receipt alice's stream gets only state records: her receipt of bob, a fence.
    await c.wb.send('from-bob');
    await aliceAcknowledges(c);
    await c.wa.reclaim();
    await reset(c);
    await c.wa.reclaim();
    await c.wa.send('m2');
    expect(await followAsBob(c, 'acknowledged', '2', '0')).toEqual(['message m2 number 0']);
  });

  it('without any receipt: a message in an earlier generation is a break; a generation of only a fence is not', async () => {
    const withMessage = await setupChat(daemon(), admin());
    await withMessage.wa.send('never-read');
    await reset(withMessage);
    const data = expectError(
      await withMessage.bob.client.call('chats.follow', { chatId: withMessage.chatId, from: 'acknowledged' }),
      'CONTINUITY_BREAK',
    );
    expect(data).toMatchObject({ reason: 'GENERATION_CHANGED', streamId: withMessage.streamA, expected: '1', actual: '2' });

    const fenceOnly = await setupChat(daemon(), admin()); // generation 1 holds alice's fence only
    await reset(fenceOnly);
    await fenceOnly.wa.reclaim();
    await fenceOnly.wa.send('first');
    expect(await followAsBob(fenceOnly, 'acknowledged', '2', '0')).toEqual(['message first number 0']);
  });

  it('names the oldest generation with unread messages, though the receipt is of an older one', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('g1');
    await bobAcknowledges(c, '1', '0');
    await reset(c);
    await c.wa.reclaim();
    await c.wa.send('g2'); // generation 2: unread
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'again' }));
    const data = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'CONTINUITY_BREAK');
    expect(data).toMatchObject({ reason: 'GENERATION_CHANGED', streamId: c.streamA, expected: '2', actual: '3' });
  });
});

describe('chats.follow from "generation-start"', () => {
  it('after a break, starts the peer stream at "0" of its current generation and the own stream at its end', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('m1');
    await bobAcknowledges(c, '1', '0');
    await c.wa.send('m2');
    await reset(c);
    await c.wa.reclaim();
    await c.wa.send('m3');
    expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'CONTINUITY_BREAK');
    const ownEnd = c.wb.next;
    const bob = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await bob.call('chats.follow', { chatId: c.chatId, from: 'generation-start' }));
      await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.nextPosition === c.wa.next), 'generation 2', 10_000);
      const records = expectContiguous(batchesOf(bob, sub.subscriptionId), c.streamA, '2', '0', c.wa.next, 'peer');
      expect(records.filter((r) => r.wrapper.type === 'chat.message').map((r) => messageOf(r).content)).toEqual(['message m3 number 0']);
      await c.wb.send('own');
      await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.streamId === c.streamB), 'own live batch', 10_000);
      expectContiguous(batchesOf(bob, sub.subscriptionId), c.streamB, '1', ownEnd, c.wb.next, 'own');
    } finally {
      bob.close();
    }
  });

  it('is PREFIX_UNAVAILABLE when the current generation was trimmed, and agents only', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('lost', 3);
    ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '2', force: true }));
    const trimmed = expectError(
      await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'generation-start' }),
      'CONTINUITY_BREAK',
    );
    expect(trimmed).toMatchObject({ reason: 'PREFIX_UNAVAILABLE', streamId: c.streamA, expected: '0', actual: '2' });
    const asAdmin = expectError(await admin().call('chats.follow', { chatId: c.chatId, from: 'generation-start' }), 'INVALID_PARAMS');
    expect(asAdmin.path).toBe('from');
  });
});

// Pins behaviour of src/daemon/streams/follow-start.ts (the resume policy of `chats.follow {from:
// "acknowledged"}`, docs/protocol.md §6.5) that the rest of the suite leaves unchecked. Over the
// real socket, against a real daemon.
describe('where a follow from "acknowledged" or from a cursor starts', () => {
  const { daemon, admin, restart } = useDaemon();

  async function reset(c: ReadingChat, reason = 'mutation guard'): Promise<void> {
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason }), 'streams.reset');
  }

  describe('follow start', () => {
    it('a receipt of a later sealed generation is where the policy starts: unread messages of an older generation it skipped are no break', async () => {
      // follow-start.ts acknowledgedStart: `first = receipt ? receipt.peerGeneration : 1`. bob
      // never read generation 1, but acknowledged all of generation 2: the scan starts at his
      // receipt's generation, so generation 1 is not looked at.
      const c = await setupChat(daemon(), admin());
      await c.wa.send('g1-unread');
      await reset(c);
      await c.wa.reclaim();
      await c.wa.send('g2');
      const shown = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '2', fromPosition: '0' }));
      await c.wb.append([receipt(c.streamA, '2', shown.nextPosition, shown.batchId)]);
      await reset(c, 'again');
      await c.wa.reclaim();
      await c.wa.send('g3');
      const bob = await connectAs(daemon().socketPath, c.bob.token);
      try {
        const sub = ok(await bob.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'chats.follow');
        await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.nextPosition === c.wa.next), 'alice to the end', 10_000);
        const first = batchesOf(bob, sub.subscriptionId).find((b) => b.streamId === c.streamA);
        expect(first).toMatchObject({ generation: '3', fromPosition: '0' });
      } finally {
        bob.close();
      }
    });

    it('a sealed generation trimmed past what was read is GENERATION_CHANGED (its lost messages count as unread), not PREFIX_UNAVAILABLE', async () => {
      // follow-start.ts unreadMessage: `if (from < b.firstPosition) return true`. Without it the
      // scan starts below the sealed generation's first position and answers the trim instead.
      const c = await setupChat(daemon(), admin());
      await c.wa.send('lost', 3); // positions 1..3 after alice's fence at 0
      ok(await admin().call('streams.trim', { streamId: c.streamA, beforePosition: '2', force: true }), 'streams.trim');
      await reset(c);
      const data = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'CONTINUITY_BREAK');
      expect(data).toEqual({ type: 'CONTINUITY_BREAK', reason: 'GENERATION_CHANGED', streamId: c.streamA, expected: '1', actual: '2' });
    });

    // The record is damaged in LevelDB's files (store-tamper.ts): LevelDB only.
    it.skipIf(testStoreIsPostgres())(
      'what lies past a corruption mark in a sealed generation counts as unread: GENERATION_CHANGED, not a start and not CORRUPT',
      async () => {
        // follow-start.ts unreadMessage: the scan ends at the mark (`Math.min(b.nextPosition,
        // readLimit)`) and a scan that ended there is unread (`end < b.nextPosition`).
        const c = await setupChat(daemon(), admin());
        await c.wa.send('read'); // alice: fence 0, message 1
        const shown = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
        await c.wb.append([receipt(c.streamA, '1', shown.nextPosition, shown.batchId)]);
        await c.wa.send('damaged'); // position 2, bob never read it
        await reset(c);
        await daemon().stop();
        await damageStoredRecord(daemon().dataDir, c.streamA, 2); // generation 1, position 2
        await restart();
        await reconnectChat(daemon(), c);
        // The first look at the damaged record may be what finds it (and marks the stream); from
        // then on the mark stands and the policy must answer the same way every time.
        await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' });
        await waitFor(
          async () => ok(await admin().call('daemon.status', {})).integrity.corruptStreams.some((m) => m.streamId === c.streamA),
          'the mark of the damaged record',
        );
        for (let i = 0; i < 2; i++) {
          const data = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'CONTINUITY_BREAK');
          expect(data).toEqual({ type: 'CONTINUITY_BREAK', reason: 'GENERATION_CHANGED', streamId: c.streamA, expected: '1', actual: '2' });
        }
      },
    );

    it('a follow from a cursor starts both streams where the cursor stands, and a cursor does not combine with from', async () => {
      // follow-start.ts startCursors: the cursor branch (`p.cursor !== undefined`), and
      // `p.from !== undefined && p.cursor !== undefined` refusing only the combination.
      const c = await setupChat(daemon(), admin());
      await c.wa.send('before');
      const bob = await connectAs(daemon().socketPath, c.bob.token);
      let cursor: string;
      try {
        const sub = ok(await bob.call('chats.follow', { chatId: c.chatId }), 'chats.follow');
        cursor = sub.cursor;
      } finally {
        bob.close();
      }
      const atCursor = { [c.streamA]: c.wa.next, [c.streamB]: c.wb.next };
      await c.wa.send('after-a');
      await c.wb.send('after-b');
      const again = await connectAs(daemon().socketPath, c.bob.token);
      try {
        const sub = ok(await again.call('chats.follow', { chatId: c.chatId, cursor }), 'chats.follow with a cursor');
        await waitFor(
          () => [c.streamA, c.streamB].every((id) => batchesOf(again, sub.subscriptionId).some((b) => b.streamId === id)),
          'a batch of each stream',
          10_000,
        );
        for (const id of [c.streamA, c.streamB]) {
          const first = batchesOf(again, sub.subscriptionId).find((b) => b.streamId === id);
          expect(first, id).toMatchObject({ generation: '1', fromPosition: atCursor[id] });
        }
      } finally {
        again.close();
      }
      const both = expectError(await c.bob.client.call('chats.follow', { chatId: c.chatId, cursor, from: 'end' }), 'INVALID_PARAMS');
      expect(both.path).toBe('from');
    });

    // The record is damaged in LevelDB's files (store-tamper.ts): LevelDB only.
    it.skipIf(testStoreIsPostgres())(
      'a corruption mark inside what was acknowledged of a sealed generation is no break: the policy starts at 0 of the new one',
      async () => {
        // follow-start.ts unreadMessage: `from >= b.nextPosition` ends the look at a generation read
        // to its end before any mark or scan is considered.
        const c = await setupChat(daemon(), admin());
        await c.wa.send('m', 2); // alice: fence 0, messages 1, 2
        const shown = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
        expect(shown.nextPosition).toBe('3');
        await c.wb.append([receipt(c.streamA, '1', shown.nextPosition, shown.batchId)]);
        await reset(c);
        await daemon().stop();
        await damageStoredRecord(daemon().dataDir, c.streamA, 2); // generation 1, position 2 (acknowledged)
        await restart();
        await reconnectChat(daemon(), c);
        // Reading the sealed generation finds the damage and marks it from position 2.
        await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' });
        await waitFor(
          async () =>
            ok(await admin().call('daemon.status', {})).integrity.corruptStreams.some(
              (m) => m.streamId === c.streamA && m.fromPosition === '2',
            ),
          'the mark of the damaged record',
        );
        await c.wa.reclaim();
        await c.wa.send('new');
        const bob = await connectAs(daemon().socketPath, c.bob.token);
        try {
          const sub = ok(await bob.call('chats.follow', { chatId: c.chatId, from: 'acknowledged' }), 'chats.follow');
          await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.nextPosition === c.wa.next), 'alice to the end', 10_000);
          expect(batchesOf(bob, sub.subscriptionId).find((b) => b.streamId === c.streamA)).toMatchObject({
            generation: '2',
            fromPosition: '0',
          });
        } finally {
          bob.close();
        }
      },
    );
  });
});
