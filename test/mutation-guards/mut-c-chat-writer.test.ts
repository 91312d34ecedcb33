// Kills mutants of src/client/chat-writer.ts (test/MUTATION.md, "Client, MCP session and
// store checks"): the writer's promises through the public client API against a real daemon,
// asserted by value: its state and claim (epoch, token, the `claimed` event, the fence's
// reason), claiming again after a release, resuming a kept claim by its token, what a non-agent
// client gets, and being replaced (FencedError once, then BAD_STATE, release leaves it alone).

import { describe, expect, it } from 'vitest';
import { ChatWriter, FencedError, YelloClientError, type YelloClient } from '../../src/client/index.js';
import { connectAgent, createChat, readStream, rejectionOf, type Participant } from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

const { daemon, admin, clients } = useClientDaemon();

async function agent(who: Participant): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
  clients.push(c);
  return c;
}

const fences = async (who: Participant) =>
  (await readStream(admin(), who.streamId)).flatMap((r) => (r.wrapper.type === 'chat.writer-fence' ? [r.wrapper.fence] : []));
const contents = async (who: Participant) =>
  (await readStream(admin(), who.streamId)).flatMap((r) => (r.wrapper.type === 'chat.message' ? [r.wrapper.message.content] : []));

describe('ChatWriter (mutation guards)', () => {
  it('state, epoch and token through claim, release and a second claim; the claimed event and the fence reason', async () => {
    const chat = await createChat(admin());
    const w = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId, reason: 'guard test' });
    expect([w.chatId, w.streamId, w.state, w.epoch, w.coordinatorToken, w.uncertainOperationId]).toEqual([
      chat.chatId,
      chat.alice.streamId,
      'unclaimed',
      null,
      null,
      null,
    ]);
    const claimed: unknown[] = [];
    w.on('claimed', (c) => claimed.push(c));
    const first = await w.send('one');
    expect(first.nextPosition).toBe('2');
    expect(w.state).toBe('claimed');
    expect(w.epoch).toBe('1');
    expect(w.coordinatorToken).toMatch(/^yello_ct_/);
    expect(claimed).toEqual([{ epoch: '1', generation: '1', nextPosition: '1', tookOver: false }]);
    await w.send('two');
    await w.settled();
    expect(await fences(chat.alice)).toMatchObject([{ epoch: '1', replaced: false, reason: 'guard test' }]);
    await w.release();
    expect([w.state, w.epoch, w.coordinatorToken]).toEqual(['released', null, null]);
    expect((await admin().rpc.streams.get({ streamId: chat.alice.streamId })).writer.active).toBe(false);
    // Released claims again on the next write.
    await w.send('three');
    expect([w.state, w.epoch]).toEqual(['claimed', '2']);
    expect(claimed).toEqual([
      { epoch: '1', generation: '1', nextPosition: '1', tookOver: false },
      { epoch: '2', generation: '1', nextPosition: '4', tookOver: false },
    ]);
    expect(await contents(chat.alice)).toEqual(['one', 'two', 'three']);
    await w.release();
  });

  it('coordinatorToken resumes a kept claim: no claim, no fence, appends at the head', async () => {
    const chat = await createChat(admin());
    const c = await agent(chat.alice);
    const first = new ChatWriter(c, { chatId: chat.chatId });
    await first.send('before');
    const token = first.coordinatorToken!;
    const resumed = new ChatWriter(c, { chatId: chat.chatId, coordinatorToken: token });
    const claimed: unknown[] = [];
    resumed.on('claimed', (x) => claimed.push(x));
    const res = await resumed.send('after');
    expect(res.nextPosition).toBe('3');
    expect([resumed.state, resumed.epoch, resumed.coordinatorToken]).toEqual(['claimed', '1', token]);
    expect(claimed).toEqual([{ epoch: '1', generation: '1', nextPosition: '2', tookOver: false }]);
    expect((await fences(chat.alice)).map((f) => f.epoch)).toEqual(['1']);
    expect(await contents(chat.alice)).toEqual(['before', 'after']);
    await resumed.release();
  });

  it('an admin client has no stream: streamId is empty and the first write is BAD_TOKEN, nothing written', async () => {
    const chat = await createChat(admin());
    const w = new ChatWriter(admin(), { chatId: chat.chatId });
    expect(w.streamId).toBe('');
    const err = await rejectionOf(w.send('nope'));
    expect(err).toBeInstanceOf(YelloClientError);
    expect((err as YelloClientError).type).toBe('BAD_TOKEN');
    expect(w.state).toBe('unclaimed');
  });

  it('replaced by another claim: FencedError and the fenced event once, then BAD_STATE; release() leaves the new claim', async () => {
    const chat = await createChat(admin());
    const w = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId });
    const fenced: FencedError[] = [];
    w.on('fenced', (e) => fenced.push(e));
    await w.send('mine');
    const other = await agent(chat.alice);
    const taken = await other.rpc.streams.claim({ streamId: chat.alice.streamId, replace: true });
    const err = await rejectionOf(w.send('too late'));
    expect(err).toBeInstanceOf(FencedError);
    expect(w.state).toBe('fenced');
    expect(fenced).toEqual([err]);
    const after = await rejectionOf(w.send('again'));
    expect(after).toBeInstanceOf(YelloClientError);
    expect(after).not.toBeInstanceOf(FencedError);
    expect((after as YelloClientError).type).toBe('BAD_STATE');
    expect(fenced).toHaveLength(1);
    await w.release();
    const head = await admin().rpc.streams.get({ streamId: chat.alice.streamId });
    expect([head.writer.active, head.writer.epoch]).toEqual([true, taken.epoch]);
    expect(await contents(chat.alice)).toEqual(['mine']);
  });

  it("replace: false refuses a stream another writer holds; a takeover's unsettled lists only operations since the displaced claim", async () => {
    const chat = await createChat(admin());
    const c1 = await agent(chat.alice);
    const w1 = new ChatWriter(c1, { chatId: chat.chatId });
    await w1.send('old, before the claim');
    await w1.release();
    const w2 = new ChatWriter(c1, { chatId: chat.chatId });
    await w2.send('by epoch 2');
    const polite = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId, replace: false });
    const refused = await rejectionOf(polite.send('refused'));
    expect(refused).toBeInstanceOf(YelloClientError);
    expect(polite.state).toBe('unclaimed');
    const forcing = new ChatWriter(await agent(chat.alice), { chatId: chat.chatId, replace: true });
    const unsettled: unknown[] = [];
    const claimed: unknown[] = [];
    forcing.on('unsettled', (u) => unsettled.push(u));
    forcing.on('claimed', (x) => claimed.push(x));
    await forcing.send('by epoch 3');
    expect(claimed).toMatchObject([{ epoch: '3', tookOver: true }]);
    expect(unsettled).toHaveLength(1);
    const u = unsettled[0] as { previousEpoch: string; operations: Array<{ state: string; firstPosition: string }> };
    expect(u.previousEpoch).toBe('2');
    // Only w2's append (at 3, after its fence at 2), not w1's (at 1).
    expect(u.operations.map((o) => [o.state, o.firstPosition])).toEqual([['committed', '3']]);
    expect(await contents(chat.alice)).toEqual(['old, before the claim', 'by epoch 2', 'by epoch 3']);
    await forcing.release();
  });
});
