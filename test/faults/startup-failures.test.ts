// Startup on a store the daemon cannot use: one line on stderr and a distinct exit code (the
// permanent ones are not restarted by systemd), never a stack trace or exit 1 that would make
// systemd restart it every 2 s forever. Cases that need root (another uid, a tmpfs) skip with a
// printed reason elsewhere.

import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT_CODES } from '../../src/daemon/runtime/exit-codes.js';
import { DaemonProcess, makeTempDir, repoRoot } from '../helpers/daemon-process.js';

const isRoot = process.getuid?.() === 0;
const cleanups: Array<() => void> = [];
afterAll(() => {
  for (const c of cleanups.reverse()) c();
});

function runDaemon(dir: string, dataDir: string, opts: { uid?: number; gid?: number } = {}): SpawnSyncReturns<string> {
  return spawnSync(
    process.execPath,
    [path.join(repoRoot, 'bin/yello'), 'daemon', '--socket', path.join(dir, 'y.sock'), '--data-dir', dataDir],
    {
      encoding: 'utf8',
      timeout: 20_000,
      ...opts,
    },
  );
}

/** One line on stderr, no stack frames. */
function expectOneLine(r: SpawnSyncReturns<string>, pattern: RegExp): void {
  const lines = r.stderr.split('\n').filter(Boolean);
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(r.stderr).not.toMatch(/\n\s+at /);
}

function mountTmpfs(dir: string, size: string): boolean {
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  if (r.status !== 0) return false;
  cleanups.push(() => void spawnSync('umount', ['-l', dir]));
  return true;
}

describe('startup failures', () => {
  it.skipIf(!isRoot)('an unwritable data dir: exit 77 and "permission denied (EACCES)"', async () => {
    const dir = await makeTempDir('yl-sf-');
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    chmodSync(dir, 0o755); // nobody may enter but not create
    const r = runDaemon(dir, path.join(dir, 'data'), { uid: 65534, gid: 65534 });
    expect(r.status, r.stderr).toBe(EXIT_CODES.permissionDenied);
    expectOneLine(r, /^yello: cannot open the data dir .*\/data: permission denied \(EACCES\)$/);
  });

  it.skipIf(!isRoot)('a data dir owned by another user: exit 78, and nothing is written into it', async () => {
    const dir = await makeTempDir('yl-sf-');
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const data = path.join(dir, 'data');
    mkdirSync(data, { mode: 0o700 });
    chownSync(data, 1001, 1001);
    const r = runDaemon(dir, data);
    expect(r.status, r.stderr).toBe(EXIT_CODES.config);
    expectOneLine(r, /^yello: cannot use the data dir .*: it is owned by uid 1001, not by this daemon's uid 0$/);
    expect(spawnSync('ls', ['-A', data], { encoding: 'utf8' }).stdout).toBe('');
  });

  it.skipIf(!isRoot)('a full disk: exit 75 and "no space left on device (ENOSPC)"', async (ctx) => {
    const dir = await makeTempDir('yl-sf-');
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const mnt = path.join(dir, 'mnt');
    mkdirSync(mnt);
    if (!mountTmpfs(mnt, '256k')) {
      console.log('[startup-failures] skipped the full-disk case: mount -t tmpfs is not permitted here');
      ctx.skip();
    }
    // Fill it to the last block.
    spawnSync('dd', ['if=/dev/zero', `of=${path.join(mnt, 'fill')}`, 'bs=4k'], { encoding: 'utf8' });
    const r = runDaemon(dir, path.join(mnt, 'data'));
    expect(r.status, r.stderr).toBe(EXIT_CODES.storageUnavailable);
    expectOneLine(r, /^yello: cannot .*: no space left on device \(ENOSPC\)$/);
  });

  it.skipIf(!isRoot)('a read-only filesystem under an existing store: exit 75 and "read-only file system (EROFS)"', async (ctx) => {
    const dir = await makeTempDir('yl-sf-');
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const mnt = path.join(dir, 'mnt');
    mkdirSync(mnt);
    if (!mountTmpfs(mnt, '64m')) {
      console.log('[startup-failures] skipped the read-only case: mount -t tmpfs is not permitted here');
      ctx.skip();
    }
    const data = path.join(mnt, 'data');
    // A store that exists: a daemon ran on it once (stopped as soon as it is ready).
    const first = await DaemonProcess.start({ dir, dataDir: data, socketPath: path.join(dir, 'y0.sock') });
    const code = await first.stop(60_000);
    expect(code, `${first.stderr}\n${first.stdoutLines.slice(-20).join('\n')}`).toBe(0);
    expect(spawnSync('mount', ['-o', 'remount,ro', mnt]).status).toBe(0);
    const r = runDaemon(dir, data);
    expect(r.status, r.stderr).toBe(EXIT_CODES.storageUnavailable);
    expectOneLine(r, /^yello: cannot .*: read-only file system \(EROFS\)$/);
  });

  it('an unhandled rejection is logged as fatal and exits 70', async () => {
    const dir = await makeTempDir('yl-sf-');
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const script = path.join(dir, 'guard.mjs');
    writeFileSync(
      script,
      `
      import { pino } from '${path.join(repoRoot, 'node_modules/pino/pino.js')}';
      import { installProcessGuards } from '${path.join(repoRoot, 'dist/daemon/runtime/process-guards.js')}';
      installProcessGuards(pino({ base: null }));
      Promise.reject(new Error('nobody handled me'));
      setTimeout(() => {}, 5000); // keeps the process alive: only the guard may end it
    `,
    );
    const r = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 10_000 });
    expect(r.status).toBe(EXIT_CODES.internal);
    const line = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 60, kind: 'unhandled rejection', err: { message: 'nobody handled me' } });
    expect(line.correlationId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
