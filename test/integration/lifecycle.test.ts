// Daemon lifecycle (§2): data dir layout and modes, socket ownership, store locking, SIGTERM,
// and logs that never leak tokens or message content.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess, makeTempDir } from '../helpers/daemon-process.js';
import { expectWellFormedErrors } from '../helpers/error-shapes.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { connectWire, claim, connectAs, createPair, ok, uniq } from '../helpers/wire-fixtures.js';

async function mode(p: string): Promise<number> {
  return (await fs.stat(p)).mode & 0o777;
}

function octal(n: number): string {
  return '0' + n.toString(8);
}

/** Leaves a real stale Unix socket at `socketPath`: a process listens there and is SIGKILLed. */
async function leaveStaleSocket(socketPath: string): Promise<void> {
  const child = spawn(
    process.execPath,
    ['-e', `require('net').createServer().listen(${JSON.stringify(socketPath)}, () => console.log('up'))`],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await once(child.stdout, 'data');
  child.kill('SIGKILL');
  await once(child, 'exit');
  expect((await fs.stat(socketPath)).isSocket()).toBe(true);
  // Nobody answers: connecting is refused.
  await expect(connectWire(socketPath, 2_000)).rejects.toThrow();
}

async function helloWorks(socketPath: string, token: string): Promise<boolean> {
  const c = await connectWire(socketPath, 2_000);
  try {
    return (await c.hello(token)).result?.role === 'admin';
  } finally {
    c.close();
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f().catch(() => undefined);
});

async function start(opts: Parameters<typeof DaemonProcess.start>[0] = {}): Promise<DaemonProcess> {
  const d = await DaemonProcess.start(opts);
  cleanups.push(() => d.cleanup());
  return d;
}

describe('data dir and socket', () => {
  it('creates admin.token and secret.key 0600, keys/ 0700 with 0600 files, db/, and a 0660 socket', async () => {
    const d = await start();
    expect(octal(await mode(path.join(d.dataDir, 'admin.token')))).toBe('0600');
    expect(octal(await mode(path.join(d.dataDir, 'secret.key')))).toBe('0600');
    expect(octal(await mode(path.join(d.dataDir, 'keys')))).toBe('0700');
    let keyFiles = 0;
    for (const f of await fs.readdir(path.join(d.dataDir, 'keys'))) {
      const p = path.join(d.dataDir, 'keys', f);
      if (!(await fs.stat(p)).isFile()) continue;
      expect(octal(await mode(p)), f).toBe('0600');
      keyFiles++;
    }
    expect(keyFiles, 'the signing key file in keys/').toBeGreaterThan(0);
    expect((await fs.stat(path.join(d.dataDir, 'db'))).isDirectory()).toBe(true);
    const sock = await fs.stat(d.socketPath);
    expect(sock.isSocket()).toBe(true);
    expect(octal(sock.mode & 0o777)).toBe('0660');
  });

  it('creates a missing socket parent directory with mode 0750', async () => {
    const dir = await makeTempDir();
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const d = await start({ dir, socketPath: path.join(dir, 'run', 'y.sock') });
    expect(octal(await mode(path.join(dir, 'run')))).toBe('0750');
    expect(await helloWorks(d.socketPath, d.adminToken)).toBe(true);
  });

  it('keeps the admin token and the data across a restart', async () => {
    const d = await start();
    const admin = await d.connectAs();
    const username = uniq('persist');
    const created = ok(await admin.call('agents.create', { username, name: 'Persistent' }));
    const token = d.adminToken;
    await d.restart();
    expect(d.adminToken).toBe(token);
    const admin2 = await d.connectAs();
    const got = ok(await admin2.call('agents.get', { agentId: created.agent.id }));
    expect(got.agent.username).toBe(username);
    const agent = await connectWire(d.socketPath);
    expect((await agent.hello(created.token)).result?.agentId).toBe(created.agent.id);
    agent.close();
  });
});

describe('stored credentials', () => {
  it('stores agent tokens only as hashes: no token appears in any file of the data dir', async () => {
    const d = await start();
    const admin = await d.connectAs();
    const created = ok(await admin.call('agents.create', { username: uniq('hashed'), name: 'Hashed' }));
    const rotated = ok(await admin.call('agents.rotateToken', { agentId: created.agent.id }));
    const other = ok(await admin.call('agents.create', { username: uniq('hashed'), name: 'Hashed too' }));
    expect(await d.stop()).toBe(0);
    const tokens = [created.token, rotated.token, other.token];
    const walk = async (dir: string): Promise<string[]> => {
      const out: string[] = [];
      for (const e of await fs.readdir(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) out.push(...(await walk(p)));
        else if (e.isFile()) out.push(p);
      }
      return out;
    };
    for (const file of await walk(d.dataDir)) {
      const bytes = await fs.readFile(file);
      for (const t of tokens) expect(bytes.includes(Buffer.from(t)), `${path.relative(d.dataDir, file)} holds an agent token`).toBe(false);
    }
  });
});

// Daemons in processes of their own here: what the refused one exits with, and the signals, are the subject.
describe('store lock and socket ownership', () => {
  it("a second daemon on the same data dir exits non-zero and leaves the first one's socket working", async () => {
    const first = await start({ process: true });
    const before = await fs.stat(first.socketPath);
    const second = await start({ dir: first.dir, socketPath: first.socketPath, dataDir: first.dataDir, waitReady: false, process: true });
    const exit = await second.waitExit(10_000);
    expect(exit.code).not.toBe(0);
    expect(exit.code).not.toBeNull();
    const after = await fs.stat(first.socketPath);
    expect(after.ino).toBe(before.ino);
    expect(await helloWorks(first.socketPath, first.adminToken)).toBe(true);
  });

  it('a second daemon on the same data dir with another socket path does not create that socket', async () => {
    const first = await start({ process: true });
    const other = path.join(first.dir, 'other.sock');
    const second = await start({ dir: first.dir, socketPath: other, dataDir: first.dataDir, waitReady: false, process: true });
    const exit = await second.waitExit(10_000);
    expect(exit.code).not.toBe(0);
    await expect(fs.stat(other)).rejects.toThrow();
    expect(await helloWorks(first.socketPath, first.adminToken)).toBe(true);
  });

  it('replaces a stale socket file left by a dead process', async () => {
    const dir = await makeTempDir();
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const socketPath = path.join(dir, 'y.sock');
    await leaveStaleSocket(socketPath);
    const d = await start({ dir, socketPath });
    expect(await helloWorks(socketPath, d.adminToken)).toBe(true);
    expect(octal(await mode(socketPath))).toBe('0660');
  });

  it('refuses a live socket owned by another daemon on a different data dir, with a non-zero exit and a message', async () => {
    const first = await start({ process: true });
    const second = await start({ socketPath: first.socketPath, waitReady: false, process: true });
    const exit = await second.waitExit(10_000);
    const detail = JSON.stringify({ exit, stderr: second.stderr.slice(-1500), stdout: second.stdoutLines.slice(-5) });
    expect(exit.code, detail).not.toBe(0);
    expect(exit.code, detail).not.toBeNull();
    expect((second.stderr + second.stdoutLines.join('\n')).trim().length).toBeGreaterThan(0);
    expect(await helloWorks(first.socketPath, first.adminToken)).toBe(true);
  });

  it('refuses a live socket owned by a foreign process', async () => {
    const dir = await makeTempDir();
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const socketPath = path.join(dir, 'y.sock');
    const foreign = net.createServer((s) => s.end());
    await new Promise<void>((r) => foreign.listen(socketPath, r));
    cleanups.push(
      () =>
        new Promise<void>((r) => {
          foreign.close(() => {
            r();
          });
        }),
    );
    const d = await start({ dir, socketPath, waitReady: false, process: true });
    const exit = await d.waitExit(10_000);
    expect(exit.code).not.toBe(0);
    expect((await fs.stat(socketPath)).isSocket()).toBe(true);
  });
});

describe('signals', () => {
  it('SIGTERM exits 0 and removes nothing from the data dir', async () => {
    const d = await start({ process: true });
    const c = await d.connectAs();
    ok(await c.call('daemon.status', {}));
    const code = await d.stop();
    expect(code).toBe(0);
    await expect(fs.stat(path.join(d.dataDir, 'admin.token'))).resolves.toBeDefined();
  });

  it('SIGINT exits 0', async () => {
    const d = await start({ process: true });
    d.child.kill('SIGINT');
    const exit = await d.waitExit(10_000);
    expect(exit.code).toBe(0);
  });

  it('SIGTERM with a long poll in flight still exits 0 promptly', async () => {
    const d = await start({ process: true });
    const admin = await d.connectAs();
    const pair = await createPair(admin, d.socketPath);
    const pending = pair.b.client
      .call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: '0', waitMs: 30_000 })
      .catch(() => undefined);
    const started = Date.now();
    expect(await d.stop(15_000)).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    await pending;
  });
});

