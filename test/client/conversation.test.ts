// Conversation (docs/protocol.md §8): the one reader of a chat. Opening it appends nothing
// (issue 20, finding 5); the peer's receipts and fences are state, never batches, so a waiting
// next({waitMs}) lasts its waitMs while only those arrive and wakes at once on a message
// (finding 1); two readers acknowledging each other's batches write no receipts while nobody
// sends a message.

import { describe, expect, it } from 'vitest';
import {
  ContinuityBreakError,
  Conversation,
  receiptFor,
  type MessageBatch,
  type YelloClient,
  ChatWriter,
  FencedError,
  YelloClientError,
} from '../../src/client/index.js';
import {
  connectAgent,
  createChat,
  readStream,
  uniqueName,
  type Hold,
  type Participant,
  type TestChat,
} from '../helpers/client-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
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
    // Each message is sent once the one before has come through the iterator, so that each is a
    // batch of its own: appends sent back to back may rightly arrive as one batch.
    const batches = conv[Symbol.asyncIterator]();
    for (const t of ['one', 'two', 'three']) {
      await append(alice, wa, [message(t)]);
      const next = await batches.next();
      if (!next.done) seen.push(next.value);
    }
    await batches.return();
    expect(seen.map((b) => b.messages.map((r) => r.position))).toEqual([['1'], ['2'], ['3']]);
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
    // One batch per append, or both in one when the follow's catch-up read came after both (a
    // slow start): either way the resumed conversation starts exactly after it.
    const before = first?.messages.map((r) => r.position) ?? [];
    const cursor = conv.cursor;
    await conv.close();
    await append(alice, wa, [message('third')]);
    const resumed = await Conversation.open(bob, { chatId: chat.chatId, cursor });
    const after: string[] = [];
    while (!after.includes('3')) {
      const batch = await resumed.next({ waitMs: 5000 });
      if (!batch) break;
      after.push(...batch.messages.map((r) => r.position));
    }
    expect([...before, ...after]).toEqual(['1', '2', '3']);
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

