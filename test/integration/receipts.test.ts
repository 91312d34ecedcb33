// Receipts (§5 "Receipt", §6 streams.append / streams.get `acknowledged`) over the real socket:
// a receipt is accepted only for a batch the daemon presented to this agent, ending where the
// receipt says, moving forward; nothing else ever acknowledges; a reply and its receipt commit
// as one operation, also across SIGKILL.

import { describe, expect, it } from 'vitest';
import type { ChatReceipt, StoredRecord } from '../../src/shared/types.js';
import { type Wire, connectAs, ok, readAll, uniq, receiptOf, type Result } from '../helpers/wire-fixtures.js';
import {
  StreamWriter,
  batchesOf,
  expectError,
  messages,
  receipt,
  setupChat,
  streamState,
  type ReadingChat,
} from '../helpers/reading-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';

const { daemon, admin } = useDaemon();

/** bob reads alice's stream from `from` (limit optional) and returns the batch. */
async function bobReads(c: ReadingChat, from: string, limit?: number): Promise<Result<'streams.read'>> {
  const params: Record<string, unknown> = { streamId: c.streamA, generation: '1', fromPosition: from };
  if (limit !== undefined) params.limit = limit;
  return ok(await c.bob.client.call('streams.read', params), 'streams.read');
}

/** Changes one character in the middle of a token (never the last, whose low bits may be ignored). */
function tamper(token: string): string {
  const i = Math.floor(token.length / 3);
  const ch = token[i] === 'A' ? 'B' : 'A';
  return token.slice(0, i) + ch + token.slice(i + 1);
}

