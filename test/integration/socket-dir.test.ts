// The daemon's side of socket directory trust (docs/security.md, "Socket directory trust"),
// run as the real `yello daemon` process: it makes its socket directory itself (0700, or
// 0750 when the socket mode lets the group in), and refuses to start, with exit code 78 and
// one line on stderr, in a directory another user owns or could have swapped (a symlink, a
// group- or world-writable one), on a path the kernel would truncate, or under a file.
// The tests run as root and play the other user with uid 1001.

import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../helpers/cli-runner.js';
import { DaemonProcess, makeTempDir } from '../helpers/daemon-process.js';
import { connectAs } from '../helpers/wire-fixtures.js';

const HOSTILE = 1001;
const EXIT_CONFIG = 78;
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function tempDir(mode?: number): Promise<string> {
  const dir = await makeTempDir('ysd-');
  if (mode !== undefined) await fs.chmod(dir, mode);
  cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
  return dir;
}

async function makeDir(dir: string, uid: number, mode: number): Promise<string> {
  await fs.mkdir(dir);
  await fs.chmod(dir, mode);
  await fs.chown(dir, uid, uid);
  return dir;
}

/** Runs `yello daemon` to its exit (a daemon that starts instead is killed after 8 s). */
function runDaemon(socketPath: string, dataDir: string, extra: string[] = []): Promise<CliResult> {
  return runCli(['daemon', '--socket', socketPath, '--data-dir', dataDir, ...extra], { timeoutMs: 8_000, process: true });
}

/** Exit 78, exactly one stderr line saying what is wrong, no socket. */
function expectConfigRefusal(r: CliResult, line: RegExp | string): void {
  const detail = JSON.stringify({ code: r.code, timedOut: r.timedOut, stderr: r.stderr });
  expect(r.timedOut, detail).toBe(false);
  expect(r.code, detail).toBe(EXIT_CONFIG);
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  expect(lines.length, detail).toBe(1);
  if (typeof line === 'string') expect(lines[0]).toBe(line);
  else expect(lines[0]).toMatch(line);
}

async function octalMode(p: string): Promise<string> {
  return '0' + ((await fs.lstat(p)).mode & 0o7777).toString(8);
}

describe('yello daemon refuses an unsafe socket directory', () => {
  it('refuses /tmp/yello-0 owned by another user (exit 78, one line) and leaves no socket', async () => {
    const tmp = await tempDir(0o1777);
    const dir = await makeDir(path.join(tmp, 'yello-0'), HOSTILE, 0o700);
    const r = await runDaemon(path.join(dir, 'yello.sock'), path.join(await tempDir(), 'data'));
    expectConfigRefusal(r, `yello: unsafe socket directory ${dir}: owned by uid 1001, not 0`);
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('refuses the same directory under a root-owned parent: the daemon wants its own', async () => {
    const base = await tempDir(0o755);
    const dir = await makeDir(path.join(base, 'yello'), HOSTILE, 0o750);
    expectConfigRefusal(
      await runDaemon(path.join(dir, 'yello.sock'), path.join(base, 'data')),
      /unsafe socket directory .*owned by uid 1001, not 0$/,
    );
  });

  it('refuses a socket directory that is a symlink', async () => {
    const tmp = await tempDir(0o1777);
    const evil = await makeDir(path.join(tmp, 'evil'), HOSTILE, 0o700);
    await fs.symlink(evil, path.join(tmp, 'yello-0'));
    const r = await runDaemon(path.join(tmp, 'yello-0', 'yello.sock'), path.join(await tempDir(), 'data'));
    expectConfigRefusal(r, `yello: unsafe socket directory ${path.join(tmp, 'yello-0')}: it is a symbolic link`);
    expect(await fs.readdir(evil)).toEqual([]);
  });

  for (const mode of [0o770, 0o777]) {
    it(`refuses its own socket directory with mode 0${mode.toString(8)}`, async () => {
      const base = await tempDir();
      const dir = await makeDir(path.join(base, 'run'), 0, mode);
      const r = await runDaemon(path.join(dir, 'yello.sock'), path.join(base, 'data'));
      expectConfigRefusal(r, `yello: unsafe socket directory ${dir}: writable by group or others (mode 0${mode.toString(8)})`);
    });
  }

  it('refuses a socket path longer than the platform limit, before creating anything', async () => {
    const base = await tempDir();
    const socketPath = path.join(base, 'deep', 'x'.repeat(120 - base.length), 'yello.sock');
    const r = await runDaemon(socketPath, path.join(base, 'data'));
    expectConfigRefusal(r, /^yello: socket path is \d+ bytes, over the platform limit of 107: /);
    // Node would have listened on a truncated name and left that file behind.
    expect(existsSync(path.join(base, 'deep'))).toBe(false);
    expect((await fs.readdir(base)).filter((f) => f !== 'data')).toEqual([]);
  });

  it('refuses a socket path whose parent is a regular file', async () => {
    const base = await tempDir();
    await fs.writeFile(path.join(base, 'file'), 'not a directory');
    expectConfigRefusal(
      await runDaemon(path.join(base, 'file', 'y.sock'), path.join(base, 'data')),
      `yello: socket directory ${path.join(base, 'file')} is not a directory`,
    );
    expectConfigRefusal(
      await runDaemon(path.join(base, 'file', 'sub', 'y.sock'), path.join(base, 'data')),
      /^yello: socket directory .*sub: a parent of it is not a directory$/,
    );
  });
});

describe('yello daemon makes and accepts a safe socket directory', () => {
  async function start(socketPath: string, dir: string, extraArgs: string[] = []): Promise<DaemonProcess> {
    const d = await DaemonProcess.start({ dir, socketPath, dataDir: path.join(dir, 'data'), extraArgs });
    cleanups.push(() => d.cleanup());
    return d;
  }

  it('creates a missing socket directory 0700 when --socket-mode gives the group nothing', async () => {
    const base = await tempDir();
    const d = await start(path.join(base, 'run', 'y.sock'), base, ['--socket-mode', '0600']);
    expect(await octalMode(path.join(base, 'run'))).toBe('0700');
    expect(await octalMode(d.socketPath)).toBe('0600');
  });

  it('creates it 0750 when the socket mode lets the group connect (the default 0660)', async () => {
    const base = await tempDir();
    await start(path.join(base, 'run', 'y.sock'), base, ['--socket-mode', '0660']);
    expect(await octalMode(path.join(base, 'run'))).toBe('0750');
  });

  it('starts in an existing root-owned 0755 directory and in its own 0700 one', async () => {
    const base = await tempDir();
    const shared = await makeDir(path.join(base, 'shared'), 0, 0o755);
    const d = await start(path.join(shared, 'y.sock'), base);
    const c = await connectAs(d.socketPath, d.adminToken);
    expect((await c.call('daemon.status', {})).result?.storage).toBe('ok');
    c.close();
    await d.stop();
    // mkdtemp's own directory: 0700, owned by us.
    const own = await tempDir();
    expect(await octalMode(own)).toBe('0700');
    await start(path.join(own, 'y.sock'), own);
  });
});
