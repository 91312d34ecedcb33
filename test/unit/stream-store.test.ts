// Pins behaviour of src/daemon/streams/stream-store.ts (the facade the handlers, readers and
// subscriptions call) that no other test checked. In-process on a real LevelDB in a temp dir.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import type { StreamTail } from '../../src/daemon/store/record-layout.js';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { streamCheckpoint } from '../../src/daemon/streams/checkpoints.js';
import { YelloError } from '../../src/shared/errors.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

async function fresh(dir?: string): Promise<InProcessStore> {
  const s = await openInProcess(dir);
  open.push(s);
  return s;
}

/** Close `s`, make its stream's tail say nextPosition 3 (with a valid checksum), reopen. */
async function withStaleTail(s: InProcessStore, streamId: string): Promise<InProcessStore> {
  await s.store.storage.close();
  open.splice(open.indexOf(s), 1);
  const db = new ClassicLevel<string, string>(path.join(s.dir, 'db'));
  await db.open();
  const key = K.tail(streamId);
  const tail = JSON.parse((await db.get(key))!.slice(8)) as StreamTail;
  tail[1] = 3;
  await db.put(key, encodeValue(key, JSON.stringify(tail)));
  await db.close();
  return fresh(s.dir);
}

describe('StreamStore', () => {
  it('state() of a committed head is what streams.get answers', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 2);
    const meta = s.streams.committedMeta(w.streamId)!;
    expect(s.streams.state(meta)).toEqual(s.streams.get(w.alice, w.streamId));
    expect(s.streams.state(meta)).toMatchObject({ streamId: w.streamId, nextPosition: '3', writer: { active: true } });
  });

  it('release() frees the writer', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const state = await s.streams.release(w.alice, { streamId: w.streamId, coordinatorToken: w.token });
    expect(state).toMatchObject({ streamId: w.streamId, writer: { active: false } });
    expect(s.streams.get(w.alice, w.streamId).writer.active).toBe(false);
  });

  it('scan() yields the records of [from, end) in order, reversed on request', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 4);
    const positions = async (reverse?: boolean) => {
      const out: string[] = [];
      for await (const r of s.streams.scan(w.streamId, 1, 1, 4, reverse)) out.push(r.record.position);
      return out;
    };
    expect(await positions()).toEqual(['1', '2', '3']);
    expect(await positions(true)).toEqual(['3', '2', '1']);
  });

  it('batchId() is the batchId streams.read answers for the same range, and a receipt with it is accepted', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 3);
    const batch = await s.streams.read(w.bob, { streamId: w.streamId, generation: 1, fromPosition: 0, limit: 1000, maxBytes: PAGE_BYTES });
    expect(typeof batch.batchId).toBe('string');
    expect(s.streams.batchId(w.bob, w.streamId, 1, 0, 4)).toBe(batch.batchId);
    expect(s.streams.batchId(w.bob, w.streamId, 1, 0, 3)).not.toBe(batch.batchId);
  });

  it('reconcileAll() finds a head behind its records before anything touches the stream', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 5);
    s = await withStaleTail(s, w.streamId);
    expect(s.integrity.list()).toEqual([]);
    await s.streams.reconcileAll();
    expect(s.integrity.list()).toEqual([expect.objectContaining({ streamId: w.streamId, generation: '1', fromPosition: '3' })]);
  });

  it('a checkpoint of the default range refuses a mark at the head, where every record still reads; [0, head) is signed', async () => {
    // checkpoints.ts: `p.nextPosition === undefined` → assertReadable(…, next) (StreamStore.assertReadable):
    // nothing in the range is damaged, only the mark says records after the head may be lost.
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 5);
    s = await withStaleTail(s, w.streamId);
    await s.streams.reconcileAll();
    const signer = new Signer(path.join(s.dir, 'keys'));
    const cp = (nextPosition?: number) =>
      streamCheckpoint(s.streams, signer, w.bob, {
        streamId: w.streamId,
        generation: 1,
        ...(nextPosition === undefined ? {} : { nextPosition }),
      });
    const refused = await cp().then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(YelloError);
    expect((refused as YelloError).type).toBe('STORAGE_FAILURE');
    expect((refused as YelloError).details).toMatchObject({ reason: 'CORRUPT', fromPosition: '3' });
    expect(() => {
      s.streams.assertReadable(w.streamId, 1, 3);
    }).toThrow(YelloError);
    expect(await cp(3)).toMatchObject({ firstPosition: '0', nextPosition: '3', recordCount: '3' });
  });
});