describe('logs', () => {
  // A process of its own: everything it writes to stdout and stderr is checked, not only its log.
  const { daemon, admin: connectedAdmin } = useDaemon({ process: true });
  let d: DaemonProcess;
  const secrets: string[] = [];
  beforeAll(async () => {
    d = daemon();
    const admin = connectedAdmin();
    const pair = await createPair(admin, d.socketPath);
    secrets.push(d.adminToken, pair.a.token, pair.b.token);
    const rotated = ok(await admin.call('agents.rotateToken', { agentId: pair.b.id }));
    secrets.push(rotated.token);
    pair.b.client = await connectAs(d.socketPath, rotated.token);
    const c = await claim(pair.a.client, pair.streamA);
    secrets.push(c.coordinatorToken);
    const content = `log-canary-${uniq('content')} do not log me`;
    secrets.push(content);
    ok(
      await pair.a.client.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: c.coordinatorToken,
        generation: '1',
        expectedPosition: c.nextPosition,
        operationId: uniq('op'),
        records: [{ type: 'chat.message', messageId: 'log-1', content }],
      }),
    );
    // Errors are logged too; they must not leak either.
    const bad = await pair.a.client.call('streams.append', {
      streamId: pair.streamA,
      coordinatorToken: c.coordinatorToken,
      generation: '1',
      expectedPosition: '999',
      operationId: uniq('op'),
      records: [{ type: 'chat.message', messageId: 'log-2', content }],
    });
    expect(bad.error?.code).toBe(4091);
    ok(await pair.b.client.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: '0' }));
    // A failed hello's token is a credential too (a typo of a real one, say).
    const guess = `guess-${uniq('token')}-ABCDEFGHIJKLMNOP`;
    secrets.push(guess);
    const stranger = await connectWire(d.socketPath);
    expect((await stranger.hello(guess)).error?.code).toBe(4001);
    stranger.close();
    expect(await d.stop()).toBe(0);
  });

  it('are JSON lines with pino level and time', () => {
    const lines = d.stdoutLines.filter((l) => l.trim() !== '');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      let parsed: Record<string, unknown>;
      expect(() => (parsed = JSON.parse(line) as Record<string, unknown>), line).not.toThrow();
      expect(typeof parsed!.level, line).not.toBe('undefined');
      expect(parsed!.time, line).toBeDefined();
    }
  });

  it('never contain the admin token, an agent token, a coordinator token, a failed hello token or message content', () => {
    const all = d.stdoutLines.join('\n') + '\n' + d.stderr;
    for (const s of secrets) expect(all.includes(s), `log leaks ${s.slice(0, 12)}…`).toBe(false);
  });

  it('never contain key material (secret.key, private signing keys)', async () => {
    const all = d.stdoutLines.join('\n') + '\n' + d.stderr;
    const material: string[] = [];
    const secretKey = await fs.readFile(path.join(d.dataDir, 'secret.key'));
    material.push(
      secretKey.toString('utf8').trim(),
      secretKey.toString('base64'),
      secretKey.toString('base64url'),
      secretKey.toString('hex'),
    );
    let privateScalars = 0;
    for (const f of await fs.readdir(path.join(d.dataDir, 'keys'))) {
      const text = await fs.readFile(path.join(d.dataDir, 'keys', f), 'utf8').catch(() => '');
      // Private EC scalars in JWK form ("d") or any long base64url run in a key file.
      for (const m of text.matchAll(/"d"\s*:\s*"([A-Za-z0-9_-]{40,})"/g)) {
        material.push(m[1]!);
        privateScalars++;
      }
      for (const m of text.matchAll(/-----BEGIN [A-Z ]*PRIVATE KEY-----([\s\S]*?)-----END/g))
        material.push(m[1]!.replace(/\s+/g, '').slice(0, 40));
    }
    // The signing key's private scalar was found, so the check below covers it.
    expect(privateScalars, 'a private JWK ("d") in keys/').toBeGreaterThan(0);
    for (const m of material.filter((x) => x.length >= 16)) expect(all.includes(m), `log leaks key material ${m.slice(0, 6)}…`).toBe(false);
  });
});

describe('error responses', () => {
  const { daemon } = useDaemon();
  it('never use code 0 and never carry a stack (errors provoked here, and every one seen in this file)', async () => {
    await expectWellFormedErrors(async () => {
      const anonymous = await connectWire(daemon().socketPath);
      try {
        await anonymous.call('daemon.status', {});
        await anonymous.call('session.hello', { token: 'yello_not_a_token' });
      } finally {
        anonymous.close();
      }
    });
  });
});
