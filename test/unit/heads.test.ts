// Pins behaviour of src/daemon/streams/heads.ts that the rest of the suite leaves unchecked: the
// admitted view that pipelined appends are decided on, the `moved` relay, the corruption mark in a
// stream's state, which commits subscribers hear of (a claim's fence; nothing for a release), the
// startup sweep over a head that fails its checksum, and a head lost while its chat exists for
// either agent. In-process on a real LevelDB in a temp dir (test/helpers/in-process-store.ts);
// stored damage is planted with the store closed, as in test/unit/subscriptions.test.ts.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import type { Caller } from '../../src/daemon/caller.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import type { ChatBatchNotification } from '../../src/shared/types.js';
import { appendMessages, chatWithWriter, openInProcess, RecordingConnection, type InProcessStore } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

async function fresh(dir?: string): Promise<InProcessStore> {
  const s = await openInProcess(dir);
  open.push(s);
  return s;
}

/** Closes `s`'s store, runs `edit` on its LevelDB, and opens it again as a new process would. */
async function reopenAfter(s: InProcessStore, edit: (db: ClassicLevel) => Promise<void>): Promise<InProcessStore> {
  await s.store.storage.close();
  const db = new ClassicLevel<string, string>(path.join(s.dir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  await db.open();
  try {
    await edit(db);
  } finally {
    await db.close();
  }
  return fresh(s.dir);
}

const agentId = (c: Caller) => (c as { agentId: string }).agentId;
const batches = (c: RecordingConnection) =>
  c.notifications.filter((n) => n.method === 'chats.batch').map((n) => n.params as ChatBatchNotification);

function message(id: string) {
  return { type: 'chat.message' as const, messageId: id, content: id };
}

describe('stream heads: the admitted view', () => {
  it('appends pipelined without waiting are decided on the admitted head: the second, sent before the first is durable, commits after it', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const base = { streamId: w.streamId, coordinatorToken: w.token, generation: 1 };
    // Both sent in one turn: the second expects the position the first takes, not yet durable.
    const first = s.streams.append(w.alice, {
      ...base,
      expectedPosition: 1,
      operationId: 'op-p1',
      records: [message('p1'), message('p2')],
    });
    const second = s.streams.append(w.alice, { ...base, expectedPosition: 3, operationId: 'op-p2', records: [message('p3')] });
    const third = s.streams.append(w.alice, { ...base, expectedPosition: 4, operationId: 'op-p3', records: [message('p4')] });
    const results = await Promise.all([first, second, third]);
    expect(results.map((r) => [r.firstPosition, r.nextPosition])).toEqual([
      ['1', '3'],
      ['3', '4'],
      ['4', '5'],
    ]);
    expect(s.streams.get(w.alice, w.streamId).nextPosition).toBe('5');
    expect(s.integrity.list()).toEqual([]);
  });
});

describe('stream heads: refusals where this daemon is the only writer', () => {
  it('a claim over an active writer is WRITER_ACTIVE and an old token FENCED, at once: no other daemon can have moved the head', async () => {
    // heads.ts movedSince: on LevelDB the port has no reloadHead, so the answer is "not moved".
    const s = await fresh();
    const w = await chatWithWriter(s);
    const claimed = await s.streams.claim(w.alice, { streamId: w.streamId, replace: false }).then(
      () => 'claimed',
      (e: unknown) => e,
    );
    expect(claimed).toMatchObject({ type: 'WRITER_ACTIVE' });
    await s.streams.claim(w.alice, { streamId: w.streamId, replace: true });
    const appended = await s.streams
      .append(w.alice, {
        streamId: w.streamId,
        coordinatorToken: w.token,
        generation: 1,
        expectedPosition: 2,
        operationId: 'op-old-token',
        records: [message('old')],
      })
      .then(
        () => 'appended',
        (e: unknown) => e,
      );
    expect(appended).toMatchObject({ type: 'FENCED' });
  });
});

describe('stream heads: events', () => {
  it('a head moved through another daemon reaches the listeners that hear of it, and passes by those that do not', async () => {
    const s = await fresh();
    const heard: string[] = [];
    // A listener without `moved` (it is optional in StreamEvents) must not break the relay.
    s.streams.listen({ committed: () => {}, discontinuity: () => {} });
    s.streams.listen({ committed: () => {}, discontinuity: () => {}, moved: (id) => heard.push(id) });
    expect(() => {
      s.streams.moved('chat_X:agt_Y');
    }).not.toThrow();
    expect(heard).toEqual(['chat_X:agt_Y']);
  });

  it("a claim's fence goes to a follower at the head as it commits; a release, which writes no record, sends nothing", async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 2); // fence 0, 1..2
    const conn = new RecordingConnection();
    const cursor = s.reader.liveCursor({
      chatId: w.chatId,
      streams: { [w.streamId]: { generation: 1, position: 3 }, [`${w.chatId}:${agentId(w.bob)}`]: { generation: 1, position: 0 } },
    });
    await s.subscriptions.follow(w.bob, { chatId: w.chatId, cursor }, conn);
    await new Promise((r) => setTimeout(r, 50));
    const claim = await s.streams.claim(w.alice, { streamId: w.streamId, replace: true });
    await waitFor(() => batches(conn).length === 1, 'the fence of the new claim', 5_000);
    const [fence] = batches(conn);
    expect(fence).toMatchObject({ streamId: w.streamId, generation: '1', fromPosition: '3', nextPosition: '4' });
    expect(fence!.records.map((r) => [r.position, r.wrapper.type])).toEqual([['3', 'chat.writer-fence']]);
    await s.streams.release(w.alice, { streamId: w.streamId, coordinatorToken: claim.coordinatorToken });
    await new Promise((r) => setTimeout(r, 100)); // time is the subject: nothing may arrive
    expect(batches(conn)).toHaveLength(1);
    expect(conn.notifications).toHaveLength(1);
  });
});

