// An agent with more chats than one connection can follow (issue 52, finding 11): the daemon
// allows 64 subscriptions per connection (docs/protocol.md §3.2), one of them the inbox's watch,
// so one connection follows at most 63 chats. The Inbox follows every chat anyway, on more
// connections of the agent; a chat it cannot follow (the daemon refuses another session of the
// agent) is listed as not followed, with why, and thrown once by wait(). Also: 62 claims of one
// agent at once pass the claims-per-minute quota by waiting its retryAfterMs (docs/security.md,
// "Quotas").

import { afterEach, describe, expect, it } from 'vitest';
import { ChatWriter, Inbox, YelloClient, type InboxBatch } from '../../src/client/index.js';
import { connectAdmin, connectAgent, uniqueName, type Participant } from '../helpers/client-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';

// Two sessions per agent: the inbox's own connection and one more, so a third is refused.
const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open', '--max-sessions-per-agent', '2'] }, (d) => connectAdmin(d));

async function makeAgent(name: string): Promise<Participant> {
  const a = await admin().rpc.agents.create({ username: uniqueName(name), name: `${name} the agent` });
  return { id: a.agent.id, username: a.agent.username, token: a.token, streamId: '' };
}

async function clientOf(who: Participant): Promise<YelloClient> {
  return connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
}

/** `n` chats of `bob` with new agents, each of whom wrote one message (`hello <i>`): their ids, and the peers. */
async function chatsWith(bob: Participant, n: number): Promise<{ ids: string[]; peers: Map<string, Participant> }> {
  const ids: string[] = [];
  const peers = new Map<string, Participant>();
  for (let i = 0; i < n; i++) {
    const peer = await makeAgent(`peer${i}`);
    const { chat } = await admin().rpc.chats.open({ agentAId: peer.id, agentBId: bob.id });
    // The peer's connection closes after it wrote: its claim is abandoned, for a later writer to take over.
    const c = await connectAgent(daemon(), peer);
    await new ChatWriter(c, { chatId: chat.id }).send(`hello ${i}`);
    c.close();
    ids.push(chat.id);
    peers.set(chat.id, peer);
  }
  return { ids, peers };
}

const opened: YelloClient[] = [];
/** A client of `who` closed when the test ends (its claim then abandoned). */
async function once(who: Participant): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who);
  opened.push(c);
  return c;
}
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
});

/** Everything wait() hands out until it has been quiet for `quietMs`. */
async function drain(inbox: Inbox, quietMs: number): Promise<InboxBatch[]> {
  const got: InboxBatch[] = [];
  for (;;) {
    const next = await inbox.wait({ waitMs: quietMs });
    if (!next) return got;
    got.push(next);
  }
}

/** Whether `who` can open two sessions now (the daemon allows two per agent here). */
async function bothSessionsFree(who: Participant): Promise<boolean> {
  const a = await connectAgent(daemon(), who);
  try {
    const b = await connectAgent(daemon(), who).catch(() => null);
    b?.close();
    return b !== null;
  } finally {
    a.close();
  }
}

describe('Inbox with more chats than one connection follows (issue 52, finding 11)', () => {
  it('follows all 70 chats: wait() hands out the message of every one, list() reports all 70 followed', async () => {
    const bob = await makeAgent('bob');
    const { ids, peers } = await chatsWith(bob, 70);
    const client = await clientOf(bob);
    const inbox = await Inbox.open(client);
    try {
      expect(inbox.chatIds.sort()).toEqual([...ids].sort());
      const got = await drain(inbox, 1500);
      expect(got.map((b) => b.chatId).sort()).toEqual([...ids].sort());
      expect(got.every((b) => b.batch.messages.length === 1)).toBe(true);
      const listed = await inbox.list();
      expect(listed).toHaveLength(70);
      expect(listed.filter((e) => !e.followed || e.failure).map((e) => [e.chatId, e.failure?.message])).toEqual([]);
      expect(listed.every((e) => e.unreadMessages === 1)).toBe(true);

      // A message written later wakes the inbox in every chat, those beyond the first 63 too.
      for (const chatId of [ids[0]!, ids[69]!]) {
        const waiting = inbox.wait({ waitMs: 10_000 });
        await new ChatWriter(await once(peers.get(chatId)!), { chatId }).send('later');
        expect((await waiting)?.chatId).toBe(chatId);
      }
    } finally {
      await inbox.close();
      client.close();
    }
  }, 180_000);

  it('a chat it gets no connection for is listed as not followed with why, thrown once by wait(), and followed once a session is free', async () => {
    const bob = await makeAgent('bob');
    const { ids } = await chatsWith(bob, 64);
    const client = await clientOf(bob);
    // Bob's other session: with it, the daemon refuses the inbox a second connection.
    const other = await clientOf(bob);
    const inbox = await Inbox.open(client);
    try {
      const listed = await inbox.list();
      expect(listed).toHaveLength(64);
      const missing = listed.filter((e) => !e.followed);
      expect(missing).toHaveLength(1);
      const [entry] = missing;
      expect(entry!.failure?.message).toMatch(/not followed/);
      expect(entry!.failure?.message).toContain(entry!.chatId);
      expect(entry!.failure).toMatchObject({ type: 'NOT_FOLLOWED', transient: true });
      // wait() says so once, then goes on with the chats it follows.
      const thrown: unknown[] = [];
      const got: InboxBatch[] = [];
      for (;;) {
        try {
          const next = await inbox.wait({ waitMs: 1500 });
          if (!next) break;
          got.push(next);
        } catch (err) {
          thrown.push(err);
        }
      }
      expect(thrown).toHaveLength(1);
      expect(thrown[0]).toBe(entry!.failure);
      expect(got).toHaveLength(63);
      expect(got.map((b) => b.chatId)).not.toContain(entry!.chatId);

      // The other session ends: the inbox tries again by itself (its backoff, up to 30 s apart;
      // nothing here calls list()), follows the chat, and its message comes.
      other.close();
      const last = await inbox.wait({ waitMs: 40_000 });
      expect(last?.chatId).toBe(entry!.chatId);
      expect(ids).toContain(entry!.chatId);
      expect(inbox.unfollowed).toEqual([]);
      expect((await inbox.list()).filter((e) => !e.followed)).toEqual([]);
    } finally {
      await inbox.close();
      other.close();
      client.close();
    }
    // The inbox's own connections closed with it.
    await expect.poll(() => bothSessionsFree(bob), { timeout: 5000 }).toBe(true);
  }, 180_000);

  it('62 streams of one agent claimed at once: each ChatWriter waits out the claims-per-minute quota (retryAfterMs) instead of failing', async () => {
    const bob = await makeAgent('bob');
    const { ids } = await chatsWith(bob, 62);
    const client = await clientOf(bob);
    try {
      const writers = ids.map((chatId) => new ChatWriter(client, { chatId }));
      const started = Date.now();
      const sent = await Promise.allSettled(writers.map((w, i) => w.send(`reply ${i}`)));
      expect(sent.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []))).toEqual([]);
      // 60 claims pass at once; the bucket refills one a second, so the last two waited.
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      await Promise.all(writers.map((w) => w.release()));
    } finally {
      client.close();
    }
  }, 180_000);
});
