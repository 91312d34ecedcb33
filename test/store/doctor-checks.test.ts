// Pins behaviour of src/daemon/store/doctor-checks.ts: each per-value check of `yello doctor` on a
// real store in a temp dir (the daemon's services built in this process), with one value edited
// through Storage (so its checksum is valid and only the check in question can notice), asserting
// every problem reported by value, and the marks.

import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { contentSha256 } from '../../src/daemon/crypto/hashing.js';
import { checkStore } from '../../src/daemon/store/leveldb/doctor.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { expandRecord, type CompactOperation, type CompactRecord } from '../../src/daemon/store/record-layout.js';
import type { DoctorProblem, StoredRecord } from '../../src/shared/types.js';
import { chatWithWriter, openInProcess, type InProcessStore, appendOperation } from '../helpers/in-process-store.js';
import { PAGE_BYTES } from '../../src/daemon/limits.js';

const opened: InProcessStore[] = [];
const cleanupDirs: string[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close().catch(() => {});
  for (const d of cleanupDirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * The store of `x` closed, values put raw with LevelDB (so their checksums fail), and opened
 * again in the same directory.
 */
async function withRawValues(x: World, values: Array<[string, string]>): Promise<World> {
  await x.s.store.storage.close();
  const db = new ClassicLevel<string, string>(path.join(x.s.dir, 'db'));
  await db.open();
  for (const [k, v] of values) await db.put(k, v);
  await db.close();
  const s = await openInProcess(x.s.dir);
  opened.push(s);
  return helpers(s, x.w, x.ops, x.bobId);
}

type Writer = Awaited<ReturnType<typeof chatWithWriter>>;

interface World {
  s: InProcessStore;
  w: Writer;
  aliceId: string;
  bobId: string;
  /** The operation ids in append order: A (position 2), B (3–5), C (6). */
  ops: string[];
  rec: (position: number, generation?: number) => string;
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the stored shape
  get: <T>(key: string) => T;
  put: (key: string, value: unknown) => Promise<void>;
  del: (key: string) => Promise<void>;
  doctor: (mark?: boolean) => ReturnType<typeof checkStore>;
}

/** alice's stream: the claim's fence at 1, then operations of 1, 3 and 1 messages (2, 3–5, 6). */
async function world(shape: number[] = [1, 3, 1]): Promise<World> {
  const s = await openInProcess();
  opened.push(s);
  cleanupDirs.push(s.dir);
  const w = await chatWithWriter(s);
  const ops: string[] = [];
  for (const [i, size] of shape.entries()) {
    const head = s.streams.get(w.alice, w.streamId);
    const operationId = `op${i}-${randomBytes(3).toString('hex')}`;
    ops.push(operationId);
    await s.streams.append(w.alice, {
      streamId: w.streamId,
      coordinatorToken: w.token,
      generation: Number(head.generation),
      expectedPosition: Number(head.nextPosition),
      operationId,
      records: Array.from({ length: size }, (_, k) => ({ type: 'chat.message' as const, messageId: `m${i}-${k}`, content: `m ${i} ${k}` })),
    });
  }
  return helpers(s, w, ops);
}

function helpers(s: InProcessStore, w: Writer, ops: string[], knownBobId?: string): World {
  const [chatId, aliceId] = w.streamId.split(':') as [string, string];
  const chat = s.store.storage.get<{ agentAId: string; agentBId: string }>(K.chat(chatId));
  const bobId = knownBobId ?? (chat!.agentAId === aliceId ? chat!.agentBId : chat!.agentAId);
  return {
    s,
    w,
    aliceId,
    bobId,
    ops,
    rec: (position, generation = 1) => K.record(w.streamId, generation, position),
    get: <T>(key: string) => s.store.storage.get<T>(key)!,
    put: (key, value) => s.store.storage.write([{ type: 'put', key, value }]),
    del: (key) => s.store.storage.write([{ type: 'del', key }]),
    doctor: (mark = false) => checkStore(s.store.storage, s.integrity, new Signer(path.join(s.dir, 'keys')), { mark }),
  };
}

/** Appends one operation of `size` messages to alice's stream with `token`; returns its id. */
async function appendOp(x: World, token: string, size: number, tag: string): Promise<string> {
  const head = x.s.streams.get(x.w.alice, x.w.streamId);
  const operationId = `op-${tag}-${randomBytes(3).toString('hex')}`;
  await x.s.streams.append(x.w.alice, {
    streamId: x.w.streamId,
    coordinatorToken: token,
    generation: Number(head.generation),
    expectedPosition: Number(head.nextPosition),
    operationId,
    records: Array.from({ length: size }, (_, k) => ({ type: 'chat.message' as const, messageId: `${tag}-${k}`, content: `${tag} ${k}` })),
  });
  return operationId;
}

/** The full record stored at `position` (expanded from its compact form). */
function fullRecord(x: World, position: number, generation = 1): StoredRecord {
  return expandRecord(x.get<CompactRecord>(x.rec(position, generation)), {
    streamId: x.w.streamId,
    generation,
    position,
    chatId: x.w.chatId,
    authorAgentId: x.aliceId,
    peerAgentId: x.bobId,
  });
}

const P = (
  kind: string,
  key: string | null,
  streamId: string | null,
  generation: string | null,
  position: string | null,
  detail: string,
): DoctorProblem => ({
  kind,
  key,
  streamId,
  generation,
  position,
  detail,
});

/** The compact message record at `position`, changed by `edit`, stored back. */
async function editCompact(x: World, position: number, edit: (r: unknown[]) => void, generation = 1): Promise<void> {
  const r = [...x.get<unknown[]>(x.rec(position, generation))];
  edit(r);
  await x.put(x.rec(position, generation), r);
}

const kidOf = (x: World, position: number) => x.get<unknown[]>(x.rec(position))[6] as string;

describe('doctor checks, one edited value at a time', () => {
  it('a healthy store: no problem, every message counted', async () => {
    const x = await world();
    const r = await x.doctor();
    expect(r.problems).toEqual([]);
    expect(r.counts).toEqual({ values: 32, agents: 2, chats: 1, streams: 2, records: 6, messages: 5, operations: 3 });
  });

  it('a record whose own fields name another stream, generation or position', async () => {
    const x = await world();
    const S = x.w.streamId;
    await x.put(x.rec(2), { ...fullRecord(x, 2), streamId: 'chat_x:agt_y' });
    await x.put(x.rec(3), { ...fullRecord(x, 3), generation: '2' });
    await x.put(x.rec(4), { ...fullRecord(x, 4), position: '9' });
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(2), S, '1', '2', 'the record names chat_x:agt_y generation 1 position 2'),
      P('record', x.rec(3), S, '1', '3', `the record names ${S} generation 2 position 3`),
      P('record', x.rec(4), S, '1', '4', `the record names ${S} generation 1 position 9`),
    ]);
  });

  it('a wrapper naming another chat, or another author', async () => {
    const x = await world();
    const S = x.w.streamId;
    const r2 = fullRecord(x, 2);
    await x.put(x.rec(2), { ...r2, wrapper: { ...r2.wrapper, chatId: 'chat_other' } });
    const r5 = fullRecord(x, 5);
    await x.put(x.rec(5), { ...r5, wrapper: { ...r5.wrapper, authorAgentId: x.bobId } });
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(2), S, '1', '2', 'the wrapper names another chat or author'),
      P('record', x.rec(5), S, '1', '5', 'the wrapper names another chat or author'),
    ]);
  });

  it('content that does not match its hash; a hash and content that the signature does not cover', async () => {
    const x = await world();
    const S = x.w.streamId;
    await editCompact(x, 3, (r) => (r[4] = 'changed'));
    await editCompact(x, 4, (r) => {
      r[4] = 'changed too';
      r[5] = contentSha256('changed too');
    });
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(3), S, '1', '3', 'contentSha256 does not match the content'),
      P('record', x.rec(4), S, '1', '4', `the signature does not verify (kid ${kidOf(x, 4)})`),
    ]);
  });

  it('createdAt going backwards is found; an equal one is not', async () => {
    const x = await world();
    const S = x.w.streamId;
    const at4 = x.get<unknown[]>(x.rec(4))[8] as string;
    // Records 4 and 5 may have been signed in the same millisecond: then the edit changes
    // nothing and record 5's signature still verifies.
    const at5 = x.get<unknown[]>(x.rec(5))[8] as string;
    await editCompact(x, 3, (r) => (r[8] = '2000-01-01T00:00:00.000Z'));
    await editCompact(x, 5, (r) => (r[8] = at4));
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(3), S, '1', '3', `the signature does not verify (kid ${kidOf(x, 3)})`),
      P('record', x.rec(3), S, '1', '3', 'createdAt goes backwards'),
      ...(at5 === at4 ? [] : [P('record', x.rec(5), S, '1', '5', `the signature does not verify (kid ${kidOf(x, 5)})`)]),
    ]);
  });

  it('missing records: at the start of the retained range and in the middle, marked from the first', async () => {
    const x = await world();
    const S = x.w.streamId;
    await x.del(x.rec(0));
    await x.del(x.rec(3));
    const r = await x.doctor(true);
    expect(r.problems).toEqual([
      P('record', null, S, '1', '0', 'positions 0..0 are missing'),
      P('record', null, S, '1', '3', 'positions 3..3 are missing'),
      P('record', x.rec(4), S, '1', '4', `record 2 of operation ${x.ops[1]} does not follow its operation's records`),
    ]);
    expect(r.corruptStreams.map((c) => [c.streamId, c.generation, c.fromPosition])).toEqual([[S, '1', '0']]);
  });

  it('a gap in the middle marks the stream from the gap', async () => {
    const x = await world();
    const S = x.w.streamId;
    await x.del(x.rec(3));
    const r = await x.doctor(true);
    expect(r.corruptStreams.map((c) => [c.streamId, c.generation, c.fromPosition])).toEqual([[S, '1', '3']]);
  });

  it('a record at the head', async () => {
    const x = await world();
    const S = x.w.streamId;
    await x.put(x.rec(6), x.get(x.rec(5)));
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(6), S, '1', '6', 'a record at or past the head (6)'),
      P('record', x.rec(6), S, '1', '6', `operation ${x.ops[2]} is missing or does not start here`),
    ]);
  });

  it('a record past the end of a sealed generation, and one missing inside it', async () => {
    const x = await world();
    const S = x.w.streamId;
    await x.s.streams.reset(S, 'test');
    await x.put(x.rec(6), x.get(x.rec(5)));
    await x.del(x.rec(3));
    expect((await x.doctor()).problems).toEqual([
      P('record', null, S, '1', '3', 'positions 3..3 are missing'),
      P('record', x.rec(4), S, '1', '4', `record 2 of operation ${x.ops[1]} does not follow its operation's records`),
      P('record', x.rec(6), S, '1', '6', "a record past the sealed generation's end (6)"),
      P('record', x.rec(6), S, '1', '6', `operation ${x.ops[2]} is missing or does not start here`),
    ]);
  });

  it('operations: missing, and one ending early', async () => {
    const x = await world();
    const S = x.w.streamId;
    const opKey = (i: number) => K.operation(S, x.ops[i]!);
    const op1 = x.get<CompactOperation>(opKey(1));
    await x.del(opKey(0));
    await x.put(opKey(1), [op1[0], op1[1], 4, op1[3], op1[4], op1[5]]);
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(1), S, '1', '1', `operation ${x.ops[0]} is missing or does not start here`),
      P('record', x.rec(4), S, '1', '4', "the record lies past its operation's end (4)"),
    ]);
  });

  it('operations of another generation, or starting elsewhere, and their log entries', async () => {
    const x = await world([3, 3]);
    const S = x.w.streamId;
    const opKey = (i: number) => K.operation(S, x.ops[i]!);
    const [g0, f0, n0, ...rest0] = x.get<CompactOperation>(opKey(0));
    const [g1, f1, n1, ...rest1] = x.get<CompactOperation>(opKey(1));
    expect([g0, f0, n0, g1, f1, n1]).toEqual([1, 1, 4, 1, 4, 7]);
    await x.put(opKey(0), [2, f0, n0, ...rest0]);
    await x.put(opKey(1), [g1, 5, n1, ...rest1]);
    const notFollowing = (p: number, i: number, op: string) =>
      P('record', x.rec(p), S, '1', String(p), `record ${i} of operation ${op} does not follow its operation's records`);
    expect((await x.doctor()).problems).toEqual([
      P('operation', opKey(0), S, '2', '1', `the operation log has no entry for ${x.ops[0]} at 1`),
      P('operation', opKey(1), S, '1', '5', `the operation log has no entry for ${x.ops[1]} at 5`),
      P('record', x.rec(1), S, '1', '1', `operation ${x.ops[0]} is missing or does not start here`),
      notFollowing(2, 1, x.ops[0]!),
      notFollowing(3, 2, x.ops[0]!),
      P('record', x.rec(4), S, '1', '4', `operation ${x.ops[1]} is missing or does not start here`),
      notFollowing(5, 1, x.ops[1]!),
      notFollowing(6, 2, x.ops[1]!),
    ]);
  });

  it('records of an operation out of order, or of another operation', async () => {
    const x = await world([3, 3]);
    const S = x.w.streamId;
    await editCompact(x, 3, (r) => (r[2] = 1));
    await editCompact(x, 5, (r) => (r[1] = x.ops[0]));
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(3), S, '1', '3', `record 1 of operation ${x.ops[0]} does not follow its operation's records`),
      P('record', x.rec(5), S, '1', '5', `record 1 of operation ${x.ops[0]} does not follow its operation's records`),
      // The record of another operation did not advance op 1's records: its next one is out of order too.
      P('record', x.rec(6), S, '1', '6', `record 2 of operation ${x.ops[1]} does not follow its operation's records`),
    ]);
  });

  it('a trim that cut an operation in two is healthy; its operation missing or moved is found', async () => {
    const x = await world([1, 3, 1]);
    const S = x.w.streamId;
    await x.s.streams.trim(S, 3, true);
    expect((await x.doctor()).problems).toEqual([]);
    const opKey = K.operation(S, x.ops[1]!);
    const [g, f, n, ...rest] = x.get<CompactOperation>(opKey);
    expect([g, f, n]).toEqual([1, 2, 5]);
    await x.put(opKey, [g, 3, n, ...rest]);
    const moved = await x.doctor();
    expect(moved.problems).toEqual([
      P('operation', opKey, S, '1', '3', `the operation log has no entry for ${x.ops[1]} at 3`),
      P('record', x.rec(3), S, '1', '3', `operation ${x.ops[1]} is missing or does not cover record 1 here`),
      P('record', x.rec(4), S, '1', '4', `record 2 of operation ${x.ops[1]} does not follow its operation's records`),
    ]);
    await x.put(opKey, [2, f, n, ...rest]);
    expect((await x.doctor()).problems).toEqual([
      P('operation', opKey, S, '2', '2', `the operation log has no entry for ${x.ops[1]} at 2`),
      P('record', x.rec(3), S, '1', '3', `operation ${x.ops[1]} is missing or does not cover record 1 here`),
      P('record', x.rec(4), S, '1', '4', `record 2 of operation ${x.ops[1]} does not follow its operation's records`),
    ]);
    await x.del(opKey);
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(3), S, '1', '3', `operation ${x.ops[1]} is missing or does not cover record 1 here`),
      P('record', x.rec(4), S, '1', '4', `record 2 of operation ${x.ops[1]} does not follow its operation's records`),
    ]);
  });

  it('a trim at the start of an operation: the record at the retained start begins it', async () => {
    const x = await world([1, 3, 1]);
    const S = x.w.streamId;
    await x.s.streams.trim(S, 2, true);
    await x.put(K.operation(S, x.ops[1]!), [1, 2, 4, ...x.get<CompactOperation>(K.operation(S, x.ops[1]!)).slice(3)]);
    expect((await x.doctor()).problems).toEqual([P('record', x.rec(4), S, '1', '4', "the record lies past its operation's end (4)")]);
  });

  it('the operation log: an entry missing, or naming another operation', async () => {
    const x = await world();
    const S = x.w.streamId;
    await x.del(K.opLog(S, 1, 2));
    await x.put(K.opLog(S, 1, 5), x.ops[0]);
    expect((await x.doctor()).problems).toEqual([
      P('operation', K.operation(S, x.ops[1]!), S, '1', '2', `the operation log has no entry for ${x.ops[1]} at 2`),
      P('operation', K.operation(S, x.ops[2]!), S, '1', '5', `the operation log has no entry for ${x.ops[2]} at 5`),
    ]);
  });

  it('the message-id index: pointing at another record is found; at a trimmed one is not', async () => {
    const x = await world();
    const S = x.w.streamId;
    const clientId = (p: number) => x.get<unknown[]>(x.rec(p))[3] as string;
    const index = (p: number) => K.messageId(S, 1, clientId(p));
    expect(x.get(index(2))).toBe('2');
    await x.put(index(2), '3');
    await x.put(K.messageId(S, 1, 'gone'), '99');
    expect((await x.doctor()).problems).toEqual([
      P('index', index(2), S, '1', '3', 'the message-id index points at position 3, which holds another record'),
    ]);
  });

  it('the directory: username, token, pair and member indexes, and a stream head missing', async () => {
    const x = await world();
    const alice = x.get<{ id: string; username: string; tokenHash: string }>(K.agent(x.aliceId));
    const bob = x.get<{ id: string; username: string; tokenHash: string }>(K.agent(x.bobId));
    const chat = x.get<{ id: string; agentAId: string; agentBId: string }>(K.chat(x.w.chatId));
    await x.del(K.username(alice.username));
    await x.put(K.token(bob.tokenHash), alice.id);
    await x.del(K.pair(chat.agentAId, chat.agentBId));
    await x.del(K.member(x.bobId, chat.id));
    const bobStream = `${chat.id}:${x.bobId}`;
    await x.del(K.stream(bobStream));
    const r = await x.doctor();
    expect(r.problems).toEqual(
      expect.arrayContaining([
        P('directory', K.agent(alice.id), null, null, null, `the username index does not lead to agent ${alice.id}`),
        P(
          'directory',
          K.agent(bob.id),
          null,
          null,
          null,
          `the token index does not lead to agent ${bob.id}: its token cannot authenticate (rotate it)`,
        ),
        P('directory', K.chat(chat.id), null, null, null, `the pair index does not lead to chat ${chat.id}`),
        P('directory', K.chat(chat.id), null, null, null, `chat ${chat.id} is missing from ${x.bobId}'s chat list`),
        P('head', K.stream(bobStream), bobStream, null, null, 'the stream head is missing, though its chat exists'),
      ]),
    );
    expect(r.problems).toHaveLength(5);
  });

  it("a stream head that fails its check: the records are still checked, with the chat's peer", async () => {
    const x = await world();
    const S = x.w.streamId;
    const y = await withRawValues(x, [[K.stream(S), 'garbage']]);
    const r = await y.doctor();
    // Nothing about the records: they were expanded with the chat's author and peer, so each
    // signature (over chatId, from, to) verified.
    expect(r.problems).toEqual([
      P('head', K.stream(S), S, null, null, 'the stream head fails its check (checksum mismatch)'),
      P('checksum', K.stream(S), S, null, null, 'the value fails its checksum'),
    ]);
  });

  it('an unreadable record is a checksum problem, and the message-id index pointing at it is reported too', async () => {
    const x = await world();
    const S = x.w.streamId;
    const index = K.messageId(S, 1, x.get<unknown[]>(x.rec(2))[3] as string);
    const y = await withRawValues(x, [[x.rec(2), 'garbage']]);
    const r = await y.doctor();
    const notFollowing = (p: number, i: number) =>
      P('record', x.rec(p), S, '1', String(p), `record ${i} of operation ${x.ops[1]} does not follow its operation's records`);
    const pastEnd = (p: number) => P('record', x.rec(p), S, '1', String(p), "the record lies past its operation's end (2)");
    expect(r.problems).toEqual([
      P('checksum', x.rec(2), S, '1', '2', 'the value fails its checksum'),
      P('record', null, S, '1', '2', 'positions 2..2 are missing'),
      notFollowing(3, 1),
      pastEnd(3),
      notFollowing(4, 2),
      pastEnd(4),
      P('index', index, S, '1', '2', 'the message-id index points at position 2, which holds another record'),
    ]);
  });

  it('a healthy store marks nothing', async () => {
    const x = await world();
    const r = await x.doctor(true);
    expect(r.problems).toEqual([]);
    expect(r.corruptStreams).toEqual([]);
  });

  it('each sealed generation is checked against its own end', async () => {
    const x = await world();
    const S = x.w.streamId;
    await x.s.streams.reset(S, 'first');
    const c2 = await x.s.streams.claim(x.w.alice, { streamId: S, replace: true });
    await appendOp(x, c2.coordinatorToken, 1, 'g2');
    await x.s.streams.reset(S, 'second');
    // Generation 2 holds its fence (0) and one message (1): a copy of that message at 2 lies past its end (2).
    await x.put(x.rec(2, 2), x.get(x.rec(1, 2)));
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(2, 2), S, '2', '2', "a record past the sealed generation's end (2)"),
      P('record', x.rec(2, 2), S, '2', '2', `operation ${x.get<unknown[]>(x.rec(1, 2))[1] as string} is missing or does not start here`),
    ]);
  });

  it("a sealed generation's first record is checked against its own start, not the current generation's", async () => {
    const x = await world();
    const S = x.w.streamId;
    await x.s.streams.reset(S, 'test');
    const c2 = await x.s.streams.claim(x.w.alice, { streamId: S, replace: true });
    await appendOp(x, c2.coordinatorToken, 2, 'g2');
    await x.s.streams.trim(S, 1, true);
    await x.del(x.rec(0, 1));
    expect((await x.doctor()).problems).toEqual([P('record', null, S, '1', '0', 'positions 0..0 are missing')]);
  });

  it('records missing at the start, up to a record inside an operation: not a trim, so it does not continue the operation', async () => {
    const x = await world();
    const S = x.w.streamId;
    for (const p of [0, 1, 2]) await x.del(x.rec(p));
    expect((await x.doctor()).problems).toEqual([
      P('record', null, S, '1', '0', 'positions 0..2 are missing'),
      P('record', x.rec(3), S, '1', '3', `record 1 of operation ${x.ops[1]} does not follow its operation's records`),
      P('record', x.rec(4), S, '1', '4', `record 2 of operation ${x.ops[1]} does not follow its operation's records`),
    ]);
  });

  it('a fence ends the operation before it: a record after it cannot continue that operation', async () => {
    const x = await world([2]);
    const S = x.w.streamId;
    const c2 = await x.s.streams.claim(x.w.alice, { streamId: S, replace: true });
    await appendOp(x, c2.coordinatorToken, 1, 'after');
    expect((await x.doctor()).problems).toEqual([]);
    // Fence at 3; the record at 4 now claims to be record 2 of the operation at 1–2.
    await editCompact(x, 4, (r) => {
      r[1] = x.ops[0];
      r[2] = 2;
    });
    expect((await x.doctor()).problems).toEqual([
      P('record', x.rec(4), S, '1', '4', `record 2 of operation ${x.ops[0]} does not follow its operation's records`),
    ]);
  });

  it("an unreadable head of the chat's second agent: its records are checked with the first agent as the peer", async () => {
    const x = await world();
    const bobStream = `${x.w.chatId}:${x.bobId}`;
    const claim = await x.s.streams.claim(x.w.bob, { streamId: bobStream, replace: false });
    await x.s.streams.append(x.w.bob, {
      streamId: bobStream,
      coordinatorToken: claim.coordinatorToken,
      generation: 1,
      expectedPosition: 1,
      operationId: 'op-bob',
      records: [{ type: 'chat.message', messageId: 'b-0', content: 'from bob' }],
    });
    // Both streams hold messages; the head lost is the one of the chat's agentB (which of the two that is, the daemon decides).
    const chat = x.get<{ agentAId: string; agentBId: string }>(K.chat(x.w.chatId));
    const second = `${x.w.chatId}:${chat.agentBId}`;
    const y = await withRawValues(x, [[K.stream(second), 'garbage']]);
    expect((await y.doctor()).problems).toEqual([
      P('head', K.stream(second), second, null, null, 'the stream head fails its check (checksum mismatch)'),
      P('checksum', K.stream(second), second, null, null, 'the value fails its checksum'),
    ]);
  });

  it('an unreadable head and no chat row: the records are checked (and fail their signatures) instead of the doctor failing', async () => {
    const x = await world([1]);
    const S = x.w.streamId;
    await x.del(K.chat(x.w.chatId));
    const y = await withRawValues(x, [[K.stream(S), 'garbage']]);
    const r = await y.doctor();
    expect(r.problems).toEqual(
      expect.arrayContaining([
        P('head', K.stream(S), S, null, null, 'the stream head fails its check (checksum mismatch)'),
        P('record', x.rec(1), S, '1', '1', `the signature does not verify (kid ${kidOf(y, 1)})`),
      ]),
    );
  });
});

