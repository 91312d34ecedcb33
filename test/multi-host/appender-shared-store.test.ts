// Pins behaviour of src/daemon/streams/appender.ts that only a store shared by several daemons
// reaches: on one LevelDB daemon the head in memory is the store's, so a refusal decided on it is
// final; on PostgreSQL another daemon may have moved a head this daemon has not heard of yet, and
// the append must be answered as §6 says for the head the database has. - A receipt for the peer's
// new generation, started and read through A while B has not heard
//   the reset: B's head of the peer says STALE_GENERATION, but the peer moved, so the receipt is
//   decided again on the database's head and accepted (appender.ts, the receipt's catch).
// - A refusal on the last decision of an append that another daemon committed meanwhile: the
//   replay answers, not the refusal (§6: a replay answers before every check but the author's;
//   appender.ts `#unlessReplay`).
// - A replay of an operation committed through A, resent through B while B's mark says the
//   stream is corrupt: the replay answers (§6: before CORRUPT), though B's first decision, without
//   the lookup, knew only the mark (appender.ts `redecidable`, 329).
// - A commit found stale on the last decision: an append sent ahead of the head (a client that
//   pipelines its appends through two daemons) whose position the head reaches only on the last
//   decision, and which A moves again inside that commit: the answer names the head the database
//   refused it against, FENCED if A claimed, POSITION_MISMATCH if A only appended.
// - append-checks.ts: a receipt for the peer's old generation, sent through B after alice
//   acknowledged the new one through A. Deciding again reloads alice's head (her position moved)
//   but not bob's, so only the check against alice's own last receipt refuses it; without it the
//   acknowledgement would go back a generation (38:9, argued near-equivalent on one daemon).
// - chat-reader.ts: a long poll on B wakes when A appends: B hears it only as a head that moved
//   (43:36, the `moved` listener; without it the poll answers when its wait runs out).
// Two daemons in this process on one database, B holding A's stream notices when a test needs it
// (test/helpers/in-process-pg-daemons.ts).

import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Caller } from '../../src/daemon/caller.js';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import { ChatReader } from '../../src/daemon/streams/chat-reader.js';
import type { AppendRequest } from '../../src/daemon/requests.js';
import { failure, useTwoDaemons, type InProcessDaemon } from '../helpers/in-process-pg-daemons.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { waitFor } from '../helpers/wait.js';
import { outcomeOf } from '../../src/daemon/store/port/stream-port.js';

