// Kills mutants of src/daemon/streams/retention.ts that the seventh mutation round
// (test/MUTATION.md, "mut (seventh round): retention.ts (m8r)") found alive on LevelDB, where
// the earlier rounds had argued them equivalent: a trim to exactly the retained start without
// force (47:9), a reset of a stream whose head and chat a log loss took (104), and the sealed
// list of a rebuilt head (110, 153). In-process, on a real LevelDB in a temp dir
// (test/helpers/in-process-store.ts), like mut-b-retention.test.ts; the head is damaged in the
// raw LevelDB between two opens.

import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { YelloError } from '../../src/shared/errors.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

const open: InProcessStore[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function fresh(dir?: string): Promise<InProcessStore> {
  const s = await openInProcess(dir);
  open.push(s);
  if (dir) dirs.push(dir);
  return s;
}

async function failure(p: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(YelloError);
    return { type: (err as YelloError).type, ...(err as YelloError).details };
  }
  throw new Error('expected a rejection, the call succeeded');
}

describe('streams.trim at the retained start (retention.ts 47)', () => {
  it('without force and with nothing acknowledged, a trim to exactly firstPosition changes nothing and answers it (not UNACKNOWLEDGED)', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 5); // nextPosition 6, no receipt from bob
    expect(await s.streams.trim(w.streamId, 3, true)).toEqual({ firstPosition: '3' });
    // §6.6: "a beforePosition at or below the current first position changes nothing" — with or
    // without force, whatever the peer acknowledged.
    expect(await s.streams.trim(w.streamId, 3, false)).toEqual({ firstPosition: '3' });
    expect(await failure(s.streams.trim(w.streamId, 4, false))).toMatchObject({ type: 'PERMISSION_DENIED', reason: 'UNACKNOWLEDGED' });
    expect(s.streams.get(w.alice, w.streamId)).toMatchObject({ firstPosition: '3', nextPosition: '6' });
  });
});

describe('streams.reset of a damaged stream (retention.ts 104, 110, 153)', () => {
  it('a stream whose head and chat a log loss took is CORRUPT with its mark, not rebuilt and not NOT_FOUND', async () => {
    const s = await fresh();
    // What applyRecoveryReport (store/leveldb/recovery-check.ts) leaves when the lost writes
    // created the chat: a mark of the generation the guard file names, and neither head nor chat.
    const streamId = `c_${randomBytes(8).toString('hex')}:a_${randomBytes(8).toString('hex')}`;
    s.integrity.remember({ streamId, generation: 1, fromPosition: 0, detail: 'lost with the write-ahead log' });
    expect(await failure(s.streams.reset(streamId, 'after the loss'))).toMatchObject({
      type: 'STORAGE_FAILURE',
      reason: 'CORRUPT',
      streamId,
      generation: '1',
      fromPosition: '0',
    });
  });

  it('a rebuilt head keeps one sealed entry per generation, the rebuilt one saying so; the reset seals nothing twice', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 2); // generation 1: fence 0, messages 1, 2
    await s.store.storage.close();
    open.splice(open.indexOf(s), 1);
    const db = new ClassicLevel<string, string>(path.join(s.dir, 'db'));
    await db.open();
    await db.put(K.stream(w.streamId), 'garbage that fails its checksum');
    await db.close();
    s = await fresh(s.dir);
    expect(await s.streams.reset(w.streamId, 'head lost')).toMatchObject({ generation: '2', firstPosition: '0', nextPosition: '0' });
    const meta = s.streams.committedMeta(w.streamId)!;
    expect(
      meta.sealed.map(({ generation, firstPosition, nextPosition, reason }) => ({ generation, firstPosition, nextPosition, reason })),
    ).toEqual([{ generation: 1, firstPosition: 0, nextPosition: 3, reason: 'rebuilt from records after the head failed its checksum' }]);
    // A reset after it seals generation 2 once, with its own reason.
    await s.streams.reset(w.streamId, 'again');
    expect(s.streams.committedMeta(w.streamId)!.sealed.map((g) => [g.generation, g.nextPosition, g.reason])).toEqual([
      [1, 3, 'rebuilt from records after the head failed its checksum'],
      [2, 0, 'again'],
    ]);
  });
});
