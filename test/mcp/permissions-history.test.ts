// Two things a newcomer tripped on (issue 52, item 14): `permissions` named the participants by
// agent id only, and `history` said "newest first" while its pages list their messages oldest
// first (docs/protocol.md §6.5: a backward page keeps the ascending order; successive backward
// pages go back in time). The server runs in this process (createMcpServer over
// InMemoryTransport) against the real daemon.

import { afterEach, describe, expect, it } from 'vitest';
import { appendMessages, connectAgent, createChat } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { ChannelSession } from './channel-client.js';

const { daemon, admin, clients } = useClientDaemon();
const sessions: ChannelSession[] = [];
afterEach(async () => {
  await Promise.all(sessions.splice(0).map((s) => s.close()));
});

async function serve(token: string): Promise<ChannelSession> {
  const s = await ChannelSession.start(daemon().socketPath, token, { channel: false });
  sessions.push(s);
  return s;
}

describe('permissions', () => {
  it('names each participant by username and display name, not only by id', async () => {
    const chat = await createChat(admin());
    const bob = await serve(chat.bob.token);
    const r = (await bob.ok('permissions', { chatId: chat.chatId })) as {
      participants: { agentId: string; username: string; name: string }[];
    };
    // In the daemon's order (agent A first), whichever that is.
    expect(r.participants.map((p) => [p.agentId, p.username, p.name]).sort()).toEqual(
      [
        [chat.alice.id, chat.alice.username, 'Alice'],
        [chat.bob.id, chat.bob.username, 'Bob'],
      ].sort(),
    );
    const text = await bob.text('permissions', { chatId: chat.chatId });
    expect(text).toContain(`${chat.alice.username} (Alice, ${chat.alice.id}): read yes`);
    expect(text).toContain(`${chat.bob.username} (Bob, ${chat.bob.id}): read yes`);
  });
});

describe('history', () => {
  it('says what it does: backward pages start at the newest messages and go back; each page lists oldest first', async () => {
    const chat = await createChat(admin());
    const alice = await connectAgent(daemon(), chat.alice);
    clients.push(alice);
    const claim = await alice.rpc.streams.claim({ streamId: chat.alice.streamId });
    await appendMessages(alice, { streamId: chat.alice.streamId, token: claim.coordinatorToken, next: claim.nextPosition }, [
      'one',
      'two',
      'three',
    ]);
    const bob = await serve(chat.bob.token);

    // The behaviour (the contract of chats.history).
    const first = (await bob.ok('history', { chatId: chat.chatId, limit: 2 })) as { messages: { content: string }[]; nextCursor: string };
    expect(first.messages.map((m) => m.content)).toEqual(['two', 'three']);
    const second = (await bob.ok('history', { chatId: chat.chatId, cursor: first.nextCursor, limit: 2 })) as {
      messages: { content: string }[];
      nextCursor: string | null;
    };
    expect(second.messages.map((m) => m.content)).toEqual(['one']);
    expect(second.nextCursor).toBeNull();
    expect(await bob.text('history', { chatId: chat.chatId, limit: 2 })).toMatch(/Older messages: call history with cursor \S+/);

    // What the tool says about it agrees.
    const { tools } = await bob.client.listTools();
    const history = tools.find((t) => t.name === 'history')!;
    const direction = (history.inputSchema.properties as Record<string, { description?: string }>).direction!.description!;
    for (const said of [history.description!, direction]) {
      expect(said).not.toMatch(/newest first/i);
      expect(said).toMatch(/oldest first/);
    }
    expect(history.description).toMatch(/backward \(the default\) starts with the newest messages/);
  });
});