describe('stream heads: state and corruption', () => {
  it("a stream's state names the first marked position of its current generation as corruptFrom; an unmarked one has none", async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 3);
    expect(s.streams.get(w.alice, w.streamId)).not.toHaveProperty('corruptFrom');
    s.integrity.mark({ streamId: w.streamId, generation: 1, fromPosition: 2, detail: 'mut-g guard' });
    expect(s.streams.get(w.alice, w.streamId)).toMatchObject({ streamId: w.streamId, corruptFrom: '2' });
  });

  it('the startup sweep marks a stream whose stored head fails its checksum as corrupt as a whole, and finishes', async () => {
    const first = await fresh();
    const w = await chatWithWriter(first);
    await appendMessages(first, w, 2);
    const other = await chatWithWriter(first);
    await appendMessages(first, other, 1);
    const s = await reopenAfter(first, async (db) => {
      const key = K.tail(w.streamId);
      const value = (await db.get(key))!;
      // The checksum (the first 8 characters) no longer matches the value.
      const flipped = (value[0] === '0' ? '1' : '0') + value.slice(1);
      await db.put(key, flipped, { sync: true });
    });
    await expect(s.streams.reconcileAll()).resolves.toBeUndefined();
    const marks = s.integrity.list();
    expect(marks.map((m) => [m.streamId, m.generation, m.fromPosition])).toEqual([[w.streamId, null, '0']]);
    expect(marks[0]!.detail).toMatch(/stream head fails its check/);
    // The intact stream of another chat is untouched by the sweep and takes appends.
    await appendMessages(s, other, 1, 'after');
    expect(s.streams.get(other.alice, other.streamId).nextPosition).toBe('3');
  });

  it('the startup sweep over more than 64 streams finishes: it yields to the event loop now and then, it does not stop there', async () => {
    const s = await fresh();
    const chats = [];
    for (let i = 0; i < 33; i++) chats.push(await chatWithWriter(s)); // 66 streams
    // Every 64th stream the sweep waits for a turn of the event loop; that wait must end.
    await s.streams.reconcileAll();
    expect(s.integrity.list()).toEqual([]);
    expect(chats).toHaveLength(33);
  });

  it('a head that cannot be read because the store is shutting down is answered so, and not marked corrupt', async () => {
    // Only a head that fails its check is corruption; a mark is persistent, a shutdown is not.
    const first = await openInProcess();
    const w = await chatWithWriter(first);
    await first.store.storage.close();
    const s = await fresh(first.dir);
    await s.store.storage.close();
    const err = (() => {
      try {
        s.streams.get(w.alice, w.streamId);
      } catch (e) {
        return e;
      }
      return 'answered';
    })();
    expect(err).toMatchObject({ type: 'STORAGE_FAILURE', details: { reason: 'SHUTTING_DOWN' } });
    expect(s.integrity.list()).toEqual([]);
  });

  it('a stream id that names no chat and author is not found, and marks nothing', async () => {
    const s = await fresh();
    const w = await chatWithWriter(s);
    const err = (() => {
      try {
        s.streams.get(w.bob, 'not-a-stream-id');
      } catch (e) {
        return e;
      }
      return 'answered';
    })();
    expect(err).toMatchObject({ type: 'NOT_FOUND', details: { kind: 'stream', id: 'not-a-stream-id' } });
    expect(s.integrity.list()).toEqual([]);
  });

  it("a head lost while its chat exists is CORRUPT for the whole stream, for either agent's stream; a stream of neither agent is NOT_FOUND", async () => {
    const first = await fresh();
    const w = await chatWithWriter(first);
    await appendMessages(first, w, 1);
    const bobStream = `${w.chatId}:${agentId(w.bob)}`;
    const s = await reopenAfter(first, async (db) => {
      const ops = [w.streamId, bobStream].flatMap((id) => [
        { type: 'del' as const, key: K.stream(id) },
        { type: 'del' as const, key: K.tail(id) },
      ]);
      await db.batch(ops, { sync: true });
    });
    for (const id of [w.streamId, bobStream]) {
      const err = (() => {
        try {
          s.streams.get(w.bob, id);
        } catch (e) {
          return e;
        }
        return 'answered';
      })();
      expect(err).toMatchObject({ type: 'STORAGE_FAILURE', details: { reason: 'CORRUPT', streamId: id } });
    }
    const marks = s.integrity.list();
    expect(marks.map((m) => [m.streamId, m.generation, m.fromPosition]).sort()).toEqual(
      [
        [w.streamId, null, '0'],
        [bobStream, null, '0'],
      ].sort(),
    );
    for (const m of marks) expect(m.detail).toMatch(/is missing, though its chat exists/);
    const stranger = `${w.chatId}:agt_WWWWWWWWWWWWWWWWWWWWWWWWWW`;
    expect(() => s.streams.get(w.bob, stranger)).toThrow(expect.objectContaining({ type: 'NOT_FOUND' }));
    expect(s.integrity.list()).toHaveLength(2);
  });
});

