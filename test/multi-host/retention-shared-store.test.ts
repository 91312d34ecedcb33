// Pins behaviour of src/daemon/streams/retention.ts that only a store shared by several daemons
// reaches: the decision again after a stale commit in `trim` and `reset`, and the confirmation of
// an UNACKNOWLEDGED refusal on the database's peer head. On one LevelDB daemon a trim or reset
// reads its head and is admitted in the same turn, so its commit is never stale; on PostgreSQL
// another daemon may have moved the head that this daemon has not heard of yet, and its commit is
// then stale and decided again on the head the database has. What the retry must answer is the
// contract's answer for that head (docs/protocol.md §6.6): a trim answers the new firstPosition (or
// the current one when it is already past `beforePosition`), a reset starts the generation after
// the one the other daemon started, and no record is lost, duplicated or left readable below the
// retained start. The same machinery kills fencing.ts's decisions again after a stale claim or
// release commit: a release that finds an append through the other daemon still releases, one that
// finds a claim is FENCED, and the last attempt answers FENCED or POSITION_MISMATCH by what moved.
//
// Two "daemons" in this process on one database of a throwaway cluster, the one holding back
// the other's notices when a test needs it (test/helpers/in-process-pg-daemons.ts).

import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Caller } from '../../src/daemon/caller.js';
import { PAGE_BYTES } from '../../src/daemon/limits.js';
import type { StreamChange } from '../../src/daemon/store/port/stream-port.js';
import { failure, useTwoDaemons, type InProcessDaemon } from '../helpers/in-process-pg-daemons.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { waitFor } from '../helpers/wait.js';
import { outcomeOf } from '../../src/daemon/store/port/stream-port.js';

