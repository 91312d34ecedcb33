// What a backup and a restore trust (issue 52, findings 1 and 10; docs/operations.md "Backup and
// restore"). A restore checks every name the manifest lists and every entry of the backup before
// it copies anything: a tampered manifest (`..`, a name that climbs to `/` and back down, a name
// outside the known set) or a symlink anywhere in the backup is refused with exit 1, and nothing
// inside or outside the data dir changes. A backup copies a data dir whose keys, admin token or
// secret are symlinks by following them and says so in its manifest; what it cannot copy as a
// file refuses the backup. On eb3c54e the restore overwrote and chmod-ed files outside the data
// dir and exited 0, dropped a symlinked secret.key and exited 0, and the backup's manifest listed
// symlinked files it had not copied.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cli, describeRun } from '../helpers/cli-runner.js';
import { DaemonProcess, makeTempDir } from '../helpers/daemon-process.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { ok } from '../helpers/wire-fixtures.js';
import type { BackupManifest } from '../../src/shared/results.js';

const scratch: string[] = [];
let source: DaemonProcess;
/** A backup of `source`, made once; each test copies it before tampering with it. */
let pristine: string;
/** An agent token and an `agents.list` cursor of `source`, from before the backup. */
let aliceToken: string;
let listCursor: string;

beforeAll(async () => {
  source = await DaemonProcess.start({ extraArgs: ['--policy', 'open'] });
  const admin = await source.connectAs();
  aliceToken = ok(await admin.call('agents.create', { username: 'alice', name: 'alice' })).token;
  ok(await admin.call('agents.create', { username: 'bob', name: 'bob' }));
  listCursor = ok(await admin.call('agents.list', { limit: 1 })).nextCursor ?? '';
  expect(listCursor).not.toBe('');
  pristine = path.join(await tempDir(), 'backup');
  ok(await admin.call('daemon.backup', { path: pristine }));
  admin.close();
}, 60_000);

