// A daemon cut off from its PostgreSQL database without a word (issue 52 finding 7): packets
// dropped, its TCP connections still open, so nothing fails until TCP gives up, minutes later.
// Daemon A reaches the database through a TCP proxy the test holds (while cut, the proxy
// forwards nothing and keeps what it got, as a silent drop does, and delivers it when the link
// heals); daemon B reaches it directly. While A is cut off, a grant is removed through B. A must
// answer its callers within its deadline instead of holding them, log the loss once, and commit
// none of the appends sent to it once the link heals: what an append depended on is checked in
// its transaction, which runs after the revocation.

import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { messages, StreamWriter } from '../helpers/reading-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { connectAs, createAgent, ok, type Wire } from '../helpers/wire-fixtures.js';

/** A TCP proxy that can be cut silently: nothing forwarded, nothing closed, everything kept for when it heals. */
class CutProxy {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  readonly #held: Array<() => void> = [];
  #cut = false;

  private constructor(server: net.Server) {
    this.#server = server;
  }

  static async start(target: { host: string; port: number }): Promise<CutProxy & { port: number }> {
    const server = net.createServer();
    const proxy = new CutProxy(server);
    server.on('connection', (client) => {
      const upstream = net.connect(target.port, target.host);
      for (const [from, to] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        proxy.#sockets.add(from);
        from.on('data', (chunk: Buffer) => {
          if (proxy.#cut) proxy.#held.push(() => to.write(chunk));
          else to.write(chunk);
        });
        from.on('error', () => to.destroy());
        from.on('close', () => {
          proxy.#sockets.delete(from);
          to.destroy();
        });
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    return Object.assign(proxy, { port });
  }

  cut(): void {
    this.#cut = true;
  }

  heal(): void {
    this.#cut = false;
    for (const deliver of this.#held.splice(0)) deliver();
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
  }
}

/**
 * A's deadline for an answer from the database: shorter than a daemon's (5 s, retry.ts
 * ANSWER_DEADLINE_MS), so that the four answers below take 12 s, not 20; not much shorter, since
 * every call A serves before the cut waits on the database within it too, on a loaded machine.
 */
const DEADLINE_MS = 3_000;

describe.skipIf(!pgAvailable())('a daemon cut off from its database without a word', () => {
  let cluster: FileDatabases;
  let proxy: CutProxy & { port: number };
  let a: DaemonProcess;
  let b: DaemonProcess;
  let adminA: Wire;
  let adminB: Wire;
  const wires: Wire[] = [];

  beforeAll(async () => {
    cluster = await FileDatabases.open();
    await cluster.createDatabase('part');
    const [host = '127.0.0.1', port = '0'] = cluster.hostPort.split(':');
    proxy = await CutProxy.start({ host, port: Number(port) });
    const viaProxy = `postgresql://${encodeURIComponent(cluster.user)}@127.0.0.1:${proxy.port}/${cluster.database('part')}?sslmode=disable&application_name=yellod-a`;
    a = await DaemonProcess.start({
      extraArgs: ['--store', viaProxy, '--policy', 'grants', '--pg-answer-deadline-ms', String(DEADLINE_MS)],
    });
    b = await DaemonProcess.start({ extraArgs: ['--store', cluster.url('part'), '--policy', 'grants'] });
    adminA = await a.connectAs();
    adminB = await b.connectAs();
  }, 90_000);

  afterAll(async () => {
    proxy.heal();
    for (const w of [adminA, adminB, ...wires]) w.close();
    await a.cleanup();
    await b.cleanup();
    await proxy.close();
    await cluster.stop();
  }, 60_000);

  it('answers its callers within the deadline, logs the loss once, and commits nothing revoked meanwhile once the link heals', async () => {
    const alice = await createAgent(adminB, b.socketPath);
    const bob = await createAgent(adminB, b.socketPath);
    wires.push(alice.client, bob.client);
    ok(await adminB.call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    ok(await adminB.call('agents.setPolicy', { agentId: alice.id, pii: 'off' }));
    const chat = ok(await alice.client.call('chats.open', { peerAgentId: bob.id })).chat;
    const streamId = `${chat.id}:${alice.id}`;
    const onA = await connectAs(a.socketPath, alice.token);
    wires.push(onA);
    const w = await StreamWriter.claim(onA, streamId);
    await w.send('before', 1);
    const before = w.next;

    proxy.cut();
    ok(await adminB.call('grants.remove', { agentId: alice.id, peerAgentId: bob.id }));
    const answers: Array<{ ms: number; answer: string }> = [];
    for (let i = 0; i < 4; i++) {
      const t0 = performance.now();
      const r = await w.tryAppend(messages(`cut-${i}`, 1), undefined, 30_000);
      answers.push({
        ms: performance.now() - t0,
        answer: r.result ? 'written' : `${String(r.error?.data?.type)}/${String(r.error?.data?.reason)}`,
      });
    }
    // Nothing acknowledged while cut off, and every answer within the deadline (and a margin):
    // the first append's commit is out (WRITE_FAILED, its outcome unknown: its statement runs once
    // the link heals), the next ones are refused before anything is sent (READ_ONLY, or
    // UNAVAILABLE: the session check got no answer).
    expect(answers.map((x) => x.answer)[0]).toBe('STORAGE_FAILURE/WRITE_FAILED');
    for (const x of answers.slice(1)) expect(['STORAGE_FAILURE/UNAVAILABLE', 'STORAGE_FAILURE/READ_ONLY']).toContain(x.answer);
    for (const x of answers) expect(x.ms, JSON.stringify(answers)).toBeLessThan(DEADLINE_MS + 3_000);
    const losses = a.stdoutLines.filter((l) => l.includes('the PostgreSQL database does not answer'));
    expect(losses).toHaveLength(1);

    proxy.heal();
    // What A had sent while cut off reaches the database now, after the revocation: it may not
    // write. A leaves read-only by itself once that commit of its own settled (its recovery waits
    // for it), retrying with backoff (at most 5 s apart).
    await waitFor(
      async () => {
        const r = await adminA.call('daemon.status', {});
        return (r.result as { storage?: string } | undefined)?.storage === 'ok' || undefined;
      },
      'A writable again',
      20_000,
    );
    const answer = await waitFor(
      async () => {
        const r = await w.tryAppend(messages('after', 1));
        if (r.result) return 'written';
        return r.error?.data?.type === 'STORAGE_FAILURE' ? undefined : `${String(r.error?.data?.type)}/${String(r.error?.data?.reason)}`;
      },
      'an answer from A once healed',
      20_000,
    );
    expect(answer).toBe('PERMISSION_DENIED/NO_GRANT');
    // The session check of that append was answered: the loss's end is logged, once.
    await waitFor(
      () => a.stdoutLines.some((l) => l.includes('the PostgreSQL database answers again')) || undefined,
      'A logged it answers',
      5_000,
    );
    expect(a.stdoutLines.filter((l) => l.includes('the PostgreSQL database answers again'))).toHaveLength(1);
    await sleep(500);
    expect(ok(await adminB.call('streams.get', { streamId })).nextPosition).toBe(before);
  }, 90_000);
});