describe('receipts', () => {
  it('two receipts in one append (two batches, moving forward) are one operation, the second one counts; on both backends', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('first', 2);
    const one = await bobReads(c, '0');
    await c.wa.send('second', 2);
    const two = await bobReads(c, one.nextPosition);
    const before = c.wb.next;
    const res = await c.wb.append([
      receipt(c.streamA, '1', one.nextPosition, one.batchId),
      receipt(c.streamA, '1', two.nextPosition, two.batchId),
    ]);
    expect(res).toMatchObject({ firstPosition: before, nextPosition: (BigInt(before) + 2n).toString(), duplicate: false });
    expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: two.nextPosition });
  });

  it('acknowledges a batch bob read with streams.read; streams.get on the peer stream shows it', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('hello', 3);
    expect((await streamState(admin(), c.streamA)).acknowledged).toBeNull();

    const batch = await bobReads(c, '0');
    expect(typeof batch.batchId).toBe('string');
    expect(batch.nextPosition).toBe(c.wa.next);
    const before = c.wb.next;
    const res = await c.wb.append([receipt(c.streamA, '1', batch.nextPosition, batch.batchId)]);
    expect(res).toMatchObject({ firstPosition: before, nextPosition: (BigInt(before) + 1n).toString(), duplicate: false });

    for (const viewer of [admin(), c.alice.client, c.bob.client]) {
      const st = await streamState(viewer, c.streamA);
      expect(st.acknowledged).toEqual({ generation: '1', nextPosition: batch.nextPosition });
    }
    // The receipt is a stored record of bob's stream, carrying exactly what was sent.
    const stored = ok(await admin().call('streams.read', { streamId: c.streamB, generation: '1', fromPosition: before }));
    expect(stored.records).toHaveLength(1);
    expect(stored.records[0]!.wrapper).toMatchObject({
      type: 'chat.receipt',
      authorAgentId: c.bob.id,
      recordIndex: 0,
      receipt: { peerStreamId: c.streamA, peerGeneration: '1', nextPosition: batch.nextPosition, batchId: batch.batchId },
    });
    // bob's own stream is not acknowledged by his own receipt.
    expect((await streamState(admin(), c.streamB)).acknowledged).toBeNull();
  });

  it('rejects a forged batchId (one character changed) with INVALID_RECEIPT and a reason, writing nothing', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('forge', 2);
    const batch = await bobReads(c, '0');
    const before = c.wb.next;
    const data = expectError(await c.wb.tryAppend([receipt(c.streamA, '1', batch.nextPosition, tamper(batch.batchId))]), 'INVALID_RECEIPT');
    expect(data.reason).toBe('UNKNOWN_BATCH');
    const data2 = expectError(await c.wb.tryAppend([receipt(c.streamA, '1', batch.nextPosition, 'not-a-batch-id')]), 'INVALID_RECEIPT');
    expect(data2.reason).toBe('UNKNOWN_BATCH');
    expect((await streamState(admin(), c.streamB)).nextPosition).toBe(before);
    expect((await streamState(admin(), c.streamA)).acknowledged).toBeNull();
  });

  it('rejects a batchId that was presented to another reader (admin, or alice herself)', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('other', 2);
    const end = c.wa.next;
    const adminBatch = ok(await admin().call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
    const aliceBatch = ok(await c.alice.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
    expect(adminBatch.nextPosition).toBe(end);
    expect(aliceBatch.nextPosition).toBe(end);
    for (const [who, b] of [
      ['admin', adminBatch],
      ['alice', aliceBatch],
    ] as const) {
      const data = expectError(await c.wb.tryAppend([receipt(c.streamA, '1', end, b.batchId)]), 'INVALID_RECEIPT', who);
      expect(data.reason, who).toBe('NOT_PRESENTED');
    }
    expect((await streamState(admin(), c.streamA)).acknowledged).toBeNull();
    // The same range read by bob himself is accepted.
    const own = await bobReads(c, '0');
    await c.wb.append([receipt(c.streamA, '1', end, own.batchId)]);
    expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: end });
  });

  it('rejects a receipt whose nextPosition is not the end of the presented batch', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('mid', 6);
    const batch = await bobReads(c, '0', 4);
    expect(batch.nextPosition).toBe('4');
    for (const wrong of ['3', '5', c.wa.next]) {
      const data = expectError(
        await c.wb.tryAppend([receipt(c.streamA, '1', wrong, batch.batchId)]),
        'INVALID_RECEIPT',
        `nextPosition ${wrong}`,
      );
      expect(data.reason, `nextPosition ${wrong}`).toBe('BATCH_MISMATCH');
    }
    // Wrong peer generation or peer stream with an otherwise good batch.
    const gen2 = expectError(await c.wb.tryAppend([receipt(c.streamA, '2', '4', batch.batchId)]), 'INVALID_RECEIPT', 'peerGeneration 2');
    expect(gen2.reason).toBe('BATCH_MISMATCH');
    const own = expectError(
      await c.wb.tryAppend([receipt(c.streamB, '1', '4', batch.batchId)]),
      'INVALID_RECEIPT',
      "bob's own stream as peerStreamId",
    );
    expect(own.reason).toBe('WRONG_STREAM');
    expect((await streamState(admin(), c.streamA)).acknowledged).toBeNull();
    await c.wb.append([receipt(c.streamA, '1', '4', batch.batchId)]);
    expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: '4' });
  });

  it('rejects a repeated receipt for the same batch, and one for an earlier batch (not moving forward)', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('rep', 6);
    const early = await bobReads(c, '0', 3);
    const later = await bobReads(c, '0');
    await c.wb.append([receipt(c.streamA, '1', later.nextPosition, later.batchId)]);
    const again = expectError(
      await c.wb.tryAppend([receipt(c.streamA, '1', later.nextPosition, later.batchId)]),
      'INVALID_RECEIPT',
      'same batch again',
    );
    expect(again.reason).toBe('NOT_FORWARD');
    const earlier = expectError(
      await c.wb.tryAppend([receipt(c.streamA, '1', early.nextPosition, early.batchId)]),
      'INVALID_RECEIPT',
      'earlier batch',
    );
    expect(earlier.reason).toBe('NOT_FORWARD');
    // Two receipts for the same batch inside one operation: the second does not move forward.
    await c.wa.send('rep2', 2);
    const fresh = await bobReads(c, later.nextPosition);
    const before = c.wb.next;
    const twice = expectError(
      await c.wb.tryAppend([
        receipt(c.streamA, '1', fresh.nextPosition, fresh.batchId),
        receipt(c.streamA, '1', fresh.nextPosition, fresh.batchId),
      ]),
      'INVALID_RECEIPT',
      'duplicate receipt in one operation',
    );
    expect(twice.reason).toBe('NOT_FORWARD');
    expect((await streamState(admin(), c.streamB)).nextPosition).toBe(before);
    expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: later.nextPosition });
  });

  it('accepts the batchId of a chats.batch notification', async () => {
    const c = await setupChat(daemon(), admin());
    const follower = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await follower.call('chats.follow', { chatId: c.chatId }));
      await c.wa.send('pushed', 3);
      const end = c.wa.next;
      const got = await waitFor(
        () => batchesOf(follower, sub.subscriptionId).find((b) => b.streamId === c.streamA && b.nextPosition === end),
        "a chats.batch ending at alice's head",
        5_000,
      );
      await c.wb.append([receipt(c.streamA, '1', got.nextPosition, got.batchId)]);
      expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: end });
    } finally {
      follower.close();
    }
  });

  it('never acknowledges on history reads, notifications, plain streams.read or unrelated sends', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('first', 2);
    const b1 = await bobReads(c, '0');
    await c.wb.append([receipt(c.streamA, '1', b1.nextPosition, b1.batchId)]);
    const acked = { generation: '1', nextPosition: b1.nextPosition };

    const follower = await connectAs(daemon().socketPath, c.bob.token);
    try {
      const sub = ok(await follower.call('chats.follow', { chatId: c.chatId }));
      await c.wa.send('second', 3);
      const end = c.wa.next;
      await waitFor(
        () => batchesOf(follower, sub.subscriptionId).some((b) => b.streamId === c.streamA && b.nextPosition === end),
        'the pushed batch',
        5_000,
      );
      ok(await c.bob.client.call('chats.history', { chatId: c.chatId }));
      ok(await c.bob.client.call('chats.history', { chatId: c.chatId, direction: 'forward', limit: 500 }));
      ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: b1.nextPosition }));
      await c.wb.send('unrelated', 2);
      await sleep(100); // nothing acknowledges late either: no receipt may take effect within 100 ms
      for (const viewer of [admin(), c.alice.client, c.bob.client]) {
        expect((await streamState(viewer, c.streamA)).acknowledged).toEqual(acked);
      }
      // A fresh chat that was only read and followed stays unacknowledged.
      const d = await setupChat(daemon(), admin());
      await d.wa.send('x', 1);
      ok(await d.bob.client.call('chats.history', { chatId: d.chatId }));
      ok(await d.bob.client.call('streams.read', { streamId: d.streamA, generation: '1', fromPosition: '0' }));
      await d.wb.send('y', 1);
      expect((await streamState(admin(), d.streamA)).acknowledged).toBeNull();
    } finally {
      follower.close();
    }
  });

  it('commits a reply and its receipt as one operation at consecutive positions, or neither', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('question', 2);
    const batch = await bobReads(c, '0');
    const before = c.wb.next;
    const operationId = uniq('reply');
    const res = await c.wb.append([...messages('answer', 1), receipt(c.streamA, '1', batch.nextPosition, batch.batchId)], operationId);
    expect(res.firstPosition).toBe(before);
    expect(res.nextPosition).toBe((BigInt(before) + 2n).toString());
    expect(res.records).toHaveLength(2);

    const stored = ok(await admin().call('streams.read', { streamId: c.streamB, generation: '1', fromPosition: before }));
    expect(stored.records.map((r) => [r.position, r.wrapper.operationId, r.wrapper.recordIndex, r.wrapper.type])).toEqual([
      [before, operationId, 0, 'chat.message'],
      [(BigInt(before) + 1n).toString(), operationId, 1, 'chat.receipt'],
    ]);
    const op = ok(await admin().call('operations.get', { streamId: c.streamB, operationId }));
    expect(op).toMatchObject({ state: 'committed', generation: '1', firstPosition: before, nextPosition: res.nextPosition });
    expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: batch.nextPosition });

    // With a bad receipt the reply is not written either.
    await c.wa.send('question2', 1);
    const b2 = await bobReads(c, batch.nextPosition);
    const mid = c.wb.next;
    const badOp = uniq('reply-bad');
    const bad = expectError(
      await c.wb.tryAppend([...messages('answer2', 3), receipt(c.streamA, '1', b2.nextPosition, tamper(b2.batchId))], badOp),
      'INVALID_RECEIPT',
    );
    expect(bad.reason).toBe('UNKNOWN_BATCH');
    expect((await streamState(admin(), c.streamB)).nextPosition).toBe(mid);
    expect(ok(await admin().call('operations.get', { streamId: c.streamB, operationId: badOp })).state).toBe('unknown');
  });
});

