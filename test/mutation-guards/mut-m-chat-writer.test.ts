// Kills two mutants of src/client/chat-writer.ts's takeover report (`unsettled`: what the
// displaced holder committed since its claim) that need every stamp of the daemon in one
// millisecond (test/MUTATION.md, "Twelfth round"). The daemon child preloads
// test/helpers/wall-clock-step.mjs with YELLO_TEST_CLOCK_FROZEN=1: its `Date` stands still.
//   231:78 `committedAt >= since` → `>`: the displaced holder's append in its claim's own
//          millisecond is left out of `unsettled`;
//   231:13 `op.generation === claim.generation` → true: an operation of the sealed generation,
//          committed in the millisecond of the displaced claim, is listed as the holder's.
// The same millisecond also shows what the report cannot tell: an append of an earlier holder in
// the displaced claim's millisecond (same generation) is listed too (test/MUTATION.md).

import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ChatWriter, type OperationInfo, type YelloClient } from '../../src/client/index.js';
import { connectAdmin, connectAgent, createChat, type Participant } from '../helpers/client-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';

const shim = fileURLToPath(new URL('../helpers/wall-clock-step.mjs', import.meta.url));
// Keep what NODE_OPTIONS already carries (the mutation run's coverage preload).
const env = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${shim}`.trim(), YELLO_TEST_CLOCK_FROZEN: '1' };
// A process of its own: the clock shim is preloaded into it.
const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open'], env, process: true }, (d) => connectAdmin(d));
const clients: YelloClient[] = [];
afterAll(() => {
  for (const c of clients) c.close();
});

async function clientOf(who: Participant): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who);
  clients.push(c);
  return c;
}

interface Unsettled {
  previousEpoch: string;
  operations: OperationInfo[];
}

/** A writer of `who` that forces a takeover (`replace: true`), with the `unsettled` reports it makes. */
async function forcing(who: Participant, chatId: string): Promise<{ w: ChatWriter; unsettled: Unsettled[] }> {
  const w = new ChatWriter(await clientOf(who), { chatId, replace: true });
  const unsettled: Unsettled[] = [];
  w.on('unsettled', (u) => unsettled.push(u));
  return { w, unsettled };
}

describe('a takeover report when every stamp is in one millisecond (the daemon’s clock stands still)', () => {
  it("lists the displaced holder's append made in its claim's own millisecond", async () => {
    const chat = await createChat(admin());
    const held = new ChatWriter(await clientOf(chat.alice), { chatId: chat.chatId });
    const sent = await held.send('by the holder');
    const state = await admin().rpc.streams.get({ streamId: chat.alice.streamId });
    const { w, unsettled } = await forcing(chat.alice, chat.chatId);
    await w.send('by the new writer');
    expect(unsettled).toHaveLength(1);
    expect(unsettled[0]!.previousEpoch).toBe(state.writer.epoch);
    // Claim and append share the millisecond: the append counts as after the claim.
    expect(unsettled[0]!.operations.map((o) => [o.committedAt, o.firstPosition])).toEqual([[state.writer.claimedAt, sent.firstPosition]]);
    await w.release();
  });

  it('does not list an operation of the sealed generation committed in the millisecond of the displaced claim', async () => {
    const chat = await createChat(admin());
    const first = new ChatWriter(await clientOf(chat.alice), { chatId: chat.chatId });
    await first.send('generation 1');
    await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'guard' });
    // A holder in generation 2 that commits nothing, displaced.
    const idle = await (await clientOf(chat.alice)).rpc.streams.claim({ streamId: chat.alice.streamId });
    expect(idle.generation).toBe('2');
    const { w, unsettled } = await forcing(chat.alice, chat.chatId);
    await w.send('generation 2');
    expect(unsettled).toEqual([]);
    await w.release();
  });

  it("also lists an earlier holder's append in the displaced claim's millisecond: the report is to the millisecond", async () => {
    const chat = await createChat(admin());
    const earlier = new ChatWriter(await clientOf(chat.alice), { chatId: chat.chatId });
    const old = await earlier.send('by an earlier holder');
    await earlier.release();
    const idle = await (await clientOf(chat.alice)).rpc.streams.claim({ streamId: chat.alice.streamId });
    const { w, unsettled } = await forcing(chat.alice, chat.chatId);
    await w.send('by the new writer');
    // The idle holder committed nothing; the earlier holder's append shares its claim's stamp.
    expect(unsettled.map((u) => [u.previousEpoch, u.operations.map((o) => o.firstPosition)])).toEqual([[idle.epoch, [old.firstPosition]]]);
    await w.release();
  });
});
