// Claims that know whether their holder is alive (docs/protocol.md §5.7, §5.8, §6.6, issue 20
// finding 4): `writer.connected` in the stream state, `streams.claim {replace: "if-abandoned"}`
// that takes over a claim whose connections are all closed (also after a daemon restart) and
// is WRITER_ACTIVE with `connected: true` while the holder is still there, and the fence's
// `replaced`/`reason`, which say whether an active holder was displaced — never whether
// `replace` was asked.

import { describe, expect, it } from 'vitest';
import type { MethodResults } from '../../src/shared/methods.js';
import type { StreamState, WriterFence } from '../../src/shared/types.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';
import {
  createPair,
  fenceOf,
  ok,
  readAll,
  uniq,
  type TestPair,
  type Wire,
  type WireResponse,
  createAgent,
} from '../helpers/wire-fixtures.js';

const { daemon, admin, restart } = useDaemon();

const get = async (c: Wire, streamId: string): Promise<StreamState> => ok(await c.call('streams.get', { streamId }), 'streams.get');

/** The stream's last record, which must be a writer fence. */
async function lastFence(streamId: string): Promise<WriterFence> {
  const records = await readAll(admin(), streamId, (await get(admin(), streamId)).generation);
  return fenceOf(records.at(-1));
}

/** The last fence without its time (checked to be there), for exact comparisons. */
async function lastFenceUntimed(streamId: string): Promise<Omit<WriterFence, 'claimedAt'>> {
  const { claimedAt, ...rest } = await lastFence(streamId);
  expect(claimedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
  return rest;
}

/** Asserts WRITER_ACTIVE (4092) and returns its message and data. */
function writerActive(r: WireResponse): { message: string; data: Record<string, unknown> } {
  expect(r.result, `expected WRITER_ACTIVE, got ${JSON.stringify(r.result)}`).toBeUndefined();
  expect({ code: r.error?.code, type: r.error?.data?.type }).toEqual({ code: 4092, type: 'WRITER_ACTIVE' });
  return { message: r.error!.message, data: r.error!.data! };
}

async function append(
  c: Wire,
  claimed: MethodResults['streams.claim'],
  text: string,
): Promise<WireResponse<MethodResults['streams.append']>> {
  const state = await get(c, claimed.streamId);
  return c.call('streams.append', {
    streamId: claimed.streamId,
    coordinatorToken: claimed.coordinatorToken,
    generation: state.generation,
    expectedPosition: state.nextPosition,
    operationId: uniq('op'),
    records: [{ type: 'chat.message', messageId: uniq('m'), content: text }],
  });
}

/** A fresh hello'd connection as alice (closed by the daemon fixture's cleanup). */
const asAlice = (pair: TestPair): Promise<Wire> => daemon().connectAs(pair.a.token);

/** Waits until the daemon has seen the holder's connection close. */
async function abandoned(pair: TestPair): Promise<void> {
  await waitFor(async () => !(await get(admin(), pair.streamA)).writer.connected, 'the claim to be abandoned', 10_000);
}

describe('writer.connected', () => {
  it('is true while the claiming connection is open, false once it closed (still active), and false when released', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    expect((await get(admin(), pair.streamA)).writer).toMatchObject({ active: false, connected: false });
    const holder = await asAlice(pair);
    const claimed = ok(await holder.call('streams.claim', { streamId: pair.streamA }));
    expect((await get(pair.b.client, pair.streamA)).writer).toMatchObject({ epoch: claimed.epoch, active: true, connected: true });
    holder.close();
    await abandoned(pair);
    expect((await get(admin(), pair.streamA)).writer).toMatchObject({ epoch: claimed.epoch, active: true, connected: false });
    // The token of an abandoned claim is still the stream's: it appends and attaches again.
    const again = await asAlice(pair);
    ok(await append(again, claimed, 'back again'));
    expect((await get(admin(), pair.streamA)).writer.connected).toBe(true);
    const released = ok(await again.call('streams.release', { streamId: pair.streamA, coordinatorToken: claimed.coordinatorToken }));
    expect(released.writer).toMatchObject({ active: false, connected: false });
  });

  it('stays true while any connection that appended with the token is open', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const claimer = await asAlice(pair);
    const claimed = ok(await claimer.call('streams.claim', { streamId: pair.streamA }));
    const appender = await asAlice(pair);
    ok(await append(appender, claimed, 'from a second connection'));
    claimer.close();
    await claimer.closed;
    // The appender still holds the claim: an if-abandoned claim must not take it.
    const held = writerActive(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned' }));
    expect(held.data.connected).toBe(true);
    appender.close();
    await abandoned(pair);
  });
});

