// Hello limiting slows only the failing caller (issue 21, finding 4; docs/security.md "Hello
// limiting"). Fault model: a local process without any token floods `session.hello` with bad
// tokens from several connections, reconnecting to get fresh tries. A valid token presented
// on its own connection must never be refused because someone else failed: on 32fc3a5 the
// 20-failures-per-second budget was shared by everyone and 0 of 99 valid hellos got in.

import { describe, expect, it } from 'vitest';
import { useDaemon } from '../helpers/use-daemon.js';
import { connectWire, createAgent } from '../helpers/wire-fixtures.js';

const ATTACKERS = 8;
const BAD_PER_CONNECTION = 3;
/** How long the flood runs while valid hellos are tried (the subject is behaviour over time). */
const FLOOD_MS = 6_000;

describe('a flood of bad hellos', () => {
  const { daemon, admin } = useDaemon();

  it('the failing connection itself waits: after its free tries, even a valid token is RATE_LIMITED on it', async () => {
    const agent = await createAgent(admin(), daemon().socketPath);
    const w = await connectWire(daemon().socketPath);
    for (let i = 0; i < BAD_PER_CONNECTION; i++) expect((await w.hello('yello_agt_wrong')).error?.data?.type).toBe('UNAUTHENTICATED');
    const r = await w.hello(agent.token);
    expect(r.error?.data?.type).toBe('RATE_LIMITED');
    expect(r.error?.data?.retryAfterMs).toBeGreaterThan(0);
    w.close();
  });

  it(`${ATTACKERS} connections × ${BAD_PER_CONNECTION} bad hellos, repeated: every valid hello on its own connection succeeds`, async () => {
    const agent = await createAgent(admin(), daemon().socketPath);
    const socketPath = daemon().socketPath;
    let stop = false;
    let bad = 0;
    const attacker = async (n: number) => {
      while (!stop) {
        const w = await connectWire(socketPath);
        const answers = await Promise.all(
          Array.from({ length: BAD_PER_CONNECTION }, (_, i) => w.hello(`yello_agt_bad${n}x${i}x${bad}`).catch(() => null)),
        );
        bad += answers.length;
        w.close();
      }
    };
    const flood = Array.from({ length: ATTACKERS }, (_, n) => attacker(n));
    const started = performance.now();
    let valid = 0;
    let refused = 0;
    const errors = new Map<string, number>();
    while (performance.now() - started < FLOOD_MS) {
      const w = await connectWire(socketPath);
      const r = await w.hello(agent.token);
      w.close();
      if (r.error) {
        refused++;
        const type = String(r.error.data?.type);
        errors.set(type, (errors.get(type) ?? 0) + 1);
      } else valid++;
    }
    stop = true;
    await Promise.all(flood);
    console.log(
      `[hello-flood] ${FLOOD_MS} ms of ${ATTACKERS}×${BAD_PER_CONNECTION} bad hellos (${bad} sent): ${valid} of ${valid + refused} valid hellos succeeded` +
        (refused ? ` (refused: ${JSON.stringify(Object.fromEntries(errors))})` : ''),
    );
    expect(bad, 'the flood ran').toBeGreaterThan(100);
    expect(valid, 'valid hellos tried').toBeGreaterThan(20);
    expect(refused, 'valid hellos refused').toBe(0);
  }, 60_000);
});
