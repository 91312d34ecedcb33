// Pins behaviour of src/daemon/streams/heads.ts (the stream heads, their first-load check against
// the records and the startup sweep, docs/protocol.md §6.11) that the rest of the suite leaves
// unchecked. Damage is planted in the stopped daemon's LevelDB; everything is observed over the
// real socket after a restart.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { describe, expect, it } from 'vitest';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { messages, reconnectChat, setupChat, StreamWriter, type ReadingChat } from '../helpers/reading-fixtures.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { waitFor } from '../helpers/wait.js';
import { ok, uniq } from '../helpers/wire-fixtures.js';

const { daemon, admin, restart } = useDaemon();

const pad = (n: number): string => n.toString().padStart(16, '0');

/** Runs `edit` on the stopped daemon's LevelDB. */
async function editStore(edit: (db: ClassicLevel) => Promise<void>): Promise<void> {
  const db = new ClassicLevel<string, string>(path.join(daemon().dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  await db.open();
  try {
    await edit(db);
  } finally {
    await db.close();
  }
}

async function marks(): Promise<Array<{ streamId: string; generation: string | null; fromPosition: string }>> {
  return ok(await admin().call('daemon.status', {})).integrity.corruptStreams;
}

describe('stream heads: the first-load check and the startup sweep', () => {
  it('the startup sweep marks each stream whose head disagrees with its records where it disagrees, and no intact one', async () => {
    // heads.ts reconcileAll/#reconcile: last record missing, failing its checksum, without an
    // operation that covers it, or a record past the head; fences, one- and many-record
    // operations at the head are fine. No stream is touched before the marks are listed.
    const chats: Record<string, ReadingChat> = {};
    for (const name of ['gone', 'flipped', 'noOp', 'behind', 'many', 'single', 'fence', 'reset']) {
      chats[name] = await setupChat(daemon(), admin());
    }
    const c = chats as Record<'gone' | 'flipped' | 'noOp' | 'behind' | 'many' | 'single' | 'fence' | 'reset', ReadingChat>;
    for (const name of ['gone', 'flipped', 'behind', 'many'] as const) await c[name].wa.send(uniq(name), 3); // 0 fence, 1..3
    const noOpLast = await c.noOp.wa.append(messages(uniq('noop'), 2), uniq('op-lost'));
    await c.single.wa.send(uniq('s'), 1);
    await c.single.wa.send(uniq('s'), 1); // last operation: one record at 2
    await c.fence.wa.send(uniq('f'), 2);
    await c.fence.wa.reclaim(); // last record: a fence at 3
    await c.reset.wa.send(uniq('r'), 2);
    ok(await admin().call('streams.reset', { streamId: c.reset.streamA, reason: 'heads guard' }), 'streams.reset');
    await c.reset.wa.reclaim();
    await c.reset.wa.send(uniq('r2'), 2); // generation 2: fence 0, 1..2
    await daemon().stop();
    await editStore(async (db) => {
      await db.del(`r/${c.gone.streamA}/${pad(1)}/${pad(3)}`, { sync: true });
      await db.del(`o/${c.noOp.streamA}/${noOpLast.operationId}`, { sync: true });
      // A stale tail (valid checksum): the head says 2, records lie at 2 and 3.
      const key = `h/${c.behind.streamA}`;
      const tail = JSON.parse((await db.get(key))!.slice(8)) as [number, number, ...unknown[]];
      expect(tail.slice(0, 2)).toEqual([1, 4]);
      tail[1] = 2;
      await db.put(key, encodeValue(key, JSON.stringify(tail)), { sync: true });
    });
    await damageStoredRecord(daemon().dataDir, c.flipped.streamA, 3);
    await restart();
    const expected = [
      { streamId: c.gone.streamA, generation: '1', fromPosition: '3' },
      { streamId: c.flipped.streamA, generation: '1', fromPosition: '3' },
      { streamId: c.noOp.streamA, generation: '1', fromPosition: '2' },
      { streamId: c.behind.streamA, generation: '1', fromPosition: '2' },
    ];
    await waitFor(async () => (await marks()).length >= expected.length, 'the startup sweep to list the damaged streams', 10_000);
    const found = await marks();
    for (const e of expected)
      expect(
        found.find((m) => m.streamId === e.streamId),
        e.streamId,
      ).toMatchObject(e);
    const intact = [c.many, c.single, c.fence, c.reset];
    for (const x of intact) expect(found.find((m) => m.streamId === x.streamA)).toBeUndefined();
    expect(found).toHaveLength(expected.length);
    // The intact ones take appends where their heads say.
    for (const x of intact) {
      await reconnectChat(daemon(), x);
      x.wa = await StreamWriter.claim(x.alice.client, x.streamA, true);
      await x.wa.send(uniq('after'), 1);
    }
    expect(await marks()).toHaveLength(expected.length);
  });

  it('a stream whose head is gone while its chat exists is CORRUPT for the whole stream, not NOT_FOUND', async () => {
    // heads.ts #load/#headBelongsToChat: both heads are written with the chat.
    const c = await setupChat(daemon(), admin());
    await c.wa.send(uniq('h'), 2);
    await daemon().stop();
    await editStore(async (db) => {
      await db.batch(
        [
          { type: 'del', key: `s/${c.streamA}` },
          { type: 'del', key: `h/${c.streamA}` },
        ],
        { sync: true },
      );
    });
    await restart();
    await reconnectChat(daemon(), c);
    const r = await c.bob.client.call('streams.get', { streamId: c.streamA });
    expect({ code: r.error?.code, data: r.error?.data }).toMatchObject({
      code: 5030,
      data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: c.streamA },
    });
    expect((await marks()).find((m) => m.streamId === c.streamA)).toMatchObject({ generation: null, fromPosition: '0' });
    // A stream of an agent outside the chat was never written: NOT_FOUND.
    const stranger = await c.bob.client.call('streams.get', { streamId: `${c.chatId}:agt_WWWWWWWWWWWWWWWWWWWWWWWWWW` });
    expect(stranger.error?.data?.type).toBe('NOT_FOUND');
  });
});
