// Pins behaviour of src/client/conversation.ts on its connection-loss paths: `#onDisconnected`,
// `#refollow` and the `disconnected` / `reconnected` listeners, against a real daemon restarted
// under the conversations. Apart from test/client/conversation.test.ts so that the mutants of the
// other paths do not pay for restarts: Stryker runs, per mutant, only the tests that reached it.
// One restart serves several conversations where the assertions allow it.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import {
  ChatWriter,
  ConnectionLostError,
  ContinuityBreakError,
  Conversation,
  LineTooLargeError,
  StorageFailureError,
  type MessageBatch,
  type YelloClient,
} from '../../src/client/index.js';
import { connectAdmin, connectAgent, createChat, type Participant } from '../helpers/client-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { sleep, waitFor } from '../helpers/wait.js';

// The admin reconnects by itself too, so a test can reset a stream right after a restart.
const fixture = useDaemon({ extraArgs: ['--policy', 'open'] }, (d) => connectAdmin(d, { reconnect: { minDelayMs: 20, maxDelayMs: 100 } }));
const { daemon, admin } = fixture;
const clients: YelloClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

type Reconnect = false | { minDelayMs: number; maxDelayMs: number };

async function agent(who: Participant, reconnect: Reconnect = { minDelayMs: 20, maxDelayMs: 100 }, extra = {}): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect, ...extra });
  clients.push(c);
  return c;
}

/** Restarts the daemon and waits for the admin to be back (it dials again by itself), so the next step or test can use it. */
async function restartDaemon(): Promise<void> {
  await daemon().restart();
  await waitFor(() => admin().connected, 'the admin to reconnect');
}

const texts = (b: MessageBatch | null) =>
  b ? b.messages.map((r) => (r.wrapper.type === 'chat.message' ? r.wrapper.message.content : '')) : null;

/** Sends once the writer's client is back (a send while it is down is refused and wrote nothing). */
async function sendWhenBack(w: ChatWriter, text: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await w.send(text);
      return;
    } catch (err) {
      if (i > 200) throw err;
      await sleep(50);
    }
  }
}

