// Pins behaviour of src/client/inbox.ts that test/client/inbox.test.ts leaves
// unchecked: against a real daemon, through the public client API.
// What each test pins: the subscriptions an inbox holds on its connection (freed by close(),
// RATE_LIMITED when the connection has 64: a failed open leaves none, a chat refused for room
// there goes on another connection), close() while a chat is opening, the wake when a chat opens during a wait, waits
// that sleep instead of spinning and leave no timer or listener behind, the order of chats after a
// failure and the failure thrown once, batches before a failure, list() with the agent on either
// side of a chat and after a trim past the receipt, a chat that cannot be opened, more chats than a
// page of chats.list, and the watch after a daemon restart (also when the first watch again is
// refused).

import { getEventListeners } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import {
  ChatWriter,
  ContinuityBreakError,
  Conversation,
  Inbox,
  YelloClientError,
  type InboxEntry,
  type Chat,
  type YelloClient,
} from '../../src/client/index.js';
import { connectAgent, uniqueName, type Participant } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { sleep, waitFor } from '../helpers/wait.js';

const { daemon, admin, clients } = useClientDaemon({ reconnect: { minDelayMs: 20, maxDelayMs: 200 } });

/** The daemon's cap of subscriptions (follows and watches) per connection. */
const MAX_SUBS = 64;

async function makeAgent(name: string): Promise<Participant> {
  const a = await admin().rpc.agents.create({ username: uniqueName(name), name: `${name} the agent` });
  return { id: a.agent.id, username: a.agent.username, token: a.token, streamId: '' };
}

async function clientOf(who: Participant): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
  clients.push(c);
  return c;
}

async function openChat(a: Participant, b: Participant): Promise<Chat> {
  return (await admin().rpc.chats.open({ agentAId: a.id, agentBId: b.id })).chat;
}

/** Watches on `client` until the daemon refuses one: how many more subscriptions it had room for (their ids in `ids`). */
async function fillSubscriptions(client: YelloClient, ids: string[] = []): Promise<number> {
  let n = 0;
  for (;;) {
    try {
      ids.push((await client.call('chats.watch', {})).subscriptionId);
      n += 1;
    } catch (err) {
      expect((err as YelloClientError).type).toBe('RATE_LIMITED');
      return n;
    }
  }
}

/** The sum of a counter of the daemon's metrics (`daemon.metrics`) over the series with `labels`. */
async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const { text } = await admin().call('daemon.metrics', {});
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^(\w+)\{([^}]*)\}\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    if (Object.entries(labels).every(([k, v]) => m[2]!.split(',').includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

/** Inbox entries with each failure as its class and message (listOnce and list make their own errors). */
function comparable(entries: InboxEntry[]) {
  return entries.map((e) => ({ ...e, failure: e.failure && { class: e.failure.constructor.name, message: e.failure.message } }));
}

async function expectRejects(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('resolved');
    },
    (e: unknown) => e,
  );
}

/** Rejects with "hung" after `ms` (a wait that should already have settled). */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  return Promise.race([p, sleep(ms).then(() => Promise.reject(new Error('hung')))]);
}

const texts = (b: { batch: { messages: { wrapper: { type: string; message?: { content: string } } }[] } } | null) =>
  b ? b.batch.messages.map((r) => r.wrapper.message?.content ?? '') : null;

