// `yello mcp` with more chats than one daemon connection follows (issue 52, finding 11): 70
// chats with one message each. wait_for_message presents all 70 (it presented 63, the other 7
// were missing from list_chats with no problem flag); acknowledging in all 70 passes the daemon's
// 60 claims a minute by waiting; the unread count and the peer's later messages reach the server
// in every chat. And when the daemon refuses the server another connection, list_chats and
// wait_for_message name the chat that is not followed and why. The server runs in this process
// (createMcpServer over InMemoryTransport) against the real daemon.

import { afterEach, describe, expect, it } from 'vitest';
import { ChatWriter, type YelloClient } from '../../src/client/index.js';
import { connectAdmin, connectAgent, uniqueName, type Participant } from '../helpers/client-fixtures.js';
import { useDaemon, type DaemonFixture } from '../helpers/use-daemon.js';
import { waitFor } from '../helpers/wait.js';
import { ChannelSession } from './channel-client.js';

const sessions: ChannelSession[] = [];
afterEach(async () => {
  await Promise.all(sessions.splice(0).map((s) => s.close()));
});

async function serve(socketPath: string, token: string): Promise<ChannelSession> {
  const s = await ChannelSession.start(socketPath, token, { channel: false });
  sessions.push(s);
  return s;
}

type Fixture = DaemonFixture<YelloClient>;

async function makeAgent(f: Fixture, name: string): Promise<Participant> {
  const a = await f.admin().rpc.agents.create({ username: uniqueName(name), name: `${name} the agent` });
  return { id: a.agent.id, username: a.agent.username, token: a.token, streamId: '' };
}

/** `n` chats of `bob` with new agents, each of whom wrote one message: chat id → peer. */
async function chatsWith(f: Fixture, bob: Participant, n: number): Promise<Map<string, Participant>> {
  const peers = new Map<string, Participant>();
  for (let i = 0; i < n; i++) {
    const peer = await makeAgent(f, `peer${i}`);
    const { chat } = await f.admin().rpc.chats.open({ agentAId: peer.id, agentBId: bob.id });
    // The peer's connection closes after it wrote: its claim is abandoned, for a later writer.
    const c = await connectAgent(f.daemon(), peer);
    await new ChatWriter(c, { chatId: chat.id }).send(`hello ${i}`);
    c.close();
    peers.set(chat.id, peer);
  }
  return peers;
}

interface Listed {
  chats: { chatId: string; unreadMessages: number; problem: string | null; followed: boolean }[];
  total: number;
}

describe('yello mcp with 70 chats (issue 52, finding 11)', () => {
  const f = useDaemon({ extraArgs: ['--policy', 'open'] }, (d) => connectAdmin(d));

  it('presents and acknowledges the message of every chat, lists all 70, and counts what a peer writes later in any of them', async () => {
    const bob = await makeAgent(f, 'bob');
    const peers = await chatsWith(f, bob, 70);
    const ids = [...peers.keys()];
    const s = await serve(f.daemon().socketPath, bob.token);

    const listed = (await s.ok('list_chats', { limit: 500 })) as unknown as Listed;
    expect(listed.total).toBe(70);
    expect(listed.chats.filter((c) => c.problem !== null || !c.followed || c.unreadMessages !== 1)).toEqual([]);

    // Every chat's message, each acknowledged: 70 claims of bob's streams, 10 past the burst.
    const presented: string[] = [];
    for (let i = 0; i < 70; i++) {
      const got = await s.ok('wait_for_message', { waitMs: 10_000 });
      expect(got.chatId, `wait ${i}`).toBeTruthy();
      presented.push(got.chatId as string);
      await s.ok('acknowledge', { chatId: got.chatId });
    }
    expect([...presented].sort()).toEqual([...ids].sort());
    expect(await s.ok('wait_for_message', { waitMs: 500 })).toMatchObject({ chatId: null, batch: null });

    // A peer beyond the first 63 chats writes twice: the server counts and presents it.
    const lastChat = presented[69]!;
    const c = await connectAgent(f.daemon(), peers.get(lastChat)!);
    const w = new ChatWriter(c, { chatId: lastChat });
    await w.send('later one');
    await w.send('later two');
    const opened = await s.ok('open_chat', { peer: peers.get(lastChat)!.username });
    expect(opened).toMatchObject({ chatId: lastChat, unreadMessages: 2 });
    const more = await s.ok('wait_for_message', { waitMs: 10_000 });
    expect(more.chatId).toBe(lastChat);
    await w.release();
    c.close();
  }, 240_000);
});

