// Kills mutants of src/daemon/store/leveldb/level-streams.ts (the stream port on LevelDB) that
// the conformance suite (test/store/port-conformance.ts, backend-neutral) does not reach:
// test/MUTATION.md, "mut (third round)". In-process on a real LevelDB in a temp dir: the head
// check the daemon runs at startup (`verifyHead`, heads.ts reconcile), each problem provoked by
// editing the stored tables through Storage (valid checksums) or LevelDB itself (a bad one).

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { compactOperation, type StoredOperation } from '../../src/daemon/store/record-layout.js';
import { cloneMeta, type StreamMeta } from '../../src/daemon/store/stream-meta.js';
import type { StoredRecord } from '../../src/shared/types.js';
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

/** A stream with its claim's fence at 0 and three one-message operations at 1..3 (head at 4). */
async function written(): Promise<{ s: InProcessStore; streamId: string; meta: StreamMeta; last: StoredRecord }> {
  const s = await fresh();
  const w = await chatWithWriter(s);
  await appendMessages(s, w, 3);
  const meta = cloneMeta(s.port.streams.head(w.streamId, 'committed')!);
  expect(meta).toMatchObject({ generation: 1, firstPosition: 0, nextPosition: 4 });
  const last = (await s.port.streams.record(meta, 1, 3))!;
  return { s, streamId: w.streamId, meta, last };
}

const put = (s: InProcessStore, key: string, value: unknown) => s.store.storage.write([{ type: 'put', key, value }]);

describe('LevelStreams.verifyHead', () => {
  it('a healthy head, an empty stream and a head whose last record is the fence have no problem', async () => {
    const { s, meta } = await written();
    expect(s.port.streams.verifyHead(meta)).toBeNull();
    const w = await chatWithWriter(s);
    expect(s.port.streams.verifyHead(cloneMeta(s.port.streams.head(w.streamId, 'committed')!))).toBeNull();
    // The chat's other stream: never claimed, no record.
    const other = `${w.chatId}:${(w.bob as { agentId: string }).agentId}`;
    const empty = s.port.streams.head(other, 'committed')!;
    expect(empty).toMatchObject({ firstPosition: 0, nextPosition: 0 });
    expect(s.port.streams.verifyHead(cloneMeta(empty))).toBeNull();
  });

  it('the last record missing', async () => {
    const { s, streamId, meta } = await written();
    await s.store.storage.write([{ type: 'del', key: K.record(streamId, 1, 3) }]);
    expect(s.port.streams.verifyHead(meta)).toEqual({
      fromPosition: 3,
      detail: 'the head says records end at 4, but position 3 is missing',
    });
  });

  it('the last record naming another position, stream or generation', async () => {
    for (const wrong of [{ position: '2' }, { streamId: 'chat_x:agt_y' }, { generation: '2' }]) {
      const { s, streamId, meta, last } = await written();
      await put(s, K.record(streamId, 1, 3), { ...last, ...wrong });
      expect(s.port.streams.verifyHead(meta), JSON.stringify(wrong)).toEqual({
        fromPosition: 3,
        detail: 'the record stored at position 3 names another place',
      });
    }
  });

  it("the last record's operation missing, of another generation, or not covering it", async () => {
    const cases: Array<(op: StoredOperation) => StoredOperation | null> = [
      () => null,
      (op) => ({ ...op, generation: 2 }),
      (op) => ({ ...op, firstPosition: 4, nextPosition: 5 }),
      (op) => ({ ...op, firstPosition: 2, nextPosition: 3 }),
    ];
    for (const [i, edit] of cases.entries()) {
      const { s, streamId, meta, last } = await written();
      const opId = last.wrapper.operationId;
      const op = (await s.port.streams.findOperation(streamId, opId))!;
      expect(op).toMatchObject({ generation: 1, firstPosition: 3, nextPosition: 4 });
      const edited = edit(op);
      await s.store.storage.write([
        edited === null
          ? { type: 'del', key: K.operation(streamId, opId) }
          : { type: 'put', key: K.operation(streamId, opId), value: compactOperation(edited) },
      ]);
      expect(s.port.streams.verifyHead(meta), `case ${i}`).toEqual({
        fromPosition: 3,
        detail: `the operation of the last record (${opId}) is missing or does not cover position 3`,
      });
    }
  });

  it('an operation exactly covering the last record is fine (its bounds are inclusive-exclusive)', async () => {
    const { s, streamId, meta, last } = await written();
    const opId = last.wrapper.operationId;
    const op = (await s.port.streams.findOperation(streamId, opId))!;
    // Widened on both sides: still covers position 3.
    await put(s, K.operation(streamId, opId), compactOperation({ ...op, firstPosition: 3, nextPosition: 4 }));
    expect(s.port.streams.verifyHead(meta)).toBeNull();
    await put(s, K.operation(streamId, opId), compactOperation({ ...op, firstPosition: 1, nextPosition: 9 }));
    expect(s.port.streams.verifyHead(meta)).toBeNull();
  });

  it('a record past the head, and a record of the next generation', async () => {
    const { s, streamId, meta } = await written();
    const behind = cloneMeta(meta);
    behind.nextPosition = 3;
    expect(s.port.streams.verifyHead(behind)).toEqual({
      fromPosition: 3,
      detail: 'a record lies at position 3, past the head: the head is behind its records',
    });
    const fence = (await s.port.streams.record(meta, 1, 0))!;
    await put(s, K.record(streamId, 2, 0), { ...fence, generation: '2' });
    expect(s.port.streams.verifyHead(meta)).toEqual({
      fromPosition: 4,
      detail: 'records of generation 2 exist, but the head is at generation 1',
    });
  });

  it('a read that fails for another reason than a checksum (a closed store) is thrown, not reported as damage', async () => {
    const { s, meta } = await written();
    await s.store.storage.close();
    expect(() => s.port.streams.verifyHead(meta)).toThrow(
      expect.objectContaining({ type: 'STORAGE_FAILURE', message: expect.stringContaining('shutting down') as string }) as Error,
    );
  });

  it('the last record failing its checksum', async () => {
    const { s, streamId, meta } = await written();
    await s.store.storage.close();
    const db = new ClassicLevel<string, string>(path.join(s.dir, 'db'));
    await db.open();
    const key = K.record(streamId, 1, 3);
    const stored = (await db.get(key))!;
    await db.put(key, `00000000${stored.slice(8)}`);
    await db.close();
    open.splice(open.indexOf(s), 1);
    const again = await fresh(s.dir);
    expect(again.port.streams.verifyHead(meta)).toEqual({
      fromPosition: 3,
      detail: "the head's last record (position 3) fails its checksum",
    });
    await again.close();
    open.splice(open.indexOf(again), 1);
    const { rmSync } = await import('node:fs');
    rmSync(s.dir, { recursive: true, force: true });
  });
});