describe.skipIf(!pgAvailable())('retention.ts on two daemons sharing one PostgreSQL database', () => {
  const pg = useTwoDaemons('retention');
  let a: InProcessDaemon;
  let b: InProcessDaemon;
  beforeAll(() => {
    a = pg.a();
    b = pg.b();
  });

  interface Pair {
    alice: Caller;
    bob: Caller;
    aliceToken: string;
    bobToken: string;
    chatId: string;
    streamId: string;
    bobStream: string;
    /** alice's coordinator token of generation 1. */
    token: string;
  }

  /** alice and bob, their chat opened through A, alice's stream claimed through A with `n` messages; B knows it all. */
  async function pair(n: number): Promise<Pair> {
    const tag = randomBytes(3).toString('hex');
    const ca = await a.directory.createAgent(`alice${tag}`, 'Alice', undefined);
    const cb = await a.directory.createAgent(`bob${tag}`, 'Bob', undefined);
    await a.directory.setPolicy(ca.agent.id, 'off');
    await a.directory.setPolicy(cb.agent.id, 'off');
    const alice = a.directory.authenticate(ca.token)!;
    const bob = a.directory.authenticate(cb.token)!;
    const { chat } = await a.directory.openChat(alice, ca.agent.id, cb.agent.id);
    const streamId = `${chat.id}:${ca.agent.id}`;
    const claim = await a.streams.claim(alice, { streamId, replace: false });
    const p: Pair = {
      alice,
      bob,
      aliceToken: ca.token,
      bobToken: cb.token,
      chatId: chat.id,
      streamId,
      bobStream: `${chat.id}:${cb.agent.id}`,
      token: claim.coordinatorToken,
    };
    await appendThrough(a, p, n, `m${tag}`);
    await heard(b, p);
    return p;
  }

  /** Append `n` one-message operations to alice's stream through `d`. */
  async function appendThrough(d: InProcessDaemon, p: Pair, n: number, prefix: string): Promise<void> {
    const alice = d.directory.authenticate(p.aliceToken)!;
    for (let i = 0; i < n; i++) {
      const head = d.streams.get(alice, p.streamId);
      await d.streams.append(alice, {
        streamId: p.streamId,
        coordinatorToken: p.token,
        generation: Number(head.generation),
        expectedPosition: Number(head.nextPosition),
        operationId: `op-${prefix}-${i}`,
        records: [{ type: 'chat.message', messageId: `${prefix}-${i}`, content: `${prefix} ${i}` }],
      });
    }
  }

  /** Wait until `d` has both heads of the pair's chat as A has them (and knows both agents). */
  async function heard(d: InProcessDaemon, p: Pair): Promise<void> {
    const want = [p.streamId, p.bobStream].map((id) => JSON.stringify(a.streams.get(p.alice, id)));
    await waitFor(
      () => {
        const alice = d.directory.authenticate(p.aliceToken);
        if (!alice || !d.directory.authenticate(p.bobToken)) return false;
        try {
          return [p.streamId, p.bobStream].every((id, i) => JSON.stringify(d.streams.get(alice, id)) === want[i]);
        } catch {
          return false;
        }
      },
      `${d.name} hears the heads`,
      10_000,
    );
  }

  /** Wait until both daemons have alice's head with `want` (the database's, once each heard the other). */
  async function settled(p: Pair, want: Record<string, string>): Promise<void> {
    await waitFor(
      () =>
        [a, b].every((d) => {
          const alice = d.directory.authenticate(p.aliceToken)!;
          const head = d.streams.get(alice, p.streamId) as unknown as Record<string, unknown>;
          return Object.entries(want).every(([k, v]) => head[k] === v);
        }),
      `both daemons have ${JSON.stringify(want)}`,
      10_000,
    );
  }

  /** Every record of alice's stream in [from, next) of `generation`, read through `d` by bob: positions and messageIds. */
  async function readAll(d: InProcessDaemon, p: Pair, generation: number, from: number) {
    const bob = d.directory.authenticate(p.bobToken)!;
    const batch = await d.streams.read(bob, { streamId: p.streamId, generation, fromPosition: from, limit: 1000, maxBytes: PAGE_BYTES });
    return {
      sealed: batch.sealed,
      nextPosition: batch.nextPosition,
      records: batch.records.map((r) => ({
        position: r.position,
        messageId: r.wrapper.type === 'chat.message' ? r.wrapper.message.clientMessageId : r.wrapper.type,
      })),
    };
  }

  function readAt(d: InProcessDaemon, p: Pair, generation: number, from: number) {
    const bob = d.directory.authenticate(p.bobToken)!;
    return d.streams.read(bob, { streamId: p.streamId, generation, fromPosition: from, limit: 1000, maxBytes: PAGE_BYTES });
  }

  it('a trim’s commit deletes the trimmed rows itself (no window before its sweep, unlike LevelDB’s chunked deletes): a read below the new start is PREFIX_UNAVAILABLE through both daemons while the sweep waits', async () => {
    const p = await pair(6); // fence at 0, messages 1..6
    const sweep = a.port.streams.sweepTrimmed.bind(a.port.streams);
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    let sweeping = false;
    a.port.streams.sweepTrimmed = async (...args) => {
      sweeping = true;
      await gate;
      return sweep(...args);
    };
    try {
      const trimming = a.streams.trim(p.streamId, 4, true);
      await waitFor(() => sweeping, 'the trim committed and its sweep waits', 10_000);
      await waitFor(() => b.streams.get(p.alice, p.streamId).firstPosition === '4', 'B hears the trim', 10_000);
      const rows = await pg.cluster().psql(`select count(*) from records where stream_id = '${p.streamId}' and position < 4`, 'retention');
      // Gone with the head change, in its transaction: stream-reader.ts 97:9 (`from < b.firstPosition`
      // -> false) is equivalent on PostgreSQL, the range read finds nothing and `missing()` answers the same.
      expect(rows.trim()).toBe('0');
      for (const d of [a, b])
        for (const from of [0, 3])
          expect(await failure(readAt(d, p, 1, from))).toMatchObject({ type: 'CONTINUITY_BREAK', reason: 'PREFIX_UNAVAILABLE' });
      go();
      expect(await trimming).toEqual({ firstPosition: '4' });
    } finally {
      go();
      a.port.streams.sweepTrimmed = sweep;
    }
  });

  it('a trim through A, which has not heard B trim less, is decided again on B’s head and takes effect (firstPosition 6, reads continuous from 6 on both daemons)', async () => {
    const p = await pair(8); // fence at 0, messages 1..8: nextPosition 9
    const prefix = (await readAll(a, p, 1, 0)).records;
    expect(prefix.map((r) => r.position)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8']);
    a.hold();
    try {
      expect(await b.streams.trim(p.streamId, 3, true)).toEqual({ firstPosition: '3' });
      // A still decides on firstPosition 0: its commit (from 0) is stale, then decided on B's head (from 3).
      expect(a.streams.get(p.alice, p.streamId).firstPosition).toBe('0');
      expect(await a.streams.trim(p.streamId, 6, true)).toEqual({ firstPosition: '6' });
      expect(a.streams.get(p.alice, p.streamId)).toMatchObject({ generation: '1', firstPosition: '6', nextPosition: '9' });
    } finally {
      a.release();
    }
    await waitFor(() => b.streams.get(p.alice, p.streamId).firstPosition === '6', 'B hears the trim to 6', 10_000);
    for (const d of [a, b]) {
      expect(d.streams.get(p.alice, p.streamId)).toMatchObject({ generation: '1', firstPosition: '6', nextPosition: '9' });
      const r = await readAll(d, p, 1, 6);
      expect(r.nextPosition).toBe('9');
      expect(r.records).toEqual(prefix.slice(6));
      for (const below of [0, 3, 5])
        expect(await failure(readAt(d, p, 1, below))).toMatchObject({ type: 'CONTINUITY_BREAK', reason: 'PREFIX_UNAVAILABLE' });
    }
  });

  it('a trim through A, which has not heard B trim further, is decided again on B’s head: it answers B’s firstPosition 6 and moves nothing', async () => {
    const p = await pair(8);
    const prefix = (await readAll(a, p, 1, 0)).records;
    a.hold();
    try {
      expect(await b.streams.trim(p.streamId, 6, true)).toEqual({ firstPosition: '6' });
      expect(a.streams.get(p.alice, p.streamId).firstPosition).toBe('0');
      // Decided again on firstPosition 6: at or below the retained start changes nothing (§6.6).
      expect(await a.streams.trim(p.streamId, 4, true)).toEqual({ firstPosition: '6' });
      expect(a.streams.get(p.alice, p.streamId)).toMatchObject({ firstPosition: '6', nextPosition: '9' });
    } finally {
      a.release();
    }
    await waitFor(() => b.streams.get(p.alice, p.streamId).firstPosition === '6', 'B has 6', 10_000);
    for (const d of [a, b]) {
      expect(d.streams.get(p.alice, p.streamId)).toMatchObject({ firstPosition: '6', nextPosition: '9' });
      expect((await readAll(d, p, 1, 6)).records).toEqual(prefix.slice(6));
      expect(await failure(readAt(d, p, 1, 4))).toMatchObject({ type: 'CONTINUITY_BREAK', reason: 'PREFIX_UNAVAILABLE' });
    }
  });

  it('two trims of one stream at the same time through both daemons both take effect: the further start wins, nothing retained is lost or read twice', async () => {
    const p = await pair(8);
    const prefix = (await readAll(a, p, 1, 0)).records;
    // Both decide on firstPosition 0 in this turn; one commit is stale and decided again.
    const [ra, rb] = await Promise.all([a.streams.trim(p.streamId, 3, true), b.streams.trim(p.streamId, 5, true)]);
    expect(rb).toEqual({ firstPosition: '5' });
    // A's trim to 3 answers 3 when it committed first, else 5 (B's start, past 3).
    expect(['3', '5']).toContain(ra.firstPosition);
    await settled(p, { firstPosition: '5' });
    for (const d of [a, b]) {
      expect(d.streams.get(p.alice, p.streamId)).toMatchObject({ generation: '1', firstPosition: '5', nextPosition: '9' });
      const r = await readAll(d, p, 1, 5);
      expect(r.records).toEqual(prefix.slice(5));
      expect(await failure(readAt(d, p, 1, 4))).toMatchObject({ type: 'CONTINUITY_BREAK', reason: 'PREFIX_UNAVAILABLE' });
    }
  });

  it('a reset through A, which has not heard B’s reset, is decided again on B’s head: generations 2 (B) and 3 (A), both sealed ones readable with their bounds', async () => {
    const p = await pair(4); // nextPosition 5
    const g1 = await readAll(a, p, 1, 0);
    const epoch = Number(a.streams.get(p.alice, p.streamId).writer.epoch);
    a.hold();
    let ra;
    try {
      const rb = await b.streams.reset(p.streamId, 'reset through B');
      expect(rb).toMatchObject({ generation: '2', firstPosition: '0', nextPosition: '0' });
      expect(rb.writer).toMatchObject({ epoch: String(epoch + 1), active: false });
      expect(a.streams.get(p.alice, p.streamId).generation).toBe('1');
      ra = await a.streams.reset(p.streamId, 'reset through A');
    } finally {
      a.release();
    }
    expect(ra).toMatchObject({ generation: '3', firstPosition: '0', nextPosition: '0' });
    expect(ra.writer).toMatchObject({ epoch: String(epoch + 2), active: false });
    await settled(p, { generation: '3' });
    for (const d of [a, b]) {
      expect(d.streams.get(p.alice, p.streamId)).toMatchObject({ generation: '3', firstPosition: '0', nextPosition: '0' });
      const meta = d.streams.committedMeta(p.streamId)!;
      expect(
        meta.sealed.map(({ generation, firstPosition, nextPosition, reason }) => ({ generation, firstPosition, nextPosition, reason })),
      ).toEqual([
        { generation: 1, firstPosition: 0, nextPosition: 5, reason: 'reset through B' },
        { generation: 2, firstPosition: 0, nextPosition: 0, reason: 'reset through A' },
      ]);
      expect(await readAll(d, p, 1, 0)).toEqual({ ...g1, sealed: true });
      expect(await readAll(d, p, 2, 0)).toEqual({ sealed: true, nextPosition: '0', records: [] });
      // The old token is fenced with the last epoch.
      expect(
        await failure(
          d.streams.append(p.alice, {
            streamId: p.streamId,
            coordinatorToken: p.token,
            generation: 3,
            expectedPosition: 0,
            operationId: `op-late-${d.name}-${randomBytes(3).toString('hex')}`,
            records: [{ type: 'chat.message', messageId: `late-${d.name}`, content: 'late' }],
          }),
        ),
      ).toMatchObject({ type: 'FENCED', epoch: String(epoch + 2) });
    }
  });

  it('two resets of one stream at the same time through both daemons answer consecutive generations (2 and 3)', async () => {
    const p = await pair(2);
    const epoch = Number(a.streams.get(p.alice, p.streamId).writer.epoch);
    const [ra, rb] = await Promise.all([a.streams.reset(p.streamId, 'A at once'), b.streams.reset(p.streamId, 'B at once')]);
    // Whichever committed first started generation 2; the other, decided again, generation 3.
    const [first, second] = ra.generation === '2' ? [ra, rb] : [rb, ra];
    expect([first.generation, second.generation]).toEqual(['2', '3']);
    expect([first.writer.epoch, second.writer.epoch]).toEqual([String(epoch + 1), String(epoch + 2)]);
    await settled(p, { generation: '3' });
    for (const d of [a, b]) {
      const meta = d.streams.committedMeta(p.streamId)!;
      expect(meta.generation).toBe(3);
      expect(meta.sealed.map((s) => [s.generation, s.firstPosition, s.nextPosition])).toEqual([
        [1, 0, 3],
        [2, 0, 0],
      ]);
    }
  });

  it('a reset whose commit is stale on every attempt answers POSITION_MISMATCH with the head that moved, after three decisions', async () => {
    const p = await pair(1);
    const admit = a.port.streams.admit.bind(a.port.streams);
    let decisions = 0;
    // Before each of A's reset commits, B resets once more: A's commit then finds the head moved.
    // (By stream, not by `kind`: the kind is the mutated code's to choose.) The ticket stands for
    // the wait and the admission after it, as a commit decided before B's reset would.
    a.port.streams.admit = (c: StreamChange) => {
      if (c.next.streamId !== p.streamId) return admit(c);
      const durable = (async () => {
        decisions++;
        await b.streams.reset(p.streamId, `B ${decisions}`);
        return outcomeOf(admit(c));
      })();
      return { status: 'admitted', durable };
    };
    try {
      expect(await failure(a.streams.reset(p.streamId, 'A'))).toMatchObject({
        type: 'POSITION_MISMATCH',
        generation: '4',
        nextPosition: '0',
      });
    } finally {
      a.port.streams.admit = admit;
    }
    expect(decisions).toBe(3);
    expect(a.streams.get(p.alice, p.streamId)).toMatchObject({ generation: '4', nextPosition: '0' });
  });

  it('without force, a trim through A that B’s receipt allows is decided again on the peer head in the database, not refused on A’s', async () => {
    const p = await pair(6); // nextPosition 7
    a.hold();
    try {
      // bob acknowledges alice's stream up to 7 through B; A has not heard it.
      const bobOnB = b.directory.authenticate(p.bobToken)!;
      const batch = await b.streams.read(bobOnB, { streamId: p.streamId, generation: 1, fromPosition: 0, limit: 7, maxBytes: PAGE_BYTES });
      expect(batch.nextPosition).toBe('7');
      const claim = await b.streams.claim(bobOnB, { streamId: p.bobStream, replace: false });
      await b.streams.append(bobOnB, {
        streamId: p.bobStream,
        coordinatorToken: claim.coordinatorToken,
        generation: Number(claim.generation),
        expectedPosition: Number(claim.nextPosition),
        operationId: `op-ack-${randomBytes(3).toString('hex')}`,
        records: [{ type: 'chat.receipt', peerStreamId: p.streamId, peerGeneration: '1', nextPosition: '7', batchId: batch.batchId }],
      });
      expect(a.streams.get(p.alice, p.streamId).acknowledged).toBeNull();
      expect(await a.streams.trim(p.streamId, 5, false)).toEqual({ firstPosition: '5' });
      expect(await failure(a.streams.trim(p.streamId, 8, false))).toMatchObject({ type: 'INVALID_PARAMS', path: 'beforePosition' });
    } finally {
      a.release();
    }
    expect(a.streams.get(p.alice, p.streamId)).toMatchObject({ firstPosition: '5', nextPosition: '7' });
    expect((await readAll(a, p, 1, 5)).records.map((r) => r.position)).toEqual(['5', '6']);
  });

  it('without force, a trim past what bob acknowledged through B is UNACKNOWLEDGED with the position the database has', async () => {
    const p = await pair(6); // nextPosition 7
    a.hold();
    try {
      const bobOnB = b.directory.authenticate(p.bobToken)!;
      const batch = await b.streams.read(bobOnB, { streamId: p.streamId, generation: 1, fromPosition: 0, limit: 4, maxBytes: PAGE_BYTES });
      const claim = await b.streams.claim(bobOnB, { streamId: p.bobStream, replace: false });
      await b.streams.append(bobOnB, {
        streamId: p.bobStream,
        coordinatorToken: claim.coordinatorToken,
        generation: Number(claim.generation),
        expectedPosition: Number(claim.nextPosition),
        operationId: `op-ack-${randomBytes(3).toString('hex')}`,
        records: [{ type: 'chat.receipt', peerStreamId: p.streamId, peerGeneration: '1', nextPosition: '4', batchId: batch.batchId }],
      });
      expect(await failure(a.streams.trim(p.streamId, 6, false))).toMatchObject({
        type: 'PERMISSION_DENIED',
        reason: 'UNACKNOWLEDGED',
        message: 'the peer acknowledged up to 4; trimming to 6 needs force: true',
      });
      expect(await a.streams.trim(p.streamId, 4, false)).toEqual({ firstPosition: '4' });
    } finally {
      a.release();
    }
  });

  it('a trim through A to a nextPosition only B’s appends reached is decided again on the database’s head, not refused as beyond it', async () => {
    const p = await pair(2); // nextPosition 3
    a.hold();
    try {
      await appendThrough(b, p, 3, `b${randomBytes(2).toString('hex')}`); // nextPosition 6 in the database
      expect(a.streams.get(p.alice, p.streamId).nextPosition).toBe('3');
      expect(await a.streams.trim(p.streamId, 6, true)).toEqual({ firstPosition: '6' });
    } finally {
      a.release();
    }
    expect(a.streams.get(p.alice, p.streamId)).toMatchObject({ firstPosition: '6', nextPosition: '6' });
  });

  // fencing.ts: a claim or release whose commit finds the head moved by the other daemon is decided
  // again; on LevelDB a commit is never stale, so these paths had no coverage. What the other
  // daemon does in between runs inside this daemon's commit, after its decision and before its
  // statement: the commit is then stale for certain.
  /** Runs `before(n)` (n = 1, 2, …) inside each of A's commits of `kind`, then the commit. */
  function beforeEachCommit(kind: StreamChange['kind'], before: (n: number) => Promise<void>): () => void {
    const admit = a.port.streams.admit.bind(a.port.streams);
    let n = 0;
    // The ticket stands for the wait and the admission after it (as a commit decided before it).
    a.port.streams.admit = (change) =>
      change.kind === kind ? { status: 'admitted', durable: before(++n).then(() => outcomeOf(admit(change))) } : admit(change);
    return () => {
      a.port.streams.admit = admit;
    };
  }

  it('a release through A whose commit finds an append through B is decided again and released; one that finds a claim through B is FENCED with its epoch', async () => {
    const p = await pair(1); // fence at 0, message 1
    const aliceOnB = b.directory.authenticate(p.aliceToken)!;
    let restore = beforeEachCommit('release', async (n) => {
      if (n === 1) await appendThrough(b, p, 1, `r${randomBytes(2).toString('hex')}`);
    });
    try {
      const released = await a.streams.release(p.alice, { streamId: p.streamId, coordinatorToken: p.token });
      expect(released).toMatchObject({ nextPosition: '3', writer: { active: false, epoch: '1' } });
    } finally {
      restore();
    }
    await settled(p, { nextPosition: '3' });
    expect((await readAll(a, p, 1, 0)).records.map((r) => r.position)).toEqual(['0', '1', '2']);

    const again = await a.streams.claim(p.alice, { streamId: p.streamId, replace: false });
    await heard(b, p);
    let taken = '';
    restore = beforeEachCommit('release', async (n) => {
      if (n === 1) taken = (await b.streams.claim(aliceOnB, { streamId: p.streamId, replace: true })).epoch;
    });
    try {
      expect(await failure(a.streams.release(p.alice, { streamId: p.streamId, coordinatorToken: again.coordinatorToken }))).toMatchObject({
        type: 'FENCED',
        epoch: '3',
      });
      expect(taken).toBe('3');
    } finally {
      restore();
    }
  });

  it('a release through A whose every commit finds the head moved through B answers FENCED on the last attempt when B claimed, POSITION_MISMATCH when B only appended', async () => {
    const p = await pair(1);
    const aliceOnB = b.directory.authenticate(p.aliceToken)!;
    const prefix = `x${randomBytes(2).toString('hex')}`;
    let restore = beforeEachCommit('release', async (n) => {
      if (n < 3) await appendThrough(b, p, 1, `${prefix}${n}`);
      else await b.streams.claim(aliceOnB, { streamId: p.streamId, replace: true });
    });
    try {
      expect(await failure(a.streams.release(p.alice, { streamId: p.streamId, coordinatorToken: p.token }))).toMatchObject({
        type: 'FENCED',
        epoch: '2',
      });
    } finally {
      restore();
    }

    // The admin releases without a token: out of attempts it is POSITION_MISMATCH, never FENCED.
    const r = await pair(1);
    const prefixR = `z${randomBytes(2).toString('hex')}`;
    restore = beforeEachCommit('release', async (n) => {
      await appendThrough(b, r, 1, `${prefixR}${n}`);
    });
    try {
      expect(await failure(a.streams.release({ role: 'admin' }, { streamId: r.streamId }))).toMatchObject({
        type: 'POSITION_MISMATCH',
        nextPosition: '5',
      });
    } finally {
      restore();
    }

    const q = await pair(1);
    const prefixQ = `y${randomBytes(2).toString('hex')}`;
    restore = beforeEachCommit('release', async (n) => {
      await appendThrough(b, q, 1, `${prefixQ}${n}`);
    });
    try {
      expect(await failure(a.streams.release(q.alice, { streamId: q.streamId, coordinatorToken: q.token }))).toMatchObject({
        type: 'POSITION_MISMATCH',
        nextPosition: '5',
      });
    } finally {
      restore();
    }
  });

  it('a claim through A whose commit finds an append through B is decided again: the fence goes after that append', async () => {
    const p = await pair(1);
    const restore = beforeEachCommit('claim', async (n) => {
      if (n === 1) await appendThrough(b, p, 1, `c${randomBytes(2).toString('hex')}`);
    });
    try {
      const claim = await a.streams.claim(p.alice, { streamId: p.streamId, replace: true });
      expect(claim).toMatchObject({ epoch: '2', nextPosition: '4', generation: '1' });
    } finally {
      restore();
    }
    const records = (await readAll(a, p, 1, 0)).records;
    expect(records.map((r) => r.messageId)).toEqual(['chat.writer-fence', expect.any(String), expect.any(String), 'chat.writer-fence']);
  });
});
