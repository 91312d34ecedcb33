// Quotas per agent (issue 21, finding 7; docs/security.md "Quotas"): one agent must not fill
// the disk or the log for everyone. Over its append rate or its claims per minute an agent gets
// RATE_LIMITED with retryAfterMs; over its stored bytes QUOTA_EXCEEDED; nothing is written
// either way, and other agents are unaffected. On 32fc3a5 none of this existed: 7,722
// claim/release cycles in 15 s wrote 7,722 fence records.

import { describe, expect, it } from 'vitest';
import { useDaemon } from '../helpers/use-daemon.js';
import { claim, createPair, ok, readAll, type TestPair, type Wire, type WireResponse } from '../helpers/wire-fixtures.js';

/** Appends `count` messages of `chars` characters at the stream's end; returns the raw answer. */
async function append(client: Wire, streamId: string, c: { coordinatorToken: string; next: bigint }, count: number, chars = 10, tag = 'm') {
  const r = await client.call('streams.append', {
    streamId,
    coordinatorToken: c.coordinatorToken,
    generation: '1',
    expectedPosition: String(c.next),
    operationId: `${tag}-${c.next}`,
    records: Array.from({ length: count }, (_, i) => ({
      type: 'chat.message',
      messageId: `${tag}.${c.next}.${i}`,
      content: 'x'.repeat(chars),
    })),
  });
  if (r.result) c.next = BigInt(r.result.nextPosition);
  return r as WireResponse<{ nextPosition: string }>;
}

async function writer(pair: TestPair, side: 'a' | 'b') {
  const client = pair[side].client;
  const streamId = side === 'a' ? pair.streamA : pair.streamB;
  const c = await claim(client, streamId);
  return { client, streamId, w: { coordinatorToken: c.coordinatorToken, next: BigInt(c.nextPosition) } };
}

describe('append rate per agent', () => {
  // 20 records/s sustained: the bucket holds 10 s of it, 200 records.
  const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open', '--quota-append-records', '20'] });

  it('an agent over its append rate gets RATE_LIMITED with retryAfterMs, nothing written; another agent is unaffected', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const a = await writer(pair, 'a');
    const b = await writer(pair, 'b');
    let limited: WireResponse | null = null;
    let appended = 0;
    for (let i = 0; i < 10 && !limited; i++) {
      const r = await append(a.client, a.streamId, a.w, 64);
      if (r.error) limited = r;
      else appended += 64;
    }
    expect(limited?.error?.data?.type, 'past 200 records in a burst').toBe('RATE_LIMITED');
    expect(appended).toBeLessThanOrEqual(200);
    const retryAfterMs = Number(limited?.error?.data?.retryAfterMs);
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(64_000 / 20);
    // Nothing of the refused append was written.
    expect((await readAll(a.client, a.streamId)).filter((r) => r.wrapper.type === 'chat.message')).toHaveLength(appended);
    // The other agent has its own bucket.
    expect((await append(b.client, b.streamId, b.w, 64)).error).toBeUndefined();
    // Waiting as told is enough (time is the subject here).
    await new Promise((r) => setTimeout(r, retryAfterMs));
    expect((await append(a.client, a.streamId, a.w, 64)).error).toBeUndefined();
  }, 30_000);
});

describe('claims per minute', () => {
  const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open'] });

  it('claim/release cycles until refused write at most the default 60 (+ refill) fences; then RATE_LIMITED', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const client = pair.a.client;
    let claims = 0;
    let limited: WireResponse | null = null;
    const started = performance.now();
    // Until the first refusal (not for a fixed time: a loaded machine may do fewer than 60 in 3 s).
    while (performance.now() - started < 20_000) {
      const r = await client.call('streams.claim', { streamId: pair.streamA });
      if (r.error) {
        limited = r;
        break;
      }
      claims++;
      ok(await client.call('streams.release', { streamId: pair.streamA, coordinatorToken: r.result!.coordinatorToken }), 'release');
    }
    const seconds = (performance.now() - started) / 1000;
    const fences = (await readAll(client, pair.streamA)).filter((r) => r.wrapper.type === 'chat.writer-fence').length;
    console.log(`[quotas] ${seconds.toFixed(1)} s of claim/release: ${claims} claims succeeded, ${fences} fence records`);
    expect(limited?.error?.data?.type).toBe('RATE_LIMITED');
    expect(Number(limited?.error?.data?.retryAfterMs)).toBeGreaterThan(0);
    // The burst of 60, and the refill of 60 a minute (one a second) while it ran.
    expect(claims, 'claims before the first refusal').toBeGreaterThanOrEqual(60);
    expect(claims, 'claims before the first refusal').toBeLessThanOrEqual(60 + Math.ceil(seconds) + 1);
    expect(fences, 'fence records written').toBeGreaterThanOrEqual(claims);
    expect(fences).toBeLessThanOrEqual(2 * (60 + Math.ceil(seconds) + 1));
    // Another agent claims as usual.
    await claim(pair.b.client, pair.streamB);
  }, 30_000);
});

describe('stored bytes per agent', () => {
  const QUOTA = 100_000;
  const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open', '--quota-stored-bytes', String(QUOTA)] });

  it('an append past the stored-bytes quota gets QUOTA_EXCEEDED (retryAfterMs null), nothing written; another agent is unaffected', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const a = await writer(pair, 'a');
    const b = await writer(pair, 'b');
    let exceeded: WireResponse | null = null;
    let appended = 0;
    for (let i = 0; i < 20 && !exceeded; i++) {
      const r = await append(a.client, a.streamId, a.w, 1, 10_000);
      if (r.error) exceeded = r;
      else appended++;
    }
    expect(exceeded?.error?.code).toBe(4291);
    expect(exceeded?.error?.data).toMatchObject({ type: 'QUOTA_EXCEEDED', quota: 'storedBytes', limit: QUOTA, retryAfterMs: null });
    expect(Number(exceeded?.error?.data?.used)).toBeLessThanOrEqual(QUOTA);
    expect(exceeded?.error?.message).toMatch(/trim|--quota-stored-bytes/);
    expect(appended).toBeGreaterThanOrEqual(8);
    expect((await readAll(a.client, a.streamId)).filter((r) => r.wrapper.type === 'chat.message')).toHaveLength(appended);
    expect((await append(b.client, b.streamId, b.w, 1, 10_000)).error).toBeUndefined();
  }, 30_000);
});
