// Conversation (docs/protocol.md §8): the one reader of a chat. Opening it appends nothing
// (issue 20, finding 5); the peer's receipts and fences are state, never batches, so a waiting
// next({waitMs}) lasts its waitMs while only those arrive and wakes at once on a message
// (finding 1); two readers acknowledging each other's batches write no receipts while nobody
// sends a message.

import { describe, expect, it } from 'vitest';
import { ContinuityBreakError, Conversation, receiptFor, type MessageBatch, type YelloClient } from '../../src/client/index.js';
import {
  connectAgent,
  createChat,
  readStream,
  uniqueName,
  type Hold,
  type Participant,
  type TestChat,
} from '../helpers/client-fixtures.js';
import { sleep } from '../helpers/wait.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

const { daemon, admin, clients } = useClientDaemon();

async function agent(who: Participant): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
  clients.push(c);
  return c;
}

/** A raw writer for `who`: claims, then appends records at the head. */
async function writer(c: YelloClient, who: Participant): Promise<Hold & { generation: string }> {
  const claim = await c.rpc.streams.claim({ streamId: who.streamId });
  return { streamId: who.streamId, token: claim.coordinatorToken, next: claim.nextPosition, generation: claim.generation };
}

async function append(
  c: YelloClient,
  hold: Hold & { generation: string },
  records: Parameters<YelloClient['rpc']['streams']['append']>[0]['records'],
) {
  const res = await c.rpc.streams.append({
    streamId: hold.streamId,
    coordinatorToken: hold.token,
    generation: hold.generation,
    expectedPosition: hold.next,
    operationId: uniqueName('op'),
    records,
  });
  hold.next = res.nextPosition;
  return res;
}

const message = (content: string) => ({ type: 'chat.message' as const, messageId: uniqueName('m'), content });

async function heads(chat: TestChat): Promise<string[]> {
  const { streams } = await admin().rpc.chats.get({ chatId: chat.chatId });
  return streams.map((s) => `${s.streamId}@${s.generation}:${s.nextPosition}`);
}

