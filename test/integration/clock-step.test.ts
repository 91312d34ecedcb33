// The host's wall clock steps back (NTP, an administrator) while the daemon runs. A stream's
// timestamps must not follow it: the signed `signature.createdAt` of its messages and the
// `claimedAt` of its fences stay non-decreasing (a verifier reports CREATED_AT_ORDER otherwise,
// docs/protocol.md §10, and `chats.history` orders by createdAt). The daemon child preloads
// test/helpers/wall-clock-step.mjs: each SIGUSR2 moves its `Date` back an hour.

import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { waitFor } from '../helpers/wait.js';
import { createPair, fenceOf, messageOf, ok, readAll, uniq, type Wire } from '../helpers/wire-fixtures.js';

const shim = fileURLToPath(new URL('../helpers/wall-clock-step.mjs', import.meta.url));
let daemon: DaemonProcess;
let admin: Wire;

beforeAll(async () => {
  // Keep what NODE_OPTIONS already carries (the mutation run's coverage preload).
  const nodeOptions = `${process.env.NODE_OPTIONS ?? ''} --import=${shim}`.trim();
  daemon = await DaemonProcess.start({ env: { NODE_OPTIONS: nodeOptions }, process: true });
  admin = await daemon.connectAs();
});

afterAll(async () => {
  admin.close();
  await daemon.cleanup();
});

/** Steps the daemon's wall clock back an hour and waits until the child says it did. */
async function stepBack(n: number): Promise<void> {
  const said = (): boolean => daemon.stderr.split('\n').filter((l) => l.startsWith('wall-clock-step:')).length >= n;
  daemon.child.kill('SIGUSR2');
  await waitFor(said, 'the daemon to step its wall clock back');
}

describe('the wall clock stepping back', () => {
  it('leaves every later message and fence of the stream stamped no earlier than the one before', async () => {
    const pair = await createPair(admin, daemon.socketPath);
    const c = pair.a.client;
    const claim = ok(await c.call('streams.claim', { streamId: pair.streamA }), 'streams.claim');
    const send = async (generation: string, expectedPosition: string, coordinatorToken: string) =>
      ok(
        await c.call('streams.append', {
          streamId: pair.streamA,
          coordinatorToken,
          generation,
          expectedPosition,
          operationId: uniq('op'),
          records: [{ type: 'chat.message', messageId: uniq('m'), content: 'hello' }],
        }),
        'streams.append',
      );
    const first = await send(claim.generation, claim.nextPosition, claim.coordinatorToken);

    await stepBack(1);
    const second = await send(first.generation, first.nextPosition, claim.coordinatorToken);
    await stepBack(2);
    const again = ok(await c.call('streams.claim', { streamId: pair.streamA, replace: true, reason: 'after the step' }), 'claim');
    await send(again.generation, again.nextPosition, again.coordinatorToken);
    expect(BigInt(second.nextPosition)).toBe(BigInt(first.nextPosition) + 1n);

    const records = await readAll(admin, pair.streamA);
    const stamps = records.map((r) => (r.wrapper.type === 'chat.message' ? messageOf(r).signature.createdAt : fenceOf(r).claimedAt));
    expect(records.map((r) => r.wrapper.type)).toEqual([
      'chat.writer-fence',
      'chat.message',
      'chat.message',
      'chat.writer-fence',
      'chat.message',
    ]);
    // The clock now reads two hours before the first record: had the daemon followed it, every
    // stamp after the first step would be earlier than the one before it.
    expect(Date.parse(stamps[0]!) - Date.now()).toBeLessThan(60_000);
    for (let i = 1; i < stamps.length; i++) expect(stamps[i]! >= stamps[i - 1]!, `${stamps[i]} after ${stamps[i - 1]}`).toBe(true);

    // What the daemon says the time is did step back: a new agent is stamped about two hours ago.
    const created = ok(await admin.call('agents.create', { username: uniq('late'), name: 'Late' }), 'agents.create');
    expect(Date.now() - Date.parse(created.agent.createdAt)).toBeGreaterThan(7_000_000);
  });

  it('stamps an operation committed after the step no earlier than the claim it was written under, so a takeover finds it', async () => {
    const pair = await createPair(admin, daemon.socketPath);
    const c = pair.a.client;
    const claim = ok(await c.call('streams.claim', { streamId: pair.streamA }), 'streams.claim');
    const claimedAt = ok(await c.call('streams.get', { streamId: pair.streamA }), 'streams.get').writer.claimedAt!;
    const operationId = uniq('op-after-step');
    const steps = daemon.stderr.split('\n').filter((l) => l.startsWith('wall-clock-step:')).length;
    await stepBack(steps + 1);
    ok(
      await c.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: claim.coordinatorToken,
        generation: claim.generation,
        expectedPosition: claim.nextPosition,
        operationId,
        records: [{ type: 'chat.message', messageId: uniq('m'), content: 'after the step' }],
      }),
      'streams.append',
    );
    const op = ok(await c.call('operations.get', { streamId: pair.streamA, operationId }), 'operations.get');
    // ChatWriter's takeover reports the operations committed at or after the displaced claim's
    // claimedAt (`unsettled`): one stamped by the stepped-back clock would be missed.
    expect(op.committedAt! >= claimedAt, `${op.committedAt} not before ${claimedAt}`).toBe(true);
    const [message] = (await readAll(admin, pair.streamA)).filter((r) => r.wrapper.type === 'chat.message');
    expect(op.committedAt! >= messageOf(message).signature.createdAt).toBe(true);
  });
});
