// Pins behaviour of src/daemon/streams/operations.ts (`operations.get`, `operations.list`,
// docs/protocol.md §6.7) that the rest of the suite leaves unchecked. Over the real socket, against
// a real daemon.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { describe, expect, it } from 'vitest';
import type { OperationInfo } from '../../src/shared/results.js';
import { expectError, messages, reconnectChat, setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { createAgent, ok, uniq, type WireResponse } from '../helpers/wire-fixtures.js';

const { daemon, admin, restart } = useDaemon();

/** Appends `n` single-message operations to alice's stream; their operationIds and answers. */
async function appendOps(c: ReadingChat, n: number): Promise<Array<{ operationId: string; firstPosition: string; nextPosition: string }>> {
  const out = [];
  for (let i = 0; i < n; i++) {
    const operationId = uniq(`op${i}`);
    const r = await c.wa.append(messages(uniq('m'), 1 + (i % 2)), operationId);
    out.push({ operationId, firstPosition: r.firstPosition, nextPosition: r.nextPosition });
  }
  return out;
}

async function list(c: ReadingChat, params: { cursor?: string; limit?: number } = {}) {
  return ok(await c.alice.client.call('operations.list', { streamId: c.streamA, ...params }), 'operations.list');
}

async function get(c: ReadingChat, operationId: string): Promise<OperationInfo> {
  return ok(await c.alice.client.call('operations.get', { streamId: c.streamA, operationId }), 'operations.get');
}

async function marks() {
  return ok(await admin().call('daemon.status', {}), 'daemon.status').integrity.corruptStreams;
}

/** The response is STORAGE_FAILURE (5030) / CORRUPT of `streamId` from `fromPosition`. */
function expectCorrupt(r: WireResponse, streamId: string, fromPosition: string): void {
  expect(r.result, 'expected STORAGE_FAILURE/CORRUPT, got a result').toBeUndefined();
  expect(r.error?.code).toBe(5030);
  expect(r.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId, fromPosition });
}

