// Coordinator option `start` (docs/protocol.md §8): with no stored cursor, a first-run
// coordinator is presented every peer message it has not acknowledged, including those sent
// before it started ('acknowledged', the default); 'end' keeps the old "only what comes later".

import { describe, expect, it } from 'vitest';
import { MemoryCursorStore } from '../../src/client/index.js';
import {
  RecordingAdapter,
  connectAgent,
  createChat,
  makeCoordinator,
  type Participant,
  type TestChat,
} from '../helpers/client-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';

const { daemon, admin, coordinators, clients } = useClientDaemon();

/** alice sends `texts` as one short-lived writer, before anyone follows. */
async function sendAs(chat: TestChat, who: Participant, texts: string[]): Promise<void> {
  const c = await connectAgent(daemon(), who);
  clients.push(c);
  const claim = await c.rpc.streams.claim({ streamId: who.streamId });
  let next = claim.nextPosition;
  for (const [i, content] of texts.entries()) {
    next = (
      await c.rpc.streams.append({
        streamId: who.streamId,
        coordinatorToken: claim.coordinatorToken,
        generation: claim.generation,
        expectedPosition: next,
        operationId: `pre-${content.length}-${Date.now()}-${i}`,
        records: [{ type: 'chat.message', messageId: `pre-${Date.now()}-${i}-${Math.random().toString(36).slice(2)}`, content }],
      })
    ).nextPosition;
  }
  await c.rpc.streams.release({ streamId: who.streamId, coordinatorToken: claim.coordinatorToken });
}

describe('Coordinator start', () => {
  it('a first run (no stored cursor) is presented the messages sent before it started, and acknowledging them sticks', async () => {
    const chat = await createChat(admin());
    await sendAs(chat, chat.alice, ['sent while bob was away', 'and another']);
    const seen = new RecordingAdapter();
    const bob = makeCoordinator(daemon(), chat, chat.bob, { adapter: seen });
    coordinators.push(bob);
    await bob.start();
    const batch = await waitFor(() => seen.batchWith('and another'), 'the earlier messages');
    expect(seen.contents).toEqual(['sent while bob was away', 'and another']);
    await bob.ack(batch);
    await bob.stop();

    // A second first run (a fresh cursor store) starts after the receipt: nothing again.
    await sendAs(chat, chat.alice, ['after the receipt']);
    const again = new RecordingAdapter();
    const bob2 = makeCoordinator(daemon(), chat, chat.bob, { adapter: again, cursorStore: new MemoryCursorStore() });
    coordinators.push(bob2);
    await bob2.start();
    await waitFor(() => again.batchWith('after the receipt'), 'the unacknowledged message');
    expect(again.contents).toEqual(['after the receipt']);
  });

  it("start: 'end' presents only what arrives after the start", async () => {
    const chat = await createChat(admin());
    await sendAs(chat, chat.alice, ['old news']);
    const seen = new RecordingAdapter();
    const bob = makeCoordinator(daemon(), chat, chat.bob, { adapter: seen, start: 'end' });
    coordinators.push(bob);
    await bob.start();
    await sleep(300); // started at the end: nothing from before may be shown within 300 ms
    expect(seen.contents).toEqual([]);
    await sendAs(chat, chat.alice, ['fresh']);
    await waitFor(() => seen.batchWith('fresh'), 'the new message');
    expect(seen.contents).toEqual(['fresh']);
  });
});