// Pins one behaviour of src/daemon/streams/heads.ts that the rest of the suite leaves unchecked:
// 92:9 `!meta` → `false` in `requireAdmitted` (and 92:38, its `kind`). A stream that does not exist
// must be NOT_FOUND by value (docs/protocol.md: NOT_FOUND names the kind and id), not an internal
// error from a head read as undefined. In-process, on a real LevelDB in a temp dir
// (test/helpers/in-process-store.ts).
describe('a stream that does not exist', () => {
  const open: InProcessStore[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close().catch(() => {});
  });

  describe('stream heads (heads.ts requireAdmitted)', () => {
    it("an append to the author's stream of a chat that does not exist is NOT_FOUND of that stream, and writes nothing", async () => {
      const s = await openInProcess();
      open.push(s);
      const w = await chatWithWriter(s);
      const author = w.streamId.slice(w.streamId.indexOf(':') + 1);
      const missing = `chat_VVVVVVVVVVVVVVVVVVVVVVVVVV:${author}`;
      const err = await s.streams
        .append(w.alice, {
          streamId: missing,
          coordinatorToken: w.token,
          generation: 1,
          expectedPosition: 1,
          operationId: 'op-nowhere',
          records: [{ type: 'chat.message', messageId: 'x', content: 'x' }],
        })
        .then(
          () => 'appended',
          (e: unknown) => e,
        );
      expect(err).toMatchObject({ type: 'NOT_FOUND', details: { kind: 'stream', id: missing } });
      expect(s.streams.get(w.alice, w.streamId).nextPosition).toBe('1');
    });
  });
});
