// Pins behaviour of src/daemon/store/leveldb/level-streams.ts (the stream port on LevelDB) that the
// conformance suite (test/store/port-conformance.ts, backend-neutral) does not reach. In-process on
// a real LevelDB in a temp dir: the head check the daemon runs at startup (`verifyHead`, heads.ts
// reconcile), each problem provoked by editing the stored tables through Storage (valid checksums)
// or LevelDB itself (a bad one).

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { compactOperation, type StoredOperation } from '../../src/daemon/store/record-layout.js';
import { cloneMeta, type StreamMeta } from '../../src/daemon/store/stream-meta.js';
import type { StoredRecord } from '../../src/shared/types.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { outcomeOf, expectOf, type CommitOutcome } from '../../src/daemon/store/port/stream-port.js';
import { YelloError } from '../../src/shared/errors.js';

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

// Pins behaviour of src/daemon/store/leveldb/level-streams.ts that the conformance suite and the
// verifyHead tests leave unchecked: the port's commits driven directly, in process, on a real
// LevelDB in a temp dir. The conformance suite speaks the port's contract on both backends; these
// pin what only the LevelDB side shows: its admitted/committed caches, the same-turn duplicate
// check, the trim's first chunk and the sweep's batches, the WAL guard's touches.
describe('LevelStreams commits, caches, trims and sweeps', () => {
  const open: InProcessStore[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close().catch(() => {});
  });

  async function fresh(options: { injectFailure?: () => boolean } = {}): Promise<InProcessStore> {
    const s = await openInProcess(undefined, options);
    open.push(s);
    return s;
  }

  const now = () => new Date().toISOString();

  function message(meta: StreamMeta, position: number, operationId: string, recordIndex: number, text: string): StoredRecord {
    return {
      streamId: meta.streamId,
      generation: String(meta.generation),
      position: String(position),
      wrapper: {
        version: 2,
        chatId: meta.chatId,
        authorAgentId: meta.authorAgentId,
        operationId,
        recordIndex,
        type: 'chat.message',
        message: {
          chatId: meta.chatId,
          fromAgentId: meta.authorAgentId,
          toAgentId: meta.peerAgentId,
          clientMessageId: `cm-${operationId}-${recordIndex}`,
          content: text,
          contentSha256: 'sha-' + text,
          signature: { kid: 'kid-1', alg: 'ES256', value: 'sig-' + text, createdAt: now() },
        },
      },
    };
  }

  /** The append of `n` messages decided on `head`. */
  function appendOf(head: StreamMeta, n: number, operationId = `op-${randomUUID()}`) {
    const next = cloneMeta(head);
    const from = head.nextPosition;
    const records = Array.from({ length: n }, (_, i) => message(head, from + i, operationId, i, `t${from + i}`));
    next.nextPosition = from + n;
    const operation: StoredOperation = {
      operationId,
      generation: head.generation,
      firstPosition: from,
      nextPosition: next.nextPosition,
      committedAt: now(),
      requestDigest: 'digest-' + operationId,
      redactions: [],
    };
    const messageIds = records.map((_, i): [string, number] => [`cm-${operationId}-${i}`, from + i]);
    return { kind: 'append' as const, expect: expectOf(head), next, records, operation, messageIds, ready: null };
  }

  function trimOf(head: StreamMeta, to: number) {
    const next = cloneMeta(head);
    next.firstPosition = to;
    return { kind: 'trim' as const, expect: expectOf(head), next, fromPosition: head.firstPosition };
  }

  async function stream(s: InProcessStore) {
    const w = await chatWithWriter(s);
    const head = () => cloneMeta(s.port.streams.head(w.streamId, 'committed')!);
    return { ...w, head };
  }

  async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
    const out: T[] = [];
    for await (const x of it) out.push(x);
    return out;
  }

  function ok(outcome: CommitOutcome): void {
    expect(outcome).toEqual({ status: 'ok' });
  }

  /** From now on, the size of every batch written to `storage`, in order. */
  function recordBatches(storage: InProcessStore['store']['storage']): number[] {
    const batches: number[] = [];
    const write = storage.write.bind(storage);
    storage.write = (ops: Parameters<typeof write>[0], ...rest: unknown[]) => {
      batches.push(ops.length);
      return (write as (...args: unknown[]) => ReturnType<typeof write>)(ops, ...rest);
    };
    return batches;
  }

  /** The WAL guard's lines (src/daemon/store/leveldb/wal-guard.ts) without their first field: `[streamId, generation, position]`. */
  function walGuard(dir: string): string[][] {
    return readFileSync(path.join(dir, 'wal-guard'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => line.split(' ').slice(1));
  }

  describe('LevelStreams caches and commits', () => {
    it('a failed write clears the admitted view: the head goes back to what is stored', async () => {
      let fail = false;
      const s = await fresh({ injectFailure: () => fail });
      const w = await stream(s);
      const before = w.head();
      fail = true;
      const outcome = await outcomeOf(s.port.streams.admit(appendOf(before, 1)));
      expect(outcome.status).toBe('unknown');
      expect(s.port.streams.head(w.streamId, 'admitted')).toMatchObject({ nextPosition: before.nextPosition });
      // Read-only now: an append is refused before admission, naming its operation.
      const change = appendOf(before, 1, 'op-after-failure');
      expect(() => s.port.streams.admit(change)).toThrow(
        expect.toSatisfy(
          (err: unknown) =>
            err instanceof YelloError && err.details.operationId === 'op-after-failure' && err.details.reason === 'READ_ONLY',
        ),
      );
    });

    it('headPending, operationStatus and the durable promises while a commit is pending', async () => {
      const s = await fresh();
      const w = await stream(s);
      expect(typeof s.port.streams.negativeIndexReady(w.streamId)).toBe('boolean');
      expect(s.port.streams.headPending(w.streamId)).toBe(false);
      const change = appendOf(w.head(), 2);
      const committed = outcomeOf(s.port.streams.admit(change));
      expect(s.port.streams.headPending(w.streamId)).toBe(true);
      expect(await s.port.streams.operationStatus(w.streamId, change.operation.operationId)).toEqual({ state: 'pending' });
      // The durable promises resolve only once the write is no longer pending.
      const stillPending: boolean[] = [];
      const durable = [
        s.port.streams.headDurable(w.streamId).then(() => stillPending.push(s.port.streams.headPending(w.streamId))),
        s.port.streams
          .operationDurable(w.streamId, change.operation.operationId)
          .then(() => stillPending.push(s.port.streams.headPending(w.streamId))),
      ];
      // Admitted but not committed: the two views differ.
      expect(s.port.streams.head(w.streamId, 'admitted')!.nextPosition).toBe(change.next.nextPosition);
      expect(s.port.streams.head(w.streamId, 'committed')!.nextPosition).toBe(change.expect.nextPosition);
      ok(await committed);
      await Promise.all(durable);
      expect(stillPending).toEqual([false, false]);
      expect(s.port.streams.headPending(w.streamId)).toBe(false);
      expect(s.port.streams.head(w.streamId, 'committed')!.nextPosition).toBe(change.next.nextPosition);
      expect((await s.port.streams.operationStatus(w.streamId, change.operation.operationId)).state).toBe('committed');
    });

    it('after a reopen the caches are empty: the committed view stays put until the commit lands', async () => {
      const s = await fresh();
      const w = await stream(s);
      await appendMessages(s, w, 2);
      const dir = s.dir;
      await s.store.storage.close();
      const again = await openInProcess(dir);
      open.push(again);
      const head = cloneMeta(again.port.streams.head(w.streamId, 'admitted')!);
      const change = appendOf(head, 1);
      const pending = outcomeOf(again.port.streams.admit(change));
      expect(again.port.streams.head(w.streamId, 'committed')!.nextPosition).toBe(head.nextPosition);
      expect(again.port.streams.head(w.streamId, 'admitted')!.nextPosition).toBe(head.nextPosition + 1);
      ok(await pending);
      expect(again.port.streams.head(w.streamId, 'committed')!.nextPosition).toBe(head.nextPosition + 1);
      // The reopen cleared the WAL guard; the first write touches where the stream stood before it.
      expect(walGuard(dir)).toEqual([[w.streamId, String(head.generation), String(head.nextPosition)]]);
    });

    it('streamIds yields the stream ids themselves', async () => {
      const s = await fresh();
      const w = await stream(s);
      const ids = await collect(s.port.streams.streamIds());
      expect(ids).toContain(w.streamId);
      for (const id of ids) expect(id).toMatch(/^chat_[^/]*:agt_[^/]*$/);
    });

    it('the same operation id twice in one turn: the second is a duplicate', async () => {
      const s = await fresh();
      const w = await stream(s);
      const first = appendOf(w.head(), 1, 'op-twice');
      const second = appendOf(first.next, 1, 'op-twice');
      const [a, b] = await Promise.all([outcomeOf(s.port.streams.admit(first)), outcomeOf(s.port.streams.admit(second))]);
      ok(a);
      expect(b).toMatchObject({ status: 'duplicate', what: 'operation' });
    });

    it('stale: a precondition on a missing stream or on another generation', async () => {
      const s = await fresh();
      const w = await stream(s);
      const head = w.head();
      const missing = appendOf({ ...cloneMeta(head), streamId: `${w.chatId}:agt_nobody` }, 1);
      expect(await outcomeOf(s.port.streams.admit(missing))).toEqual({ status: 'stale', head: undefined });
      const wrongGeneration = appendOf(head, 1);
      wrongGeneration.expect = { ...wrongGeneration.expect, generation: head.generation + 1 };
      expect(await outcomeOf(s.port.streams.admit(wrongGeneration))).toMatchObject({ status: 'stale' });
      const wrongEpoch = appendOf(head, 1);
      wrongEpoch.expect = { ...wrongEpoch.expect, writerEpoch: head.writer.epoch + 1 };
      expect(await outcomeOf(s.port.streams.admit(wrongEpoch))).toMatchObject({ status: 'stale' });
      const wrongPosition = appendOf(head, 1);
      wrongPosition.expect = { ...wrongPosition.expect, nextPosition: head.nextPosition + 1 };
      expect(await outcomeOf(s.port.streams.admit(wrongPosition))).toMatchObject({ status: 'stale' });
    });

    it('a reset with no precondition replaces the head', async () => {
      const s = await fresh();
      const w = await stream(s);
      await appendMessages(s, w, 2);
      const head = w.head();
      const next = cloneMeta(head);
      next.generation = head.generation + 1;
      next.firstPosition = 0;
      next.nextPosition = 0;
      ok(await outcomeOf(s.port.streams.admit({ kind: 'reset', expect: null, next })));
      expect(s.port.streams.head(w.streamId, 'committed')).toMatchObject({ generation: head.generation + 1, nextPosition: 0 });
      // The WAL guard marks the new generation from its first position, not from where the old one stood.
      const ofNew = walGuard(s.dir).filter(([id, g]) => id === w.streamId && g === String(next.generation));
      expect(ofNew).toEqual([[w.streamId, String(next.generation), '0']]);
    });

    it('records with limit 0 yield nothing; messageIds and operationIds yield the ids themselves', async () => {
      const s = await fresh();
      const w = await stream(s);
      const change = appendOf(w.head(), 3, 'op-ids');
      ok(await outcomeOf(s.port.streams.admit(change)));
      const head = w.head();
      expect(await collect(s.port.streams.records(head, head.generation, 0, head.nextPosition, { limit: 0 }))).toEqual([]);
      expect(await collect(s.port.streams.records(head, head.generation, 0, head.nextPosition, { limit: 2 }))).toHaveLength(2);
      expect((await collect(s.port.streams.messageIds(w.streamId, head.generation))).sort()).toEqual(
        change.messageIds.map(([id]) => id).sort(),
      );
      expect(await collect(s.port.streams.operationIds(w.streamId))).toContain('op-ids');
      expect(typeof (await s.port.streams.approximateBytes(w.streamId))).toBe('number');
    });
  });

  describe('LevelStreams trims and sweeps', () => {
    it('a trim deletes its first records at once; the sweep keeps the boundary operation and its ids', async () => {
      const s = await fresh();
      const w = await stream(s);
      // Fence at 0; operations [1,3) and [3,5).
      const a = appendOf(w.head(), 2);
      ok(await outcomeOf(s.port.streams.admit(a)));
      const b = appendOf(a.next, 2);
      ok(await outcomeOf(s.port.streams.admit(b)));
      const c = appendOf(b.next, 2);
      ok(await outcomeOf(s.port.streams.admit(c)));
      ok(await outcomeOf(s.port.streams.admit(trimOf(w.head(), 3))));
      const positions = (await collect(s.port.streams.allRecords(w.head()))).map((r) => r.position);
      expect(positions).toEqual([3, 4, 5, 6]);
      const swept = await s.port.streams.sweepTrimmed(w.streamId, w.head().generation, 3);
      // Operation a ends exactly at 3: gone; b starts there: kept, and c after it.
      expect(swept).toEqual({ records: 0, operations: 1, messageIds: 2 });
      expect(await s.port.streams.findOperation(w.streamId, a.operation.operationId)).toBeUndefined();
      expect(await s.port.streams.findOperation(w.streamId, b.operation.operationId)).toBeDefined();
      const ids = await collect(s.port.streams.messageIds(w.streamId, w.head().generation));
      expect(ids).toContain(b.messageIds[0]![0]);
      expect(ids).not.toContain(a.messageIds[1]![0]);
      // A trim through the middle of c: c stays, and so does its first id below the new start.
      ok(await outcomeOf(s.port.streams.admit(trimOf(w.head(), 6))));
      expect(await s.port.streams.sweepTrimmed(w.streamId, w.head().generation, 6)).toEqual({
        records: 0,
        operations: 1,
        messageIds: 3,
      });
      expect(await s.port.streams.findOperation(w.streamId, c.operation.operationId)).toBeDefined();
    });

    it('a trim of 10,000 records compacts after its sweep and one of 9,999 does not; batches stay within 10,000', async () => {
      const s = await fresh();
      const storage = s.store.storage;
      const compactions: string[] = [];
      const compact = storage.compactRange.bind(storage);
      storage.compactRange = (gte: string, lt: string) => {
        compactions.push(gte);
        return compact(gte, lt);
      };
      const batches = recordBatches(storage);

      for (const [size, compacts] of [
        [9_999, false],
        [10_000, true],
      ] as const) {
        const w = await stream(s);
        const big = appendOf(w.head(), size + 1);
        ok(await outcomeOf(s.port.streams.admit(big)));
        // The fence first, alone: the large trim then starts at 1, not 0.
        ok(await outcomeOf(s.port.streams.admit(trimOf(w.head(), 1))));
        await s.port.streams.sweepTrimmed(w.streamId, w.head().generation, 1);
        compactions.length = 0;
        batches.length = 0;
        // From 1 up to `size + 1`: `size` records gone.
        ok(await outcomeOf(s.port.streams.admit(trimOf(w.head(), size + 1))));
        const first = (await collect(s.port.streams.allRecords(w.head())))[0]!;
        expect(first.position).toBe(size + 1);
        const swept = await s.port.streams.sweepTrimmed(w.streamId, w.head().generation, size + 1);
        expect(swept.records).toBe(0);
        expect(compactions.length > 0, `trim of ${size}`).toBe(compacts);
        expect(Math.max(...batches)).toBeLessThanOrEqual(10_003);
      }
    });

    it('a trim past one chunk leaves the rest to the sweep, in batches of at most 10,000', async () => {
      const s = await fresh();
      const storage = s.store.storage;
      const w = await stream(s);
      const big = appendOf(w.head(), 25_000);
      ok(await outcomeOf(s.port.streams.admit(big)));
      const batches = recordBatches(storage);
      ok(await outcomeOf(s.port.streams.admit(trimOf(w.head(), 24_000))));
      expect(batches[0]).toBeLessThanOrEqual(10_003);
      const left = await collect(storage.keys({ gte: K.recordsPrefix(w.streamId, 1), lt: K.record(w.streamId, 1, 24_000) }));
      expect(left).toHaveLength(14_000);
      const swept = await s.port.streams.sweepTrimmed(w.streamId, 1, 24_000);
      expect(swept).toEqual({ records: 14_000, operations: 0, messageIds: 23_999 });
      const sweepBatches = batches.slice(1);
      expect(Math.max(...sweepBatches)).toBeLessThanOrEqual(10_000);
      // 14,000 records in two batches, 23,999 ids in three.
      expect(sweepBatches).toHaveLength(5);
    });

    it('the record counter goes down by what each trim removes, also from a start above 0', async () => {
      const s = await fresh();
      const w = await stream(s);
      ok(await outcomeOf(s.port.streams.admit(appendOf(w.head(), 6))));
      const before = s.port.counts().records;
      // Fence at 0, messages at 1..6: trim [0,3), then [3,5).
      ok(await outcomeOf(s.port.streams.admit(trimOf(w.head(), 3))));
      expect(s.port.counts().records).toBe(before - 3);
      ok(await outcomeOf(s.port.streams.admit(trimOf(w.head(), 5))));
      expect(s.port.counts().records).toBe(before - 5);
    });

    it('the operations sweep deletes in batches of at most 10,000 keys (5,001 operations: two batches)', async () => {
      const s = await fresh();
      const storage = s.store.storage;
      const w = await stream(s);
      // Admission is synchronous, so the appends pipeline into a few group commits.
      const commits: Promise<CommitOutcome>[] = [];
      let head = w.head();
      for (let i = 0; i < 5_001; i++) {
        const change = appendOf(head, 1);
        commits.push(outcomeOf(s.port.streams.admit(change)));
        head = change.next;
      }
      for (const outcome of await Promise.all(commits)) ok(outcome);
      ok(await outcomeOf(s.port.streams.admit(trimOf(w.head(), 5_002))));
      const batches = recordBatches(storage);
      const swept = await s.port.streams.sweepTrimmed(w.streamId, w.head().generation, 5_002);
      expect(swept).toEqual({ records: 0, operations: 5_001, messageIds: 5_001 });
      // An operation and its log entry go together: 5,000 pairs, then the last pair, then the ids.
      expect(batches).toEqual([10_000, 2, 5_001]);
    });

    it('record and findOperation on a closing store reject (reason SHUTTING_DOWN), never throw where they are called', async () => {
      const s = await fresh();
      const w = await stream(s);
      const head = w.head();
      const closing = s.store.storage.close();
      let record: Promise<unknown> | undefined;
      let operation: Promise<unknown> | undefined;
      expect(() => {
        record = s.port.streams.record(head, head.generation, 0);
        operation = s.port.streams.findOperation(w.streamId, 'op-1');
      }).not.toThrow();
      const [r, o] = await Promise.allSettled([record, operation]);
      for (const settled of [r, o]) {
        expect(settled.status).toBe('rejected');
        const err = (settled as PromiseRejectedResult).reason as YelloError;
        expect(err).toBeInstanceOf(YelloError);
        expect((err.details as { reason?: string }).reason).toBe('SHUTTING_DOWN');
      }
      await closing;
    });
  });
});
