// Kills mutants of src/client/inbox.ts (test/MUTATION.md, "Client, MCP session and store
// checks"): the inbox's promises through the public client API against a real daemon, asserted
// by value: who may open one, list() (peer, unread counts after a receipt and after a reset,
// last activity, a 120-character preview, newest first), chats taking turns in wait(),
// follow()/conversation(), `start`, waitMs 0, an abort signal and close().

import { describe, expect, it } from 'vitest';
import { ChatWriter, Conversation, Inbox, YelloClientError, type YelloClient } from '../../src/client/index.js';
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

const texts = (b: { batch: { messages: { wrapper: { type: string; message?: { content: string } } }[] } } | null) =>
  b ? b.batch.messages.map((r) => r.wrapper.message?.content ?? '') : null;

describe('Inbox (mutation guards)', () => {
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
    expect(list).toEqual([
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
    await waitFor(async () => (await inbox.list()).find((e) => e.chatId === withAlice)?.unreadMessages === 1, 'the count of generation 2');
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
    for (const t of ['a1', 'a2']) await wa.send(t);
    for (const t of ['c1', 'c2']) await wc.send(t);
    const conv1 = inbox.conversation(c1)!;
    const conv2 = inbox.conversation(c2)!;
    expect(conv1).toBeInstanceOf(Conversation);
    expect(conv1.chatId).toBe(c1);
    expect(conv2.chatId).toBe(c2);
    await waitFor(() => conv1.queued === 2 && conv2.queued === 2, 'both chats to have two batches');
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
