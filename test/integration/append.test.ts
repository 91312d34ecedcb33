// Pins behaviour of src/daemon/streams/appender.ts (`streams.append`, docs/protocol.md §6.6) that
// the rest of the suite leaves unchecked. Over the real socket, against a real daemon; each test
// names the line it pins.

import { describe, expect, it } from 'vitest';
import { expectError, messages, setupChat, receipt, streamState, type ReadingChat } from '../helpers/reading-fixtures.js';
import { useDaemon, type DaemonFixture } from '../helpers/use-daemon.js';
import {
  createPair,
  claim,
  fetchKeys,
  messageOf,
  messageProblems,
  ok,
  readAll,
  uniq,
  type Result,
  type Wire,
} from '../helpers/wire-fixtures.js';

const { daemon, admin } = useDaemon();

const recordsCount = async (): Promise<number> => ok(await admin().call('daemon.status', {})).counts.records;

describe('streams.append', () => {
  it('an operationId sent again while its first append is still being written replays it (duplicate: true), not POSITION_MISMATCH', async () => {
    // appender.ts append: the replay looks the operation up among the *admitted* writes
    // (`this.#tables.operation(…, true)`). Both requests leave in one write, so the second is
    // admitted while the first waits for its fsync: only the admitted view knows the operation.
    const c = await setupChat(daemon(), admin());
    const operationId = uniq('op-twice');
    const records = messages(uniq('twice'), 2);
    const params = {
      streamId: c.streamA,
      coordinatorToken: c.wa.token,
      generation: c.wa.generation,
      expectedPosition: c.wa.next,
      operationId,
      records,
    };
    const [first, second] = await Promise.all([
      c.alice.client.call('streams.append', params),
      c.alice.client.call('streams.append', params),
    ]);
    const a = ok(first, 'first append');
    const b = ok(second, 'the same append again');
    expect(a.duplicate).toBe(false);
    expect(b.duplicate).toBe(true);
    expect({ ...b, duplicate: false }).toEqual(a);
    expect(ok(await c.alice.client.call('streams.get', { streamId: c.streamA })).nextPosition).toBe(a.nextPosition);
  });

  it('an append without a grant is PERMISSION_DENIED with reason NO_GRANT, and writes nothing', async () => {
    // appender.ts append: `errors.permissionDenied('NO_GRANT', …)` (§3.5 reasons).
    const p = await createPair(admin(), daemon().socketPath, { grants: 'a-to-b' });
    const bc = await claim(p.b.client, p.streamB);
    const r = await p.b.client.call('streams.append', {
      streamId: p.streamB,
      coordinatorToken: bc.coordinatorToken,
      generation: bc.generation,
      expectedPosition: bc.nextPosition,
      operationId: uniq('op'),
      records: messages(uniq('ng'), 1),
    });
    const data = expectError(r, 'PERMISSION_DENIED');
    expect(data).toEqual({ type: 'PERMISSION_DENIED', reason: 'NO_GRANT' });
    expect(ok(await admin().call('streams.get', { streamId: p.streamB })).nextPosition).toBe(bc.nextPosition);
  });

  it('DUPLICATE_MESSAGE names the position of the stored message, also for the third message of a request', async () => {
    // appender.ts append: the message-id index stores `expected + index` for each message.
    const c = await setupChat(daemon(), admin());
    const sent = messages(uniq('idx'), 3);
    const first = await c.wa.append(sent);
    expect(first.firstPosition).toBe('1');
    for (const [index, m] of sent.entries()) {
      const r = await c.wa.tryAppend([m]);
      expect({ code: r.error?.code, data: r.error?.data }, `message ${index}`).toEqual({
        code: 4094,
        data: { type: 'DUPLICATE_MESSAGE', position: String(1 + index) },
      });
    }
  });

  it('daemon.status counts each appended record once (counts.records goes up by the records of the append)', async () => {
    // appender.ts append: `this.#counters.records += p.records.length`.
    const c = await setupChat(daemon(), admin());
    const before = await recordsCount();
    await c.wa.send('count', 3);
    expect(await recordsCount()).toBe(before + 3);
  });

  it('records signed at the end of a busy turn are stored with their signature (the write waits for the signing)', async () => {
    await busyTurnsSigned({ daemon, admin });
  });
});

describe('streams.append with signing workers (--sign-workers 2)', () => {
  // A process of its own: the worker threads load dist/daemon/crypto/sign-worker.js, which a
  // daemon run from src/ in the test worker has no compiled copy of.
  const workers = useDaemon({ extraArgs: ['--sign-workers', '2'], process: true });
  it('records signed by the workers in busy turns are stored with the signature their append answered, and verify', async () => {
    // sign-pool.ts: a busy turn's signatures come from worker threads; the write still waits for them.
    await busyTurnsSigned(workers);
    // The workers made them: a pool that failed would have logged its fall back to the event loop.
    expect(
      workers
        .daemon()
        .logs()
        .filter((l) => l.msg === 'signing on the event loop from now on'),
    ).toEqual([]);
  });
});

