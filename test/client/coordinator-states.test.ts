// The Coordinator's state machine at its edges, against a fake daemon (a real Unix socket)
// that can leave an append unanswered: a terminal state is never left, whatever answer (or
// loss) arrives after it.

import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeDaemon, FAKE_CHAT, coordinatorStartResults, type FakeRequest } from '../helpers/fake-daemon.js';
import { ConnectionLostError, Coordinator, MemoryCursorStore, type CoordinatorState } from '../../src/client/index.js';
import { makeTempDir, rejectionOf } from '../helpers/client-fixtures.js';
import { waitFor } from '../helpers/wait.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

const { chatId } = FAKE_CHAT;

/** A daemon that lets the coordinator start, answers everything else with {}, and never answers an append. */
function appendHangs(req: FakeRequest): unknown {
  if (req.method === 'streams.append') return undefined;
  return { jsonrpc: '2.0', id: req.id, result: coordinatorStartResults('1')[req.method ?? ''] ?? {} };
}

describe('Coordinator states', () => {
  it('stop() while an append is on the wire ends stopped: the lost answer records the operation but never pauses a stopped coordinator', async () => {
    const dir = await makeTempDir('ycs-');
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const fake = await FakeDaemon.start(path.join(dir, 'fake.sock'), appendHangs);
    cleanups.push(() => fake.close());
    const coord = new Coordinator({
      token: 'yello_agent_fake',
      chatId,
      socketPath: fake.socketPath,
      adapter: { present: () => {} },
      cursorStore: new MemoryCursorStore(),
    });
    cleanups.push(() => coord.stop({ release: false }));
    const states: CoordinatorState[] = [];
    coord.on('state', (e) => states.push(e.state));
    await coord.start();

    const sending = coord.send('never answered');
    await waitFor(() => fake.requests.some((r) => r.method === 'streams.append'), 'the append to reach the daemon');
    await coord.stop({ release: false });
    const err = await rejectionOf(sending);
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect((err as ConnectionLostError).outcomeUnknown).toBe(true);

    expect(coord.state).toBe('stopped');
    expect(states).toEqual(['starting', 'running', 'stopped']);
    // Still reported, so whoever restarts can settle it with operations.get.
    expect(coord.uncertainOperationId).toMatch(/^op-/);
    await expect(coord.done).resolves.toBeUndefined();
  });
});