// Pins behaviour of src/client/conversation.ts: the reader's promises through the public client API
// against a real daemon, asserted by value: who may open one and what it knows from the start (both
// receipts), where `start: 'end'` begins, what `queued`, `ready()`, `waitMs: 0` and an abort signal
// do, how a takeover of the agent's own stream and a reset of the peer's stop it, and that the
// cursor after `next()` includes the state-only batches that followed the batch returned.
describe('what a Conversation promises, by value', () => {
  const { daemon, admin, clients } = useClientDaemon();

  async function agent(who: Participant): Promise<YelloClient> {
    const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
    clients.push(c);
    return c;
  }

  const texts = (b: MessageBatch | null) =>
    b ? b.messages.map((r) => (r.wrapper.type === 'chat.message' ? r.wrapper.message.content : '')) : null;

  describe('Conversation', () => {
    it('an admin client cannot open one (BAD_TOKEN); a conversation knows both receipts from the start', async () => {
      const err = await Conversation.open(admin(), { chatId: 'chat_none' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(YelloClientError);
      expect((err as YelloClientError).type).toBe('BAD_TOKEN');
      expect((err as YelloClientError).message).toBe('a conversation needs an agent token');

      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      await wa.send('to bob');
      const bobReads = await Conversation.open(bob, { chatId: chat.chatId });
      expect([bobReads.chatId, bobReads.agentId, bobReads.peerAgentId, bobReads.ownStreamId, bobReads.peerStreamId]).toEqual([
        chat.chatId,
        chat.bob.id,
        chat.alice.id,
        chat.bob.streamId,
        chat.alice.streamId,
      ]);
      expect([bobReads.acknowledged, bobReads.peerAcknowledged]).toEqual([null, null]);
      const batch = await bobReads.next({ waitMs: 5000 });
      expect(texts(batch)).toEqual(['to bob']);
      const wb = new ChatWriter(bob, { chatId: chat.chatId, conversation: bobReads });
      await wb.ack(batch!);
      const ack = { generation: '1', nextPosition: batch!.nextPosition };
      expect(bobReads.acknowledged).toEqual(ack);
      expect(bobReads.pending()).toEqual([]);
      await bobReads.close();
      // Opened again, each side knows the receipt from chats.get, before anything is followed.
      const again = await Conversation.open(bob, { chatId: chat.chatId });
      const aliceReads = await Conversation.open(alice, { chatId: chat.chatId });
      expect([again.acknowledged, again.peerAcknowledged]).toEqual([ack, null]);
      expect([aliceReads.acknowledged, aliceReads.peerAcknowledged]).toEqual([null, ack]);
      // The receipt was acknowledged already: nothing of the peer is read again.
      expect(await again.next({ waitMs: 300 })).toBeNull();
      await again.close();
      await aliceReads.close();
    });

    it("start: 'end' begins after what is there; waitMs 0 answers at once; queued and ready() see what arrived", async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      await wa.send('before');
      const conv = await Conversation.open(bob, { chatId: chat.chatId, start: 'end' });
      let t = Date.now();
      expect(await conv.next({ waitMs: 0 })).toBeNull();
      expect(Date.now() - t).toBeLessThan(500);
      expect(conv.queued).toBe(0);
      // One batch each: 'two' sent only once 'one' is queued (sent together, they may come as one).
      await wa.send('one');
      await waitFor(() => conv.queued === 1, 'the first batch to arrive');
      await wa.send('two');
      await waitFor(() => conv.queued === 2, 'two batches to arrive');
      t = Date.now();
      await conv.ready(10_000);
      expect(Date.now() - t).toBeLessThan(1000);
      expect(texts(await conv.next({ waitMs: 0 }))).toEqual(['one']);
      expect(conv.queued).toBe(1);
      expect(texts(await conv.next({ waitMs: 0 }))).toEqual(['two']);
      expect(conv.queued).toBe(0);
      expect(conv.pending().map((b) => texts(b))).toEqual([['one'], ['two']]);
      // Nothing there: ready() lasts its ms (time is the subject).
      t = Date.now();
      await conv.ready(300);
      expect(Date.now() - t).toBeGreaterThanOrEqual(290);
      await conv.close();
      // Closed: ready() and next() answer at once.
      t = Date.now();
      await conv.ready(10_000);
      expect(await conv.next()).toBeNull();
      expect(Date.now() - t).toBeLessThan(1000);
    });

    it("an abort signal ends a waiting next() with the signal's reason; close() ends one with null", async () => {
      const chat = await createChat(admin());
      const bob = await agent(chat.bob);
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      const ac = new AbortController();
      const waiting = conv.next({ signal: ac.signal });
      const reason = new Error('stop waiting');
      setTimeout(() => {
        ac.abort(reason);
      }, 50);
      await expect(waiting).rejects.toBe(reason);
      await expect(conv.next({ signal: ac.signal })).rejects.toBe(reason);
      const open = conv.next();
      setTimeout(() => void conv.close(), 50);
      expect(await open).toBeNull();
    });

    it('a takeover of the own stream stops it with FencedError: the replaced event once, next() throws it', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      const replaced: FencedError[] = [];
      const breaks: Error[] = [];
      conv.on('replaced', (e) => replaced.push(e));
      conv.on('break', (e) => breaks.push(e));
      const wb = new ChatWriter(bob, { chatId: chat.chatId, conversation: conv });
      await wb.send('mine');
      expect(wb.epoch).toBe('1');
      // A message of the peer arrives before the takeover: it is returned before the failure.
      await new ChatWriter(alice, { chatId: chat.chatId }).send('hello');
      await waitFor(() => conv.queued === 1, "alice's message to arrive");
      const late = await Conversation.open(bob, { chatId: chat.chatId });
      const other = await agent(chat.bob);
      await other.rpc.streams.claim({ streamId: chat.bob.streamId, replace: true });
      await waitFor(() => conv.failure !== null, 'the conversation to see the new fence');
      // An answer on bob's connection comes after the notifications sent before it: late has the fence too.
      await bob.rpc.chats.get({ chatId: chat.chatId });
      expect(replaced).toHaveLength(1);
      expect(replaced[0]).toBeInstanceOf(FencedError);
      expect(replaced[0]!.data).toMatchObject({ streamId: chat.bob.streamId, epoch: '2' });
      expect(breaks).toEqual([]);
      expect(conv.failure).toBe(replaced[0]);
      expect(texts(await conv.next({ waitMs: 0 }))).toEqual(['hello']);
      await expect(conv.next({ waitMs: 0 })).rejects.toBe(replaced[0]);
      // ready() resolves at once for a failed conversation.
      const t = Date.now();
      await conv.ready(10_000);
      expect(Date.now() - t).toBeLessThan(1000);

      // A conversation that saw the fence of epoch 2 while no writer was expected: told then that
      // its writer is epoch 1, it is replaced at once; told epoch 2 (or none), it is not. Its own
      // subscription may push the fence after the answer above (PostgreSQL: each pump reads the
      // notice on its own), so wait until it has it.
      await waitFor(() => late.ownWriterEpoch === '2', 'the second conversation to see the new fence');
      expect(late.failure).toBeNull();
      late.expectWriter('2');
      expect(late.failure).toBeNull();
      late.expectWriter(null);
      expect(late.failure).toBeNull();
      late.expectWriter('1');
      expect(late.failure).toBeInstanceOf(FencedError);
      expect((late.failure as FencedError).data).toMatchObject({ streamId: chat.bob.streamId, epoch: '2' });
      await late.close();
    });

    it('a reset of the peer stream while following: what came before is returned, then ContinuityBreakError and the break event', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      const breaks: Error[] = [];
      const replaced: Error[] = [];
      conv.on('break', (e) => breaks.push(e));
      conv.on('replaced', (e) => replaced.push(e));
      await new ChatWriter(alice, { chatId: chat.chatId }).send('unread');
      await waitFor(() => conv.queued === 1, 'the message to arrive');
      await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'guard' });
      await waitFor(() => conv.failure !== null, 'the break');
      expect(conv.failure).toBeInstanceOf(ContinuityBreakError);
      expect((conv.failure as ContinuityBreakError).data).toMatchObject({ streamId: chat.alice.streamId });
      expect(breaks).toEqual([conv.failure]);
      expect(replaced).toEqual([]);
      expect(texts(await conv.next({ waitMs: 0 }))).toEqual(['unread']);
      await expect(conv.next({ waitMs: 0 })).rejects.toBe(conv.failure);
      await conv.close();
    });

    it('the cursor after next() includes the receipt-only batch that followed the message batch; the peer receipt is state', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      const acks: unknown[] = [];
      conv.on('peer-acknowledged', (a) => acks.push(a));
      const writers: unknown[] = [];
      conv.on('peer-writer', (f) => writers.push(f));
      // bob writes first, so alice has something to acknowledge.
      const wb = new ChatWriter(bob, { chatId: chat.chatId, conversation: conv });
      await wb.send('from bob');
      const aliceReads = await Conversation.open(alice, { chatId: chat.chatId });
      const fromBob = await aliceReads.next({ waitMs: 5000 });
      const wa = new ChatWriter(alice, { chatId: chat.chatId, conversation: aliceReads });
      await wa.send('from alice');
      await waitFor(() => conv.queued === 1, "alice's message");
      expect(writers).toMatchObject([{ epoch: '1' }]);
      await wa.ack(fromBob!);
      await waitFor(() => acks.length === 1, "alice's receipt");
      expect(acks).toEqual([{ generation: '1', nextPosition: fromBob!.nextPosition }]);
      expect(conv.queued).toBe(1);
      const batch = await conv.next({ waitMs: 0 });
      expect(texts(batch)).toEqual(['from alice']);
      // The cursor is past the receipt: resuming from it reads nothing, and the end of both streams is where it stands.
      const atEnd = await Conversation.open(bob, { chatId: chat.chatId, start: 'end' });
      expect(conv.cursor).toBe(atEnd.cursor);
      await atEnd.close();
      const cursor = conv.cursor;
      await conv.close();
      const resumed = await Conversation.open(bob, { chatId: chat.chatId, cursor });
      expect(await resumed.next({ waitMs: 300 })).toBeNull();
      await resumed.close();
      await aliceReads.close();
    });

    it('observeOwn ignores receipts of another stream and older receipts', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      await wa.send('a1');
      const first = await conv.next({ waitMs: 5000 });
      await wa.send('a2');
      const second = await conv.next({ waitMs: 5000 });
      expect([texts(first), texts(second)]).toEqual([['a1'], ['a2']]);
      const wb = new ChatWriter(bob, { chatId: chat.chatId });
      const r2 = await wb.ack(second!);
      conv.observeOwn(r2.records);
      expect(conv.acknowledged).toEqual({ generation: '1', nextPosition: second!.nextPosition });
      expect(conv.pending()).toEqual([]);
      // An older receipt does not move it back (the daemon refuses one; observeOwn must not need it to).
      const older = r2.records.map((r) =>
        r.wrapper.type === 'chat.receipt'
          ? { ...r, wrapper: { ...r.wrapper, receipt: { ...r.wrapper.receipt, nextPosition: first!.nextPosition } } }
          : r,
      );
      conv.observeOwn(older);
      expect(conv.acknowledged).toEqual({ generation: '1', nextPosition: second!.nextPosition });
      // A receipt naming another stream is not this conversation's.
      const elsewhere = r2.records.map((r) =>
        r.wrapper.type === 'chat.receipt'
          ? { ...r, wrapper: { ...r.wrapper, receipt: { ...r.wrapper.receipt, peerStreamId: chat.bob.streamId, nextPosition: '99' } } }
          : r,
      );
      conv.observeOwn(elsewhere);
      expect(conv.acknowledged).toEqual({ generation: '1', nextPosition: second!.nextPosition });
      await conv.close();
    });

    it('close() and a failure end the subscription on the daemon; each conversation of a client takes only its own subscription', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      const closed = await Conversation.open(bob, { chatId: chat.chatId });
      await closed.close();
      const replacedConv = await Conversation.open(bob, { chatId: chat.chatId });
      await new ChatWriter(bob, { chatId: chat.chatId, conversation: replacedConv }).send('mine');
      const other = await agent(chat.bob);
      await other.rpc.streams.claim({ streamId: chat.bob.streamId, replace: true });
      await waitFor(() => replacedConv.failure !== null, 'the takeover');
      // Two live conversations of the same client on the same chat.
      const one = await Conversation.open(bob, { chatId: chat.chatId, start: 'end' });
      const two = await Conversation.open(bob, { chatId: chat.chatId, start: 'end' });
      const seen: string[] = [];
      bob.on('chats.batch', (n) => {
        if (n.streamId === chat.alice.streamId && n.records.some((r) => r.wrapper.type === 'chat.message')) seen.push(n.subscriptionId);
      });
      await wa.send('after');
      await waitFor(() => one.queued === 1 && two.queued === 1, 'both to get the message');
      // An answer on bob's connection comes after every notification sent before it.
      await bob.rpc.chats.get({ chatId: chat.chatId });
      // Only the two live subscriptions were told: the closed and the failed one were unfollowed.
      expect(seen).toHaveLength(2);
      expect(new Set(seen).size).toBe(2);
      expect([one.queued, two.queued]).toEqual([1, 1]);
      expect(texts(await one.next({ waitMs: 0 }))).toEqual(['after']);
      expect(await one.next({ waitMs: 0 })).toBeNull();
      await one.close();
      await two.close();
    });

    it('the async iterator yields the message batches in order and ends, without a null, when the conversation is closed', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      const seen: string[] = [];
      const reading = (async () => {
        // Sent back to back, the two may rightly come as one batch or as two.
        for await (const b of conv) {
          seen.push(...(texts(b) ?? []));
          if (seen.length === 2) void conv.close();
        }
        return 'ended';
      })();
      await wa.send('one');
      await wa.send('two');
      expect(await reading).toBe('ended');
      expect(seen).toEqual(['one', 'two']);
    });

    it("after a reset with unread messages open throws ContinuityBreakError (and stays unsubscribed); start 'generation-start' reads the new generation from 0", async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      await new ChatWriter(alice, { chatId: chat.chatId }).send('unread in generation 1');
      await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'guard' });
      const err = await Conversation.open(bob, { chatId: chat.chatId }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ContinuityBreakError);
      await new ChatWriter(alice, { chatId: chat.chatId }).send('in generation 2');
      const conv = await Conversation.open(bob, { chatId: chat.chatId, start: 'generation-start' });
      const batch = await conv.next({ waitMs: 5000 });
      expect([batch?.generation, batch?.fromPosition, texts(batch)]).toEqual(['2', '0', ['in generation 2']]);
      await conv.close();
    });

    it('ready() waits without a timer for Infinity and for 2^31 ms (past what setTimeout takes); close() ends it', async () => {
      const chat = await createChat(admin());
      const bob = await agent(chat.bob);
      const conv = await Conversation.open(bob, { chatId: chat.chatId, start: 'end' });
      const ended: string[] = [];
      const forever = conv.ready(Infinity).then(() => ended.push('Infinity'));
      const long = conv.ready(2 ** 31).then(() => ended.push('2^31'));
      await new Promise((r) => setTimeout(r, 200));
      expect(ended).toEqual([]);
      await conv.close();
      await Promise.all([forever, long]);
      expect(ended.sort()).toEqual(['2^31', 'Infinity']);
    });

    it("ready() rejects with the signal's reason when its signal aborts, like next()", async () => {
      const chat = await createChat(admin());
      const bob = await agent(chat.bob);
      const conv = await Conversation.open(bob, { chatId: chat.chatId, start: 'end' });
      const ac = new AbortController();
      const reason = new Error('stop');
      const waiting = conv.ready(60_000, ac.signal);
      setTimeout(() => {
        ac.abort(reason);
      }, 50);
      await expect(waiting).rejects.toBe(reason);
      await conv.close();
    });

    it('a saved cursor resumes after the last returned batch: the unread one after it comes, nothing before it', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      await wa.send('first');
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      expect(texts(await conv.next({ waitMs: 5000 }))).toEqual(['first']);
      await wa.send('second');
      await waitFor(() => conv.queued === 1, "'second' to arrive");
      const cursor = conv.cursor;
      await conv.close();
      // start 'end' would read nothing, 'acknowledged' would read 'first' again: the cursor wins.
      const resumed = await Conversation.open(bob, { chatId: chat.chatId, cursor, start: 'end' });
      expect(texts(await resumed.next({ waitMs: 5000 }))).toEqual(['second']);
      expect(await resumed.next({ waitMs: 100 })).toBeNull();
      await resumed.close();
    });

    it('pending() keeps the batches after the receipt; the failures say what stopped and why', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      // One batch each: a2 sent only once a1's batch is here (sent together, they may come as one).
      await wa.send('a1');
      const first = await conv.next({ waitMs: 5000 });
      await wa.send('a2');
      const second = await conv.next({ waitMs: 5000 });
      expect([texts(first), texts(second)]).toEqual([['a1'], ['a2']]);
      const r1 = await new ChatWriter(bob, { chatId: chat.chatId }).ack(first!);
      conv.observeOwn(r1.records);
      expect(conv.pending()).toEqual([second]);
      await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'guard' });
      await waitFor(() => conv.failure !== null, 'the break');
      expect(conv.failure!.message).toMatch(new RegExp(`^reading ${chat.chatId} stopped: \\S+ on ${chat.alice.streamId}$`));
      await conv.close();
    });

    it("the own stream's fences: the writer's own epoch and older ones never replace it; a failure is set once, never after close()", async () => {
      const chat = await createChat(admin());
      const bob = await agent(chat.bob);
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      const closed = await Conversation.open(bob, { chatId: chat.chatId });
      const replaced: Error[] = [];
      conv.on('replaced', (e) => replaced.push(e));
      await bob.rpc.streams.claim({ streamId: chat.bob.streamId });
      const other = await agent(chat.bob);
      await other.rpc.streams.claim({ streamId: chat.bob.streamId, replace: true });
      const fences = (await readStream(admin(), chat.bob.streamId)).filter((r) => r.wrapper.type === 'chat.writer-fence');
      expect(fences.map((r) => (r.wrapper.type === 'chat.writer-fence' ? r.wrapper.fence.epoch : ''))).toEqual(['1', '2']);
      const [fence1, fence2] = fences as [(typeof fences)[0], (typeof fences)[0]];
      await waitFor(async () => {
        await bob.rpc.chats.get({ chatId: chat.chatId }); // answers come after the notifications sent before them
        return conv.cursor !== '' && closed.cursor !== '';
      }, 'the fences');
      // A writer of epoch 2 seeing its own fence (and the older one) again is not replaced.
      conv.expectWriter('2');
      conv.observeOwn([fence2, fence1]);
      expect(conv.failure).toBeNull();
      // The highest fence seen stays 2 although fence 1 came after it: a writer of epoch 1 is replaced.
      conv.expectWriter('1');
      expect(conv.failure).not.toBeNull();
      expect(conv.failure!.message).toBe(`stream ${chat.bob.streamId} was claimed by epoch 2: another writer speaks for this agent`);
      const first = conv.failure;
      conv.expectWriter('0');
      conv.observeOwn([fence2]);
      expect(conv.failure).toBe(first);
      expect(replaced).toEqual([first]);
      await closed.close();
      closed.expectWriter('1');
      expect(closed.failure).toBeNull();
      await conv.close();
    });

    it('a receipt of the peer that was known from the start is not announced again', async () => {
      const chat = await createChat(admin());
      const alice = await agent(chat.alice);
      const bob = await agent(chat.bob);
      await new ChatWriter(alice, { chatId: chat.chatId }).send('to bob');
      const bobReads = await Conversation.open(bob, { chatId: chat.chatId });
      const batch = await bobReads.next({ waitMs: 5000 });
      await new ChatWriter(bob, { chatId: chat.chatId, conversation: bobReads }).ack(batch!);
      await bobReads.close();
      const aliceReads = await Conversation.open(alice, { chatId: chat.chatId });
      const acks: unknown[] = [];
      aliceReads.on('peer-acknowledged', (a) => acks.push(a));
      const opened = aliceReads.cursor;
      // bob's stream (his fence and receipt) is read from 0: the receipt is the one chats.get gave.
      await waitFor(() => aliceReads.cursor !== opened, "bob's stream to be read");
      expect(acks).toEqual([]);
      expect(aliceReads.peerAcknowledged).toEqual({ generation: '1', nextPosition: batch!.nextPosition });
      await aliceReads.close();
    });
  });
});