describe('yello mcp when the daemon refuses it another connection', () => {
  // One session per agent: the server's own connection; the second its inbox needs is refused.
  const f = useDaemon({ extraArgs: ['--policy', 'open', '--max-sessions-per-agent', '1'] }, (d) => connectAdmin(d));

  it('list_chats and wait_for_message name the chat it does not follow, and why', async () => {
    const bob = await makeAgent(f, 'bob');
    const peers = await chatsWith(f, bob, 64);
    const s = await serve(f.daemon().socketPath, bob.token);
    const listed = (await s.ok('list_chats', { limit: 500 })) as unknown as Listed;
    expect(listed.total).toBe(64);
    const missing = listed.chats.filter((c) => !c.followed);
    expect(missing).toHaveLength(1);
    expect(missing[0]).toMatchObject({ problem: 'NOT_FOLLOWED', unreadMessages: 1 });
    const missingId = missing[0]!.chatId;
    expect(peers.has(missingId)).toBe(true);
    const text = await s.text('list_chats', { limit: 500 });
    expect(text).toMatch(new RegExp(`${missingId}.*not followed`));

    // wait_for_message presents the 63 it follows and says which one it does not.
    const presented = new Set<string>();
    for (let i = 0; i < 63; i++) {
      const got = await s.ok('wait_for_message', { waitMs: 10_000 });
      expect(got.unfollowed).toEqual([missingId]);
      presented.add(got.chatId as string);
      await s.ok('acknowledge', { chatId: got.chatId });
    }
    expect(presented.size).toBe(63);
    expect(presented.has(missingId)).toBe(false);
    const none = await s.ok('wait_for_message', { waitMs: 300 });
    expect(none).toMatchObject({ chatId: null, unfollowed: [missingId] });
    expect(await s.text('wait_for_message', { waitMs: 0 })).toContain(`not followed: ${missingId}`);
  }, 240_000);
});

describe('yello mcp --channel when the daemon refuses it another connection', () => {
  // Two sessions per agent: the tools' connection and the channel's; a third is refused.
  const f = useDaemon({ extraArgs: ['--policy', 'open', '--max-sessions-per-agent', '2'] }, (d) => connectAdmin(d));

  it('a chat it gets no connection for is a not-followed event (not a stop), and list_chats says so', async () => {
    const bob = await makeAgent(f, 'bob');
    await chatsWith(f, bob, 63);
    const s = await ChannelSession.start(f.daemon().socketPath, bob.token, { channel: true });
    sessions.push(s);
    // Both connections follow 63 chats each (and the watch): the 64th needs a third. Once both
    // hold bob's two sessions (a third hello is refused), whichever asks first is refused too.
    await s.ok('list_chats', { limit: 500 });
    await waitFor(
      async () => {
        const third = await connectAgent(f.daemon(), bob).catch((err: unknown) => err as Error);
        if (!(third instanceof Error)) third.close();
        return third instanceof Error && (third as { type?: string }).type === 'RATE_LIMITED';
      },
      "the tools' and the channel's connections to hold both sessions of bob",
      30_000,
      100,
    );
    const [late] = [...(await chatsWith(f, bob, 1)).keys()];
    // The tools' inbox was open before the 64th chat came: that one is the chat it does not follow.
    await waitFor(async () => {
      const listed = (await s.ok('list_chats', { limit: 500 })) as unknown as Listed;
      return listed.chats.find((c) => c.chatId === late && !c.followed && c.problem === 'NOT_FOLLOWED');
    }, 'list_chats to show the 64th chat not followed');
    // The channel's inbox may have been opening when it came: it leaves out one of the 64, and says which.
    await waitFor(() => s.events.some((e) => e.meta.event === 'not-followed'), 'a not-followed event', 30_000);
    const notFollowed = s.events.filter((e) => e.meta.event === 'not-followed');
    expect(notFollowed).toHaveLength(1);
    const [event] = notFollowed;
    const missing = event!.meta.chat_id!;
    expect(event!.meta).toMatchObject({ event: 'not-followed', error_type: 'NOT_FOLLOWED' });
    expect(event!.content).toContain(`Chat ${missing}: NOT_FOLLOWED`);
    expect(event!.content).toMatch(/pushed once it is/);
    // Not a stop, and nothing pushed for it; the 63 others it follows are pushed.
    expect(s.events.filter((e) => e.meta.event === 'stopped')).toEqual([]);
    expect(s.of(missing, 'messages')).toEqual([]);
    await waitFor(
      () => new Set(s.events.filter((e) => e.meta.event === 'messages').map((e) => e.meta.chat_id)).size === 63,
      '63 chats pushed',
    );
  }, 240_000);
});