// ---------------------------------------------------------------------------------------------
// The receipt checks of §3.5 one by one, each by the reason it must answer: a receipt that
// fails one check must not be caught by a later one instead (or, with the check gone, pass).

describe('receipt checks, each by its reason', () => {
  it("WRONG_STREAM: a receipt naming a batch of the reader's own stream is refused and acknowledges nothing", async () => {
    // Guards: "a receipt acknowledges the peer's stream only" (§3.5 WRONG_STREAM). Without the
    // check, bob's batch of his own stream passes every later check (it was presented to him, its
    // generation and end match) and moves the acknowledgement of alice's stream.
    const c = await setupChat(daemon(), admin());
    await c.wa.send('peer', 2);
    await c.wb.send('own', 3);
    const ownBatch = ok(await c.bob.client.call('streams.read', { streamId: c.streamB, generation: '1', fromPosition: '0' }));
    expect(ownBatch.nextPosition).toBe(c.wb.next);
    const before = c.wb.next;
    const data = expectError(
      await c.wb.tryAppend([receipt(c.streamB, '1', ownBatch.nextPosition, ownBatch.batchId)]),
      'INVALID_RECEIPT',
      'receipt of own stream',
    );
    expect(data.reason).toBe('WRONG_STREAM');
    expect((await streamState(admin(), c.streamB)).nextPosition).toBe(before);
    expect((await streamState(admin(), c.streamA)).acknowledged).toBeNull();
    expect((await streamState(admin(), c.streamB)).acknowledged).toBeNull();
  });

  it('STALE_GENERATION: a receipt for a batch of a sealed (pre-reset) generation of alice is refused', async () => {
    // Guards: "a receipt acknowledges the peer's current generation only" (§3.5
    // STALE_GENERATION). The batch is genuine and matches its generation and end, so only this
    // check stands between it and an acknowledgement of a generation that no longer runs.
    const c = await setupChat(daemon(), admin());
    await c.wa.send('old', 4);
    const shown = await bobReads(c, '0');
    expect(shown.nextPosition).toBe('5');
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'stale receipt test' }));
    await c.wa.reclaim();
    await c.wa.send('new', 4);
    expect(c.wa.generation).toBe('2');
    const before = c.wb.next;
    const data = expectError(
      await c.wb.tryAppend([receipt(c.streamA, '1', shown.nextPosition, shown.batchId)]),
      'INVALID_RECEIPT',
      'receipt of sealed generation 1',
    );
    expect(data.reason).toBe('STALE_GENERATION');
    // Read again from the sealed generation after the reset: the same answer.
    const sealed = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }));
    expect(sealed.sealed).toBe(true);
    const again = expectError(
      await c.wb.tryAppend([receipt(c.streamA, '1', sealed.nextPosition, sealed.batchId)]),
      'INVALID_RECEIPT',
      'receipt of a batch read from the sealed generation',
    );
    expect(again.reason).toBe('STALE_GENERATION');
    expect((await streamState(admin(), c.streamB)).nextPosition).toBe(before);
    expect((await streamState(admin(), c.streamA)).acknowledged).toBeNull();
  });

  it('BATCH_MISMATCH: a batch of sealed generation 1 used for generation 2 at the same positions is refused', async () => {
    // Guards: "a batch acknowledges the generation it was presented from" (§3.5 BATCH_MISMATCH
    // compares peerGeneration with the batch's). Generation 2 holds the same positions (fence +
    // 4 messages), so a check of the end alone would let generation 1's batch acknowledge it.
    const c = await setupChat(daemon(), admin());
    await c.wa.send('first', 4);
    const shown = await bobReads(c, '0');
    expect(shown.nextPosition).toBe('5');
    ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'batch mismatch test' }));
    await c.wa.reclaim();
    await c.wa.send('second', 4);
    expect(c.wa.generation).toBe('2');
    expect(c.wa.next).toBe(shown.nextPosition);
    const data = expectError(
      await c.wb.tryAppend([receipt(c.streamA, '2', shown.nextPosition, shown.batchId)]),
      'INVALID_RECEIPT',
      'generation 1 batch for generation 2',
    );
    expect(data.reason).toBe('BATCH_MISMATCH');
    expect((await streamState(admin(), c.streamA)).acknowledged).toBeNull();
    // A batch of generation 2 itself, at the same positions, is accepted.
    const current = ok(await c.bob.client.call('streams.read', { streamId: c.streamA, generation: '2', fromPosition: '0' }));
    expect(current.nextPosition).toBe(shown.nextPosition);
    await c.wb.append([receipt(c.streamA, '2', current.nextPosition, current.batchId)]);
    expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '2', nextPosition: current.nextPosition });
  });
});

