// Kills mutants of src/daemon/streams/writer-presence.ts (`writer.connected`, docs/protocol.md
// §5.8, and `streams.claim {replace: "if-abandoned"}`) that the mutation run found alive
// (test/MUTATION.md, "Stream modules"). Over the real socket, against a real daemon.

import { describe, expect, it } from 'vitest';
import type { StreamState } from '../../src/shared/types.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { createAgent, createPair, ok, uniq, type Wire } from '../helpers/wire-fixtures.js';

const { daemon, admin } = useDaemon();

const get = async (streamId: string): Promise<StreamState> => ok(await admin().call('streams.get', { streamId }), 'streams.get');

async function appendOne(c: Wire, streamId: string, coordinatorToken: string): Promise<void> {
  const state = await get(streamId);
  ok(
    await c.call('streams.append', {
      streamId,
      coordinatorToken,
      generation: state.generation,
      expectedPosition: state.nextPosition,
      operationId: uniq('op'),
      records: [{ type: 'chat.message', messageId: uniq('m'), content: 'hello' }],
    }),
    'streams.append',
  );
}

describe('writer presence (mutation guards)', () => {
  it('a second connection that appended with the token and closed leaves the claiming connection holding the claim', async () => {
    // writer-presence.ts attach: `a?.tokenHash !== tokenHash` starts a new attachment only for a
    // new claim; an append with the same token joins the claimer's, it does not replace it.
    const pair = await createPair(admin(), daemon().socketPath);
    // alice's second chat (with carol): a stream only the appender's connection holds, so its
    // close is observable (a close detaches a connection from all its streams at once).
    const carol = await createAgent(admin(), daemon().socketPath);
    ok(await admin().call('grants.add', { agentId: pair.a.id, peerAgentId: carol.id }), 'grants.add');
    ok(await admin().call('grants.add', { agentId: carol.id, peerAgentId: pair.a.id }), 'grants.add');
    const other = ok(await pair.a.client.call('chats.open', { peerAgentId: carol.id }), 'chats.open');
    const otherStream = `${other.chat.id}:${pair.a.id}`;

    const claimer = await daemon().connectAs(pair.a.token);
    const claimed = ok(await claimer.call('streams.claim', { streamId: pair.streamA }), 'streams.claim');
    const appender = await daemon().connectAs(pair.a.token);
    ok(await appender.call('streams.claim', { streamId: otherStream }), 'streams.claim (second chat)');
    await appendOne(appender, pair.streamA, claimed.coordinatorToken);
    expect((await get(pair.streamA)).writer.connected).toBe(true);

    appender.close();
    await waitFor(async () => !(await get(otherStream)).writer.connected, 'the appender’s close to be seen', 10_000);
    expect((await get(pair.streamA)).writer).toMatchObject({ epoch: claimed.epoch, active: true, connected: true });
    const held = await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned' });
    expect(held.error?.data).toMatchObject({ type: 'WRITER_ACTIVE', connected: true });

    claimer.close();
    await waitFor(async () => !(await get(pair.streamA)).writer.connected, 'the claim to be abandoned', 10_000);
  });
});
