// chats.watch and the chats.opened notification (docs/protocol.md §6.5, §6.8; issue 20: an
// inbox wait across all of an agent's chats, chats opened later included): a watch is told of
// every chat created later that includes its agent — opened by the peer, by the agent itself or
// by the admin — and of nothing else; it ends with chats.unfollow; it counts toward the 64
// subscriptions of a connection; the admin may not watch.

import { describe, expect, it } from 'vitest';
import type { Chat, ChatOpenedNotification } from '../../src/shared/types.js';
import { expectError, ok } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { createAgent, type TestAgent, type Wire } from '../helpers/wire-fixtures.js';

const { daemon, admin } = useDaemon();

/** The chats.opened params this connection received for `subscriptionId`, in order. */
function openedOf(c: Wire, subscriptionId: string): ChatOpenedNotification[] {
  return c.notifications
    .filter((n) => n.method === 'chats.opened' && (n.params as { subscriptionId?: unknown }).subscriptionId === subscriptionId)
    .map((n) => n.params as ChatOpenedNotification);
}

async function agent(): Promise<TestAgent> {
  return createAgent(admin(), daemon().socketPath);
}

async function grant(from: TestAgent, to: TestAgent): Promise<void> {
  ok(await admin().call('grants.add', { agentId: from.id, peerAgentId: to.id }));
}

async function watch(c: Wire): Promise<string> {
  return ok(await c.call('chats.watch', {})).subscriptionId;
}

/** Waits for the `n`-th chats.opened of a watch and returns the chats so far. */
async function opened(c: Wire, subscriptionId: string, n: number): Promise<Chat[]> {
  await waitFor(() => openedOf(c, subscriptionId).length >= n, `chats.opened #${n}`, 10_000);
  return openedOf(c, subscriptionId).map((o) => o.chat);
}

describe('chats.watch', () => {
  it('pushes chats.opened to both agents when the peer opens a chat, with the chat as chats.get returns it', async () => {
    const alice = await agent();
    const bob = await agent();
    await grant(alice, bob);
    const bobWatch = await watch(bob.client);
    const aliceWatch = await watch(alice.client);
    const r = ok(await alice.client.call('chats.open', { peerAgentId: bob.id }));
    expect(r.created).toBe(true);
    const [toBob] = await opened(bob.client, bobWatch, 1);
    const [toAlice] = await opened(alice.client, aliceWatch, 1);
    const asGot = ok(await bob.client.call('chats.get', { chatId: r.chat.id })).chat;
    expect(toBob).toEqual(asGot);
    expect(toAlice).toEqual(asGot);
  });

  it('pushes chats.opened when the admin opens a chat; not for a chat that already existed, nor to unrelated agents', async () => {
    const bob = await agent();
    const carol = await agent();
    const dave = await agent();
    const bobWatch = await watch(bob.client);
    const daveWatch = await watch(dave.client);
    const first = ok(await admin().call('chats.open', { agentAId: bob.id, agentBId: carol.id }));
    expect((await opened(bob.client, bobWatch, 1)).map((c) => c.id)).toEqual([first.chat.id]);
    // Opening it again finds it: nothing is pushed. A chat of dave's comes next, and it is the
    // first thing dave's watch ever got (so bob's and carol's chat was not sent to it).
    expect(ok(await admin().call('chats.open', { agentAId: carol.id, agentBId: bob.id })).created).toBe(false);
    const daves = ok(await admin().call('chats.open', { agentAId: dave.id, agentBId: carol.id }));
    expect((await opened(dave.client, daveWatch, 1)).map((c) => c.id)).toEqual([daves.chat.id]);
    const again = ok(await admin().call('chats.open', { agentAId: bob.id, agentBId: dave.id }));
    expect((await opened(bob.client, bobWatch, 2)).map((c) => c.id)).toEqual([first.chat.id, again.chat.id]);
  });

  it('ends with chats.unfollow; a second watch of the same connection goes on', async () => {
    const bob = await agent();
    const carol = await agent();
    const ended = await watch(bob.client);
    const kept = await watch(bob.client);
    expect(ok(await bob.client.call('chats.unfollow', { subscriptionId: ended }))).toEqual({ subscriptionId: ended, ended: true });
    const r = ok(await admin().call('chats.open', { agentAId: bob.id, agentBId: carol.id }));
    expect((await opened(bob.client, kept, 1)).map((c) => c.id)).toEqual([r.chat.id]);
    expect(openedOf(bob.client, ended)).toEqual([]);
    // An ended watch, or one of another connection, is NOT_FOUND.
    expectError(await bob.client.call('chats.unfollow', { subscriptionId: ended }), 'NOT_FOUND');
    const other = await daemon().connectAs(bob.token);
    expectError(await other.call('chats.unfollow', { subscriptionId: kept }), 'NOT_FOUND');
  });

  it('counts toward the 64 subscriptions of a connection, together with chats.follow', async () => {
    const bob = await agent();
    const carol = await agent();
    const chat = ok(await admin().call('chats.open', { agentAId: bob.id, agentBId: carol.id })).chat;
    const c = await daemon().connectAs(bob.token);
    const follows: string[] = [];
    for (let i = 0; i < 32; i++) follows.push(ok(await c.call('chats.follow', { chatId: chat.id })).subscriptionId);
    const watches: string[] = [];
    for (let i = 0; i < 32; i++) watches.push(await watch(c));
    expectError(await c.call('chats.watch', {}), 'RATE_LIMITED');
    expectError(await c.call('chats.follow', { chatId: chat.id }), 'RATE_LIMITED');
    ok(await c.call('chats.unfollow', { subscriptionId: watches[0]! }));
    ok(await c.call('chats.follow', { chatId: chat.id }));
    expectError(await c.call('chats.watch', {}), 'RATE_LIMITED');
    ok(await c.call('chats.unfollow', { subscriptionId: follows[0]! }));
    await watch(c);
  });

  it('is agents only: the admin gets PERMISSION_DENIED/AGENT_ONLY', async () => {
    const data = expectError(await admin().call('chats.watch', {}), 'PERMISSION_DENIED');
    expect(data.reason).toBe('AGENT_ONLY');
  });
});
