// Kills mutants of src/daemon/streams/append-checks.ts that the mutation run
// (`npm run test:mutation`, test/MUTATION.md) found alive: each test names the check it pins.
// Over the real socket, against a real daemon.

import { describe, expect, it } from 'vitest';
import { expectError, messages, receipt, setupChat, streamState, type ReadingChat } from '../helpers/reading-fixtures.js';
import { ok, uniq, type Result } from '../helpers/wire-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';

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

describe('append checks (mutation guards)', () => {
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