afterAll(async () => {
  await source.cleanup();
  for (const dir of scratch) fs.rmSync(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await makeTempDir('ylr-');
  scratch.push(dir);
  return dir;
}

/** A copy of the pristine backup at `at`, with its manifest changed by `edit`. */
function tamperedCopy(at: string, edit: (m: BackupManifest) => void = () => undefined): string {
  fs.mkdirSync(path.dirname(at), { recursive: true });
  fs.cpSync(pristine, at, { recursive: true });
  const file = path.join(at, 'manifest.json');
  const m = JSON.parse(fs.readFileSync(file, 'utf8')) as BackupManifest;
  edit(m);
  fs.writeFileSync(file, JSON.stringify(m));
  return at;
}

/** Everything under `dir` (names, modes, contents), to show that nothing changed. */
function snapshot(dir: string): string[] {
  if (!fs.existsSync(dir)) return ['(absent)'];
  const out: string[] = [];
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    out.push(`${path.relative(dir, p)} ${(st.mode & 0o7777).toString(8)} ${st.isFile() ? fs.readFileSync(p, 'base64') : ''}`);
    if (st.isDirectory()) for (const n of fs.readdirSync(p).sort()) walk(path.join(p, n));
  };
  walk(dir);
  return out;
}

async function restore(backup: string, dataDir: string) {
  return new Cli(path.join(path.dirname(dataDir), 'y.sock'), dataDir).run(['restore', backup]);
}

describe('yello restore of a tampered backup', () => {
  it('refuses a manifest name that climbs out with `..`: the file outside keeps its content and mode, nothing is created', async () => {
    const root = await tempDir();
    // The backup two levels below `attacker/`, the data dir one level below `victim/`: the same
    // `../../outside/planted.txt` reads attacker/outside/… from the backup and names
    // victim/outside/… from the restore's staging directory inside the data dir.
    const backup = tamperedCopy(path.join(root, 'attacker', 'x', 'backup'), (m) => m.files.push('../../outside/planted.txt'));
    fs.mkdirSync(path.join(root, 'attacker', 'outside'));
    fs.writeFileSync(path.join(root, 'attacker', 'outside', 'planted.txt'), 'the attacker wrote this\n');
    const victim = path.join(root, 'victim', 'outside', 'planted.txt');
    fs.mkdirSync(path.dirname(victim), { recursive: true });
    fs.writeFileSync(victim, 'the victim owns this\n', { mode: 0o644 });
    fs.chmodSync(victim, 0o644);
    const dataDir = path.join(root, 'victim', 'data');
    const before = snapshot(path.join(root, 'victim'));

    const r = await restore(backup, dataDir);
    expect(r.code, describeRun(r)).toBe(1);
    expect(r.stderr).toContain('"../../outside/planted.txt"');
    expect(r.stderr).toContain('nothing was changed');
    expect(fs.readFileSync(victim, 'utf8')).toBe('the victim owns this\n');
    expect(fs.statSync(victim).mode & 0o777).toBe(0o644);
    expect(snapshot(path.join(root, 'victim'))).toEqual(before);
  });

  it('refuses a name that climbs to / and back down to an existing file: its mode stays 0644', async () => {
    const root = await tempDir();
    const victim = path.join(root, 'victim.txt');
    fs.writeFileSync(victim, 'keep me\n', { mode: 0o644 });
    fs.chmodSync(victim, 0o644);
    const climb = '../'.repeat(40) + victim.slice(1);
    const backup = tamperedCopy(path.join(root, 'backup'), (m) => m.files.push(climb));
    const dataDir = path.join(root, 'data');

    const r = await restore(backup, dataDir);
    expect(r.code, describeRun(r)).toBe(1);
    expect(r.stderr).toContain('cannot be restored');
    expect(fs.statSync(victim).mode & 0o777).toBe(0o644);
    expect(fs.readFileSync(victim, 'utf8')).toBe('keep me\n');
    expect(fs.existsSync(dataDir), 'the data dir was not even created').toBe(false);
  });

  it('refuses a name outside the known set, a repeated name, and a listed file the backup lacks', async () => {
    const root = await tempDir();
    const cases: Array<[string, (m: BackupManifest) => void, string]> = [
      ['unknown', (m) => m.files.push('db'), '"db"'],
      ['plain-unknown', (m) => m.files.push('notes.txt'), '"notes.txt"'],
      ['not-a-string', (m) => (m.files as unknown[]).push({ name: 'keys' }), 'among its files'],
      ['twice', (m) => m.files.push('secret.key'), 'secret.key twice'],
    ];
    for (const [name, edit, says] of cases) {
      const r = await restore(tamperedCopy(path.join(root, name), edit), path.join(root, `data-${name}`));
      expect(r.code, describeRun(r)).toBe(1);
      expect(r.stderr, name).toContain(says);
      expect(fs.existsSync(path.join(root, `data-${name}`)), name).toBe(false);
    }
    const lacking = tamperedCopy(path.join(root, 'lacking'));
    fs.rmSync(path.join(lacking, 'admin.token'));
    const r = await restore(lacking, path.join(root, 'data-lacking'));
    expect(r.code, describeRun(r)).toBe(1);
    expect(r.stderr).toContain('the backup has no admin.token');
  });

  it('refuses a symlink anywhere in the backup (secret.key, a key file, a db file, the manifest) and changes nothing', async () => {
    const root = await tempDir();
    const elsewhere = path.join(root, 'elsewhere');
    fs.writeFileSync(elsewhere, 'x');
    const cases: Array<[string, string]> = [
      ['secret', 'secret.key'],
      ['key', path.join('keys', 'active')],
      ['db', path.join('db', 'CURRENT')],
      ['manifest', 'manifest.json'],
    ];
    for (const [name, rel] of cases) {
      const backup = tamperedCopy(path.join(root, name));
      const at = path.join(backup, rel);
      // The link leads to an identical copy: only being a link is wrong.
      const copy = path.join(root, `${name}-target`);
      fs.copyFileSync(at, copy);
      fs.rmSync(at);
      fs.symlinkSync(copy, at);
      const dataDir = path.join(root, `data-${name}`);
      const r = await restore(backup, dataDir);
      expect(r.code, `${name}: ${describeRun(r)}`).toBe(1);
      expect(r.stderr, name).toContain('is a symlink');
      expect(fs.existsSync(dataDir), name).toBe(false);
    }
  });

  it('into a data dir holding an older store: a refusal leaves every file as it was', async () => {
    const root = await tempDir();
    const old = await DaemonProcess.start({ dir: root });
    await old.stop();
    const before = snapshot(old.dataDir);
    const backup = tamperedCopy(path.join(root, 'evil'), (m) => m.files.push('../../x'));
    const r = await restore(backup, old.dataDir);
    expect(r.code, describeRun(r)).toBe(1);
    expect(snapshot(old.dataDir)).toEqual(before);
    await old.cleanup();
  });
});

describe('what depends on secret.key (docs/operations.md)', () => {
  it('a store restored without it: agent tokens still work (stored as hashes), cursors sealed before are refused', async () => {
    const root = await tempDir();
    const backup = tamperedCopy(path.join(root, 'backup'), (m) => {
      m.files = m.files.filter((f) => f !== 'secret.key');
    });
    fs.rmSync(path.join(backup, 'secret.key'));
    const dataDir = path.join(root, 'data');
    const r = await restore(backup, dataDir);
    expect(r.code, describeRun(r)).toBe(0);
    const d = await DaemonProcess.start({ dir: root, dataDir });
    try {
      const alice = await d.connectAs(aliceToken);
      ok(await alice.call('chats.list', {}));
      alice.close();
      const admin = await d.connectAs();
      const page = await admin.call('agents.list', { limit: 1, cursor: listCursor });
      expect(page.error?.data).toMatchObject({ type: 'INVALID_PARAMS', path: 'cursor' });
      admin.close();
    } finally {
      await d.cleanup();
    }
  });
});

describe('yello backup of a data dir with symlinked keys/, secret.key and admin.token', () => {
  it('follows each symlink, holds the files it led to, lists them in `followed`, and restores them as files', async () => {
    const root = await tempDir();
    const d = await DaemonProcess.start({ dir: root });
    await d.stop();
    // The secrets moved to another directory (a mounted volume, say), linked from the data dir.
    const vault = path.join(root, 'vault');
    fs.mkdirSync(vault, { mode: 0o700 });
    for (const name of ['keys', 'secret.key', 'admin.token']) {
      fs.renameSync(path.join(d.dataDir, name), path.join(vault, name));
      fs.symlinkSync(path.join(vault, name), path.join(d.dataDir, name));
    }
    await d.restart();
    try {
      const backup = path.join(root, 'backup');
      const r = await new Cli(d.socketPath, d.dataDir).run(['backup', backup, '--json']);
      expect(r.code, describeRun(r)).toBe(0);
      const { manifest } = JSON.parse(r.stdout) as { manifest: BackupManifest };
      expect(manifest.files).toEqual(['keys', 'admin.token', 'secret.key']);
      expect(manifest.followed).toEqual([
        { name: 'keys', target: path.join(vault, 'keys') },
        { name: 'admin.token', target: path.join(vault, 'admin.token') },
        { name: 'secret.key', target: path.join(vault, 'secret.key') },
      ]);
      for (const name of ['secret.key', 'admin.token']) {
        expect(fs.lstatSync(path.join(backup, name)).isFile(), name).toBe(true);
        expect(fs.readFileSync(path.join(backup, name), 'utf8')).toBe(fs.readFileSync(path.join(vault, name), 'utf8'));
      }
      expect(fs.readdirSync(path.join(backup, 'keys')).sort()).toEqual(fs.readdirSync(path.join(vault, 'keys')).sort());

      const dataDir = path.join(root, 'restored');
      const restored = await restore(backup, dataDir);
      expect(restored.code, describeRun(restored)).toBe(0);
      expect(restored.stdout).toContain('secret.key');
      expect(fs.readFileSync(path.join(dataDir, 'secret.key'), 'utf8')).toBe(fs.readFileSync(path.join(vault, 'secret.key'), 'utf8'));
      expect(fs.lstatSync(path.join(dataDir, 'keys')).isDirectory()).toBe(true);
    } finally {
      await d.cleanup();
    }
  });

  it('refuses what it cannot copy as a file (a FIFO in keys/, a dangling secret.key link): STORAGE_FAILURE/UNSUPPORTED naming it, nothing written', async () => {
    const root = await tempDir();
    const d = await DaemonProcess.start({ dir: root });
    try {
      const admin = await d.connectAs();
      const fifo = path.join(d.dataDir, 'keys', 'not-a-key');
      execFileSync('mkfifo', [fifo]);
      const target = path.join(root, 'backup-fifo');
      const r = await admin.call('daemon.backup', { path: target });
      expect(r.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'UNSUPPORTED' });
      expect(r.error?.message).toContain('keys/not-a-key');
      expect(r.error?.message).toContain('FIFO');
      fs.rmSync(fifo);

      const secret = path.join(d.dataDir, 'secret.key');
      const kept = fs.readFileSync(secret);
      fs.rmSync(secret);
      fs.symlinkSync(path.join(root, 'gone'), secret);
      const dangling = await admin.call('daemon.backup', { path: path.join(root, 'backup-dangling') });
      expect(dangling.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'UNSUPPORTED' });
      expect(dangling.error?.message).toContain('secret.key');
      expect(dangling.error?.message).toContain('leads nowhere');
      fs.rmSync(secret);
      fs.writeFileSync(secret, kept, { mode: 0o600 });
      expect(fs.readdirSync(root).filter((n) => n.includes('backup'))).toEqual([]);
      admin.close();
    } finally {
      await d.cleanup();
    }
  });
});