describe('Inbox when subscriptions run out, chats fail, waits end and the daemon restarts', () => {
  it('open(): the BAD_TOKEN message; a refused chats.watch (64 subscriptions) rejects open() with RATE_LIMITED', async () => {
    const err = (await expectRejects(Inbox.open(admin()))) as YelloClientError;
    expect(err.message).toBe('an inbox needs an agent token');
    const bob = await makeAgent('bob');
    const bobClient = await clientOf(bob);
    expect(await fillSubscriptions(bobClient)).toBe(MAX_SUBS);
    const refused = (await expectRejects(Inbox.open(bobClient))) as YelloClientError;
    expect(refused).toBeInstanceOf(YelloClientError);
    expect(refused.type).toBe('RATE_LIMITED');
  });

  it('subscriptions: a chat its connection has no room for (RATE_LIMITED) is followed on another connection (issue 52, finding 11); close() frees the watch and every follow', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const chat = await openChat(alice, bob);
    const bobClient = await clientOf(bob);
    const mine: string[] = [];
    // Room for the inbox's watch only: its follow of the chat is refused there, and goes on a
    // connection of the inbox's own.
    for (let i = 0; i < MAX_SUBS - 1; i++) mine.push((await bobClient.call('chats.watch', {})).subscriptionId);
    const inbox = await Inbox.open(bobClient);
    expect(inbox.chatIds).toEqual([chat.id]);
    expect(inbox.conversation(chat.id)).toBeInstanceOf(Conversation);
    const list = await inbox.list();
    expect(list.map((e) => [e.chatId, e.followed, e.failure])).toEqual([[chat.id, true, null]]);
    // The client holds 64 (mine and the watch); the watch comes back with close() (twice is once).
    expect(await fillSubscriptions(bobClient)).toBe(0);
    await inbox.close();
    await inbox.close();
    expect(await fillSubscriptions(bobClient)).toBe(1);
  });

  it('close() while a chat is opening: follow() gives null and the Conversation opened meanwhile is closed', async () => {
    const bob = await makeAgent('bob');
    const peer = await makeAgent('peer');
    const bobClient = await clientOf(bob);
    const inbox = await Inbox.open(bobClient);
    const { chat } = await bobClient.rpc.chats.open({ peerAgentId: peer.id });
    const followed = inbox.follow(chat);
    const closing = inbox.close();
    expect(await followed).toBeNull();
    await closing;
    expect(inbox.conversation(chat.id)).toBeNull();
    expect(await fillSubscriptions(bobClient)).toBe(MAX_SUBS);
  });

  it('a wait wakes when a chat opens with a message in it; an abort ends a wait of an inbox without chats', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const inbox = await Inbox.open(await clientOf(bob));
    expect(inbox.chatIds).toEqual([]);
    const ac = new AbortController();
    const reason = new Error('stop');
    const aborted = inbox.wait({ signal: ac.signal });
    setTimeout(() => {
      ac.abort(reason);
    }, 50);
    expect(await expectRejects(within(aborted, 3000))).toBe(reason);
    // The wait starts before the chat exists: it has no Conversation to wait on, only the wake of
    // the chat's opening lets it wait on the new chat's Conversation.
    const started = Date.now();
    const waiting = inbox.wait({ waitMs: 8000 });
    const chat = await openChat(alice, bob);
    await waitFor(() => inbox.conversation(chat.id), 'the chat followed');
    const wa = new ChatWriter(await clientOf(alice), { chatId: chat.id });
    await wa.send('after bob follows');
    expect(texts(await waiting)).toEqual(['after bob follows']);
    expect(Date.now() - started).toBeLessThan(4000);
    await wa.release();
    await inbox.close();
  });

  it('waitMs: a wait of an inbox without chats ends when waitMs is up; waitMs 0 looks once, even on a clock that stands still', async () => {
    const bob = await makeAgent('bob');
    const inbox = await Inbox.open(await clientOf(bob));
    const started = Date.now();
    expect(await within(inbox.wait({ waitMs: 200 }), 3000)).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    // Date.now() frozen (only Date is faked; timers are real): no time passes, waitMs 0 still answers.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      expect(await within(inbox.wait({ waitMs: 0 }), 2000)).toBeNull();
    } finally {
      vi.useRealTimers();
    }
    await inbox.close();
  });

  it('waits sleep (no spinning), and leave no timer and no abort listener behind', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    await openChat(alice, bob);
    const inbox = await Inbox.open(await clientOf(bob));
    const queued = vi.spyOn(Conversation.prototype, 'queued', 'get');
    try {
      // Left out waitMs: as long as it takes (here: until the abort).
      const ac = new AbortController();
      const waiting = inbox.wait({ signal: ac.signal });
      await sleep(600); // time is the subject: how often the inbox looked in 600 ms
      ac.abort(new Error('enough'));
      await expect(waiting).rejects.toThrow('enough');
      expect(queued.mock.calls.length).toBeLessThan(20);
      queued.mockClear();
      expect(await inbox.wait({ waitMs: 400 })).toBeNull();
      expect(queued.mock.calls.length).toBeLessThan(20);
    } finally {
      queued.mockRestore();
    }
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const ac = new AbortController();
    const waiting = inbox.wait({ waitMs: 60_000, signal: ac.signal });
    await new Promise((r) => setImmediate(r));
    expect(timers()).toBeGreaterThan(before);
    ac.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
    expect(timers()).toBe(before);
    // A wait that ran out removes its listener from the caller's signal.
    const kept = new AbortController();
    expect(await inbox.wait({ waitMs: 50, signal: kept.signal })).toBeNull();
    expect(getEventListeners(kept.signal, 'abort')).toHaveLength(0);
    expect(timers()).toBe(before);
    await inbox.close();
  });

  it('batches that came before a failure first; the failure once; the chat after the failed one has the next turn', async () => {
    const bob = await makeAgent('bob');
    const peers = [await makeAgent('p0'), await makeAgent('p1'), await makeAgent('p2')];
    for (const p of peers) await openChat(p, bob);
    const bobClient = await clientOf(bob);
    const inbox = await Inbox.open(bobClient);
    const ids = inbox.chatIds; // the order of the turns
    expect(ids).toHaveLength(3);
    const peerOf = async (chatId: string) => {
      const { chat } = await admin().rpc.chats.get({ chatId });
      const id = chat.agentAId === bob.id ? chat.agentBId : chat.agentAId;
      return peers.find((p) => p.id === id)!;
    };
    const [pa, pb, pc] = [await peerOf(ids[0]!), await peerOf(ids[1]!), await peerOf(ids[2]!)];
    const writers = new Map<string, ChatWriter>();
    for (const [p, chatId] of [
      [pa, ids[0]!],
      [pb, ids[1]!],
      [pc, ids[2]!],
    ] as const)
      writers.set(chatId, new ChatWriter(await clientOf(p), { chatId }));
    const [A, B, C] = ids as [string, string, string];
    const send = async (chatId: string, text: string) => {
      await writers.get(chatId)!.send(text);
      await waitFor(() => inbox.conversation(chatId)!.queued > 0, `a batch in ${chatId}`);
    };
    const next = async () => (await inbox.wait({ waitMs: 0 }))?.chatId ?? null;
    // Turn 0: A is empty, B answers; the next turn is C's, not A's.
    await send(B, 'b1');
    await send(C, 'c1');
    expect(await next()).toBe(B);
    await send(A, 'a1');
    expect(await next()).toBe(C);
    expect(await next()).toBe(A);
    await send(C, 'c2');
    expect(await next()).toBe(C); // turn back at A
    expect(await next()).toBeNull();
    // B breaks (a reset behind b1, read but not acknowledged) while C has a batch and A none.
    await send(C, 'c3');
    await admin().rpc.streams.reset({ streamId: `${B}:${pb.id}`, reason: 'guard' });
    await waitFor(() => inbox.conversation(B)!.failure, 'the break of B');
    expect(await expectRejects(inbox.wait({ waitMs: 0 }))).toBeInstanceOf(ContinuityBreakError);
    await send(A, 'a2');
    // After the failure at B the turn is C's.
    expect(await next()).toBe(C);
    expect(await next()).toBe(A);
    // B is not thrown again, nor read again.
    expect(await next()).toBeNull();
    expect(await inbox.wait({ waitMs: 100 })).toBeNull();

    // A batch that arrived before its chat's failure comes first, then the failure (once).
    const [d] = [await makeAgent('d')];
    const chatD = await openChat(d, bob);
    const wd = new ChatWriter(await clientOf(d), { chatId: chatD.id });
    await waitFor(() => inbox.conversation(chatD.id), 'the chat with d followed');
    await wd.send('d1');
    await waitFor(() => inbox.conversation(chatD.id)!.queued === 1, 'd1 queued');
    await admin().rpc.streams.reset({ streamId: `${chatD.id}:${d.id}`, reason: 'guard' });
    await waitFor(() => inbox.conversation(chatD.id)!.failure, 'the break of the chat with d');
    expect(texts(await inbox.wait({ waitMs: 0 }))).toEqual(['d1']);
    expect(await expectRejects(inbox.wait({ waitMs: 0 }))).toBeInstanceOf(ContinuityBreakError);
    expect(await inbox.wait({ waitMs: 0 })).toBeNull();
    await inbox.close();
  });

  it('list(): the peer whichever side of the chat the agent is; unread after a trim past the receipt; a chat that cannot be opened', async () => {
    // Chats keep their two agents in id order: a bob with one peer of a smaller id and one of a
    // larger (a bob whose id sorts first or last among five peers is made again).
    let bob: Participant;
    let ps: Participant[];
    let lower: Participant | undefined;
    let higher: Participant | undefined;
    do {
      bob = await makeAgent('bob');
      ps = [await makeAgent('p0'), await makeAgent('p1'), await makeAgent('p2'), await makeAgent('p3'), await makeAgent('p4')];
      lower = ps.find((p) => p.id < bob.id);
      higher = ps.find((p) => p.id > bob.id);
    } while (!lower || !higher);
    const third = ps.find((p) => p !== lower && p !== higher)!;
    const peerOfChat = new Map<string, Participant>();
    for (const p of [lower, higher, third]) peerOfChat.set((await openChat(p, bob)).id, p);
    const chatIds = [...peerOfChat.keys()];
    const bobClient = await clientOf(bob);
    // The messages go to the chat chats.list gives second of three: the sort of list() then
    // compares it with a chat without activity on either side of it.
    const order = (await bobClient.call('chats.list', { limit: 500 })).chats.map((c) => c.id);
    expect([...order].sort()).toEqual([...chatIds].sort());
    const withAlice = order[1]!;
    const alice = peerOfChat.get(withAlice)!;
    // bob acknowledges a1; a2 and a3 follow; then a trim (force) keeps a3 only, past bob's receipt.
    const wa = new ChatWriter(await clientOf(alice), { chatId: withAlice });
    const reads = await Conversation.open(bobClient, { chatId: withAlice });
    await wa.send('a1');
    const first = (await reads.next({ waitMs: 5000 }))!;
    const bobWrites = new ChatWriter(bobClient, { chatId: withAlice });
    await bobWrites.ack(first);
    await reads.close();
    await bobWrites.release();
    await wa.send('a2');
    await wa.send('a3');
    const { streams } = await admin().rpc.chats.get({ chatId: withAlice });
    const aliceStream = streams.find((s) => s.authorAgentId === alice.id)!;
    const keep = BigInt(aliceStream.nextPosition) - 1n;
    expect(BigInt(first.nextPosition)).toBeLessThan(keep);
    await admin().rpc.streams.trim({ streamId: aliceStream.streamId, beforePosition: keep.toString(), force: true });
    const inbox = await Inbox.open(bobClient);
    expect(inbox.chatIds.sort()).toEqual([...chatIds].sort());
    const list = await inbox.list();
    expect(list).toHaveLength(chatIds.length);
    for (const e of list) {
      const { chat } = await admin().rpc.chats.get({ chatId: e.chatId });
      expect(e.peer.agentId).toBe(chat.agentAId === bob.id ? chat.agentBId : chat.agentAId);
    }
    // Newest activity first; chats without a message last.
    expect(list[0]!.chatId).toBe(withAlice);
    const entry = list.find((e) => e.chatId === withAlice)!;
    expect(entry.unreadMessages).toBe(1);
    expect(entry.preview).toBe('a3');
    // bob's Conversation cannot start at his receipt (trimmed): the chat stays followed with that failure, thrown once.
    expect(entry.failure).toBeInstanceOf(ContinuityBreakError);
    expect(inbox.conversation(withAlice)).toBeNull();
    // Read once, without an inbox: the same entries, the break found by opening that chat alone.
    expect(comparable(await Inbox.listOnce(bobClient))).toEqual(comparable(list));
    expect(entry.followed).toBe(false);
    expect(await expectRejects(inbox.wait({ waitMs: 0 }))).toBe(entry.failure);
    expect(await inbox.wait({ waitMs: 0 })).toBeNull();
    await wa.release();
    await inbox.close();
  });

  it('listOnce(): follows only a chat with something after the receipt, and only while it reads it; a follow refused for room is the failure of that chat; agents only', async () => {
    const bob = await makeAgent('bob');
    const [alice, carol] = [await makeAgent('alice'), await makeAgent('carol')];
    const quiet = await openChat(alice, bob);
    const busy = await openChat(carol, bob);
    const wc = new ChatWriter(await clientOf(carol), { chatId: busy.id });
    await wc.send('c1');
    const bobClient = await clientOf(bob);
    const ids: string[] = [];
    expect(await fillSubscriptions(bobClient, ids)).toBe(MAX_SUBS);
    // No room on the connection: the quiet chat needs no follow; the busy one cannot be looked at.
    const full = await Inbox.listOnce(bobClient);
    expect(full.find((e) => e.chatId === quiet.id)).toMatchObject({ unreadMessages: 0, followed: true, failure: null });
    const refused = full.find((e) => e.chatId === busy.id)!;
    expect(refused).toMatchObject({ unreadMessages: 1, preview: 'c1', followed: false });
    expect((refused.failure as YelloClientError).type).toBe('RATE_LIMITED');
    // Room for one: the busy chat is opened, found readable, and closed again (the room is free after).
    await bobClient.call('chats.unfollow', { subscriptionId: ids.pop()! });
    const listed = await Inbox.listOnce(bobClient);
    expect(listed.map((e) => [e.chatId, e.unreadMessages, e.followed, e.failure])).toEqual([
      [busy.id, 1, true, null],
      [quiet.id, 0, true, null],
    ]);
    expect(await fillSubscriptions(bobClient, ids)).toBe(1);
    expect(((await expectRejects(Inbox.listOnce(admin()))) as YelloClientError).type).toBe('BAD_TOKEN');
    await wc.release();
  });

  it('list() reads a peer stream only where there is something after the receipt (daemon metrics)', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const chat = await openChat(alice, bob);
    const inbox = await Inbox.open(await clientOf(bob));
    const reads = () => counter('yello_reads_total', { method: 'streams.read' });
    let before = await reads();
    expect((await inbox.list()).map((e) => e.unreadMessages)).toEqual([0]);
    expect((await reads()) - before).toBe(0);
    const wa = new ChatWriter(await clientOf(alice), { chatId: chat.id });
    await wa.send('one');
    before = await reads();
    expect((await inbox.list()).map((e) => e.unreadMessages)).toEqual([1]);
    expect((await reads()) - before).toBe(1);
    await wa.release();
    await inbox.close();
  });

  it('more chats than a page of chats.list (500): open() reads every page, each with its cursor', async () => {
    const bob = await makeAgent('bob');
    for (let i = 0; i < 501; i += 50)
      await Promise.all(Array.from({ length: Math.min(50, 501 - i) }, async (_, j) => openChat(await makeAgent(`x${i + j}`), bob)));
    const bobClient = await clientOf(bob);
    const refused = () => counter('yello_refusals_total', { type: 'RATE_LIMITED' });
    const before = await refused();
    const inbox = await within(Inbox.open(bobClient), 60_000);
    // Every chat followed, the 501st (the second page) included: 63 on the client (64
    // subscriptions per connection, one for the watch), the rest on 7 connections of the
    // inbox's own; none refused (the inbox counts what each connection holds).
    expect(inbox.chatIds).toHaveLength(501);
    expect(inbox.unfollowed).toEqual([]);
    expect((await refused()) - before).toBe(0);
    await inbox.close();
  }, 90_000);

  it('after a daemon restart the inbox watches again: a chat opened then is followed', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const carol = await makeAgent('carol');
    const bobClient = await clientOf(bob);
    const inbox = await Inbox.open(bobClient);
    await daemon().restart();
    await waitFor(() => bobClient.connected, 'bob reconnected');
    const chat = await waitFor(() => openChat(alice, bob).catch(() => null), 'the admin client back');
    await waitFor(() => inbox.conversation(chat.id), 'the chat opened after the restart followed');
    const chat2 = await openChat(carol, bob);
    await waitFor(() => inbox.conversation(chat2.id), 'the second chat followed');
    // bob's connection holds the inbox's watch and two follows, no more.
    expect(await fillSubscriptions(bobClient)).toBe(MAX_SUBS - 3);
    await inbox.close();
  });

  it('after a restart a refused watch (RATE_LIMITED) is tried again soon, until the inbox is closed', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const bobClient = await clientOf(bob);
    // Registered before the inboxes' listeners: on 'reconnected' these 64 watches reach the daemon first.
    const mine: Promise<string>[] = [];
    bobClient.on('reconnected', () => {
      for (let i = 0; i < MAX_SUBS; i++) mine.push(bobClient.call('chats.watch', {}).then((r) => r.subscriptionId));
    });
    const inbox = await Inbox.open(bobClient);
    const closing = await Inbox.open(bobClient);
    await daemon().restart();
    await waitFor(() => mine.length === MAX_SUBS, 'the reconnect');
    const ids = await Promise.all(mine);
    await sleep(150); // time is the subject: both inboxes' watches are refused meanwhile, and retried
    // Retried after a backoff, not at once: a few refusals (counted since the restart), not hundreds.
    const refusedSoFar = await waitFor(
      () => counter('yello_refusals_total', { type: 'RATE_LIMITED' }).catch(() => null),
      'the admin client back',
    );
    expect(refusedSoFar).toBeLessThan(30);
    const invalidBefore = await counter('yello_refusals_total', { type: 'INVALID_PARAMS' });
    // Closed while it has no watch: it asks the daemon nothing (no unfollow of a null watch).
    await closing.close();
    expect(await counter('yello_refusals_total', { type: 'INVALID_PARAMS' })).toBe(invalidBefore);
    for (const id of ids.slice(0, 3)) await bobClient.call('chats.unfollow', { subscriptionId: id });
    const freed = Date.now();
    const chat = await openChat(alice, bob);
    await waitFor(() => inbox.conversation(chat.id), 'the chat followed once the watch is back');
    // The retry comes after its backoff (50 ms on), not after 2 s.
    expect(Date.now() - freed).toBeLessThan(1500);
    // The closed inbox took no slot: one of the three is left, also after its longest backoff (2 s).
    await sleep(2100); // time is the subject: a retry of the closed inbox would have come by now
    expect(closing.chatIds).toEqual([]);
    expect(await fillSubscriptions(bobClient)).toBe(1);
    await inbox.close();
  });
  // 296:77 `jitter: true` → false, and 297:29 the loop's `this.#watchId === null` → true. The
  // rewatch loop's sleeps are seen (and, for the second test, held) through a spy on setTimeout
  // that picks the timers set by inbox.ts itself.

  it('a refused rewatch backs off with jitter: 50, 100, 200 ms … each spread over half to all of it', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const bobClient = await clientOf(bob);
    const mine = watchOnReconnect(bobClient);
    const inbox = await Inbox.open(bobClient);
    const delays: number[] = [];
    const spy = spyOnInboxTimers((delay) => {
      delays.push(delay);
      return 'schedule';
    });
    try {
      await daemon().restart();
      await waitFor(() => delays.length >= 4, 'four refused rewatches');
    } finally {
      spy.mockRestore();
    }
    const ids = await Promise.all(mine);
    delays.slice(0, 4).forEach((d, i) => {
      const base = 50 * 2 ** i;
      expect(d).toBeGreaterThanOrEqual(base / 2);
      expect(d).toBeLessThanOrEqual(base);
    });
    // Without jitter every delay is exactly its base; with it, all four being so has probability 0.
    expect(delays.slice(0, 4).filter((d, i) => d !== 50 * 2 ** i).length).toBeGreaterThan(0);
    for (const id of ids.slice(0, 2)) await bobClient.call('chats.unfollow', { subscriptionId: id });
    const chat = await openChat(alice, bob);
    await waitFor(() => inbox.conversation(chat.id), 'the inbox watching again: the chat followed');
    await inbox.close();
  });

  it('a rewatch loop asleep across a second restart stops when the next loop has watched: one watch, not two', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const bobClient = await clientOf(bob);
    let fill = true;
    const mine = watchOnReconnect(bobClient, () => fill);
    const inbox = await Inbox.open(bobClient);
    const { held, spy } = holdInboxTimers();
    try {
      await daemon().restart();
      await waitFor(() => held.length === 1, 'the first loop refused and asleep');
      await Promise.all(mine);
      fill = false;
      await daemon().restart();
      await waitFor(() => bobClient.connected, 'bob reconnected');
      // The second loop watches (nothing refuses it) while the first is still asleep.
      const chat = await waitFor(() => openChat(alice, bob).catch(() => null), 'the admin client back');
      await waitFor(() => inbox.conversation(chat.id), 'the second loop watching: a chat opened now is followed');
      expect(held).toHaveLength(1);
    } finally {
      spy.mockRestore();
    }
    held[0]!();
    await sleep(300); // time is the subject: a second watch by the woken loop would have come by now
    // bob's connection holds the inbox's one watch and its follow of the chat.
    expect(await fillSubscriptions(bobClient)).toBe(MAX_SUBS - 2);
    await inbox.close();
  });
  it('while its watch is refused the inbox ignores chats.opened of the other watches on its connection; its own watch, once back, follows the chat', async () => {
    const bob = await makeAgent('bob');
    const alice = await makeAgent('alice');
    const bobClient = await clientOf(bob);
    const mine = watchOnReconnect(bobClient);
    const inbox = await Inbox.open(bobClient);
    const { held, spy } = holdInboxTimers();
    try {
      await daemon().restart();
      await waitFor(() => held.length === 1, 'the rewatch refused and asleep');
      const ids = await Promise.all(mine);
      for (const id of ids.slice(0, 2)) await bobClient.call('chats.unfollow', { subscriptionId: id });
      // The test's 62 watches are told of this chat; the inbox has no watch.
      const chat = await waitFor(() => openChat(alice, bob).catch(() => null), 'the admin client back');
      await sleep(300); // time is the subject: a follow on another watch's notice would have come by now
      expect(inbox.chatIds).toEqual([]);
      expect(held).toHaveLength(1);
      held[0]!();
      await waitFor(() => inbox.conversation(chat.id), 'the chat followed once the inbox watches again');
    } finally {
      spy.mockRestore();
    }
    // The inbox's watch and its follow took the two freed slots.
    expect(await fillSubscriptions(bobClient)).toBe(0);
    await inbox.close();
  });
});

