// Kills a mutant of src/daemon/streams/retention.ts that the fourth mutation round
// (test/MUTATION.md, "mut (fourth round)") found alive: 161:29 `ordered.at(-1)` → `at(+1)` in
// `#rebuildHead`, which the two-generation guard of mut-b cannot tell apart (with two
// generations index 1 is the last). In-process, on a real LevelDB in a temp dir
// (test/helpers/in-process-store.ts); the head is damaged in the raw LevelDB between two opens.

import { rmSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
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

describe('rebuilding a lost head (retention.ts #rebuildHead)', () => {
  it('with three generations the rebuilt head continues from the last one, not the second', async () => {
    let s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 2, 'g1'); // generation 1: fence 0, messages 1, 2
    await s.streams.reset(w.streamId, 'to generation 2');
    w.token = (await s.streams.claim(w.alice, { streamId: w.streamId, replace: true })).coordinatorToken;
    await appendMessages(s, w, 1, 'g2'); // generation 2: fence 0, message 1
    await s.streams.reset(w.streamId, 'to generation 3');
    w.token = (await s.streams.claim(w.alice, { streamId: w.streamId, replace: true })).coordinatorToken;
    await appendMessages(s, w, 3, 'g3'); // generation 3: fence 0, messages 1..3
    await s.store.storage.close();
    open.splice(open.indexOf(s), 1);
    const db = new ClassicLevel<string, string>(path.join(s.dir, 'db'));
    await db.open();
    await db.put(K.stream(w.streamId), 'garbage that fails its checksum');
    await db.close();
    s = await fresh(s.dir);
    const state = await s.streams.reset(w.streamId, 'head lost');
    expect(state).toMatchObject({ generation: '4', firstPosition: '0', nextPosition: '0' });
    const g3 = await s.streams.read(w.bob, { streamId: w.streamId, generation: 3, fromPosition: 0, limit: 1000, maxBytes: PAGE_BYTES });
    expect(g3).toMatchObject({ sealed: true, nextPosition: '4' });
    expect(g3.records).toHaveLength(4);
  });
});
