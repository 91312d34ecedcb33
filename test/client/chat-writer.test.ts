// ChatWriter (docs/protocol.md §8): claims on the first write, not before (reads never write);
// takes over an abandoned claim by default (issue 20, finding 4) and reports what the displaced
// holder committed; pauses on an unknown outcome and never resends; release() always releases,
// over a connection of its own when the client is gone.

import { afterEach, describe, expect, it } from 'vitest';
import {
  ChatWriter,
  Conversation,
  CoordinatorPausedError,
  TimeoutError,
  WriterActiveError,
  YelloClient,
  type Unsettled,
} from '../../src/client/index.js';
import { connectAgent, createChat, freeze, readStream, rejectionOf, thaw, type Participant } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { waitFor } from '../helpers/wait.js';

// A process of its own: a test freezes (SIGSTOP) it.
const { daemon, admin, clients } = useClientDaemon({ process: true });
afterEach(() => {
  if (daemon().running) thaw(daemon());
});

async function agent(who: Participant, extra: Partial<Parameters<typeof YelloClient.connect>[0]> = {}): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 }, ...extra });
  clients.push(c);
  return c;
}

const types = async (who: Participant) => (await readStream(admin(), who.streamId)).map((r) => r.wrapper.type);

describe('ChatWriter', () => {
  it('claims on the first write, not before; a receipt it writes clears the conversation’s pending batch', async () => {
    const chat = await createChat(admin());
    const alice = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const bobClient = await agent(chat.bob);
    const conv = await Conversation.open(bobClient, { chatId: chat.chatId });
    const bob = new ChatWriter(bobClient, { chatId: chat.chatId, conversation: conv });
    expect(await types(chat.bob)).toEqual([]);
    expect(bob.state).toBe('unclaimed');
    await alice.send('hi bob');
    expect(await types(chat.alice)).toEqual(['chat.writer-fence', 'chat.message']);
    const batch = (await conv.next({ waitMs: 5000 }))!;
    expect(conv.pending()).toHaveLength(1);
    await bob.send('hi alice', { ack: batch });
    expect(conv.pending()).toEqual([]);
    expect(await types(chat.bob)).toEqual(['chat.writer-fence', 'chat.message', 'chat.receipt']);
    expect(bob.state).toBe('claimed');
    await bob.release();
    await alice.release();
    const { streams } = await admin().rpc.chats.get({ chatId: chat.chatId });
    expect(streams.map((s) => s.writer.active)).toEqual([false, false]);
    await conv.close();
  });

  it('takes over an abandoned claim without replace, and reports what the displaced holder committed (finding 4)', async () => {
    const chat = await createChat(admin());
    const first = await agent(chat.alice, { reconnect: false });
    const w1 = new ChatWriter(first, { chatId: chat.chatId });
    await w1.send('sent by the first process');
    first.close(); // a crash: the claim stays, but nothing holds it any more
    const w2 = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const unsettled: Unsettled[] = [];
    w2.on('unsettled', (u) => unsettled.push(u));
    await waitFor(async () => {
      const s = await admin().rpc.streams.get({ streamId: chat.alice.streamId });
      return !s.writer.connected;
    }, 'the first claim to be abandoned');
    await w2.send('sent by the second');
    expect(unsettled).toHaveLength(1);
    expect(unsettled[0]!.previousEpoch).toBe('1');
    expect(unsettled[0]!.operations.map((o) => o.state)).toEqual(['committed']);
    const fences = (await readStream(admin(), chat.alice.streamId)).flatMap((r) =>
      r.wrapper.type === 'chat.writer-fence' ? [r.wrapper.fence] : [],
    );
    expect(fences.at(-1)).toMatchObject({ epoch: '2', replaced: true, reason: 'abandoned' });
    await w2.release();
  });

  it('a connected holder keeps its claim: WRITER_ACTIVE, and the advice names yello streams release', async () => {
    const chat = await createChat(admin());
    const w1 = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    await w1.send('I am alive');
    const w2 = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const err = await rejectionOf(w2.send('me too'));
    expect(err).toBeInstanceOf(WriterActiveError);
    expect((err as WriterActiveError).data).toMatchObject({ connected: true });
    await w1.release();
    await w2.send('now me');
    await w2.release();
  });

  it('an append of unknown outcome pauses the writer; resolveUncertain() settles it and nothing is resent', async () => {
    const chat = await createChat(admin());
    const w = new ChatWriter(await agent(chat.alice, { callTimeoutMs: 300 }), { chatId: chat.chatId });
    await w.send('first');
    freeze(daemon());
    const err = await rejectionOf(w.send('maybe'));
    expect(err).toBeInstanceOf(TimeoutError);
    expect(w.state).toBe('paused');
    expect(await rejectionOf(w.send('refused while paused'))).toBeInstanceOf(CoordinatorPausedError);
    thaw(daemon());
    const outcome = await w.resolveUncertain();
    expect(outcome.committed).toBe(true);
    expect(w.state).toBe('claimed');
    await w.send('after');
    const contents = (await readStream(admin(), chat.alice.streamId)).flatMap((r) =>
      r.wrapper.type === 'chat.message' ? [r.wrapper.message.content] : [],
    );
    expect(contents).toEqual(['first', 'maybe', 'after']);
    await w.release();
  });

  it('release() releases over a connection of its own when the client is closed', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice, { reconnect: false });
    const w = new ChatWriter(c, { chatId: chat.chatId });
    await w.send('then the connection goes');
    c.close();
    await w.release();
    expect((await admin().rpc.streams.get({ streamId: chat.alice.streamId })).writer.active).toBe(false);
  });

  it('release() of a claim already released (the admin, or an attempt that timed out but was done) ends released, not fenced; a later epoch fences', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice);
    const w = new ChatWriter(c, { chatId: chat.chatId });
    const fenced: unknown[] = [];
    w.on('fenced', (e) => fenced.push(e));
    await w.send('before the admin releases');
    await admin().rpc.streams.release({ streamId: chat.alice.streamId });
    await w.release();
    expect(w.state).toBe('released');
    expect(fenced).toEqual([]);
    // The next write claims again; a claim by someone else afterwards does fence this writer.
    await w.send('claimed again');
    const other = await agent(chat.alice);
    await other.rpc.streams.claim({ streamId: chat.alice.streamId, replace: true });
    await w.release();
    expect(w.state).toBe('fenced');
    expect(fenced).toHaveLength(1);
  });
});