describe.skipIf(!pgAvailable())('appender.ts on two daemons sharing one PostgreSQL database', () => {
  const pg = useTwoDaemons('appender');
  let a: InProcessDaemon;
  let b: InProcessDaemon;
  beforeAll(() => {
    a = pg.a();
    b = pg.b();
  });

  interface Chat {
    aliceId: string;
    aliceToken: string;
    bobToken: string;
    aliceStream: string;
    bobStream: string;
  }

  /** alice and bob (PII policy off) and their chat, made through A; B knows the agents and both heads. */
  async function chat(): Promise<Chat> {
    const tag = randomBytes(3).toString('hex');
    const ca = await a.directory.createAgent(`alice${tag}`, 'Alice', undefined);
    const cb = await a.directory.createAgent(`bob${tag}`, 'Bob', undefined);
    await a.directory.setPolicy(ca.agent.id, 'off');
    await a.directory.setPolicy(cb.agent.id, 'off');
    const alice = a.directory.authenticate(ca.token)!;
    const { chat: c } = await a.directory.openChat(alice, ca.agent.id, cb.agent.id);
    const out = {
      aliceId: ca.agent.id,
      aliceToken: ca.token,
      bobToken: cb.token,
      aliceStream: `${c.id}:${ca.agent.id}`,
      bobStream: `${c.id}:${cb.agent.id}`,
    };
    await waitFor(
      () => b.directory.authenticate(out.aliceToken) !== null && b.directory.authenticate(out.bobToken) !== null,
      'B knows both agents',
      10_000,
    );
    // The chat reaches B by its notice, apart from the agents': these calls go below the RPC
    // layer, which alone reads the store again for a stream it has not heard of (confirmRefusal).
    await heard(b, out.aliceToken, out.aliceStream);
    await heard(b, out.bobToken, out.bobStream);
    return out;
  }

  const as = (d: InProcessDaemon, token: string): Caller => d.directory.authenticate(token)!;

  /** Wait until `d` has the stream's head as A has it. */
  async function heard(d: InProcessDaemon, token: string, streamId: string): Promise<void> {
    const want = JSON.stringify(a.streams.get(as(a, token), streamId));
    await waitFor(
      () => {
        try {
          return JSON.stringify(d.streams.get(as(d, token), streamId)) === want;
        } catch {
          return false;
        }
      },
      `${d.name} hears ${streamId}`,
      10_000,
    );
  }

  /** A one-message append on the head `d` has in memory. */
  function messageAt(d: InProcessDaemon, caller: Caller, streamId: string, token: string, content: string): AppendRequest {
    const head = d.streams.get(caller, streamId);
    const id = randomBytes(4).toString('hex');
    return {
      streamId,
      coordinatorToken: token,
      generation: Number(head.generation),
      expectedPosition: Number(head.nextPosition),
      operationId: `op-${id}`,
      records: [{ type: 'chat.message', messageId: `m-${id}`, content }],
    };
  }

  it('a receipt for the peer generation that a reset through A started, read through A, is accepted through B, which had not heard the reset', async () => {
    const c = await chat();
    const bobOnA = as(a, c.bobToken);
    const bobClaim = await a.streams.claim(bobOnA, { streamId: c.bobStream, replace: false });
    await a.streams.append(bobOnA, messageAt(a, bobOnA, c.bobStream, bobClaim.coordinatorToken, 'gen 1'));
    const aliceOnB = as(b, c.aliceToken);
    const aliceClaim = await b.streams.claim(aliceOnB, { streamId: c.aliceStream, replace: false });
    await heard(b, c.bobToken, c.bobStream);
    b.hold();
    try {
      await a.streams.reset(c.bobStream, 'guard');
      const again = await a.streams.claim(bobOnA, { streamId: c.bobStream, replace: true });
      await a.streams.append(bobOnA, messageAt(a, bobOnA, c.bobStream, again.coordinatorToken, 'gen 2'));
      const batch = await a.streams.read(as(a, c.aliceToken), {
        streamId: c.bobStream,
        generation: 2,
        fromPosition: 0,
        limit: 100,
        maxBytes: PAGE_BYTES,
      });
      expect(batch).toMatchObject({ generation: '2', nextPosition: '2' });
      // B still has generation 1 of bob's stream: its receipt check alone would say STALE_GENERATION.
      expect(b.streams.get(aliceOnB, c.bobStream).generation).toBe('1');
      const head = b.streams.get(aliceOnB, c.aliceStream);
      const receipt = {
        type: 'chat.receipt' as const,
        peerStreamId: c.bobStream,
        peerGeneration: '2',
        nextPosition: '2',
        batchId: batch.batchId,
      };
      const done = await b.streams.append(aliceOnB, {
        streamId: c.aliceStream,
        coordinatorToken: aliceClaim.coordinatorToken,
        generation: Number(head.generation),
        expectedPosition: Number(head.nextPosition),
        operationId: `op-ack-${randomBytes(3).toString('hex')}`,
        records: [receipt],
      });
      expect(done).toMatchObject({ duplicate: false, firstPosition: head.nextPosition });
      expect(done.records[0]?.wrapper).toMatchObject({ type: 'chat.receipt', receipt: { peerGeneration: '2', nextPosition: '2' } });
    } finally {
      b.release();
    }
    await waitFor(
      () => JSON.stringify(a.streams.get(bobOnA, c.bobStream).acknowledged) === JSON.stringify({ generation: '2', nextPosition: '2' }),
      'A shows bob’s generation 2 acknowledged up to 2',
      10_000,
    );
  });

  it('an append refused on its last decision (POLICY_REJECTED) after A committed the same operation answers the replay, not the refusal', async () => {
    const c = await chat();
    const aliceOnA = as(a, c.aliceToken);
    const claim = await a.streams.claim(aliceOnA, { streamId: c.aliceStream, replace: false });
    await heard(b, c.aliceToken, c.aliceStream);
    const aliceOnB = as(b, c.aliceToken);
    // One refused append through B (a stale position) makes alice's next appends there look their
    // ids up before deciding (lookup-penalty.ts), so the decision below is the looked-up one.
    const stale = { ...messageAt(b, aliceOnB, c.aliceStream, claim.coordinatorToken, 'stale'), expectedPosition: 99 };
    expect(await failure(b.streams.append(aliceOnB, stale))).toMatchObject({ type: 'POSITION_MISMATCH' });

    const x = messageAt(b, aliceOnB, c.aliceStream, claim.coordinatorToken, 'write to ops@example.com');
    const prepare = b.port.streams.prepare.bind(b.port.streams);
    let armed = true;
    // Inside B's lookup, after it found nothing: A commits the very same append, and alice's policy
    // becomes reject, so B's decision (on its head in memory, which has not heard A) refuses it.
    b.port.streams.prepare = async (...args) => {
      await prepare(...args);
      if (!armed) return;
      armed = false;
      await a.streams.append(aliceOnA, x);
      await a.directory.setPolicy(c.aliceId, 'reject');
      await waitFor(() => b.directory.piiMode(c.aliceId) === 'reject', 'B hears the policy', 10_000);
    };
    b.hold();
    try {
      const answer = await b.streams.append(aliceOnB, x);
      expect(armed).toBe(false);
      expect(answer).toMatchObject({ duplicate: true, operationId: x.operationId, firstPosition: String(x.expectedPosition) });
      expect(answer.records[0]?.wrapper).toMatchObject({ type: 'chat.message', message: { content: 'write to ops@example.com' } });
    } finally {
      b.release();
      b.port.streams.prepare = prepare;
      await a.directory.setPolicy(c.aliceId, 'off');
    }
    // Written once: the stream holds the fence and one message.
    expect(a.streams.get(aliceOnA, c.aliceStream).nextPosition).toBe(String(x.expectedPosition + 1));
  });

  it.each([
    ['appended', 'POSITION_MISMATCH'],
    ['claimed', 'FENCED'],
  ] as const)('an append whose last decision commits on a head A then %s answers %s with the head the database has', async (move, type) => {
    const c = await chat();
    const aliceOnA = as(a, c.aliceToken);
    const claim = await a.streams.claim(aliceOnA, { streamId: c.aliceStream, replace: false });
    await heard(b, c.aliceToken, c.aliceStream);
    const aliceOnB = as(b, c.aliceToken);
    const n = Number(b.streams.get(aliceOnB, c.aliceStream).nextPosition);
    // Sent for position n + 2, while the head is at n: the client's two appends before it go
    // through A, one inside each of B's reloads of the head (B decides again when its head
    // moved), so only B's third decision finds the head at n + 2.
    const ahead = { ...messageAt(b, aliceOnB, c.aliceStream, claim.coordinatorToken, 'third'), expectedPosition: n + 2 };
    const streams = b.port.streams;
    const reload = streams.reloadHead.bind(streams);
    const admit = streams.admit.bind(streams);
    let reloads = 0;
    let commits = 0;
    streams.reloadHead = async (streamId) => {
      if (streamId === c.aliceStream && ++reloads <= 2)
        await a.streams.append(aliceOnA, messageAt(a, aliceOnA, c.aliceStream, claim.coordinatorToken, `pipelined ${reloads}`));
      return reload(streamId);
    };
    let epoch = claim.epoch;
    // Inside the third decision's commit, after B decided: A moves the head once more, then B's
    // change is admitted (the ticket stands for both).
    streams.admit = (change) => {
      if (change.next.streamId !== c.aliceStream || change.kind !== 'append' || ++commits !== 1) return admit(change);
      const moved = async () => {
        if (move === 'claimed') epoch = (await a.streams.claim(aliceOnA, { streamId: c.aliceStream, replace: true })).epoch;
        else await a.streams.append(aliceOnA, messageAt(a, aliceOnA, c.aliceStream, claim.coordinatorToken, 'moved inside'));
      };
      return { status: 'admitted', durable: moved().then(() => outcomeOf(admit(change))) };
    };
    b.hold();
    try {
      const refused = await failure(b.streams.append(aliceOnB, ahead));
      expect({ reloads, commits }).toEqual({ reloads: 2, commits: 1 });
      const head = a.streams.get(aliceOnA, c.aliceStream);
      expect(head.nextPosition).toBe(String(n + 3));
      if (type === 'FENCED') expect(refused).toMatchObject({ type, epoch });
      else expect(refused).toMatchObject({ type, nextPosition: String(n + 3), generation: '1' });
    } finally {
      b.release();
      streams.reloadHead = reload;
      streams.admit = admit;
    }
  });

  it('an operation committed through A and resent through B, whose mark says the stream is corrupt, answers the replay', async () => {
    const c = await chat();
    const aliceOnA = as(a, c.aliceToken);
    const claim = await a.streams.claim(aliceOnA, { streamId: c.aliceStream, replace: false });
    await heard(b, c.aliceToken, c.aliceStream);
    const aliceOnB = as(b, c.aliceToken);
    b.hold();
    try {
      const x = messageAt(a, aliceOnA, c.aliceStream, claim.coordinatorToken, 'before the mark');
      const first = await a.streams.append(aliceOnA, x);
      b.integrity.mark({ streamId: c.aliceStream, generation: 1, fromPosition: x.expectedPosition + 1, detail: 'mutation guard' });
      // Resent first, so that B decides it without the lookup (no refusal of alice's before it).
      expect(await b.streams.append(aliceOnB, x)).toEqual({ ...first, duplicate: true });
      // The mark is real: a new append is refused by it.
      const next = messageAt(a, aliceOnA, c.aliceStream, claim.coordinatorToken, 'new');
      expect(await failure(b.streams.append(aliceOnB, { ...next, expectedPosition: x.expectedPosition + 1 }))).toMatchObject({
        type: 'STORAGE_FAILURE',
        reason: 'CORRUPT',
      });
    } finally {
      b.release();
    }
  });

  it('a receipt for the peer’s old generation, sent through B after alice acknowledged the new one through A, is STALE_GENERATION and moves nothing', async () => {
    const c = await chat();
    const bobOnA = as(a, c.bobToken);
    const aliceOnA = as(a, c.aliceToken);
    const bobClaim = await a.streams.claim(bobOnA, { streamId: c.bobStream, replace: false });
    await a.streams.append(bobOnA, messageAt(a, bobOnA, c.bobStream, bobClaim.coordinatorToken, 'gen 1'));
    const aliceClaim = await a.streams.claim(aliceOnA, { streamId: c.aliceStream, replace: false });
    await heard(b, c.bobToken, c.bobStream);
    await heard(b, c.aliceToken, c.aliceStream);
    const aliceOnB = as(b, c.aliceToken);
    const read = (d: InProcessDaemon, generation: number) =>
      d.streams.read(as(d, c.aliceToken), { streamId: c.bobStream, generation, fromPosition: 0, limit: 100, maxBytes: PAGE_BYTES });
    const old = await read(b, 1);
    const receipt = (batch: { generation: string; nextPosition: string; batchId: string }) => ({
      type: 'chat.receipt' as const,
      peerStreamId: c.bobStream,
      peerGeneration: batch.generation,
      nextPosition: batch.nextPosition,
      batchId: batch.batchId,
    });
    b.hold();
    try {
      await a.streams.reset(c.bobStream, 'guard');
      const again = await a.streams.claim(bobOnA, { streamId: c.bobStream, replace: true });
      await a.streams.append(bobOnA, messageAt(a, bobOnA, c.bobStream, again.coordinatorToken, 'gen 2'));
      const current = await read(a, 2);
      const acked = { ...messageAt(a, aliceOnA, c.aliceStream, aliceClaim.coordinatorToken, 'x'), records: [receipt(current)] };
      await a.streams.append(aliceOnA, acked);
      // B has neither the reset nor alice's receipt; alice sends on the head A gave her.
      expect(b.streams.get(aliceOnB, c.bobStream).generation).toBe('1');
      const stale = { ...messageAt(a, aliceOnA, c.aliceStream, aliceClaim.coordinatorToken, 'x'), records: [receipt(old)] };
      expect(await failure(b.streams.append(aliceOnB, stale))).toMatchObject({ type: 'INVALID_RECEIPT', reason: 'STALE_GENERATION' });
    } finally {
      b.release();
    }
    // Nothing written: alice's stream holds her fence and the receipt of generation 2, which stands.
    expect(a.streams.get(aliceOnA, c.aliceStream).nextPosition).toBe('2');
    expect(a.streams.get(bobOnA, c.bobStream).acknowledged).toEqual({ generation: '2', nextPosition: '2' });
  });

  it('a long poll on B answers when A appends to the stream, not when its wait runs out', async () => {
    const c = await chat();
    const aliceOnA = as(a, c.aliceToken);
    const claim = await a.streams.claim(aliceOnA, { streamId: c.aliceStream, replace: false });
    await heard(b, c.aliceToken, c.aliceStream);
    const reader = new ChatReader(b.streams, b.directory, b.codec);
    const head = b.streams.get(as(b, c.bobToken), c.aliceStream);
    const polling = reader.read(as(b, c.bobToken), {
      streamId: c.aliceStream,
      generation: Number(head.generation),
      fromPosition: Number(head.nextPosition),
      limit: 10,
      maxBytes: PAGE_BYTES,
      waitMs: 60_000,
    });
    await a.streams.append(aliceOnA, messageAt(a, aliceOnA, c.aliceStream, claim.coordinatorToken, 'wake up'));
    // A minute's wait against the notice's few milliseconds: only a poll that never woke is late.
    const late = new Promise<'late'>((r) =>
      setTimeout(() => {
        r('late');
      }, 15_000).unref(),
    );
    const batch = await Promise.race([polling, late]);
    expect(batch).not.toBe('late');
    expect(batch === 'late' ? [] : batch.records.map((r) => r.wrapper.type)).toEqual(['chat.message']);
  }, 30_000);
});