// Finding 9: the lock check looked only at LevelDB's db/, which a daemon on PostgreSQL does not
// have; the restore swapped a running daemon's admin token, keys and secret under it.
describe.runIf(pgAvailable())('yello restore into the data dir of a running daemon on PostgreSQL', () => {
  let cluster: FileDatabases;
  beforeAll(async () => {
    cluster = await FileDatabases.open();
    await cluster.createDatabase('restore');
  }, 60_000);
  afterAll(async () => {
    await cluster.stop();
  });

  it('is refused, naming the daemon, and changes nothing; once it is stopped the restore goes through', async () => {
    const root = await tempDir();
    // A process of its own: the refusal names the pid that holds the lock.
    const d = await DaemonProcess.start({ dir: root, extraArgs: ['--store', cluster.url('restore')], process: true });
    try {
      const files = () =>
        ['admin.token', 'secret.key', 'keys']
          .flatMap((n) => snapshot(path.join(d.dataDir, n)))
          .concat(fs.readdirSync(d.dataDir).sort().join(' '));
      const before = files();
      const r = await restore(pristine, d.dataDir);
      expect(r.code, describeRun(r)).toBe(1);
      expect(r.stderr).toContain(`a daemon holds the data dir's lock ${path.join(d.dataDir, 'lock')}`);
      expect(r.stderr).toContain(`pid ${d.pid}`);
      expect(r.stderr).toContain('stop it first');
      expect(files()).toEqual(before);
      const admin = await d.connectAs();
      ok(await admin.call('daemon.status', {}));
      admin.close();

      await d.stop();
      const after = await restore(pristine, d.dataDir);
      expect(after.code, describeRun(after)).toBe(0);
      expect(fs.readFileSync(path.join(d.dataDir, 'admin.token'), 'utf8').trim()).toBe(source.adminToken);
    } finally {
      await d.cleanup();
    }
  }, 90_000);
});
