// Pins behaviour of src/daemon/streams/checkpoints.ts (`streams.checkpoint`, docs/protocol.md
// §5.9). In-process on a real LevelDB in a temp dir, with the daemon's own Signer over the store's
// key directory; every checkpoint is verified with the client library's verifyCheckpoint and its
// digest recomputed from the records.

import { rmSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { verifyCheckpoint } from '../../src/client/verify.js';
import { ChainDigest } from '../../src/daemon/crypto/hashing.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { streamCheckpoint } from '../../src/daemon/streams/checkpoints.js';
import { CHECKPOINT_TYPE } from '../../src/shared/checkpoint.js';
import { YelloError } from '../../src/shared/errors.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

const open: InProcessStore[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function setup(messages: number) {
  const s = await openInProcess();
  open.push(s);
  const w = await chatWithWriter(s);
  await appendMessages(s, w, messages);
  const signer = new Signer(path.join(s.dir, 'keys'));
  const cp = (p: { generation?: number; fromPosition?: number; nextPosition?: number }, caller = w.bob) =>
    streamCheckpoint(s.streams, signer, caller, { streamId: w.streamId, generation: 1, ...p });
  return { s, w, signer, cp };
}

async function digestOf(s: InProcessStore, streamId: string, generation: number, from: number, next: number): Promise<string> {
  const d = new ChainDigest();
  if (next > from) for (const r of await s.streams.range(streamId, generation, from, next, next - from)) d.add(r);
  return d.digest();
}

async function failure(p: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(YelloError);
    return { type: (err as YelloError).type, ...(err as YelloError).details };
  }
  throw new Error('expected a refusal, the checkpoint was signed');
}

describe('streams.checkpoint', () => {
  it('by default covers the generation from its retained start to its head, signed and verifiable', async () => {
    const { s, w, signer, cp } = await setup(5);
    await s.streams.trim(w.streamId, 2, true);
    const c = await cp({});
    expect(c).toMatchObject({
      type: CHECKPOINT_TYPE,
      streamId: w.streamId,
      chatId: w.chatId,
      authorAgentId: (w.alice as { agentId: string }).agentId,
      generation: '1',
      firstPosition: '2',
      nextPosition: '6',
      recordCount: '4',
    });
    expect(c.chainDigest).toBe(await digestOf(s, w.streamId, 1, 2, 6));
    expect(Date.now() - Date.parse(c.createdAt)).toBeLessThan(60_000);
    expect(() => {
      verifyCheckpoint(c, signer.jwks());
    }).not.toThrow();
    // The signature covers the fields: another count does not verify.
    expect(() => {
      verifyCheckpoint({ ...c, recordCount: '3' }, signer.jwks());
    }).toThrow();
  });

  it('an explicit range [from, next) counts and digests exactly those records', async () => {
    const { s, w, signer, cp } = await setup(6);
    const c = await cp({ fromPosition: 2, nextPosition: 5 });
    expect(c).toMatchObject({ firstPosition: '2', nextPosition: '5', recordCount: '3' });
    expect(c.chainDigest).toBe(await digestOf(s, w.streamId, 1, 2, 5));
    expect(c.chainDigest).not.toBe(await digestOf(s, w.streamId, 1, 2, 6));
    expect(() => {
      verifyCheckpoint(c, signer.jwks());
    }).not.toThrow();
    const onlyFrom = await cp({ fromPosition: 4 });
    expect(onlyFrom).toMatchObject({ firstPosition: '4', nextPosition: '7', recordCount: '3' });
    const onlyNext = await cp({ nextPosition: 3 });
    expect(onlyNext).toMatchObject({ firstPosition: '0', nextPosition: '3', recordCount: '3' });
    // An empty range is a valid statement.
    const empty = await cp({ fromPosition: 7, nextPosition: 7 });
    expect(empty).toMatchObject({ firstPosition: '7', nextPosition: '7', recordCount: '0' });
    expect(empty.chainDigest).toBe(new ChainDigest().digest());
    const emptyInside = await cp({ fromPosition: 3, nextPosition: 3 });
    expect(emptyInside).toMatchObject({ recordCount: '0' });
  });

  it('refuses a range below the retained start, beyond the head, or reversed; and an unknown generation', async () => {
    const { s, w, cp } = await setup(5); // nextPosition 6
    await s.streams.trim(w.streamId, 2, true);
    expect(await failure(cp({ fromPosition: 1 }))).toMatchObject({
      type: 'CONTINUITY_BREAK',
      reason: 'PREFIX_UNAVAILABLE',
      streamId: w.streamId,
      expected: '1',
      actual: '2',
    });
    expect(await cp({ fromPosition: 2 })).toMatchObject({ recordCount: '4' });
    expect(await failure(cp({ nextPosition: 7 }))).toMatchObject({ type: 'INVALID_PARAMS', path: 'nextPosition' });
    expect(await cp({ nextPosition: 6 })).toMatchObject({ recordCount: '4' });
    expect(await failure(cp({ fromPosition: 5, nextPosition: 4 }))).toMatchObject({ type: 'INVALID_PARAMS', path: 'fromPosition' });
    expect(await failure(cp({ generation: 2 }))).toMatchObject({
      type: 'CONTINUITY_BREAK',
      reason: 'GENERATION_CHANGED',
      streamId: w.streamId,
      expected: '2',
      actual: '1',
    });
  });

  it('a sealed generation is checkpointed with its own bounds', async () => {
    const { s, w, cp } = await setup(3);
    await s.streams.reset(w.streamId, 'seal it');
    const c = await cp({ generation: 1 });
    expect(c).toMatchObject({ generation: '1', firstPosition: '0', nextPosition: '4', recordCount: '4' });
    expect(c.chainDigest).toBe(await digestOf(s, w.streamId, 1, 0, 4));
  });

  it('only a participant (or the admin) gets one', async () => {
    const { s, cp } = await setup(2);
    const carol = await s.directory.createAgent(`carol${Date.now()}`, 'Carol', undefined);
    const caller = s.directory.authenticate(carol.token)!;
    expect(await failure(cp({}, caller))).toMatchObject({ type: 'PERMISSION_DENIED', reason: 'NOT_PARTICIPANT' });
    expect(await cp({}, { role: 'admin' })).toMatchObject({ recordCount: '3' });
  });

  it('digests a range longer than one page (1000 records) in full', async () => {
    const s = await openInProcess();
    open.push(s);
    const w = await chatWithWriter(s);
    const head = s.streams.get(w.alice, w.streamId);
    // 1200 records in three operations of 400.
    let next = Number(head.nextPosition);
    for (let op = 0; op < 3; op++) {
      await s.streams.append(w.alice, {
        streamId: w.streamId,
        coordinatorToken: w.token,
        generation: 1,
        expectedPosition: next,
        operationId: `op-page-${op}`,
        records: Array.from({ length: 400 }, (_, i) => ({
          type: 'chat.message' as const,
          messageId: `p${op}-${i}`,
          content: `${op}/${i}`,
        })),
      });
      next += 400;
    }
    const signer = new Signer(path.join(s.dir, 'keys'));
    const c = await streamCheckpoint(s.streams, signer, w.bob, { streamId: w.streamId, generation: 1 });
    expect(c).toMatchObject({ firstPosition: '0', nextPosition: String(next), recordCount: String(next) });
    expect(c.chainDigest).toBe(await digestOf(s, w.streamId, 1, 0, next));
  });

  it('refuses a default range that reaches a corruption mark; an explicit range below it is signed', async () => {
    const first = await openInProcess();
    const w = await chatWithWriter(first);
    await appendMessages(first, w, 6); // 0..6
    await first.store.storage.close();
    const db = new ClassicLevel<string, string>(path.join(first.dir, 'db'));
    await db.open();
    await db.del(K.record(w.streamId, 1, 4));
    await db.close();
    const s = await openInProcess(first.dir);
    open.push(s);
    dirs.push(first.dir);
    // A read meets the hole and marks the stream from 4.
    await expect(
      s.streams.read(w.bob, { streamId: w.streamId, generation: 1, fromPosition: 4, limit: 10, maxBytes: PAGE_BYTES }),
    ).rejects.toMatchObject({ type: 'STORAGE_FAILURE' });
    const signer = new Signer(path.join(s.dir, 'keys'));
    const cp = (p: { fromPosition?: number; nextPosition?: number }) =>
      streamCheckpoint(s.streams, signer, w.bob, { streamId: w.streamId, generation: 1, ...p });
    expect(await failure(cp({}))).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT', fromPosition: '4' });
    expect(await failure(cp({ fromPosition: 2 }))).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT' });
    expect(await failure(cp({ nextPosition: 5 }))).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT', fromPosition: '4' });
    const below = await cp({ nextPosition: 4 });
    expect(below).toMatchObject({ firstPosition: '0', nextPosition: '4', recordCount: '4' });
    expect(() => {
      verifyCheckpoint(below, signer.jwks());
    }).not.toThrow();
    expect(await cp({ fromPosition: 1, nextPosition: 3 })).toMatchObject({ recordCount: '2' });
    // An empty explicit range claims no record, wherever it lies.
    expect(await cp({ fromPosition: 5, nextPosition: 5 })).toMatchObject({ recordCount: '0' });
  });
});
