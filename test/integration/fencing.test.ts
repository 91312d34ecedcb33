// Pins behaviour of src/daemon/streams/fencing.ts (`streams.claim`, `streams.release`, the writer
// fence record; docs/protocol.md §5.7, §6.6) that the rest of the suite leaves unchecked. Over the
// real socket, against a real daemon.

import { describe, expect, it } from 'vitest';
import type { StreamState } from '../../src/shared/types.js';
import { batchesOf, expectError } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { createPair, ok, readAll, uniq, type Wire } from '../helpers/wire-fixtures.js';

const { daemon, admin } = useDaemon();

const get = async (streamId: string): Promise<StreamState> => ok(await admin().call('streams.get', { streamId }), 'streams.get');

async function appendWith(c: Wire, streamId: string, coordinatorToken: string) {
  const s = await get(streamId);
  return c.call('streams.append', {
    streamId,
    coordinatorToken,
    generation: s.generation,
    expectedPosition: s.nextPosition,
    operationId: uniq('op'),
    records: [{ type: 'chat.message', messageId: uniq('m'), content: 'x' }],
  });
}

describe('streams.claim, streams.release and the writer fence', () => {
  it('a claim answers a yello_ct_ token of 256 bits and stores the fence exactly as §5.7 shows it, operationId fence.<epoch>', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const recordsCount = async (): Promise<number> => ok(await admin().call('daemon.status', {})).counts.records;
    const first = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA }), 'streams.claim');
    // Time is the subject: the next claim must be stamped later than this one, so let the
    // millisecond clock move on first (fence times come from nextTimestamp, never backwards).
    const firstAt = Date.now();
    await waitFor(() => Date.now() > firstAt + 1, 'the clock to move on');
    const before = await recordsCount();
    const second = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: true, reason: 'guard' }), 'claim');
    for (const c of [first, second]) expect(c.coordinatorToken).toMatch(/^yello_ct_[A-Za-z0-9_-]{43}$/);
    expect(second.coordinatorToken).not.toBe(first.coordinatorToken);
    expect(BigInt(second.epoch)).toBe(BigInt(first.epoch) + 1n);
    const state = await get(pair.streamA);
    expect(state.nextPosition).toBe(second.nextPosition);
    const records = await readAll(admin(), pair.streamA);
    expect(records.map((r) => r.position)).toEqual(['0', '1']);
    expect(records[1]).toEqual({
      streamId: pair.streamA,
      generation: '1',
      position: '1',
      wrapper: {
        version: 2,
        chatId: pair.chatId,
        authorAgentId: pair.a.id,
        operationId: `fence.${second.epoch}`,
        recordIndex: 0,
        type: 'chat.writer-fence',
        fence: { epoch: second.epoch, claimedAt: state.writer.claimedAt, replaced: true, reason: 'guard' },
      },
    });
    expect(records[0]!.wrapper).toMatchObject({ operationId: `fence.${first.epoch}` });
    // The later claim is stamped later; the fence is one more stored record (daemon.status).
    const [t0, t1] = records.map((r) => (r.wrapper as { fence: { claimedAt: string } }).fence.claimedAt);
    expect(t1! > t0!, `${t1} after ${t0}`).toBe(true);
    expect(await recordsCount()).toBe(before + 1);
  });

  it('the author releases only with its current token: none is INVALID_PARAMS at coordinatorToken, an old one FENCED; neither releases', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const old = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA }), 'streams.claim');
    const cur = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: true }), 'streams.claim');
    const none = expectError(await pair.a.client.call('streams.release', { streamId: pair.streamA }), 'INVALID_PARAMS');
    expect(none.path).toBe('coordinatorToken');
    const stale = expectError(
      await pair.a.client.call('streams.release', { streamId: pair.streamA, coordinatorToken: old.coordinatorToken }),
      'FENCED',
    );
    expect(stale).toMatchObject({ streamId: pair.streamA, epoch: cur.epoch });
    expect((await get(pair.streamA)).writer).toMatchObject({ epoch: cur.epoch, active: true });
    ok(await appendWith(pair.a.client, pair.streamA, cur.coordinatorToken), 'the current token still appends');
    const released = ok(
      await pair.a.client.call('streams.release', { streamId: pair.streamA, coordinatorToken: cur.coordinatorToken }),
      'streams.release',
    );
    expect(released.writer).toMatchObject({ epoch: cur.epoch, active: false, connected: false });
    // Released, the token is no longer current: releasing again with it is FENCED too.
    expectError(await pair.a.client.call('streams.release', { streamId: pair.streamA, coordinatorToken: cur.coordinatorToken }), 'FENCED');
  });

  it('releasing a stream nobody holds answers its state and changes nothing; a release appends no record', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA }), 'streams.claim');
    const held = await get(pair.streamA);
    const released = ok(await admin().call('streams.release', { streamId: pair.streamA }), 'streams.release');
    expect(released).toEqual({ ...held, writer: { ...held.writer, active: false, connected: false } });
    const again = ok(await admin().call('streams.release', { streamId: pair.streamA }), 'streams.release again');
    expect(again).toEqual(released);
    expect(await get(pair.streamA)).toEqual(released);
    expect(released.nextPosition).toBe(c.nextPosition);
    expectError(await appendWith(pair.a.client, pair.streamA, c.coordinatorToken), 'FENCED');
  });

  it('a follower is pushed the fence of a claim as a batch of exactly that one position', async () => {
    // fencing.ts claim: the committed range `{fromPosition: position, nextPosition: position + 1}`
    // is what followers are told of.
    const pair = await createPair(admin(), daemon().socketPath);
    const first = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA }), 'streams.claim');
    const bob = await daemon().connectAs(pair.b.token);
    try {
      const sub = ok(await bob.call('chats.follow', { chatId: pair.chatId }), 'chats.follow');
      const second = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: true }), 'streams.claim');
      await waitFor(() => batchesOf(bob, sub.subscriptionId).some((b) => b.streamId === pair.streamA), 'the fence to be pushed', 10_000);
      const pushed = batchesOf(bob, sub.subscriptionId).filter((b) => b.streamId === pair.streamA);
      expect(pushed.map((b) => ({ from: b.fromPosition, next: b.nextPosition, positions: b.records.map((r) => r.position) }))).toEqual([
        { from: first.nextPosition, next: second.nextPosition, positions: [first.nextPosition] },
      ]);
    } finally {
      bob.close();
    }
  });
});
