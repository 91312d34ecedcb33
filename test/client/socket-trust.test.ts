// Token theft through the socket directory (docs/security.md, "Socket directory trust"):
// with $XDG_RUNTIME_DIR unset the socket is /tmp/yello-$UID/yello.sock, a directory another
// local user can create first, or point elsewhere with a symlink, and fill with a fake
// daemon. The tests run as root, so they play that user by chown'ing directories to uid 1001
// in a sticky, world-writable directory that stands in for /tmp. The fake daemon records
// every connection and byte: the client must refuse before it connects, so no token leaks.

import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeDaemon, helloThenHang } from '../helpers/fake-daemon.js';
import { ConnectionLostError, Coordinator, MemoryCursorStore, UntrustedSocketError, YelloClient } from '../../src/client/index.js';
import { makeTempDir, rejectionOf } from '../helpers/client-fixtures.js';
import { waitFor } from '../helpers/wait.js';

const HOSTILE = 1001;
const TOKEN = 'yello_admin_secret-token-value';
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

/** A fresh directory that behaves like /tmp: root-owned, mode 1777. */
async function fakeTmp(): Promise<string> {
  const dir = await makeTempDir('ytr-');
  await fs.chmod(dir, 0o1777);
  cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A directory `dir` made by `uid` with `mode`. */
async function makeDir(dir: string, uid: number, mode: number): Promise<string> {
  await fs.mkdir(dir);
  await fs.chmod(dir, mode);
  await fs.chown(dir, uid, uid);
  return dir;
}

async function plant(socketPath: string): Promise<FakeDaemon> {
  const fake = await FakeDaemon.start(socketPath, helloThenHang);
  cleanups.push(() => fake.close());
  return fake;
}

async function refused(socketPath: string, fake: FakeDaemon): Promise<UntrustedSocketError> {
  const err = await rejectionOf(YelloClient.connect({ socketPath, token: TOKEN, callTimeoutMs: 1_000 }));
  expect(err).toBeInstanceOf(UntrustedSocketError);
  // Nothing reached the planted daemon: not a connection, not a byte, so not the token.
  expect(fake.connections).toBe(0);
  expect(fake.bytes).toBe(0);
  const e = err as UntrustedSocketError;
  expect(e.type).toBe('UNTRUSTED_SOCKET');
  expect(e.path).toBe(socketPath);
  expect(e.message).toContain(socketPath);
  expect(e.message).not.toContain(TOKEN);
  return e;
}

async function accepted(socketPath: string, fake: FakeDaemon): Promise<void> {
  const client = await YelloClient.connect({ socketPath, token: TOKEN, callTimeoutMs: 1_000 });
  client.close();
  expect(fake.requests[0]?.method).toBe('session.hello');
}

describe('YelloClient.connect refuses an untrusted socket before sending the token', () => {
  it('refuses /tmp/yello-0 pre-created by another user, with a planted daemon in it', async () => {
    const tmp = await fakeTmp();
    const dir = await makeDir(path.join(tmp, 'yello-0'), HOSTILE, 0o700);
    const fake = await plant(path.join(dir, 'yello.sock'));
    const e = await refused(fake.socketPath, fake);
    expect(e.reason).toBe(
      `the socket directory ${dir} is not trusted: owned by uid 1001, not 0, and its parent is not trusted either: writable by group or others (mode 01777); use a private directory (mode 0700) such as $XDG_RUNTIME_DIR/yello`,
    );
  });

  it("refuses a socket directory that is a symlink to another user's directory", async () => {
    const tmp = await fakeTmp();
    const evil = await makeDir(path.join(tmp, 'evil'), HOSTILE, 0o700);
    await fs.symlink(evil, path.join(tmp, 'yello-0'));
    const fake = await plant(path.join(evil, 'yello.sock'));
    const e = await refused(path.join(tmp, 'yello-0', 'yello.sock'), fake);
    expect(e.reason).toMatch(/symbolic link/);
  });

  it("refuses a symlinked socket directory even when its target and parent are root's", async () => {
    const base = await makeTempDir('ytr-');
    cleanups.push(() => fs.rm(base, { recursive: true, force: true }));
    const real = await makeDir(path.join(base, 'real'), 0, 0o700);
    await fs.symlink(real, path.join(base, 'link'));
    const fake = await plant(path.join(real, 'yello.sock'));
    expect((await refused(path.join(base, 'link', 'yello.sock'), fake)).reason).toMatch(/symbolic link/);
  });

  for (const mode of [0o770, 0o777, 0o1777]) {
    it(`refuses a root-owned socket directory with mode 0${mode.toString(8)} (others could swap the socket)`, async () => {
      const base = await makeTempDir('ytr-');
      cleanups.push(() => fs.rm(base, { recursive: true, force: true }));
      const dir = await makeDir(path.join(base, 'run'), 0, mode);
      const fake = await plant(path.join(dir, 'yello.sock'));
      expect((await refused(fake.socketPath, fake)).reason).toMatch(/writable by group or others/);
    });
  }

  it('refuses a socket path that is a symlink, or not a socket', async () => {
    const base = await makeTempDir('ytr-');
    cleanups.push(() => fs.rm(base, { recursive: true, force: true }));
    const fake = await plant(path.join(base, 'real.sock'));
    await fs.symlink(fake.socketPath, path.join(base, 'link.sock'));
    expect((await refused(path.join(base, 'link.sock'), fake)).reason).toMatch(/symbolic link/);
    await fs.writeFile(path.join(base, 'file.sock'), '');
    expect((await refused(path.join(base, 'file.sock'), fake)).reason).toMatch(/not a socket/);
  });

  it("trusts its own 0700 directory, and a directory of the daemon's user under a root-owned parent (like /run/yello)", async () => {
    const own = await makeTempDir('ytr-');
    cleanups.push(() => fs.rm(own, { recursive: true, force: true }));
    await accepted(path.join(own, 'yello.sock'), await plant(path.join(own, 'yello.sock')));

    const run = await makeTempDir('ytr-');
    cleanups.push(() => fs.rm(run, { recursive: true, force: true }));
    await fs.chmod(run, 0o755);
    const yelloDir = await makeDir(path.join(run, 'yello'), HOSTILE, 0o750);
    await accepted(path.join(yelloDir, 'yello.sock'), await plant(path.join(yelloDir, 'yello.sock')));
  });

  it('a missing socket is still a ConnectionLostError (a daemon restarting), not a trust failure', async () => {
    const base = await makeTempDir('ytr-');
    cleanups.push(() => fs.rm(base, { recursive: true, force: true }));
    const err = await rejectionOf(YelloClient.connect({ socketPath: path.join(base, 'none.sock'), token: TOKEN }));
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect((err as ConnectionLostError).outcomeUnknown).toBe(false);
  });

  it('verifySocket: false is the explicit opt-out, and then the token is sent', async () => {
    const tmp = await fakeTmp();
    const dir = await makeDir(path.join(tmp, 'yello-0'), HOSTILE, 0o700);
    const fake = await plant(path.join(dir, 'yello.sock'));
    const client = await YelloClient.connect({ socketPath: fake.socketPath, token: TOKEN, verifySocket: false });
    client.close();
    expect(fake.requests[0]?.params?.token).toBe(TOKEN);
  });
});

describe('every path that sends a token checks first', () => {
  it('a reconnect refuses a directory taken over while the client was away', async () => {
    const tmp = await fakeTmp();
    const dir = await makeDir(path.join(tmp, 'yello-0'), 0, 0o700);
    const fake = await plant(path.join(dir, 'yello.sock'));
    const client = await YelloClient.connect({ socketPath: fake.socketPath, token: TOKEN, reconnect: { minDelayMs: 10, maxDelayMs: 20 } });
    cleanups.push(() => {
      client.close();
    });
    const events: Error[] = [];
    client.on('disconnected', (e) => events.push(e));
    // The directory now belongs to another user (as if they had replaced it), and the
    // connection drops.
    await fs.chown(dir, HOSTILE, HOSTILE);
    const bytesBefore = fake.bytes;
    fake.dropConnections();
    const refusal = await waitFor(() => events.find((e) => e instanceof UntrustedSocketError), 'the reconnect to be refused');
    expect(refusal.reason).toMatch(/owned by uid 1001/);
    expect(fake.connections).toBe(1);
    expect(fake.bytes).toBe(bytesBefore);
  });

  it('a Coordinator refuses at start, sending nothing', async () => {
    const tmp = await fakeTmp();
    const dir = await makeDir(path.join(tmp, 'yello-0'), HOSTILE, 0o700);
    const fake = await plant(path.join(dir, 'yello.sock'));
    const coord = new Coordinator({
      token: TOKEN,
      chatId: 'chat_x',
      socketPath: fake.socketPath,
      adapter: { present: () => {} },
      cursorStore: new MemoryCursorStore(),
    });
    expect(await rejectionOf(coord.start())).toBeInstanceOf(UntrustedSocketError);
    expect(coord.state).toBe('stopped');
    expect(fake.connections).toBe(0);
  });
});
