// Connection admission (issue 21, finding 3; docs/security.md "Connection admission"): a local
// process that can reach the socket must not lock the admin and the agents out. Fault model: a
// hostile local process holding thousands of connections that never say a byte, or an agent
// holding every session it can get.
//
//   - 2,048 silent connections (= --max-connections): `yello status` and an agent's hello still
//     work during the flood, and the silent ones are all closed by the hello deadline;
//   - one agent at --max-sessions-per-agent gets RATE_LIMITED for one more; another agent and
//     the admin are not affected; agents together leave slots for the admin;
//   - a connection the daemon refuses reaches the client as RateLimitedError with
//     retryAfterMs, not as "the connection closed (is the daemon running?)".

import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { RateLimitedError, YelloClient } from '../../src/client/index.js';
import { Cli } from '../helpers/cli-runner.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { waitFor } from '../helpers/wait.js';
import { connectWire, createAgent, type Wire } from '../helpers/wire-fixtures.js';

const FLOOD = 2_048;
const HELLO_TIMEOUT_MS = 3_000;

/** Opens `n` connections that never write; resolves once each is connected or refused. */
async function silentFlood(socketPath: string, n: number): Promise<{ sockets: net.Socket[]; closed: () => number }> {
  const sockets: net.Socket[] = [];
  let closed = 0;
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve) => {
          const s = net.createConnection(socketPath);
          sockets.push(s);
          s.on('error', () => {
            resolve();
          });
          s.on('close', () => {
            closed++;
            resolve();
          });
          s.on('connect', () => {
            resolve();
          });
          s.resume();
        }),
    ),
  );
  return { sockets, closed: () => closed };
}

describe('a flood of connections that never say hello', () => {
  const { daemon, admin } = useDaemon({
    extraArgs: ['--max-connections', String(FLOOD), '--hello-timeout-ms', String(HELLO_TIMEOUT_MS)],
  });

  it(`${FLOOD} silent connections: yello status and an agent's hello still work; the silent ones are closed by the deadline`, async () => {
    const agent = await createAgent(admin(), daemon().socketPath);
    const started = performance.now();
    const flood = await silentFlood(daemon().socketPath, FLOOD);
    // The admin as an operator runs it: a new process, a new connection, hello, daemon.status.
    const cli = new Cli(daemon().socketPath, daemon().dataDir);
    const t = performance.now();
    const status = await cli.run(['status']);
    const statusMs = performance.now() - t;
    expect(status.stderr).toBe('');
    expect(status.code, 'yello status during the flood').toBe(0);
    const agentConn = await connectWire(daemon().socketPath);
    const hello = await agentConn.hello(agent.token);
    expect(hello.error, 'an agent hello during the flood').toBeUndefined();
    console.log(`[admission] ${FLOOD} silent connections: yello status took ${statusMs.toFixed(0)} ms (process start included)`);
    await waitFor(() => flood.closed() === FLOOD, 'every silent connection closed', HELLO_TIMEOUT_MS + 5_000);
    expect(performance.now() - started, 'closed within the hello deadline (+ margin)').toBeLessThan(HELLO_TIMEOUT_MS + 5_000);
    // The session that said hello is kept.
    expect((await agentConn.call('agents.get', { agentId: agent.id })).error).toBeUndefined();
    agentConn.close();
    for (const s of flood.sockets) s.destroy();
  }, 60_000);
});

describe('sessions per agent and the admin reserve', () => {
  const MAX = 24;
  const PER_AGENT = 10;
  const { daemon, admin } = useDaemon({
    extraArgs: ['--max-connections', String(MAX), '--max-sessions-per-agent', String(PER_AGENT)],
  });

  it('an agent at its session cap gets RATE_LIMITED; agents together leave slots for the admin; a refused client sees RateLimitedError', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const b = await createAgent(admin(), daemon().socketPath);
    const c = await createAgent(admin(), daemon().socketPath);
    // createAgent says hello once per agent: those three sessions count, plus the admin's.
    const held: Wire[] = [a.client, b.client, c.client];
    const helloAs = async (token: string) => {
      const w = await connectWire(daemon().socketPath);
      held.push(w);
      return w.hello(token);
    };
    for (let i = 1; i < PER_AGENT; i++) expect((await helloAs(a.token)).error, `session ${i + 1} of agent a`).toBeUndefined();
    const over = await helloAs(a.token);
    expect(over.error?.data?.type, 'one session past the per-agent cap').toBe('RATE_LIMITED');
    expect(over.error?.data?.retryAfterMs).toBeGreaterThan(0);
    // Agent b is not affected by a's cap; agents together stop at MAX - 8 (the admin reserve).
    let agentSessions = PER_AGENT + 2;
    while (agentSessions < MAX - 8) {
      expect((await helloAs(b.token)).error).toBeUndefined();
      agentSessions++;
    }
    expect((await helloAs(c.token)).error?.data?.type, 'agents together hold at most max-connections - 8').toBe('RATE_LIMITED');
    // Closed connections free their slots: the admin still gets in, as a CLI process.
    for (const w of held.splice(-2)) w.close();
    await waitFor(async () => (await new Cli(daemon().socketPath, daemon().dataDir).run(['status'])).code === 0, 'yello status', 10_000);

    // Fill every remaining slot with admin sessions: the next connection is refused at accept.
    const admins: Wire[] = [];
    for (;;) {
      const w = await connectWire(daemon().socketPath);
      const r = await w.hello(daemon().adminToken).catch(() => null);
      if (!r || r.error) {
        w.close();
        break;
      }
      admins.push(w);
    }
    const refused = await YelloClient.connect({ socketPath: daemon().socketPath, token: a.token }).then(
      (cl) => {
        cl.close();
        return null;
      },
      (err: unknown) => err,
    );
    expect(refused, 'the refusal reaches the client as what it is').toBeInstanceOf(RateLimitedError);
    expect((refused as RateLimitedError).retryAfterMs).toBeGreaterThan(0);
    for (const w of [...held, ...admins]) w.close();
  }, 60_000);
});