// ---------------------------------------------------------------------------------------------
// Atomicity across SIGKILL. Several chats; in each, alice keeps sending and bob keeps answering
// with [reply × k, receipt] operations. After SIGKILL and a restart, no operation is half there.

interface Load {
  chat: ReadingChat;
  bobOps: Map<string, number>; // operationId -> record count sent
  aliceOps: Map<string, number>;
  ackedOps: Set<string>;
  errors: unknown[];
  stop: boolean;
}

async function runAlice(l: Load, client: Wire, w: StreamWriter): Promise<void> {
  let i = 0;
  while (!l.stop) {
    try {
      const operationId = uniq('a');
      const records = messages(`a${i++}`, 1 + (i % 4));
      l.aliceOps.set(operationId, records.length);
      const r = await client.call('streams.append', {
        streamId: w.streamId,
        coordinatorToken: w.token,
        generation: w.generation,
        expectedPosition: w.next,
        operationId,
        records,
      });
      if (r.error) {
        l.errors.push(r.error);
        return;
      }
      w.next = r.result!.nextPosition;
    } catch {
      return; // connection lost
    }
  }
}

async function runBob(l: Load, client: Wire, w: StreamWriter): Promise<void> {
  let from = '0';
  let i = 0;
  while (!l.stop) {
    try {
      const b = await client.call('streams.read', { streamId: l.chat.streamA, generation: '1', fromPosition: from, waitMs: 200 });
      if (b.error) {
        l.errors.push(b.error);
        return;
      }
      if (b.result!.records.length === 0) continue;
      const k = 1 + (i % 17);
      const operationId = `r-${i++}-${uniq('b')}`;
      const records = [...messages(operationId, k, 100), receipt(l.chat.streamA, '1', b.result!.nextPosition, b.result!.batchId)];
      l.bobOps.set(operationId, records.length);
      const r = await client.call('streams.append', {
        streamId: w.streamId,
        coordinatorToken: w.token,
        generation: w.generation,
        expectedPosition: w.next,
        operationId,
        records,
      });
      if (r.error) {
        l.errors.push(r.error);
        return;
      }
      l.ackedOps.add(operationId);
      w.next = r.result!.nextPosition;
      from = b.result!.nextPosition;
    } catch {
      return;
    }
  }
}