describe('Conversation across connection losses', () => {
  it('a restart drops the unreturned batches and follows again from the cursor: each message once, in order; a failed one keeps its backlog', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob);
    const wa = new ChatWriter(alice, { chatId: chat.chatId });
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    await wa.send('one');
    expect(texts(await conv.next({ waitMs: 5000 }))).toEqual(['one']);
    await wa.send('two');
    await waitFor(() => conv.queued === 1, "'two' to arrive");

    // A second chat whose conversation failed (a reset of the peer stream) before the loss:
    // the batch that came before the failure is still returned after it.
    const chat2 = await createChat(admin());
    const carol = await agent(chat2.alice);
    const dave = await agent(chat2.bob);
    const failed = await Conversation.open(dave, { chatId: chat2.chatId });
    await new ChatWriter(carol, { chatId: chat2.chatId }).send('unread');
    await waitFor(() => failed.queued === 1, "'unread' to arrive");
    await admin().rpc.streams.reset({ streamId: chat2.alice.streamId, reason: 'guard' });
    await waitFor(() => failed.failure !== null, 'the break');

    // Listeners run in the order they were added: the conversation's own ran before this one.
    const atLoss: number[] = [];
    bob.on('disconnected', () => atLoss.push(conv.queued));
    const reconnected = new Promise<void>((resolve) =>
      bob.on('reconnected', () => {
        resolve();
      }),
    );
    await restartDaemon();
    await reconnected;
    expect(atLoss).toEqual([0]);
    // The follow again from the cursor brings 'two' back, once.
    expect(texts(await conv.next({ waitMs: 5000 }))).toEqual(['two']);
    await sendWhenBack(wa, 'three');
    expect(texts(await conv.next({ waitMs: 5000 }))).toEqual(['three']);
    expect(await conv.next({ waitMs: 200 })).toBeNull();
    expect(conv.failure).toBeNull();
    expect(conv.pending().map((b) => texts(b))).toEqual([['one'], ['two'], ['three']]);

    expect(failed.failure).toBeInstanceOf(ContinuityBreakError);
    expect(texts(await failed.next({ waitMs: 0 }))).toEqual(['unread']);
    await expect(failed.next({ waitMs: 0 })).rejects.toBe(failed.failure);
    await conv.close();
    await failed.close();
  });

  it('a client that does not reconnect: the loss is the failure (ConnectionLostError, the break event), and a closed conversation ignores it', async () => {
    const chat = await createChat(admin());
    const bob = await agent(chat.bob, false);
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    const closed = await Conversation.open(bob, { chatId: chat.chatId });
    await closed.close();
    const breaks: Error[] = [];
    conv.on('break', (e) => breaks.push(e));
    await restartDaemon();
    await waitFor(() => conv.failure !== null, 'the loss');
    expect(conv.failure).toBeInstanceOf(ConnectionLostError);
    expect(breaks).toEqual([conv.failure]);
    await expect(conv.next({ waitMs: 0 })).rejects.toBe(conv.failure);
    expect(closed.failure).toBeNull();
    expect(await closed.next({ waitMs: 0 })).toBeNull();
  });

  it('a line over the client cap ends reading (LineTooLargeError) although the client reconnects: it does not follow again', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob, { minDelayMs: 20, maxDelayMs: 100 }, { maxInboundLineBytes: 16 * 1024 });
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    const breaks: Error[] = [];
    conv.on('break', (e) => breaks.push(e));
    const reconnected = new Promise<void>((resolve) =>
      bob.on('reconnected', () => {
        resolve();
      }),
    );
    const wa = new ChatWriter(alice, { chatId: chat.chatId });
    await wa.send('x'.repeat(32 * 1024));
    await waitFor(() => conv.failure !== null, 'the over-size line');
    expect(conv.failure).toBeInstanceOf(LineTooLargeError);
    expect(breaks).toEqual([conv.failure]);
    await reconnected;
    // Back on a new connection, the conversation stays stopped: nothing new is followed.
    await wa.send('small');
    await bob.rpc.chats.get({ chatId: chat.chatId });
    await sleep(100);
    expect(conv.queued).toBe(0);
    await expect(conv.next({ waitMs: 0 })).rejects.toBe(conv.failure);
  });

  it('a reset of the peer stream while the client was away: the follow again throws ContinuityBreakError, the failure and the break event', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    // Slow to dial again (3–6 s with jitter, counted from the loss), so the reset lands while bob
    // is away even on a loaded machine; the test checks that it did.
    const bob = await agent(chat.bob, { minDelayMs: 6000, maxDelayMs: 6000 });
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    const breaks: Error[] = [];
    conv.on('break', (e) => breaks.push(e));
    await new ChatWriter(alice, { chatId: chat.chatId }).send('unread');
    await waitFor(() => conv.queued === 1, "'unread' to arrive");
    await restartDaemon();
    await waitFor(async () => {
      try {
        await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'guard' });
        return true;
      } catch {
        return false; // the admin is still dialling again
      }
    }, 'the reset');
    expect(bob.connected).toBe(false);
    await waitFor(() => conv.failure !== null, 'the failed follow', 10_000);
    expect(conv.failure).toBeInstanceOf(ContinuityBreakError);
    expect(breaks).toEqual([conv.failure]);
    // 'unread' was dropped at the loss and cannot be followed again: the failure is what is left.
    await expect(conv.next({ waitMs: 0 })).rejects.toBe(conv.failure);
    await conv.close();
  });

  it('a corruption found under a follower (chats.error) stops it: the break event (not replaced), next() throws it', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const wa = new ChatWriter(alice, { chatId: chat.chatId });
    for (const t of ['a1', 'a2', 'a3', 'a4', 'a5']) await wa.send(t); // fence at 0, messages at 1..5
    await daemon().stop();
    // A record deleted under the daemon: the first read of it marks the stream corrupt from there.
    const db = new ClassicLevel<string, string>(path.join(daemon().dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    await db.del(K.record(chat.alice.streamId, 1, 3));
    await db.close();
    await restartDaemon();
    const bob = await agent(chat.bob);
    const conv = await Conversation.open(bob, { chatId: chat.chatId, start: 'end' });
    const breaks: Error[] = [];
    const replaced: Error[] = [];
    conv.on('break', (e) => breaks.push(e));
    conv.on('replaced', (e) => replaced.push(e));
    await waitFor(async () => {
      try {
        await admin().rpc.streams.read({ streamId: chat.alice.streamId, generation: '1', fromPosition: '3' });
        return false;
      } catch (err) {
        return err instanceof StorageFailureError; // and not the admin still dialling again
      }
    }, 'the read that finds the gap');
    await waitFor(() => conv.failure !== null, 'chats.error');
    expect(conv.failure).toBeInstanceOf(StorageFailureError);
    expect((conv.failure as StorageFailureError).data).toMatchObject({ reason: 'CORRUPT', streamId: chat.alice.streamId });
    expect(breaks).toEqual([conv.failure]);
    expect(replaced).toEqual([]);
    await expect(conv.next({ waitMs: 0 })).rejects.toBe(conv.failure);
    await conv.close();
  });

  it('a follow again refused as transient (RATE_LIMITED: the connection is full) is tried again until it succeeds; nothing is lost', async () => {
    const chat = await createChat(admin());
    const alice = await agent(chat.alice);
    const bob = await agent(chat.bob);
    const wa = new ChatWriter(alice, { chatId: chat.chatId });
    // Added before the conversation's listener, so on the new connection these follows are
    // written first and fill it (MAX_SUBSCRIPTIONS_PER_CONNECTION = 64): the conversation's
    // follow again is refused with RATE_LIMITED, a transient error.
    let fillers: Promise<{ subscriptionId: string }>[] = [];
    bob.on('reconnected', () => {
      fillers = Array.from({ length: 64 }, () => bob.rpc.chats.follow({ chatId: chat.chatId, from: 'end' }));
    });
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    await wa.send('before');
    expect(texts(await conv.next({ waitMs: 5000 }))).toEqual(['before']);
    await restartDaemon();
    await waitFor(() => fillers.length === 64, 'the reconnect');
    const held = await Promise.all(fillers);
    await sleep(200); // the conversation is refused and backs off meanwhile
    expect(conv.failure).toBeNull();
    for (const f of held) await bob.rpc.chats.unfollow({ subscriptionId: f.subscriptionId });
    await sendWhenBack(wa, 'after');
    expect(texts(await conv.next({ waitMs: 8000 }))).toEqual(['after']);
    expect(conv.failure).toBeNull();
    await conv.close();
  });
});
