// Inbox (docs/protocol.md §8): one wait across all of an agent's chats, chats opened after it
// started included (chats.watch); list() with unread counts, last activity and a preview.

import { describe, expect, it, vi } from 'vitest';
import {
  ChatWriter,
  ContinuityBreakError,
  Inbox,
  remoteError,
  YelloClient,
  Conversation,
  YelloClientError,
} from '../../src/client/index.js';
import { connectAgent, uniqueName, type Participant } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { waitFor } from '../helpers/wait.js';

const { daemon, admin, clients } = useClientDaemon();

async function makeAgent(name: string): Promise<Participant> {
  const a = await admin().rpc.agents.create({ username: uniqueName(name), name: `${name} the agent` });
  return { id: a.agent.id, username: a.agent.username, token: a.token, streamId: '' };
}

async function clientOf(who: Participant): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
  clients.push(c);
  return c;
}

async function openChat(a: Participant, b: Participant): Promise<string> {
  return (await admin().rpc.chats.open({ agentAId: a.id, agentBId: b.id })).chat.id;
}

describe('Inbox', () => {
  it('wakes at once for a message in a chat opened after it started, and not for receipts or fences', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const carol = await makeAgent('carol');
    const first = await openChat(alice, bob);
    const inbox = await Inbox.open(await clientOf(bob));
    expect(inbox.chatIds).toEqual([first]);

    // Carol opens a chat with bob only now, claims her stream (a fence) and then writes.
    const carolClient = await clientOf(carol);
    const later = (await carolClient.rpc.chats.open({ peerAgentId: bob.id })).chat.id;
    const carolWrites = new ChatWriter(carolClient, { chatId: later });
    const started = Date.now();
    const quiet = inbox.wait({ waitMs: 600 });
    // A fence in the new chat while the inbox waits: state, not a wake.
    const streamId = `${later}:${carol.id}`;
    const claim = await carolClient.rpc.streams.claim({ streamId });
    await carolClient.rpc.streams.release({ streamId, coordinatorToken: claim.coordinatorToken });
    expect(await quiet).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(590);
    expect(inbox.chatIds).toContain(later);

    const waiting = inbox.wait({ waitMs: 10_000 });
    const sentAt = Date.now();
    await carolWrites.send('hello bob, from a new chat');
    const got = await waiting;
    expect(Date.now() - sentAt).toBeLessThan(1000);
    expect(got?.chatId).toBe(later);
    expect(got?.batch.messages).toHaveLength(1);
    await carolWrites.release();
    await inbox.close();
    expect(await inbox.wait({ waitMs: 1000 })).toBeNull();
  });

  it('list() reports each chat with its unread messages, last activity and a preview', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const carol = await makeAgent('carol');
    const withAlice = await openChat(alice, bob);
    const withCarol = await openChat(carol, bob);
    const aliceWrites = new ChatWriter(await clientOf(alice), { chatId: withAlice });
    await aliceWrites.send('one');
    await aliceWrites.send('two');
    const carolWrites = new ChatWriter(await clientOf(carol), { chatId: withCarol });
    await carolWrites.send('the newest message of all, a long one '.repeat(5));
    const bobClient = await clientOf(bob);
    const inbox = await Inbox.open(bobClient);
    const before = await inbox.list();
    expect(before.map((e) => [e.chatId, e.unreadMessages])).toEqual([
      [withCarol, 1],
      [withAlice, 2],
    ]);
    expect(before[0]!.peer).toEqual({ agentId: carol.id, username: carol.username, displayName: 'carol the agent' });
    expect(before[0]!.preview).toHaveLength(120);
    expect(before[1]!.preview).toBe('two');
    expect(Date.parse(before[0]!.lastActivityAt!)).toBeGreaterThanOrEqual(Date.parse(before[1]!.lastActivityAt!));

    // Bob reads and acknowledges alice's chat: its count drops to 0.
    const bobWrites = new ChatWriter(bobClient, { chatId: withAlice, conversation: inbox.conversation(withAlice)! });
    for (;;) {
      const got = await inbox.wait({ waitMs: 5000 });
      if (!got) break;
      if (got.chatId === withAlice) {
        await bobWrites.ack(got.batch);
        if (got.batch.nextPosition === '3') break;
      }
    }
    const after = await inbox.list();
    expect(after.find((e) => e.chatId === withAlice)?.unreadMessages).toBe(0);
    await bobWrites.release();
    await aliceWrites.release();
    await carolWrites.release();
    await inbox.close();
  });

  it('a chat that broke throws once from wait(); the other chats go on', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const carol = await makeAgent('carol');
    const withAlice = await openChat(alice, bob);
    const withCarol = await openChat(carol, bob);
    const inbox = await Inbox.open(await clientOf(bob));
    const aliceWrites = new ChatWriter(await clientOf(alice), { chatId: withAlice });
    await aliceWrites.send('unread, then reset');
    const first = await inbox.wait({ waitMs: 5000 });
    expect(first?.chatId).toBe(withAlice);
    await admin().rpc.streams.reset({ streamId: `${withAlice}:${alice.id}`, reason: 'test reset' });
    await expect(inbox.wait({ waitMs: 5000 })).rejects.toBeInstanceOf(ContinuityBreakError);
    const carolWrites = new ChatWriter(await clientOf(carol), { chatId: withCarol });
    await carolWrites.send('still here');
    const next = await inbox.wait({ waitMs: 5000 });
    expect(next?.chatId).toBe(withCarol);
    expect((await inbox.list()).find((e) => e.chatId === withAlice)?.failure).toBeInstanceOf(ContinuityBreakError);
    await inbox.close();
  });
  it('a watch refused for good after a reconnect is thrown once by wait() (not an unhandled rejection); the chats it has go on', async () => {
    const alice = await makeAgent('alice');
    const bob = await makeAgent('bob');
    const chatId = await openChat(alice, bob);
    const c = await clientOf(alice);
    const inbox = await Inbox.open(c);
    // The one refusal a live session cannot be made to give on demand, injected at the call:
    // the daemon, the connection and the conversations are real.
    const real = c.call.bind(c);
    vi.spyOn(c, 'call').mockImplementation(((method: string, ...rest: unknown[]) =>
      method === 'chats.watch'
        ? Promise.reject(remoteError({ code: 4003, message: 'refused', data: { type: 'PERMISSION_DENIED' } }))
        : (real as (m: string, ...r: unknown[]) => Promise<unknown>)(method, ...rest)) as typeof c.call);
    const reconnected = new Promise<void>((resolve) =>
      c.on('reconnected', () => {
        resolve();
      }),
    );
    await daemon().restart();
    await reconnected;
    await expect(inbox.wait({ waitMs: 5000 })).rejects.toMatchObject({ type: 'PERMISSION_DENIED' });
    const bc = await clientOf(bob);
    await new ChatWriter(bc, { chatId }).send('still here');
    const got = await inbox.wait({ waitMs: 5000 });
    expect(got?.chatId).toBe(chatId);
    await inbox.close();
  });
});

