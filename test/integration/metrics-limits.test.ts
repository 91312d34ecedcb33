// What the `--metrics-listen` endpoint lets a local process hold (issue 52, finding 2;
// docs/metrics.md "Limits"). On eb3c54e it had no connection cap and its sockets sat outside the
// fd headroom the Unix socket keeps for LevelDB: under a 1,024-fd limit, 1,100 idle TCP
// connections made LevelDB's next file open fail and the daemon read-only until restart. It
// also answered any Host, so a DNS-rebound page could read the scrape. Here the daemon runs with
// a 256-fd limit (prlimit on its pid) while 300 idle connections are opened to the endpoint,
// and then writes enough to make LevelDB flush and open new files.

import { execFileSync } from 'node:child_process';
import { request } from 'node:http';
import fs from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METRICS_IDLE_MS } from '../../src/daemon/runtime/metrics-http.js';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { waitFor } from '../helpers/wait.js';
import { claim, createPair, ok, type TestPair } from '../helpers/wire-fixtures.js';

let d: DaemonProcess;
let port: number;

beforeAll(async () => {
  d = await DaemonProcess.start({ extraArgs: ['--policy', 'open', '--metrics-listen', '127.0.0.1:0'], process: true }); // prlimit on its pid below
  const line = d.logs().find((l) => l.msg === 'metrics endpoint listening');
  port = Number(new URL(String(line?.url)).port);
}, 30_000);

afterAll(async () => {
  await d.cleanup();
});

function get(host: string | null, path = '/metrics'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers = host === null ? {} : { host };
    const req = request({ host: '127.0.0.1', port, path, headers, agent: false, setHost: host === null ? false : undefined }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** An idle TCP connection to the endpoint (on `to`, default `d`'s); `closed` resolves when the daemon closes it. */
function idle(to = port): Promise<{ socket: net.Socket; closed: Promise<void> }> {
  return new Promise((resolve) => {
    const socket = net.createConnection({ host: '127.0.0.1', port: to });
    const closed = new Promise<void>((r) => {
      socket.once('close', () => {
        r();
      });
    });
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      resolve({ socket, closed });
    });
    socket.once('close', () => {
      resolve({ socket, closed });
    });
  });
}

describe('--metrics-listen under a low fd limit', () => {
  it('300 idle connections under RLIMIT_NOFILE 256 leave LevelDB its files: 24 MB of appends (past the 16 MiB write buffer) go on, the daemon stays writable, a scrape answers', async () => {
    const admin = await d.connectAs();
    const pair: TestPair = await createPair(admin, d.socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    execFileSync('prlimit', ['--pid', String(d.pid), '--nofile=256:256']);
    const flood = await Promise.all(Array.from({ length: 300 }, () => idle()));
    // Let the daemon accept (or refuse) all of them before the writes need new files.
    await new Promise((r) => setTimeout(r, 1_000));
    console.log(`[metrics-limits] daemon fds after the flood: ${fs.readdirSync(`/proc/${d.pid}/fd`).length} of 256`);
    let next = Number(c.nextPosition);
    const content = 'x'.repeat(200_000);
    for (let i = 0; i < 120; i++) {
      const r = await pair.a.client.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: c.coordinatorToken,
        generation: c.generation,
        expectedPosition: String(next),
        operationId: `fd-${i}`,
        records: [{ type: 'chat.message', messageId: `fd.${i}`, content }],
      });
      next = Number(ok(r, `append ${i}`).nextPosition);
    }
    const status = ok(await admin.call('daemon.status', {}));
    expect(status.storage).toBe('ok');
    const open = flood.filter((f) => !f.socket.destroyed && f.socket.readyState === 'open').length;
    expect(open, 'idle metrics connections the daemon kept').toBeLessThanOrEqual(8);
    expect((await get(`127.0.0.1:${port}`)).status).toBe(200);
    for (const f of flood) f.socket.destroy();
    admin.close();
  }, 120_000);
});

describe('--metrics-listen connections', () => {
  it('keeps at most 8: a newcomer closes the oldest idle one, and a scrape still answers', async () => {
    const conns = [];
    for (let i = 0; i < 8; i++) conns.push(await idle());
    let firstClosed = false;
    void conns[0]!.closed.then(() => (firstClosed = true));
    const ninth = await idle();
    await waitFor(() => firstClosed, 'the oldest idle connection to be closed', 5_000);
    expect((await get(`localhost:${port}`)).status).toBe(200);
    for (const c of [...conns, ninth]) c.socket.destroy();
  });
});

// The idle timeout on a daemon of its own, given a shorter one than a daemon's (10 s,
// docs/metrics.md) so as not to sit it out; on `d` above, idle connections that timed out would
// make the cap's and the fd limit's checks pass without them.
describe('--metrics-listen idle connections', () => {
  const IDLE_MS = 1_000;
  let e: DaemonProcess;
  let ePort: number;

  beforeAll(async () => {
    e = await DaemonProcess.start({ extraArgs: ['--metrics-listen', '127.0.0.1:0', '--metrics-idle-ms', String(IDLE_MS)] });
    ePort = Number(new URL(String(e.logs().find((l) => l.msg === 'metrics endpoint listening')?.url)).port);
  }, 30_000);

  afterAll(async () => {
    await e.cleanup();
  });

  it('closes a connection that sends nothing after the idle timeout (a daemon: 10 s)', async () => {
    expect(METRICS_IDLE_MS, 'the default docs/metrics.md names').toBe(10_000);
    const t0 = performance.now();
    const c = await idle(ePort);
    await c.closed;
    const ms = performance.now() - t0;
    expect(ms).toBeGreaterThan(IDLE_MS * 0.9);
    // Below the 5 s headers timeout, the next thing that would close it.
    expect(ms).toBeLessThan(IDLE_MS + 3_000);
  });
});

describe('--metrics-listen Host check (DNS rebinding)', () => {
  it('answers its own address and localhost on its port; refuses other names, other ports and no Host with 421', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`]) expect((await get(host)).status, host).toBe(200);
    for (const host of [
      `evil.example:${port}`,
      `evil.example`,
      `127.0.0.1:${port + 1}`,
      `localhost`,
      `10.0.0.7:${port}`,
      `127.0.0.1.nip.io:${port}`,
    ]) {
      const r = await get(host);
      expect(r.status, host).toBe(421);
      expect(r.body).not.toContain('yello_');
    }
    // Node answers a request without Host 400 itself (HTTP/1.1 requires one); either way, no scrape.
    expect([400, 421]).toContain((await get(null)).status);
  });
});