describe('operations.get and operations.list', () => {
  it('operations.get answers a committed append with every field by value, and an unknown id with every field null', async () => {
    const c = await setupChat(daemon(), admin());
    const [op] = await appendOps(c, 1);
    const info = await get(c, op!.operationId);
    const { committedAt, requestDigest, ...rest } = info;
    expect(rest).toEqual({
      operationId: op!.operationId,
      state: 'committed',
      generation: '1',
      firstPosition: op!.firstPosition,
      nextPosition: op!.nextPosition,
    });
    expect(committedAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(requestDigest).toMatch(/^.{16,}$/);
    const never = uniq('op-never');
    expect(await get(c, never)).toEqual({
      operationId: never,
      state: 'unknown',
      generation: null,
      firstPosition: null,
      nextPosition: null,
      committedAt: null,
      requestDigest: null,
    });
  });

  it('operations.get is scoped to its stream: an operationId committed in the peer stream is unknown here', async () => {
    // operations.ts get: the confirming scan covers this stream's operation log only.
    const c = await setupChat(daemon(), admin());
    const operationId = uniq('op-shared');
    await c.wb.append(messages(uniq('peer'), 1), operationId);
    await c.wa.send('own', 1);
    expect((await get(c, operationId)).state).toBe('unknown');
    const peer = ok(await c.bob.client.call('operations.get', { streamId: c.streamB, operationId }), 'operations.get');
    expect(peer.state).toBe('committed');
    expect(await marks()).not.toContainEqual(expect.objectContaining({ streamId: c.streamA }));
  });

  it('operations.get sent right behind its append is pending or committed, never unknown', async () => {
    // operations.ts get: an admitted write not yet synced is `pending` (`hasPending`); read from
    // the store alone it would look like `unknown` ("never committed", which invites a resend).
    const c = await setupChat(daemon(), admin());
    for (let i = 0; i < 5; i++) {
      const operationId = uniq('op-behind');
      // Sent in this order on one connection (the daemon handles a connection's requests in order).
      const appending = c.alice.client.call('streams.append', {
        streamId: c.streamA,
        coordinatorToken: c.wa.token,
        generation: c.wa.generation,
        expectedPosition: c.wa.next,
        operationId,
        records: messages(uniq('b'), 1),
      });
      const asking = c.alice.client.call('operations.get', { streamId: c.streamA, operationId });
      const [appended, asked] = await Promise.all([appending, asking]);
      c.wa.next = ok(appended, 'append').nextPosition;
      const info = ok(asked, 'operations.get');
      expect(['pending', 'committed'], JSON.stringify(info)).toContain(info.state);
      if (info.state === 'pending') {
        expect(info).toEqual({
          operationId,
          state: 'pending',
          generation: null,
          firstPosition: null,
          nextPosition: null,
          committedAt: null,
          requestDigest: null,
        });
      }
    }
  });

  it('operations.get and operations.list of a missing stream are NOT_FOUND, of an outsider PERMISSION_DENIED', async () => {
    const c = await setupChat(daemon(), admin());
    const outsider = await createAgent(admin(), daemon().socketPath);
    const missing = `${c.chatId}:agt_WWWWWWWWWWWWWWWWWWWWWWWWWW`;
    for (const r of [
      await admin().call('operations.get', { streamId: missing, operationId: 'x' }),
      await admin().call('operations.list', { streamId: missing }),
    ]) {
      expect(expectError(r, 'NOT_FOUND')).toEqual({ type: 'NOT_FOUND', kind: 'stream', id: missing });
    }
    expectError(await outsider.client.call('operations.get', { streamId: c.streamA, operationId: 'x' }), 'PERMISSION_DENIED');
    expectError(await outsider.client.call('operations.list', { streamId: c.streamA }), 'PERMISSION_DENIED');
  });

  it('operations.list pages exactly: limit items a page, nextCursor null on the last page (also when it is full)', async () => {
    // operations.ts list: `limit + 1` entries read, `entries.length > limit` decides nextCursor.
    const c = await setupChat(daemon(), admin());
    const ops = await appendOps(c, 4);
    const ids = ops.map((o) => o.operationId);
    const all = await list(c);
    expect(all.operations.map((o) => o.operationId)).toEqual(ids);
    expect(all.nextCursor).toBeNull();
    for (const [i, o] of all.operations.entries()) {
      expect(o).toEqual({ ...(await get(c, ids[i]!)) });
      expect({ first: o.firstPosition, next: o.nextPosition }).toEqual({ first: ops[i]!.firstPosition, next: ops[i]!.nextPosition });
    }
    const full = await list(c, { limit: 4 });
    expect(full.operations.map((o) => o.operationId)).toEqual(ids);
    expect(full.nextCursor).toBeNull();
    const p1 = await list(c, { limit: 3 });
    expect(p1.operations.map((o) => o.operationId)).toEqual(ids.slice(0, 3));
    expect(p1.nextCursor).toEqual(expect.any(String));
    const p2 = await list(c, { limit: 3, cursor: p1.nextCursor! });
    expect(p2.operations.map((o) => o.operationId)).toEqual(ids.slice(3));
    expect(p2.nextCursor).toBeNull();
    const q1 = await list(c, { limit: 2 });
    expect(q1.operations.map((o) => o.operationId)).toEqual(ids.slice(0, 2));
    const q2 = await list(c, { limit: 2, cursor: q1.nextCursor! });
    expect(q2.operations.map((o) => o.operationId)).toEqual(ids.slice(2));
    expect(q2.nextCursor).toBeNull();
  });

  it('operations.list orders by generation, then position, across a reset', async () => {
    const c = await setupChat(daemon(), admin());
    const g1 = await appendOps(c, 2);
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'ops across generations' }), 'streams.reset');
    await c.wa.reclaim();
    const g2 = await appendOps(c, 2);
    const all = await list(c);
    expect(all.operations.map((o) => [o.operationId, o.generation])).toEqual([
      ...g1.map((o) => [o.operationId, '1']),
      ...g2.map((o) => [o.operationId, '2']),
    ]);
  });

  it('operations.list refuses a cursor of another stream, of another kind or made up with INVALID_PARAMS at cursor', async () => {
    // operations.ts list: `typeof opened !== 'string' || !opened.startsWith(prefix)`.
    const c = await setupChat(daemon(), admin());
    await appendOps(c, 3);
    await c.wb.send('b', 3);
    await c.wb.append(messages(uniq('b2'), 1));
    const own = await list(c, { limit: 1 });
    const bobs = ok(await c.bob.client.call('operations.list', { streamId: c.streamB, limit: 1 }), 'operations.list');
    expect(bobs.nextCursor).toEqual(expect.any(String));
    const history = ok(await c.alice.client.call('chats.history', { chatId: c.chatId, limit: 1 }), 'chats.history');
    for (const [what, cursor] of [
      ['another stream', bobs.nextCursor!],
      ['a history cursor', history.nextCursor!],
      ['a live cursor', history.liveCursor],
      ['made up', 'not-a-cursor'],
    ] as const) {
      expect(cursor, what).toEqual(expect.any(String));
      const data = expectError(
        await c.alice.client.call('operations.list', { streamId: c.streamA, cursor, limit: 1 }),
        'INVALID_PARAMS',
        what,
      );
      expect(data.path, what).toBe('cursor');
    }
    // The stream's own cursor goes on.
    expect((await list(c, { limit: 1, cursor: own.nextCursor! })).operations).toHaveLength(1);
  });

  it('an operation whose entry is gone but the operation log names is CORRUPT at its position, in operations.get and operations.list', async () => {
    // operations.ts #lostEntry / locateKeyPosition: the mark lies where the log places the
    // operation (generation and position from the log key), never `unknown` or skipped.
    const forGet = await setupChat(daemon(), admin());
    const forList = await setupChat(daemon(), admin());
    const gOps = await appendOps(forGet, 3);
    const lOps = await appendOps(forList, 3);
    await daemon().stop();
    const db = new ClassicLevel<string, string>(path.join(daemon().dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    try {
      for (const [c, op] of [
        [forGet, gOps[1]!],
        [forList, lOps[1]!],
      ] as const) {
        const key = `o/${c.streamA}/${op.operationId}`;
        expect(await db.get(key), key).toBeDefined();
        await db.del(key, { sync: true });
      }
    } finally {
      await db.close();
    }
    await restart();
    await reconnectChat(daemon(), forGet);
    await reconnectChat(daemon(), forList);
    expect((await get(forGet, gOps[0]!.operationId)).state).toBe('committed');
    expectCorrupt(
      await forGet.alice.client.call('operations.get', { streamId: forGet.streamA, operationId: gOps[1]!.operationId }),
      forGet.streamA,
      gOps[1]!.firstPosition,
    );
    expectCorrupt(
      await forList.alice.client.call('operations.list', { streamId: forList.streamA }),
      forList.streamA,
      lOps[1]!.firstPosition,
    );
    const found = await marks();
    const getMark = found.find((m) => m.streamId === forGet.streamA);
    const listMark = found.find((m) => m.streamId === forList.streamA);
    expect(getMark).toMatchObject({ generation: '1', fromPosition: gOps[1]!.firstPosition });
    expect(listMark).toMatchObject({ generation: '1', fromPosition: lOps[1]!.firstPosition });
    // The mark says which operation and why (what `yello doctor` and daemon.status show).
    expect(getMark?.detail).toBe(`operation ${gOps[1]!.operationId} is in the operation log but its entry is missing`);
    expect(listMark?.detail).toBe(`operation ${lOps[1]!.operationId} is in the operation log but missing`);
  });
});
