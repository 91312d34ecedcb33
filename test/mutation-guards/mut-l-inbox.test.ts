// Kills a mutant of src/client/inbox.ts that survived mut-h-inbox.test.ts (r1, see
// r1-arguments.md, "src/client/inbox.ts"): 216:37, `entry.conversation?.failure` in list() made
// `entry.conversation.failure`. list() meets an entry without a Conversation and without a
// failure only for a chat whose opening did not end in either, which looked like a race. It is
// not: close() while a chat is opening leaves exactly such an entry (`#open` closes the
// Conversation it got and returns), and list() after the close still reports it. mut-h's test of
// that close stops at follow() and conversation(), and never calls list().

import { describe, expect, it } from 'vitest';
import { Inbox } from '../../src/client/index.js';
import { connectAgent, uniqueName, type Participant } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

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