/** Pipelined appends from 8 writers: every stored message verifies and carries the signature its append answered. */
async function busyTurnsSigned(d: Pick<DaemonFixture<Wire>, 'daemon' | 'admin'>): Promise<void> {
  // appender.ts append: the write is handed `Promise.all(signing)` when a signature was
  // deferred (sign-batcher.ts: from the 4th signature of a turn on), so no record is stored
  // before its signature value is set. What is pinned: every stored message verifies and
  // carries the signature its append answered. (The mutant `signing.length > 0` → `false`
  // survives this test: the batcher's end-of-turn signing is scheduled before the storage's
  // group cut in every run seen.)
  const chats = await Promise.all([0, 1, 2, 3].map(() => setupChat(d.daemon(), d.admin())));
  const writers = chats.flatMap((c) => [c.wa, c.wb]);
  const rounds = 16;
  const answered = new Map<string, string>();
  // Each writer pipelines all its appends at once (positions known in advance): requests keep
  // arriving while earlier groups are synced, which is when a group could be cut and encoded
  // before the end-of-turn signing of an append admitted in the same loop iteration.
  const results = await Promise.all(
    writers.flatMap((w) =>
      Array.from({ length: rounds }, (_, round) =>
        w.client.call('streams.append', {
          streamId: w.streamId,
          coordinatorToken: w.token,
          generation: w.generation,
          expectedPosition: String(Number(w.next) + 8 * round),
          operationId: uniq('op-busy'),
          records: messages(uniq(`busy${round}`), 8),
        }),
      ),
    ),
  );
  for (const r of results)
    for (const rec of ok(r, 'pipelined append').records) answered.set(`${rec.streamId}#${rec.position}`, messageOf(rec).signature.value);
  const keys = await fetchKeys(d.admin());
  let checked = 0;
  for (const w of writers) {
    for (const rec of await readAll(d.admin(), w.streamId)) {
      if (rec.wrapper.type !== 'chat.message') continue;
      const m = messageOf(rec);
      expect(m.signature.value, `${rec.streamId}#${rec.position}`).not.toBe('');
      expect(messageProblems(m, keys), `${rec.streamId}#${rec.position}`).toEqual([]);
      expect(m.signature.value).toBe(answered.get(`${rec.streamId}#${rec.position}`));
      checked++;
    }
  }
  expect(checked).toBe(writers.length * rounds * 8);
}

