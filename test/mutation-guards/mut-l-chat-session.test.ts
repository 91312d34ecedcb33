// Kills mutants of src/mcp/chat-session.ts that survived mut-i-chat-session.test.ts (r1, see
// r1-arguments.md, "src/mcp/chat-session.ts"): how a session turns a conversation's failure into
// why it stopped. mut-i's failures are all continuity breaks and fences, and each comes while the
// session listens, so two paths were never taken. (1) A failure that is neither a break nor a
// fence, seen by the session's `break` listener, must become CHAT_STOPPED (113:24): here the
// daemon stops under a client that does not reconnect. (2) A conversation that failed before the
// session listened (the inbox's conversation, broken before any tool opened the chat) reaches the
// session only through its first read_new, in `#absorb` (187–189): a break is kept as it is, any
// other failure of the conversation (a line over the client's `maxInboundLineBytes`) becomes
// CHAT_STOPPED, and either way the session stops and `onStopped` is called once with the chat and
// the error. These tests build ChatSession.start in the vitest worker against a real daemon, as
// mut-i does.

import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  ChatWriter,
  ConnectionLostError,
  ContinuityBreakError,
  Conversation,
  LineTooLargeError,
  type Chat,
  type YelloClient,
} from '../../src/client/index.js';
import { PeerHead } from '../../src/client/peer-head.js';
import { ChatSession, type ChatSessionOptions } from '../../src/mcp/chat-session.js';
import { ToolFailure } from '../../src/mcp/tool-errors.js';
import { connectAgent, createChat, rejectionOf, type Participant } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { waitFor } from '../helpers/wait.js';

const { daemon, admin, clients } = useClientDaemon({ reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
const log = pino({ level: 'silent' });

type Stopped = Array<{ chatId: string; error: Error }>;

async function clientOf(who: Participant, extra: Partial<Parameters<typeof connectAgent>[2]> = {}): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 }, ...extra });
  clients.push(c);
  return c;
}

function optionsOf(client: YelloClient, stopped: Stopped): ChatSessionOptions {
  return { client, replace: false, resumeAfterBreak: false, settleMs: 3000, log, onStopped: (info) => stopped.push(info) };
}

async function chatOf(client: YelloClient, chatId: string): Promise<Chat> {
  return (await client.call('chats.get', { chatId })).chat;
}

function toolFailure(e: unknown): ToolFailure {
  expect(e).toBeInstanceOf(ToolFailure);
  return e as ToolFailure;
}

/**
 * After its first read failed with `error`: the session stopped, told `onStopped` once with
 * `{chatId, error}`, and keeps `error` as why (thrown again without reading, `onStopped` not
 * called again).
 */
async function expectStoppedBy(s: ChatSession, stopped: Stopped, chatId: string, error: Error): Promise<void> {
  expect(s.state).toBe('needs-intervention');
  expect(stopped).toEqual([{ chatId, error }]);
  expect(stopped[0]!.error).toBe(error);
  expect(() => {
    s.assertUsable();
  }).toThrow(error);
  expect(await rejectionOf(s.readNew({ waitMs: 0 }))).toBe(error);
  expect(stopped).toHaveLength(1);
}

describe('ChatSession: failures that are not a break or a fence, and failures from before the session listened', () => {
  it('a conversation broken before the session listened: the first read_new throws the break, the session stops, onStopped once', async () => {
    const chat = await createChat(admin());
    const alice = await clientOf(chat.alice);
    const bob = await clientOf(chat.bob);
    // The conversation the inbox would hand over: it read alice's message, then the reset broke it.
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    const wa = new ChatWriter(alice, { chatId: chat.chatId });
    await wa.send('lost');
    expect(await conv.next({ waitMs: 5000 })).not.toBeNull();
    await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'guard' });
    const broken = await waitFor(() => conv.failure, 'the break of the conversation');
    expect(broken).toBeInstanceOf(ContinuityBreakError);
    const head = PeerHead.watch(bob, await chatOf(bob, chat.chatId));
    const stopped: Stopped = [];
    try {
      const s = await ChatSession.start(optionsOf(bob, stopped), await chatOf(bob, chat.chatId), conv, head);
      // It missed the break event: nothing says it stopped until it reads.
      expect(s.state).toBe('running');
      expect(stopped).toEqual([]);
      expect(await rejectionOf(s.readNew({ waitMs: 0 }))).toBe(broken);
      await expectStoppedBy(s, stopped, chat.chatId, broken);
    } finally {
      head.close();
      await conv.close();
      await wa.release().catch(() => undefined);
    }
  });

  it('a conversation ended by a line over maxInboundLineBytes before the session listened: read_new throws CHAT_STOPPED, the session stops', async () => {
    const chat = await createChat(admin());
    const alice = await clientOf(chat.alice);
    const bob = await clientOf(chat.bob, { maxInboundLineBytes: 16 * 1024 });
    const conv = await Conversation.open(bob, { chatId: chat.chatId });
    const wa = new ChatWriter(alice, { chatId: chat.chatId });
    await wa.send('x'.repeat(32 * 1024));
    const tooLarge = await waitFor(() => conv.failure, 'the over-size line to end the conversation');
    expect(tooLarge).toBeInstanceOf(LineTooLargeError);
    // The client is back on a new connection; the conversation stays failed.
    await waitFor(() => bob.connected, 'bob to reconnect');
    const head = PeerHead.watch(bob, await chatOf(bob, chat.chatId));
    const stopped: Stopped = [];
    try {
      const s = await ChatSession.start(optionsOf(bob, stopped), await chatOf(bob, chat.chatId), conv, head);
      expect(s.state).toBe('running');
      const e = toolFailure(await rejectionOf(s.readNew({ waitMs: 0 })));
      expect(e.type).toBe('CHAT_STOPPED');
      expect(e.cause).toBe(tooLarge);
      expect(e.data).toMatchObject({ chatId: chat.chatId, cause: 'LINE_TOO_LARGE' });
      await expectStoppedBy(s, stopped, chat.chatId, e);
    } finally {
      head.close();
      await conv.close();
      await wa.release().catch(() => undefined);
    }
  });

  it('the connection lost for good (no reconnect, the daemon stopped) under a listening session: it stops with CHAT_STOPPED, not the raw loss', async () => {
    const chat = await createChat(admin());
    const bob = await clientOf(chat.bob, { reconnect: false });
    const head = PeerHead.watch(bob, await chatOf(bob, chat.chatId));
    const stopped: Stopped = [];
    const s = await ChatSession.start(optionsOf(bob, stopped), await chatOf(bob, chat.chatId), null, head);
    expect(s.state).toBe('running');
    try {
      await daemon().stop();
      await waitFor(() => stopped.length > 0, 'the session to stop');
      expect(s.state).toBe('needs-intervention');
      const e = toolFailure(stopped[0]!.error);
      expect(e.type).toBe('CHAT_STOPPED');
      expect(e.cause).toBeInstanceOf(ConnectionLostError);
      expect(e.data).toMatchObject({ chatId: chat.chatId, cause: 'CONNECTION_LOST' });
      expect(stopped).toEqual([{ chatId: chat.chatId, error: e }]);
      expect(() => {
        s.assertUsable();
      }).toThrow(e);
      expect(await rejectionOf(s.readNew({ waitMs: 0 }))).toBe(e);
      expect(stopped).toHaveLength(1);
    } finally {
      head.close();
      await s.stop();
      await daemon().restart();
      await waitFor(() => admin().connected, 'the admin to reconnect', 15_000, 20);
    }
  });
});
