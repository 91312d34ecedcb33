// Inbox (docs/protocol.md §8): one wait across all of an agent's chats, chats opened after it
// started included (chats.watch); list() with unread counts, last activity and a preview.

import { describe, expect, it, vi } from 'vitest';
import { ChatWriter, ContinuityBreakError, Inbox, remoteError, YelloClient } from '../../src/client/index.js';
import { connectAgent, uniqueName, type Participant } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

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