// Pins behaviour of src/daemon/streams/append-checks.ts that the rest of the suite leaves
// unchecked: each test names the check it pins. Over the real
// socket, against a real daemon.
describe('the checks of an append', () => {
  const { daemon, admin } = useDaemon();

  async function bobReads(
    c: ReadingChat,
    streamId: string,
    generation: string,
    from: string,
    limit?: number,
  ): Promise<Result<'streams.read'>> {
    const params: Record<string, unknown> = { streamId, generation, fromPosition: from };
    if (limit !== undefined) params.limit = limit;
    return ok(await c.bob.client.call('streams.read', params), 'streams.read');
  }

  describe('append checks', () => {
    it('NOT_PRESENTED: a batch of bob’s own stream offered as a receipt of alice’s, same generation and end, is refused', async () => {
      // append-checks.ts checkReceipts: `batch.streamId !== r.peerStreamId`. The batch was shown to
      // bob (reader matches) and has alice's generation and end, so only the stream check refuses.
      const c = await setupChat(daemon(), admin());
      await c.wa.send('a', 3);
      await c.wb.send('b', 3);
      expect(c.wb.next).toBe(c.wa.next);
      const own = await bobReads(c, c.streamB, '1', '0');
      expect(own.nextPosition).toBe(c.wa.next);
      const before = c.wb.next;
      const data = expectError(await c.wb.tryAppend([receipt(c.streamA, '1', own.nextPosition, own.batchId)]), 'INVALID_RECEIPT');
      expect(data.reason).toBe('NOT_PRESENTED');
      expect((await streamState(admin(), c.streamB)).nextPosition).toBe(before);
      expect((await streamState(admin(), c.streamA)).acknowledged).toBeNull();
    });

    it('NOT_FORWARD compares positions within one peer generation: after a reset, a receipt ending lower is accepted', async () => {
      // append-checks.ts checkReceipts: `last.peerGeneration === peerGeneration && nextPosition <= last.nextPosition`.
      const c = await setupChat(daemon(), admin());
      await c.wa.send('old', 4);
      const shown = await bobReads(c, c.streamA, '1', '0');
      expect(shown.nextPosition).toBe('5');
      await c.wb.append([receipt(c.streamA, '1', shown.nextPosition, shown.batchId)]);
      ok(await admin().call('streams.reset', { streamId: c.streamA, reason: 'not forward test' }));
      await c.wa.reclaim();
      await c.wa.send('new', 1);
      expect(c.wa.generation).toBe('2');
      const fresh = await bobReads(c, c.streamA, '2', '0');
      expect(BigInt(fresh.nextPosition)).toBeLessThan(BigInt(shown.nextPosition));
      await c.wb.append([receipt(c.streamA, '2', fresh.nextPosition, fresh.batchId)]);
      expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '2', nextPosition: fresh.nextPosition });
    });

    it('the request digest covers receipts: the same operationId with another receipt is OPERATION_CONFLICT', async () => {
      // append-checks.ts requestDigest: a receipt's fields are part of the digest (and a receipt is
      // not digested as a message).
      const c = await setupChat(daemon(), admin());
      await c.wa.send('d', 4);
      const early = await bobReads(c, c.streamA, '1', '0', 2);
      const full = await bobReads(c, c.streamA, '1', '0');
      expect(early.nextPosition).not.toBe(full.nextPosition);
      const operationId = uniq('op');
      const params = (batch: Result<'streams.read'>): Record<string, unknown> => ({
        streamId: c.streamB,
        coordinatorToken: c.wb.token,
        generation: c.wb.generation,
        expectedPosition: c.wb.next,
        operationId,
        records: [receipt(c.streamA, '1', batch.nextPosition, batch.batchId)],
      });
      const first = ok(await c.bob.client.call('streams.append', params(early)));
      expect(first.duplicate).toBe(false);
      // The same request again replays ...
      const replay = ok(await c.bob.client.call('streams.append', params(early)));
      expect(replay).toMatchObject({ duplicate: true, firstPosition: first.firstPosition, nextPosition: first.nextPosition });
      // ... another receipt under the same operationId conflicts.
      const data = expectErrorType(await c.bob.client.call('streams.append', params(full)), 4093, 'OPERATION_CONFLICT');
      expect(data.operation).toBe(operationId);
      expect((await streamState(admin(), c.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: early.nextPosition });
    });

    it('a messageId twice in one request answers DUPLICATE_MESSAGE with the position of the first', async () => {
      // append-checks.ts checkMessageIds: position = nextPosition + index of the earlier record.
      const c = await setupChat(daemon(), admin());
      await c.wa.send('pre', 3);
      const at = BigInt(c.wa.next);
      const [m0, m1] = messages(uniq('dup'), 2);
      const r = await c.wa.tryAppend([m0, m1, { ...m1!, content: 'again' }]);
      const data = expectErrorType(r, 4094, 'DUPLICATE_MESSAGE');
      expect(data.position).toBe((at + 1n).toString());
      expect((await streamState(admin(), c.streamA)).nextPosition).toBe(at.toString());
    });

    it('policy reject: clean messages are accepted, and POLICY_REJECTED lists the kinds of all messages sorted', async () => {
      // append-checks.ts applyPolicy: reject only when something was found; kinds sorted (§7).
      const c = await setupChat(daemon(), admin());
      ok(await admin().call('agents.setPolicy', { agentId: c.alice.id, pii: 'reject' }));
      const clean = await c.wa.append(messages(uniq('clean'), 2));
      expect(clean.redactions).toEqual([]);
      const before = c.wa.next;
      const r = await c.wa.tryAppend([
        { type: 'chat.message', messageId: uniq('p'), content: 'call me on +1 415 555 0100' },
        { type: 'chat.message', messageId: uniq('e'), content: 'or write to dora@example.com' },
      ]);
      const data = expectErrorType(r, 4220, 'POLICY_REJECTED');
      expect(data.kinds).toEqual(['EMAIL', 'PHONE']);
      expect((await streamState(admin(), c.streamA)).nextPosition).toBe(before);
    });

    it('receipts pass the PII policy untouched: a receipt with a message under redact and reject is accepted', async () => {
      // append-checks.ts applyPolicy: only chat.message records go through the policy.
      const c = await setupChat(daemon(), admin());
      await c.wa.send('r', 4);
      for (const [i, pii] of (['redact', 'reject'] as const).entries()) {
        ok(await admin().call('agents.setPolicy', { agentId: c.bob.id, pii }));
        const batch = await bobReads(c, c.streamA, '1', '0', 2 + i);
        const res = await c.wb.append([
          { type: 'chat.message', messageId: uniq('m'), content: 'seen' },
          receipt(c.streamA, '1', batch.nextPosition, batch.batchId),
        ]);
        expect(res.redactions, pii).toEqual([]);
        expect((await streamState(admin(), c.streamA)).acknowledged, pii).toEqual({ generation: '1', nextPosition: batch.nextPosition });
      }
    });
  });

  /** Asserts the JSON-RPC error `code`/`data.type` and returns its data. */
  function expectErrorType(
    resp: { result?: unknown; error?: { code: number; data?: Record<string, unknown> } },
    code: number,
    type: string,
  ): Record<string, unknown> {
    expect(resp.result, `expected ${type}`).toBeUndefined();
    expect({ code: resp.error?.code, type: resp.error?.data?.type }).toEqual({ code, type });
    return resp.error?.data ?? {};
  }
});