describe('writer.connected of a busy daemon', () => {
  // A daemon of its own, in a process: SIGSTOP makes it read the hang-up and the claim in one turn of its loop.
  const { daemon, admin } = useDaemon({ process: true });

  it('is false for the next request once the holder has hung up, without waiting (20 rounds)', async () => {
    // A script runs `yello send` and then starts a coordinator: the claim the CLI left must be
    // abandoned for the coordinator's first call, not some milliseconds later (CI flake of
    // test/cli/waiting.test.ts: the daemon detached on the socket's close, a loop turn or more
    // after it read the hang-up).
    for (let round = 0; round < 20; round++) {
      const pair = await createPair(admin(), daemon().socketPath);
      const holder = await daemon().connectAs(pair.a.token);
      ok(await holder.call('streams.claim', { streamId: pair.streamA }));
      // Frozen, the daemon reads the hang-up and the claim in one turn of its loop, as a busy
      // daemon does.
      process.kill(daemon().pid!, 'SIGSTOP');
      try {
        holder.close();
        await holder.closed;
        const taking = pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned' });
        await sleep(20);
        process.kill(daemon().pid!, 'SIGCONT');
        const taken = await taking;
        expect(taken.error, `round ${round}`).toBeUndefined();
      } finally {
        process.kill(daemon().pid!, 'SIGCONT');
      }
    }
  });
});

describe('streams.claim replace: "if-abandoned"', () => {
  it('takes over a claim whose connection closed: fence replaced: true, reason "abandoned"; the old token is FENCED', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const holder = await asAlice(pair);
    const old = ok(await holder.call('streams.claim', { streamId: pair.streamA }));
    holder.close();
    await abandoned(pair);
    // Without replace an abandoned claim still blocks, and the error says how to proceed.
    const plain = writerActive(await pair.a.client.call('streams.claim', { streamId: pair.streamA }));
    expect(plain.data).toMatchObject({ epoch: old.epoch, connected: false });
    expect(plain.message).toContain('if-abandoned');
    expect(plain.message).toContain(`yello streams release ${pair.streamA}`);

    const taken = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned' }));
    expect(BigInt(taken.epoch)).toBe(BigInt(old.epoch) + 1n);
    expect(await lastFenceUntimed(pair.streamA)).toEqual({ epoch: taken.epoch, replaced: true, reason: 'abandoned' });
    expect((await get(admin(), pair.streamA)).writer).toMatchObject({ epoch: taken.epoch, active: true, connected: true });
    const stale = await append(pair.a.client, old, 'from the abandoned claim');
    expect(stale.error?.data).toMatchObject({ type: 'FENCED', epoch: taken.epoch });
    ok(await append(pair.a.client, taken, 'from the new holder'));
  });

  it('keeps the reason the caller gave for the takeover', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const holder = await asAlice(pair);
    ok(await holder.call('streams.claim', { streamId: pair.streamA }));
    holder.close();
    await abandoned(pair);
    ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned', reason: 'mcp server restarted' }));
    expect(await lastFence(pair.streamA)).toMatchObject({ replaced: true, reason: 'mcp server restarted' });
  });

  it('a connected holder still gets WRITER_ACTIVE with connected: true, and the message names yello streams release', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const holder = await asAlice(pair);
    const held = ok(await holder.call('streams.claim', { streamId: pair.streamA }));
    const before = await get(admin(), pair.streamA);
    const r = writerActive(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned' }));
    expect(r.data).toEqual({ type: 'WRITER_ACTIVE', epoch: held.epoch, claimedAt: before.writer.claimedAt, connected: true });
    expect(r.message).toContain('connection is open');
    expect(r.message).toContain(`yello streams release ${pair.streamA}`);
    // Nothing was written, and the holder's token still works.
    expect((await get(admin(), pair.streamA)).nextPosition).toBe(before.nextPosition);
    ok(await append(holder, held, 'still mine'));
    // Without replace the same: WRITER_ACTIVE, connected: true.
    expect(writerActive(await pair.a.client.call('streams.claim', { streamId: pair.streamA })).data.connected).toBe(true);
  });

  it('claims a never-claimed or released stream like a plain claim: replaced: false, no reason', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const first = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned' }));
    expect(await lastFenceUntimed(pair.streamA)).toEqual({ epoch: first.epoch, replaced: false });
    ok(await pair.a.client.call('streams.release', { streamId: pair.streamA, coordinatorToken: first.coordinatorToken }));
    const second = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned' }));
    expect(await lastFenceUntimed(pair.streamA)).toEqual({ epoch: second.epoch, replaced: false });
  });

  it('rejects other values of replace with INVALID_PARAMS at replace', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const r = await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: 'always' });
    expect(r.error?.data).toMatchObject({ type: 'INVALID_PARAMS', path: 'replace' });
  });
});