describe('receipt atomicity under SIGKILL', () => {
  // A daemon of its own, in a process: the SIGKILL is the subject.
  const { daemon, admin, restart } = useDaemon({ process: true });
  it('leaves every reply+receipt operation whole or absent after a crash mid-load', async () => {
    const CHATS = 4;
    const loads: Load[] = [];
    for (let i = 0; i < CHATS; i++)
      loads.push({
        chat: await setupChat(daemon(), admin()),
        bobOps: new Map(),
        aliceOps: new Map(),
        ackedOps: new Set(),
        errors: [],
        stop: false,
      });
    // A batch presented before the crash, acknowledged only after the restart.
    const keep = await setupChat(daemon(), admin());
    await keep.wa.send('keep', 3);
    const keepBatch = ok(await keep.bob.client.call('streams.read', { streamId: keep.streamA, generation: '1', fromPosition: '0' }));
    const clients = await Promise.all(
      loads.flatMap((l) => [connectAs(daemon().socketPath, l.chat.alice.token), connectAs(daemon().socketPath, l.chat.bob.token)]),
    );
    const loops = loads.flatMap((l, i) => [runAlice(l, clients[2 * i]!, l.chat.wa), runBob(l, clients[2 * i + 1]!, l.chat.wb)]);

    // Some acknowledged replies in every chat, and the kill lands while a reply+receipt of bob is
    // on the wire (sent, not yet answered) in at least one of them.
    await waitFor(
      () => loads.every((l) => l.ackedOps.size >= 25) && loads.some((l) => l.bobOps.size > l.ackedOps.size),
      'some acknowledged replies in every chat and one in flight',
      30_000,
      1,
    );
    const exit = await daemon().kill();
    expect(exit.signal).toBe('SIGKILL');
    for (const l of loads) l.stop = true;
    await Promise.all(loops);
    for (const l of loads) expect(l.errors).toEqual([]);

    await restart();
    keep.wb.client = await daemon().connectAs(keep.bob.token);
    await keep.wb.append([receipt(keep.streamA, '1', keepBatch.nextPosition, keepBatch.batchId)]);
    expect((await streamState(admin(), keep.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: keepBatch.nextPosition });

    for (const [n, l] of loads.entries()) {
      const label = `chat ${n}`;
      const bRecords = await readAll(admin(), l.chat.streamB);
      const aRecords = await readAll(admin(), l.chat.streamA);
      for (const [stream, recs] of [
        [l.chat.streamB, bRecords],
        [l.chat.streamA, aRecords],
      ] as const) {
        const st = await streamState(admin(), stream);
        expect(
          recs.map((r) => r.position),
          `${label} ${stream} contiguous`,
        ).toEqual(Array.from({ length: Number(st.nextPosition) }, (_, i) => String(i)));
      }
      // Group bob's records by operation: every operation whole, in order, at consecutive positions.
      const byOp = new Map<string, StoredRecord[]>();
      for (const r of bRecords) {
        const list = byOp.get(r.wrapper.operationId) ?? [];
        list.push(r);
        byOp.set(r.wrapper.operationId, list);
      }
      let lastReceipt: ChatReceipt | null = null;
      for (const [opId, recs] of byOp) {
        if (recs[0]!.wrapper.type === 'chat.writer-fence') continue;
        const sent = l.bobOps.get(opId);
        expect(sent, `${label} stray operation ${opId}`).toBeDefined();
        expect(recs.length, `${label} ${opId} records present`).toBe(sent);
        recs.forEach((r, i) => {
          expect(r.wrapper.recordIndex, `${label} ${opId}`).toBe(i);
          expect(BigInt(r.position) - BigInt(recs[0]!.position)).toBe(BigInt(i));
        });
        // Every receipt's operation holds its reply messages; the receipt is last.
        expect(
          recs.slice(0, -1).every((r) => r.wrapper.type === 'chat.message'),
          `${label} ${opId} messages`,
        ).toBe(true);
        expect(recs.at(-1)!.wrapper.type, `${label} ${opId} receipt`).toBe('chat.receipt');
        lastReceipt = receiptOf(recs.at(-1));
        const op = ok(await admin().call('operations.get', { streamId: l.chat.streamB, operationId: opId }));
        expect(op, `${label} ${opId}`).toMatchObject({
          state: 'committed',
          firstPosition: recs[0]!.position,
          nextPosition: (BigInt(recs.at(-1)!.position) + 1n).toString(),
        });
      }
      // Every acknowledged operation survived.
      for (const opId of l.ackedOps) expect(byOp.has(opId), `${label} acked ${opId} lost`).toBe(true);
      // Sent but absent operations are reported as never committed.
      for (const opId of l.bobOps.keys()) {
        if (byOp.has(opId)) continue;
        expect(ok(await admin().call('operations.get', { streamId: l.chat.streamB, operationId: opId })).state, `${label} ${opId}`).toBe(
          'unknown',
        );
      }
      // Alice's operations are whole too.
      const aOps = new Map<string, StoredRecord[]>();
      for (const r of aRecords) aOps.set(r.wrapper.operationId, [...(aOps.get(r.wrapper.operationId) ?? []), r]);
      for (const [opId, recs] of aOps) {
        if (recs[0]!.wrapper.type === 'chat.writer-fence') continue;
        expect(recs.length, `${label} alice ${opId} records present`).toBe(l.aliceOps.get(opId));
        expect(
          recs.map((r) => r.wrapper.recordIndex),
          `${label} alice ${opId}`,
        ).toEqual(recs.map((_, i) => i));
      }
      // acknowledged matches the last committed receipt.
      expect(lastReceipt, `${label} at least one receipt survived`).not.toBeNull();
      expect((await streamState(admin(), l.chat.streamA)).acknowledged, label).toEqual({
        generation: '1',
        nextPosition: lastReceipt!.nextPosition,
      });
    }
  }, 60_000);
});