// Pins behaviour of src/client/inbox.ts: the inbox's promises through the public client API against
// a real daemon, asserted by value: who may open one, list() (peer, unread counts after a receipt
// and after a reset, last activity, a 120-character preview, newest first), chats taking turns in
// wait(), follow()/conversation(), `start`, waitMs 0, an abort signal and close().
describe('who may open one, list(), turns and waits, by value', () => {
  const { daemon, admin, clients } = useClientDaemon();

  async function makeAgent(name: string): Promise<Participant> {
    const a = await admin().rpc.agents.create({ username: uniqueName(name), name: `${name} the agent` });
    return { id: a.agent.id, username: a.agent.username, token: a.token, streamId: '' };
  }

  async function clientOf(who: Participant): Promise<YelloClient> {
    const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
    clients.push(c);
    return c;
  }

  async function openChat(a: Participant, b: Participant): Promise<string> {
    return (await admin().rpc.chats.open({ agentAId: a.id, agentBId: b.id })).chat.id;
  }

  const texts = (b: { batch: { messages: { wrapper: { type: string; message?: { content: string } } }[] } } | null) =>
    b ? b.batch.messages.map((r) => r.wrapper.message?.content ?? '') : null;

  describe('Inbox', () => {
    it('an admin client cannot open one (BAD_TOKEN)', async () => {
      const err = await Inbox.open(admin()).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(YelloClientError);
      expect((err as YelloClientError).type).toBe('BAD_TOKEN');
    });

    it('list(): the peer, unread messages after the receipt (receipts and fences not counted), activity, preview, newest first', async () => {
      const bob = await makeAgent('bob');
      const alice = await makeAgent('alice');
      const carol = await makeAgent('carol');
      const withAlice = await openChat(alice, bob);
      const withCarol = await openChat(bob, carol);
      const aliceClient = await clientOf(alice);
      const bobClient = await clientOf(bob);
      const carolClient = await clientOf(carol);
      const quietChat = await openChat(bob, await makeAgent('dave'));
      const wa = new ChatWriter(aliceClient, { chatId: withAlice });
      const long = 'x'.repeat(100) + 'y'.repeat(100);
      // bob acknowledges alice's first message; three more follow (unread), with her fence and bob's receipt in the streams.
      const bobReads = await Conversation.open(bobClient, { chatId: withAlice });
      await wa.send('a1');
      const first = await bobReads.next({ waitMs: 5000 });
      await new ChatWriter(bobClient, { chatId: withAlice }).ack(first!);
      await bobReads.close();
      await wa.send('a2');
      await wa.send('a3');
      const wc = new ChatWriter(carolClient, { chatId: withCarol });
      await wc.send('c1');
      await wa.send(long);
      const inbox = await Inbox.open(bobClient);
      expect(inbox.chatIds.sort()).toEqual([withAlice, withCarol, quietChat].sort());
      const list = await inbox.list();
      const historyOf = async (chatId: string) => (await admin().rpc.chats.history({ chatId, limit: 1 })).entries.at(-1)!;
      const newestAlice = await historyOf(withAlice);
      const newestCarol = await historyOf(withCarol);
      const at = (r: typeof newestAlice) => (r.wrapper.type === 'chat.message' ? r.wrapper.message.signature.createdAt : null);
      // Newest first; alice's last message was sent after carol's, but both may carry the same
      // millisecond, and a tie is in chat id order (a run under coverage met one).
      const aliceFirst = at(newestAlice)! > at(newestCarol)! || (at(newestAlice) === at(newestCarol) && withAlice < withCarol);
      const [one, two] = [
        {
          chatId: withAlice,
          peer: { agentId: alice.id, username: alice.username, displayName: 'alice the agent' },
          unreadMessages: 3,
          lastActivityAt: at(newestAlice),
          preview: long.slice(0, 120),
          followed: true,
          failure: null,
        },
        {
          chatId: withCarol,
          peer: { agentId: carol.id, username: carol.username, displayName: 'carol the agent' },
          unreadMessages: 1,
          lastActivityAt: at(newestCarol),
          preview: 'c1',
          followed: true,
          failure: null,
        },
      ];
      expect(list).toEqual([
        ...(aliceFirst ? [one, two] : [two, one]),
        {
          chatId: quietChat,
          peer: expect.objectContaining({ displayName: 'dave the agent' }) as unknown,
          unreadMessages: 0,
          lastActivityAt: null,
          preview: null,
          followed: true,
          failure: null,
        },
      ]);
      // A reset: the unread count is of the peer's new generation, from its start.
      await admin().rpc.streams.reset({ streamId: `${withAlice}:${alice.id}`, reason: 'guard' });
      const wa2 = new ChatWriter(aliceClient, { chatId: withAlice });
      await wa2.send('in generation 2');
      await waitFor(
        async () => (await inbox.list()).find((e) => e.chatId === withAlice)?.unreadMessages === 1,
        'the count of generation 2',
      );
      await inbox.close();
    });

    it('chats take turns in wait(); follow() and conversation() give the chat’s Conversation', async () => {
      const bob = await makeAgent('bob');
      const alice = await makeAgent('alice');
      const carol = await makeAgent('carol');
      const c1 = await openChat(alice, bob);
      const c2 = await openChat(carol, bob);
      const bobClient = await clientOf(bob);
      const inbox = await Inbox.open(bobClient);
      const wa = new ChatWriter(await clientOf(alice), { chatId: c1 });
      const wc = new ChatWriter(await clientOf(carol), { chatId: c2 });
      const conv1 = inbox.conversation(c1)!;
      const conv2 = inbox.conversation(c2)!;
      expect(conv1).toBeInstanceOf(Conversation);
      expect(conv1.chatId).toBe(c1);
      expect(conv2.chatId).toBe(c2);
      // One batch each: a message is sent once the one before is queued (sent together, two may come as one).
      for (const [writer, conv, words] of [[wa, conv1, ['a1', 'a2']] as const, [wc, conv2, ['c1', 'c2']] as const]) {
        for (const [i, t] of words.entries()) {
          await writer.send(t);
          await waitFor(() => conv.queued === i + 1, `batch ${t} to be queued`);
        }
      }
      const got: string[] = [];
      for (let i = 0; i < 4; i++) {
        const b = await inbox.wait({ waitMs: 0 });
        got.push(`${b!.chatId === c1 ? 'alice' : 'carol'}:${texts(b)!.join()}`);
      }
      // Alternating, each chat in order.
      expect([got[0]!.split(':')[0], got[1]!.split(':')[0], got[2]!.split(':')[0], got[3]!.split(':')[0]]).toEqual(
        got[0]!.startsWith('alice') ? ['alice', 'carol', 'alice', 'carol'] : ['carol', 'alice', 'carol', 'alice'],
      );
      expect(got.filter((g) => g.startsWith('alice'))).toEqual(['alice:a1', 'alice:a2']);
      expect(got.filter((g) => g.startsWith('carol'))).toEqual(['carol:c1', 'carol:c2']);
      expect(await inbox.wait({ waitMs: 0 })).toBeNull();
      // follow() of a chat already followed gives its Conversation; of a new chat, opens one.
      const { chat: chat1 } = await admin().rpc.chats.get({ chatId: c1 });
      expect(await inbox.follow(chat1)).toBe(conv1);
      const dave = await makeAgent('dave');
      const c3 = await openChat(bob, dave);
      const { chat: chat3 } = await admin().rpc.chats.get({ chatId: c3 });
      const conv3 = await inbox.follow(chat3);
      expect(conv3?.chatId).toBe(c3);
      expect(inbox.conversation(c3)).toBe(conv3);
      expect(inbox.conversation('chat_unknown')).toBeNull();
      await inbox.close();
      // Closed: a follow opens nothing.
      const c4 = await openChat(bob, await makeAgent('erin'));
      const { chat: chat4 } = await admin().rpc.chats.get({ chatId: c4 });
      expect(await inbox.follow(chat4)).toBeNull();
    });

    it("start: 'end' skips what is there; waitMs 0 answers at once; an abort signal rejects with its reason; close() ends a wait with null", async () => {
      const bob = await makeAgent('bob');
      const alice = await makeAgent('alice');
      const c1 = await openChat(alice, bob);
      const wa = new ChatWriter(await clientOf(alice), { chatId: c1 });
      await wa.send('old');
      const inbox = await Inbox.open(await clientOf(bob), { start: 'end' });
      let t = Date.now();
      expect(await inbox.wait({ waitMs: 0 })).toBeNull();
      expect(Date.now() - t).toBeLessThan(500);
      await wa.send('new');
      expect(texts(await inbox.wait({ waitMs: 5000 }))).toEqual(['new']);
      const ac = new AbortController();
      const reason = new Error('stop');
      const waiting = inbox.wait({ signal: ac.signal });
      setTimeout(() => {
        ac.abort(reason);
      }, 50);
      await expect(waiting).rejects.toBe(reason);
      await expect(inbox.wait({ signal: ac.signal })).rejects.toBe(reason);
      // A wait with waitMs lasts it (time is the subject).
      t = Date.now();
      expect(await inbox.wait({ waitMs: 300 })).toBeNull();
      expect(Date.now() - t).toBeGreaterThanOrEqual(290);
      const open = inbox.wait();
      setTimeout(() => void inbox.close(), 50);
      t = Date.now();
      expect(await open).toBeNull();
      expect(Date.now() - t).toBeLessThan(2000);
    });
  });
});