// Pins three behaviours of src/daemon/store/leveldb/doctor-checks.ts that the tests above leave
// unchecked:
// - 71:15 `damaged = true` → `false`: `damaged` only decides whether doctor.ts marks the stream
//   after `checkRecord`. Every mark asserted so far comes from a gap or a checksum failure,
//   which doctor.ts marks itself, and "a healthy store marks nothing" marks nothing either way.
//   Here a record's own problem (its content no longer matching its hash) must mark the stream.
// - 86:28 `scan.expect === null` → `true`: a trim may leave the first retained record in the
//   middle of its operation, and only the first record of a generation may continue it. The
//   current generation's records below its start are skipped by doctor.ts before this check,
//   a sealed generation's are not, and no test kept such a record in a sealed generation.
// - 119:9 `scan.lastCreatedAt !== null` → `true`: with no createdAt before it, a string compared
//   with null is compared as a number, so a createdAt of "-1" is "less" than null. The existing
//   createdAt test edits a later message, never a generation's first.
// In process, on a real LevelDB in a temp dir (test/helpers/in-process-store.ts), like the tests
// above: values are edited through Storage, so their checksums are valid
// and only the check in question can notice.
describe('doctor checks of signatures, keys and operation records', () => {
  const opened: InProcessStore[] = [];
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close().catch(() => {});
  });

  type Writer = Awaited<ReturnType<typeof chatWithWriter>>;

  interface World {
    s: InProcessStore;
    w: Writer;
    /** The operation ids in append order. */
    ops: string[];
    rec: (position: number, generation?: number) => string;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the stored shape
    get: <T>(key: string) => T;
    put: (key: string, value: unknown) => Promise<void>;
    doctor: (mark?: boolean) => ReturnType<typeof checkStore>;
  }

  /**
   * alice's stream: the claim's fence at 0, then one operation of `size` messages per entry of
   * `shape` (the default: 1 at 1, 2..4 and 5; nextPosition 6).
   */
  async function world(shape: number[] = [1, 3, 1]): Promise<World> {
    const s = await openInProcess();
    opened.push(s);
    const w = await chatWithWriter(s);
    const ops: string[] = [];
    for (const [i, size] of shape.entries()) ops.push(await appendOperation(s, w, size, `m${i}`));
    return {
      s,
      w,
      ops,
      rec: (position, generation = 1) => K.record(w.streamId, generation, position),
      get: <T>(key: string) => s.store.storage.get<T>(key)!,
      put: (key, value) => s.store.storage.write([{ type: 'put', key, value }]),
      doctor: (mark = false) => checkStore(s.store.storage, s.integrity, new Signer(path.join(s.dir, 'keys')), { mark }),
    };
  }

  /** The compact message record at `position` (generation 1), changed by `edit`, stored back. */
  async function editCompact(x: World, position: number, edit: (r: unknown[]) => void): Promise<void> {
    const r = [...x.get<unknown[]>(x.rec(position))];
    edit(r);
    await x.put(x.rec(position), r);
  }

  const P = (
    kind: string,
    key: string | null,
    streamId: string | null,
    generation: string | null,
    position: string | null,
    detail: string,
  ): DoctorProblem => ({ kind, key, streamId, generation, position, detail });

  const kidOf = (x: World, position: number) => x.get<unknown[]>(x.rec(position))[6] as string;

  describe('doctor checks: a record’s own problem, a sealed trimmed generation, a first createdAt', () => {
    it('a record whose content no longer matches its hash marks the stream from that record', async () => {
      const x = await world();
      const S = x.w.streamId;
      await editCompact(x, 3, (r) => (r[4] = 'changed'));
      const r = await x.doctor(true);
      expect(r.problems).toEqual([P('record', x.rec(3), S, '1', '3', 'contentSha256 does not match the content')]);
      // No gap and no checksum failure: only the record's own check can have asked for the mark.
      expect(r.corruptStreams.map((c) => [c.streamId, c.generation, c.fromPosition])).toEqual([[S, '1', '3']]);
      expect(x.s.integrity.list()).toHaveLength(1);
    });

    it('a sealed generation: a record a crashed trim left below its start is not damage, and nothing is marked', async () => {
      // Operation 1 holds 2..4. The trim to 4 cuts it in two; record 3 is put back with its
      // stored value (what a trim of over 10,000 records cut off by a crash after its first delete
      // chunk leaves), and the reset seals generation 1 with its start at 4 before any compaction
      // removes record 3 again (compaction sweeps only the current generation).
      const x = await world([1, 3, 1]);
      const S = x.w.streamId;
      const raw3 = x.get<unknown>(x.rec(3));
      expect(await x.s.streams.trim(S, 4, true)).toEqual({ firstPosition: '4' });
      await x.put(x.rec(3), raw3);
      await x.s.streams.reset(S, 'test');
      expect(x.s.streams.get(x.w.alice, S)).toMatchObject({ generation: '2', firstPosition: '0', nextPosition: '0' });
      // Record 3 is trimmed already (reads of generation 1 fail closed below 4), as a leftover of
      // the current generation is: the doctor reported it and the healthy record 4 after it, and
      // with marking on (the default) marked the retained generation corrupt.
      const r = await x.doctor(true);
      expect(r.problems).toEqual([]);
      expect(r.corruptStreams).toEqual([]);
      const batch = await x.s.streams.read(x.w.bob, { streamId: S, generation: 1, fromPosition: 4, limit: 10, maxBytes: PAGE_BYTES });
      expect(batch.records.map((rec) => rec.position)).toEqual(['4', '5']);
    });

    it('the sealed generation without the leftover record: the record at its start continues the trimmed operation', async () => {
      // The same store without record 3 put back: record 4 is the generation's first and healthy.
      const x = await world([1, 3, 1]);
      const S = x.w.streamId;
      await x.s.streams.trim(S, 4, true);
      await x.s.streams.reset(S, 'test');
      expect((await x.doctor()).problems).toEqual([]);
    });

    it('a first message with createdAt "-1" fails its signature only; nothing before it to go backwards from', async () => {
      const x = await world([2]);
      const S = x.w.streamId;
      // Position 0 is the claim's fence (no createdAt checked); 1 is the generation's first message.
      await editCompact(x, 1, (r) => (r[8] = '-1'));
      expect((await x.doctor()).problems).toEqual([
        P('record', x.rec(1), S, '1', '1', `the signature does not verify (kid ${kidOf(x, 1)})`),
      ]);
    });
  });
});
