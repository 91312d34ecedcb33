// Small CLI behaviours an agent or a shell script relies on (docs/protocol.md §9): stdin that is
// not UTF-8 is refused, a closed stdout ends quietly, errors name what the user typed, a
// refused admin token says which file was read, `daemon --help` shows daemon options only,
// and `yello` alone says its hint once.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { cliEnv, expectExit, oneLineErrorProblems, runCli, yelloBin, type CliResult } from '../helpers/cli-runner.js';
import { repoRoot } from '../helpers/daemon-process.js';
import { ok, readAll, messageOf, type Result } from '../helpers/wire-fixtures.js';
import { useCli, type CliPair } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const fixture = useCli();
const { daemon, admin, cli } = fixture;

function expectOneLine(r: CliResult, code: number, pattern: RegExp): void {
  expectExit(r, code);
  expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
  expect(r.stderr).toMatch(pattern);
}

/** A fresh pair (see useCli), alice's PII policy off. */
async function pair(): Promise<CliPair> {
  const p = await fixture.pair();
  ok(await admin().call('agents.setPolicy', { agentId: p.a.id, pii: 'off' }));
  return p;
}

/** Runs the CLI with its stdout pipe closed by the reader before the CLI writes anything. */
function runWithClosedStdout(args: string[]): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [yelloBin, ...args], {
      cwd: repoRoot,
      env: cliEnv({ YELLO_SOCKET: daemon().socketPath, YELLO_DATA_DIR: daemon().dataDir }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy(); // like `| head -0`: the reader is gone
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('close', (code, signal) => {
      resolve({ code, signal, stderr });
    });
  });
}

describe('send -', () => {
  it('refuses stdin that is not UTF-8 (exit 2, nothing claimed or written); --lossy sends it with U+FFFD', async () => {
    const p = await pair();
    const r = await p.alice.run(['send', p.chatId, '-'], { input: Buffer.from([0x68, 0x69, 0x20, 0xff, 0xfe, 0x21]) });
    expectOneLine(r, 2, /not valid UTF-8.*--lossy/);
    expect(ok(await admin().call('streams.get', { streamId: p.streamA }))).toMatchObject({ nextPosition: '0', writer: { epoch: '0' } });

    const lossy = await p.alice.run(['send', p.chatId, '-', '--lossy', '--json'], { input: Buffer.from([0x68, 0x69, 0x20, 0xff, 0x21]) });
    expectExit(lossy, 0);
    expect(messageOf((JSON.parse(lossy.stdout) as Result<'streams.append'>).records[0]).content).toBe('hi \uFFFD!');
    // Valid UTF-8, multi-byte included, goes through unchanged.
    const fine = await p.alice.run(['send', p.chatId, '-', '--json'], { input: Buffer.from('grüße, 🐝\n', 'utf8') });
    expect(messageOf((JSON.parse(expectExit(fine, 0).stdout) as Result<'streams.append'>).records[0]).content).toBe('grüße, 🐝');
  });
});

describe('a closed stdout', () => {
  it('ends the command quietly with exit 0 (yello status | head -0)', async () => {
    for (const args of [['status'], ['agents', 'list'], ['keys', 'list', '--json']]) {
      const r = await runWithClosedStdout(args);
      expect({ args, code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({ args, code: 0, signal: null, stderr: '' });
    }
  });
});

describe('errors name what the user typed', () => {
  it('a mistyped chat id is "no such chat: <id>" (exit 1), never an internal stream id', async () => {
    const p = await pair();
    const typo = p.chatId.slice(0, -1) + (p.chatId.endsWith('a') ? 'b' : 'a');
    const runs = await Promise.all([
      p.alice.run(['send', typo, 'hello']),
      p.alice.run(['ack', typo]),
      p.alice.run(['chats', 'read', typo]),
      p.alice.run(['chats', 'follow', typo]),
      p.alice.run(['chats', 'follow', typo, '--ack']),
      p.alice.run(['chats', 'history', typo]),
      cli().run(['chats', 'show', typo]),
      cli().run(['chats', 'permissions', typo]),
    ]);
    for (const r of runs) {
      expectOneLine(r, 1, new RegExp(`^yello: no such chat: ${typo}\\n$`));
      expect(r.stderr).not.toContain(':agt_');
    }
    // And nothing was claimed on the way.
    expect(await readAll(admin(), p.streamA)).toEqual([]);
  });

  it('an admin token the daemon refuses: says which file was read and how to point at the right one', async () => {
    const other = path.join(daemon().dir, 'other-data');
    fs.mkdirSync(other, { recursive: true });
    fs.writeFileSync(path.join(other, 'admin.token'), 'yello_admin_not-this-daemons\n', { mode: 0o600 });
    const r = await cli().run(['agents', 'list'], { env: { YELLO_DATA_DIR: other } });
    expectOneLine(r, 1, /UNAUTHENTICATED/);
    expect(r.stderr).toContain(path.join(other, 'admin.token'));
    for (const hint of ['--data-dir', '$YELLO_DATA_DIR', '--admin-token-file']) expect(r.stderr).toContain(hint);
  });
});

describe('help', () => {
  it('`yello daemon --help` lists daemon options only, not the client ones', async () => {
    const r = expectExit(await runCli(['daemon', '--help']), 0);
    for (const flag of ['--socket', '--data-dir', '--log-level', '--policy']) expect(r.stdout).toContain(flag);
    for (const flag of ['--token-file', '--admin-token-file', '--json', '--state-dir']) expect(r.stdout).not.toContain(flag);
  });

  it('`yello` alone prints its usage hint once (exit 2)', async () => {
    const r = expectExit(await runCli([]), 2);
    expect(r.stderr.match(/yello --help/g)).toHaveLength(1);
  });
});