/**
 * Registered before an inbox's listeners: on each 'reconnected' (while `when()`), MAX_SUBS watches
 * of the test reach the daemon before the inbox's; their subscription ids.
 */
function watchOnReconnect(client: YelloClient, when: () => boolean = () => true): Promise<string>[] {
  const ids: Promise<string>[] = [];
  client.on('reconnected', () => {
    if (!when()) return;
    for (let i = 0; i < MAX_SUBS; i++) ids.push(client.call('chats.watch', {}).then((r) => r.subscriptionId));
  });
  return ids;
}

/** Holds every timer inbox.ts sets (the rewatch loop's sleeps): fire one with `held[i]()`. */
function holdInboxTimers() {
  const held: (() => void)[] = [];
  const spy = spyOnInboxTimers(
    () => 'hold',
    (fire) => held.push(fire),
  );
  return { held, spy };
}

/**
 * Spies on setTimeout: a timer set by src/client/inbox.ts itself (its caller frame) is passed to
 * `decide(delay)`, which schedules it as usual or holds it (given to `hold`, to be fired by the
 * test); every other timer is scheduled untouched.
 */
function spyOnInboxTimers(decide: (delay: number) => 'schedule' | 'hold', hold: (fire: () => void) => void = () => {}) {
  const real = globalThis.setTimeout;
  return vi.spyOn(globalThis, 'setTimeout').mockImplementation((fn: () => void, delay?: number, ...rest: unknown[]) => {
    const caller = (new Error().stack ?? '')
      .split('\n')
      .slice(1)
      .find((f) => !f.includes('node_modules') && !f.includes('inbox-failures.test') && /\/(src|test)\//.test(f));
    if (caller?.includes('/src/client/inbox.') && decide(delay ?? 0) === 'hold') {
      hold(() => {
        Reflect.apply(fn, undefined, rest);
      });
      return real(() => {}, 0);
    }
    return real(() => {
      Reflect.apply(fn, undefined, rest);
    }, delay);
  });
}