// Pins one behaviour of src/client/inbox.ts that test/client/inbox-failures.test.ts leaves
// unchecked: 216:37, `entry.conversation?.failure` in list() made `entry.conversation.failure`.
// list() meets an entry without a Conversation and without a failure only for a chat whose opening
// did not end in either, which looked like a race. It is not: close() while a chat is opening
// leaves exactly such an entry (`#open` closes the Conversation it got and returns), and list()
// after the close still reports it. The test of that close in test/client/inbox-failures.test.ts stops at follow() and
// conversation(), and never calls list().
describe('list() after close()', () => {
  const { daemon, admin, clients } = useClientDaemon({ reconnect: { minDelayMs: 20, maxDelayMs: 200 } });

  async function makeAgent(name: string): Promise<Participant> {
    const a = await admin().rpc.agents.create({ username: uniqueName(name), name: `${name} the agent` });
    return { id: a.agent.id, username: a.agent.username, token: a.token, streamId: '' };
  }

  describe('Inbox: list() after close()', () => {
    it('close() while a chat is opening, then list(): the chat is listed with failure null', async () => {
      const bob = await makeAgent('bob');
      const peer = await makeAgent('peer');
      const bobClient = await connectAgent(daemon(), bob, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
      clients.push(bobClient);
      const inbox = await Inbox.open(bobClient);
      const { chat } = await bobClient.rpc.chats.open({ peerAgentId: peer.id });
      const followed = inbox.follow(chat);
      const closing = inbox.close();
      expect(await followed).toBeNull();
      await closing;
      // The entry stays: neither a Conversation (closed as it opened) nor a failure.
      expect(inbox.chatIds).toEqual([chat.id]);
      expect(inbox.conversation(chat.id)).toBeNull();
      const list = await inbox.list();
      expect(list).toHaveLength(1);
      expect(list[0]).toMatchObject({ chatId: chat.id, peer: { agentId: peer.id }, unreadMessages: 0, failure: null });
    });
  });
});