describe('streams.claim replace: true', () => {
  it('on a released or never-claimed stream records replaced: false (replace was asked, nobody was displaced)', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const first = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: true }));
    expect(await lastFence(pair.streamA)).toMatchObject({ epoch: first.epoch, replaced: false });
    ok(await admin().call('streams.release', { streamId: pair.streamA }));
    const second = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: true, reason: 'forced' }));
    expect(await lastFenceUntimed(pair.streamA)).toEqual({ epoch: second.epoch, replaced: false, reason: 'forced' });
    // Over a connected holder, replace: true displaces it: replaced: true, no invented reason.
    const third = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: true }));
    expect(await lastFenceUntimed(pair.streamA)).toEqual({ epoch: third.epoch, replaced: true });
  });
});

describe('after a daemon restart', () => {
  it('every claim is abandoned until its token is used again; if-abandoned takes it over', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const kept = ok(await pair.a.client.call('streams.claim', { streamId: pair.streamA }));
    const takenOver = ok(await pair.b.client.call('streams.claim', { streamId: pair.streamB }));
    await restart();
    const alice = await daemon().connectAs(pair.a.token);
    const bob = await daemon().connectAs(pair.b.token);
    expect((await get(admin(), pair.streamA)).writer).toMatchObject({ epoch: kept.epoch, active: true, connected: false });
    expect((await get(admin(), pair.streamB)).writer).toMatchObject({ epoch: takenOver.epoch, active: true, connected: false });

    // alice's token survives the restart: appending with it attaches the new connection.
    ok(await append(alice, kept, 'after the restart'));
    expect((await get(admin(), pair.streamA)).writer.connected).toBe(true);
    const stillHeld = writerActive(
      await (await daemon().connectAs(pair.a.token)).call('streams.claim', { streamId: pair.streamA, replace: 'if-abandoned' }),
    );
    expect(stillHeld.data.connected).toBe(true);

    // bob's holder never came back: a new coordinator takes the claim without replace: true.
    const fresh = ok(await bob.call('streams.claim', { streamId: pair.streamB, replace: 'if-abandoned' }));
    expect(await lastFence(pair.streamB)).toMatchObject({ epoch: fresh.epoch, replaced: true, reason: 'abandoned' });
  });
});

// Pins behaviour of src/daemon/streams/writer-presence.ts (`writer.connected`, docs/protocol.md
// §5.8, and `streams.claim {replace: "if-abandoned"}`) that the rest of the suite leaves unchecked.
// Over the real socket, against a real daemon.
describe('writer.connected with several connections of one writer', () => {
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

  describe('writer presence', () => {
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
});
