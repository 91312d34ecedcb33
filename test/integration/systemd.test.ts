// The systemd units are checked by systemd itself, and socket activation is exercised with
// systemd-socket-activate, which hands the daemon a listening fd exactly as systemd does.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir, repoRoot } from '../helpers/daemon-process.js';
import { connectAs } from '../helpers/rpc-line-client.js';

const hasSystemd = spawnSync('systemd-analyze', ['--version']).status === 0 && spawnSync('systemd-socket-activate', ['--help']).status === 0;
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(!hasSystemd && !process.env.CI)('systemd units', () => {
  it('pass systemd-analyze verify', async () => {
    const dir = await makeTempDir('ysd-');
    dirs.push(dir);
    for (const unit of ['yellod.socket', 'yellod.service']) {
      const text = readFileSync(path.join(repoRoot, 'systemd', unit), 'utf8').replace('/opt/yello/dist/cli/main.js', path.join(repoRoot, 'dist/cli/main.js'));
      writeFileSync(path.join(dir, unit), text);
    }
    const r = spawnSync('systemd-analyze', ['verify', path.join(dir, 'yellod.socket'), path.join(dir, 'yellod.service')], { encoding: 'utf8' });
    expect(r.stderr + r.stdout).not.toMatch(/error|invalid|unknown/i);
    expect(r.status).toBe(0);
  });

  it('declares the hardening and activation settings the deployment relies on', () => {
    const service = readFileSync(path.join(repoRoot, 'systemd/yellod.service'), 'utf8');
    const socket = readFileSync(path.join(repoRoot, 'systemd/yellod.socket'), 'utf8');
    for (const line of ['Type=exec', 'StateDirectory=yello', 'StateDirectoryMode=0700', 'UMask=0077', 'ProtectSystem=strict', 'ProtectHome=yes', 'PrivateTmp=yes', 'NoNewPrivileges=yes', 'RestrictAddressFamilies=AF_UNIX', 'RestartPreventExitStatus=73 74 76']) {
      expect(service).toContain(line);
    }
    expect(service).not.toMatch(/^MemoryDenyWriteExecute/m);
    for (const line of ['ListenStream=/run/yello/yello.sock', 'SocketMode=0660', 'SocketGroup=yello', 'DirectoryMode=0750']) expect(socket).toContain(line);
  });

  it('serves on the socket passed by systemd-socket-activate (LISTEN_FDS)', async () => {
    const dir = await makeTempDir('ysa-');
    dirs.push(dir);
    const sock = path.join(dir, 'a.sock');
    const data = path.join(dir, 'data');
    const child = spawn('systemd-socket-activate', ['-l', sock, process.execPath, path.join(repoRoot, 'dist/cli/main.js'), 'daemon', '--data-dir', data], {
      env: { ...process.env, YELLO_SOCKET: '', XDG_RUNTIME_DIR: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    try {
      for (let i = 0; i < 100 && !existsSync(sock); i++) await new Promise((r) => setTimeout(r, 50));
      // The first connection starts the daemon; the admin token exists once it has started.
      const poke = await import('node:net').then((net) => net.connect(sock));
      poke.on('error', () => {});
      for (let i = 0; i < 200 && !existsSync(path.join(data, 'admin.token')); i++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 300));
      poke.destroy();
      const token = readFileSync(path.join(data, 'admin.token'), 'utf8').trim();
      const client = await connectAs(sock, token);
      const status = await client.call('daemon.status', {});
      expect(status.result?.storage).toBe('ok');
      client.close();
      expect(out).toContain('systemd:fd3');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });
});
