// Secrets the CLI handles (docs/protocol.md §9, docs/security.md): `--token-out` never writes into
// a file it did not create (O_EXCL, 0600; --force replaces it with a new inode), and coordinator
// tokens are read from a file or stdin, never taken from argv where `ps` shows them.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { cliEnv, expectExit, oneLineErrorProblems, writeTokenFile, yelloBin, type CliResult } from '../helpers/cli-runner.js';
import { repoRoot } from '../helpers/daemon-process.js';
import { claim, createPair, messageOf, ok, uniq, type Result } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const { daemon, admin, cli } = useCli();
let shared: string;

beforeAll(() => {
  // The token files go to a directory another user may write to, as /tmp is (not the socket's:
  // clients refuse a socket in a directory others can write).
  shared = path.join(daemon().dir, 'shared');
  fs.mkdirSync(shared);
  fs.chmodSync(shared, 0o1777);
});

function expectOneLine(r: CliResult, code: number, pattern: RegExp): void {
  expectExit(r, code);
  expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
  expect(r.stderr).toMatch(pattern);
}

/** A file "another user" (uid 1001) created first, hoping to read what lands in it. */
function planted(name: string): string {
  const file = path.join(shared, name);
  fs.writeFileSync(file, 'theirs\n', { mode: 0o644 });
  fs.chownSync(file, 1001, 1001);
  return file;
}

const usernames = async () => ok(await admin().call('agents.list', {})).agents.map((a: { username: string }) => a.username);

describe('--token-out', () => {
  it('refuses a file another user pre-created: it keeps its owner and contents, and no agent is made', async () => {
    const file = planted('planted-add.token');
    const username = uniq('victim');
    const r = await cli().run(['agents', 'add', username, '--token-out', file]);
    expectOneLine(r, 2, /already exists.*--force/);
    expect(fs.readFileSync(file, 'utf8')).toBe('theirs\n');
    expect(fs.statSync(file)).toMatchObject({ uid: 1001, gid: 1001 });
    // The token is shown once: refusing before the agent exists loses nothing.
    expect(await usernames()).not.toContain(username);
  });

  it('--force replaces it with a new inode of ours, mode 0600, holding a working token', async () => {
    const file = planted('planted-force.token');
    const before = fs.statSync(file);
    const r = await cli().ok(['agents', 'add', uniq('forced'), '--token-out', file, '--force']);
    const after = fs.statSync(file);
    expect(after.ino).not.toBe(before.ino);
    expect(after.uid).toBe(process.getuid!());
    expect(after.mode & 0o777).toBe(0o600);
    const token = fs.readFileSync(file, 'utf8').trim();
    expect(token).toMatch(/^yello_agt_/);
    expect(r.stdout).not.toContain(token);
    expectExit(await cli().as(file).run(['status']), 0);
    // No temp file is left beside it.
    expect(fs.readdirSync(shared).filter((f) => f.includes('planted-force') && f !== 'planted-force.token')).toEqual([]);
  });

  it('a new file is created 0600; a symlink in its place is refused', async () => {
    const file = path.join(shared, `${uniq('fresh')}.token`);
    await cli().ok(['agents', 'add', uniq('fresh'), '--token-out', file]);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const target = planted('symlink-target');
    const link = path.join(shared, 'link.token');
    fs.symlinkSync(target, link);
    expectOneLine(await cli().run(['agents', 'add', uniq('linked'), '--token-out', link]), 2, /already exists/);
    expect(fs.readFileSync(target, 'utf8')).toBe('theirs\n');
  });

  it('rotate-token --token-out: refused over a planted file (the old token keeps working), replaced with --force', async () => {
    const created = ok(await admin().call('agents.create', { username: uniq('rot'), name: 'Rot' }));
    const oldFile = writeTokenFile(daemon().dir, uniq('rot-old'), created.token);
    const file = planted('planted-rotate.token');
    expectOneLine(await cli().run(['agents', 'rotate-token', created.agent.id, '--token-out', file]), 2, /already exists/);
    expect(fs.readFileSync(file, 'utf8')).toBe('theirs\n');
    expectExit(await cli().as(oldFile).run(['status']), 0);
    await cli().ok(['agents', 'rotate-token', created.agent.id, '--token-out', file, '--force']);
    expect(fs.statSync(file)).toMatchObject({ uid: process.getuid!() });
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expectExit(await cli().as(file).run(['status']), 0);
    expectExit(await cli().as(oldFile).run(['status']), 1);
  });
});

describe('coordinator tokens stay off the command line', () => {
  it('--coordinator-token T is a usage error pointing at --coordinator-token-file, for send and streams release', async () => {
    const p = await createPair(admin(), daemon().socketPath);
    const alice = cli().as(writeTokenFile(daemon().dir, uniq('alice'), p.a.token));
    const c = await claim(p.a.client, p.streamA);
    const [send, release] = await Promise.all([
      alice.run(['send', p.chatId, 'hi', '--coordinator-token', c.coordinatorToken]),
      alice.run(['streams', 'release', p.streamA, '--coordinator-token', c.coordinatorToken]),
    ]);
    for (const r of [send, release]) expectOneLine(r, 2, /--coordinator-token-file/);
    // Nothing happened under the token.
    expect(ok(await admin().call('streams.get', { streamId: p.streamA }))).toMatchObject({ nextPosition: '1', writer: { active: true } });
  });

  it('with --coordinator-token-file - the token is read from stdin and never appears in the process argv', async () => {
    const p = await createPair(admin(), daemon().socketPath);
    const tokenFile = writeTokenFile(daemon().dir, uniq('alice'), p.a.token);
    const c = await claim(p.a.client, p.streamA);
    const child = spawn(
      process.execPath,
      [yelloBin, '--token-file', tokenFile, 'send', p.chatId, 'under a claim', '--coordinator-token-file', '-', '--json'],
      {
        cwd: repoRoot,
        env: cliEnv({ YELLO_SOCKET: daemon().socketPath, XDG_STATE_HOME: path.join(daemon().dir, 'state') }),
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    const exited = new Promise<number | null>((r) => {
      child.on('close', (code) => {
        r(code);
      });
    });
    // While it waits for stdin, its command line is what `ps` shows.
    const cmdline = await waitFor(
      () => {
        try {
          return fs.readFileSync(`/proc/${child.pid}/cmdline`, 'utf8');
        } catch {
          return '';
        }
      },
      'the cmdline',
      10_000,
    );
    expect(cmdline).toContain('--coordinator-token-file');
    expect(cmdline).not.toContain(c.coordinatorToken);
    child.stdin.end(c.coordinatorToken + '\n');
    expect(await exited).toBe(0);
    expect(messageOf((JSON.parse(stdout) as Result<'streams.append'>).records[0]).content).toBe('under a claim');
  });
});