describe('Conversation', () => {
  it('opening and reading a chat appends nothing to either stream (finding 5)', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const w = await writer(alice, chat.alice);
    await append(alice, w, [message('before bob opens')]);
    const before = await heads(chat);
    const bob = await agent(chat.bob);
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    const batch = await conv.next({ waitMs: 5000 });
    expect(batch?.messages.map((r) => (r.wrapper.type === 'chat.message' ? r.wrapper.message.content : null))).toEqual([
      'before bob opens',
    ]);
    expect(await heads(chat)).toEqual(before);
    expect((await admin().rpc.streams.get({ streamId: chat.bob.streamId })).writer.epoch).toBe('0');
    await conv.close();
  });

  it('next({waitMs}) lasts its waitMs while only receipts and fences arrive, and wakes at once on a message (finding 1)', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob);
    // bob sends one message so alice has something to acknowledge later.
    const wb = await writer(bob, chat.bob);
    await append(bob, wb, [message('from bob')]);
    const aliceReads = await Conversation.open(alice, { chatId: chat.chatId });
    const fromBob = await aliceReads.next({ waitMs: 5000 });
    expect(fromBob).not.toBeNull();

    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    const acks: unknown[] = [];
    const writers: unknown[] = [];
    conv.on('peer-acknowledged', (a) => acks.push(a));
    conv.on('peer-writer', (f) => writers.push(f));
    // While bob waits 800 ms, alice claims (a fence) and acknowledges bob's message (a receipt).
    const started = Date.now();
    const waiting = conv.next({ waitMs: 800 });
    const wa = await writer(alice, chat.alice);
    await append(alice, wa, [receiptFor(fromBob!)]);
    expect(await waiting).toBeNull();
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(790);
    expect(writers).toHaveLength(1);
    expect(acks).toEqual([{ generation: '1', nextPosition: fromBob!.nextPosition }]);
    expect(conv.peerAcknowledged).toEqual({ generation: '1', nextPosition: fromBob!.nextPosition });

    // A message ends the wait at once (time is the subject: the wake latency).
    const again = conv.next({ waitMs: 10_000 });
    await sleep(100);
    const sentAt = Date.now();
    await append(alice, wa, [message('wake up')]);
    const batch = await again;
    const latency = Date.now() - sentAt;
    expect(batch?.messages).toHaveLength(1);
    expect(latency).toBeLessThan(1000);
    // The fence and the receipt before it were absorbed as state; the message's batch starts after them.
    expect(batch!.records.every((r) => r.wrapper.type === 'chat.message')).toBe(true);
    await conv.close();
    await aliceReads.close();
  });

  it('two readers acknowledging each other write 0 receipts while nobody sends a message (finding 1)', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob);
    const wa = await writer(alice, chat.alice);
    const wb = await writer(bob, chat.bob);
    await append(alice, wa, [message('hello bob')]);
    await append(bob, wb, [message('hello alice')]);
    const loops = [
      { c: alice, w: wa, conv: await Conversation.open(alice, { chatId: chat.chatId }), receipts: 0, waits: [] as number[] },
      { c: bob, w: wb, conv: await Conversation.open(bob, { chatId: chat.chatId }), receipts: 0, waits: [] as number[] },
    ];
    // The documented loop: wait for a batch, acknowledge it, wait again; for 3 s (time is the subject).
    const until = Date.now() + 3000;
    await Promise.all(
      loops.map(async (l) => {
        while (Date.now() < until) {
          const t = Date.now();
          const batch = await l.conv.next({ waitMs: 500 });
          if (!batch) {
            l.waits.push(Date.now() - t);
            continue;
          }
          await append(l.c, l.w, [receiptFor(batch)]);
          l.receipts += 1;
        }
      }),
    );
    // Each acknowledged the one message of the other, and nothing else.
    expect(loops.map((l) => l.receipts)).toEqual([1, 1]);
    for (const l of loops) for (const w of l.waits.slice(0, -1)) expect(w).toBeGreaterThanOrEqual(490);
    const receipts = async (who: Participant) =>
      (await readStream(admin(), who.streamId)).filter((r) => r.wrapper.type === 'chat.receipt').length;
    expect([await receipts(chat.alice), await receipts(chat.bob)]).toEqual([1, 1]);
    for (const l of loops) await l.conv.close();
  });

  it('pending() holds returned batches until a receipt covers them; the async iterator yields message batches in order', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob);
    const wa = await writer(alice, chat.alice);
    const wb = await writer(bob, chat.bob);
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    const seen: MessageBatch[] = [];
    const reading = (async () => {
      for await (const b of conv) {
        seen.push(b);
        if (seen.length === 3) return;
      }
    })();
    for (const t of ['one', 'two', 'three']) await append(alice, wa, [message(t)]);
    await reading;
    expect(seen.flatMap((b) => b.messages.map((r) => r.position))).toEqual(['1', '2', '3']);
    expect(conv.pending().map((b) => b.nextPosition)).toEqual(['2', '3', '4']);
    const res = await append(bob, wb, [receiptFor(seen[1]!)]);
    conv.observeOwn(res.records);
    expect(conv.pending().map((b) => b.nextPosition)).toEqual(['4']);
    await conv.close();
    expect(await conv.next({ waitMs: 1000 })).toBeNull();
  });

  it('a cursor resumes exactly after the last returned batch (state-only batches after it included)', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob);
    const wa = await writer(alice, chat.alice);
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    await append(alice, wa, [message('first')]);
    await append(alice, wa, [message('second')]);
    const first = await conv.next({ waitMs: 5000 });
    expect(first?.fromPosition).toBe('1');
    const cursor = conv.cursor;
    await conv.close();
    const resumed = await Conversation.open(bob, { chatId: chat.chatId, cursor });
    const second = await resumed.next({ waitMs: 5000 });
    expect(second?.messages.map((r) => r.position)).toEqual(['2']);
    await resumed.close();
  });

  it("after a reset with unread messages: open throws ContinuityBreakError; a person's start: 'generation-start' reads the new generation from 0", async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob);
    const wa = await writer(alice, chat.alice);
    await append(alice, wa, [message('unread in generation 1')]);
    await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'test reset' });
    const err = await Conversation.open(bob, { chatId: chat.chatId }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ContinuityBreakError);
    const w2 = await writer(alice, chat.alice);
    await append(alice, w2, [message('in generation 2')]);
    const conv = await Conversation.open(bob, { chatId: chat.chatId, start: 'generation-start' });
    const batch = await conv.next({ waitMs: 5000 });
    expect(batch?.generation).toBe('2');
    expect(batch?.fromPosition).toBe('0');
    expect(batch?.messages).toHaveLength(1);
    await conv.close();
  });

  it('rides through a daemon restart: follows again from its cursor, nothing skipped or repeated', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob);
    const wa = await writer(alice, chat.alice);
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    await append(alice, wa, [message('before')]);
    expect((await conv.next({ waitMs: 5000 }))?.fromPosition).toBe('1');
    await daemon().restart();
    const waiting = conv.next({ waitMs: 15_000 });
    // alice's client reconnects by itself too; her token survives the restart.
    for (;;) {
      try {
        await append(alice, wa, [message('after')]);
        break;
      } catch {
        await sleep(50); // reconnecting: try again (nothing was written: the connection was down)
      }
    }
    const after = await waiting;
    expect(after?.messages.map((r) => r.position)).toEqual(['2']);
    expect(conv.failure).toBeNull();
    await conv.close();
  });
});
