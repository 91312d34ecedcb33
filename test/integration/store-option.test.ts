// `yello daemon --store` / `$YELLO_STORE` / `--store-password-file` (issue 24, docs/protocol.md
// §2.1, §2.7): LevelDB stays the default; a PostgreSQL URL holding a password is refused without
// ever printing it; the flag wins over the environment; a database that cannot be used exits
// with a code that says whether restarting helps; LevelDB-only methods answer STORAGE_FAILURE/UNSUPPORTED on
// PostgreSQL; daemon.status names the backend with the URL redacted.

import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT_CODES } from '../../src/daemon/runtime/exit-codes.js';
import { DaemonProcess, makeTempDir, repoRoot } from '../helpers/daemon-process.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { ok } from '../helpers/wire-fixtures.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `yello daemon` with these arguments, killed after 20 s if it has not exited by then. */
async function runDaemon(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const dir = await makeTempDir('yl-so-');
  cleanups.push(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const child = spawn(
    process.execPath,
    [path.join(repoRoot, 'bin/yello'), 'daemon', '--socket', path.join(dir, 'y.sock'), '--data-dir', path.join(dir, 'data'), ...args],
    { env: { ...process.env, YELLO_STORE: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const code = await new Promise<number | null>((resolve) =>
    child.on('exit', (c) => {
      resolve(c);
    }),
  );
  clearTimeout(timer);
  return { code, stdout, stderr };
}

function expectOneLine(r: Run, pattern: RegExp): void {
  const lines = r.stderr.split('\n').filter(Boolean);
  expect(lines[0], r.stderr).toMatch(pattern);
  expect(r.stderr).not.toMatch(/\n\s+at /);
}

describe('--store: the form of the value', () => {
  it('LevelDB is the default, and daemon.status says so', async () => {
    const d = await DaemonProcess.start({ env: { YELLO_STORE: '' } });
    cleanups.push(() => d.cleanup());
    const admin = await d.connectAs();
    const status = ok(await admin.call('daemon.status'));
    expect(status.store).toEqual({ backend: 'leveldb' });
    expect(readdirSync(d.dataDir)).toContain('db');
  });

  it('--store leveldb: wins over a $YELLO_STORE URL (the flag wins)', async () => {
    const d = await DaemonProcess.start({
      extraArgs: ['--store', 'leveldb:'],
      env: { YELLO_STORE: 'postgresql://nobody@127.0.0.1:1/none' },
    });
    cleanups.push(() => d.cleanup());
    const status = ok(await (await d.connectAs()).call('daemon.status'));
    expect(status.store).toEqual({ backend: 'leveldb' });
  });

  it('a value that is neither leveldb: nor a postgresql:// URL is a usage error (exit 2)', async () => {
    const r = await runDaemon(['--store', 'mysql://x@h/db']);
    expect(r.code, r.stderr).toBe(EXIT_CODES.usage);
    expectOneLine(r, /--store \(or \$YELLO_STORE\) must be leveldb: or a postgresql:\/\/USER@HOST:PORT\/DATABASE URL/);
  });

  it('--store-password-file without a PostgreSQL store is a usage error (exit 2)', async () => {
    const r = await runDaemon(['--store-password-file', '/nonexistent']);
    expect(r.code, r.stderr).toBe(EXIT_CODES.usage);
    expectOneLine(r, /--store-password-file is for a PostgreSQL store/);
  });

  it('a URL holding a password is refused (exit 78) and the password is printed nowhere', async () => {
    const secret = 'hunter2-s3cret';
    for (const [args, env] of [
      [['--store', `postgresql://yello:${secret}@127.0.0.1:1/yello`], {}],
      [[], { YELLO_STORE: `postgresql://yello:${secret}@127.0.0.1:1/yello` }],
      [['--store', `postgresql://yello@127.0.0.1:1/yello?password=${secret}`], {}],
    ] as const) {
      const r = await runDaemon([...args], env);
      expect(r.code, r.stderr).toBe(EXIT_CODES.config);
      expectOneLine(r, /it holds a password.*--store-password-file.*PGPASSWORD/);
      expect(r.stderr + r.stdout).not.toContain(secret);
    }
  });

  it('a password file readable by others is refused (exit 78) with the chmod to run', async () => {
    const dir = await makeTempDir('yl-so-');
    cleanups.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const file = path.join(dir, 'pw');
    writeFileSync(file, 'pw\n', { mode: 0o644 });
    const r = await runDaemon(['--store', 'postgresql://yello@127.0.0.1:1/yello', '--store-password-file', file]);
    expect(r.code, r.stderr).toBe(EXIT_CODES.config);
    expectOneLine(r, /readable by group or others.*chmod 600/);
  });
});

describe.skipIf(!pgAvailable())('--store on PostgreSQL', () => {
  let cluster: FileDatabases;
  beforeAll(async () => {
    cluster = await FileDatabases.open();
    cleanups.push(() => cluster.stop());
    await cluster.createDatabase('so_main');
  }, 60_000);

  it('a database nobody listens on: exit 69 (restarting retries), the URL redacted', async () => {
    const r = await runDaemon(['--store', 'postgresql://yello@127.0.0.1:1/yello?connect_timeout=2&application_name=secretish']);
    expect(r.code, r.stderr).toBe(EXIT_CODES.databaseUnavailable);
    expectOneLine(r, /^yello: cannot open the store postgresql:\/\/yello@127\.0\.0\.1:1\/yello\?.*: the database cannot be reached/);
  });

  it('a role the database does not know: exit 77 (credentials or privileges refused)', async () => {
    const url = cluster.url('so_main').replace(/^postgresql:\/\/[^@]*@/, 'postgresql://no_such_role@');
    const r = await runDaemon(['--store', url]);
    expect(r.code, r.stderr).toBe(EXIT_CODES.permissionDenied);
    expectOneLine(r, /refused the credentials or privileges/);
  });

  it('a damaged deployment secret (the meta row cut short): exit 78, saying which row to delete', async () => {
    await cluster.createDatabase('so_secret');
    const d = await DaemonProcess.start({ extraArgs: ['--store', cluster.url('so_secret')] });
    await d.cleanup();
    await cluster.psql(`update meta set body = 'c2hvcnQ' where name = 'deployment-secret'`, 'so_secret');
    const r = await runDaemon(['--store', cluster.url('so_secret')]);
    expect(r.code, r.stderr).toBe(EXIT_CODES.config);
    expectOneLine(r, /deployment secret \(table meta, name 'deployment-secret'\) is missing or shorter than 32 bytes: delete that row/);
  });

  it('a database that does not exist: exit 78, saying to create it', async () => {
    const r = await runDaemon(['--store', cluster.url('no_such_db')]);
    expect(r.code, r.stderr).toBe(EXIT_CODES.config);
    expectOneLine(r, /does not exist.*createdb/);
  });

  it('daemon.status names the backend, daemon.check and daemon.backup answer UNSUPPORTED, a second daemon on the data dir exits 73', async () => {
    const d = await DaemonProcess.start({ extraArgs: ['--store', cluster.url('so_main')] });
    cleanups.push(() => d.cleanup());
    const admin = await d.connectAs();
    const status = ok(await admin.call('daemon.status'));
    expect(status.store).toEqual({ backend: 'postgresql', url: cluster.url('so_main') });
    expect(status.integrity.walIncidents).toEqual([]);
    expect(readdirSync(d.dataDir).sort()).toEqual(['admin.token', 'keys', 'lock', 'secret.key']);

    const check = await admin.call('daemon.check', {});
    expect(check.error?.code).toBe(5030);
    expect(check.error?.data).toEqual({ type: 'STORAGE_FAILURE', reason: 'UNSUPPORTED', operationId: null, outcome: 'not-written' });
    expect(check.error?.message).toMatch(/amcheck/);
    const backupDir = path.join(d.dir, 'backup');
    const backup = await admin.call('daemon.backup', { path: backupDir });
    expect(backup.error?.data).toEqual({ type: 'STORAGE_FAILURE', reason: 'UNSUPPORTED', operationId: null, outcome: 'not-written' });
    expect(backup.error?.message).toMatch(/pg_dump/);

    const second = await runDaemonOn(d.dataDir, cluster.url('so_main'));
    expect(second.code, second.stderr).toBe(EXIT_CODES.storeLocked);
    expectOneLine(second, new RegExp(`locked by another daemon \\(pid ${d.holderPid}`));
  });
});

/** A second daemon on an existing data dir, with its own socket. */
async function runDaemonOn(dataDir: string, url: string): Promise<Run> {
  const dir = await makeTempDir('yl-so-');
  mkdirSync(dir, { recursive: true });
  cleanups.push(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const child = spawn(
    process.execPath,
    [path.join(repoRoot, 'bin/yello'), 'daemon', '--socket', path.join(dir, 'y.sock'), '--data-dir', dataDir, '--store', url],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((resolve) =>
    child.on('exit', (c) => {
      resolve(c);
    }),
  );
  return { code, stdout, stderr };
}
