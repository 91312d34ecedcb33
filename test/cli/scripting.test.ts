// Scripting and readiness (issue 23, findings 6 and 7): `status --wait` blocks until a daemon
// answers or says in one line that none did; a start that fails leaves no half-made data dir; a
// refused lock names the daemon that holds it; and the small output and help items: errors that
// do not repeat themselves, `verify`'s plurals, help that describes every option and does not
// print a script or wrap a command.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { expectExit, oneLineErrorProblems, runCli, startCli, type CliResult } from '../helpers/cli-runner.js';
import { DaemonProcess, makeTempDir } from '../helpers/daemon-process.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const { daemon, cli, pair } = useCli();
const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const dir = await makeTempDir('yl-scr-');
  cleanups.push(() => fs.promises.rm(dir, { recursive: true, force: true }));
  return dir;
}

function expectOneLine(r: CliResult, code: number, pattern: RegExp): void {
  expectExit(r, code);
  expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
  expect(r.stderr).toMatch(pattern);
}

describe('yello status --wait', () => {
  it('started before the daemon, it returns 0 with the status once the daemon answers', async () => {
    const dir = await tempDir();
    const socketPath = path.join(dir, 'y.sock');
    const dataDir = path.join(dir, 'data');
    const env = { YELLO_SOCKET: socketPath, YELLO_DATA_DIR: dataDir };
    const waiting = startCli(['status', '--wait', '30'], { env, timeoutMs: 45_000 });
    const d = await DaemonProcess.start({ dir, socketPath, dataDir });
    cleanups.push(() => d.cleanup());
    const r = expectExit(await waiting.exited, 0);
    expect(r.stdout).toMatch(/^version\s+\S+/m);
    expect(r.stderr).toBe('');
  });

  it('with no daemon: a non-zero exit after about SECONDS, with one line naming the socket', async () => {
    const dir = await tempDir();
    const socketPath = path.join(dir, 'y.sock');
    const started = Date.now();
    const r = await runCli(['status', '--wait', '1'], { env: { YELLO_SOCKET: socketPath, YELLO_DATA_DIR: path.join(dir, 'data') } });
    // Time is the subject here: it must have waited, and not much longer than asked.
    const elapsed = Date.now() - started;
    expectOneLine(r, 1, new RegExp(`^yello: the daemon at ${socketPath} did not answer within 1 s \\(last: `));
    expect(elapsed).toBeGreaterThanOrEqual(900);
  });

  it('with a daemon listening but no admin.token where it looks (the wrong --data-dir): exit 2 at once, not after the wait', async () => {
    const dir = await tempDir();
    const d = await DaemonProcess.start({ dir });
    cleanups.push(() => d.cleanup());
    // 600 s: a run that waited would outlast the test's own timeout.
    const r = await runCli(['status', '--wait', '600'], {
      env: { YELLO_SOCKET: d.socketPath, YELLO_DATA_DIR: path.join(dir, 'elsewhere') },
    });
    expectOneLine(r, 2, /no admin token at .*elsewhere\/admin\.token: pass --data-dir/);
  });

  it('a bad SECONDS is a usage error; a refused token is reported at once, not waited on', async () => {
    expectOneLine(await cli().run(['status', '--wait', 'soon']), 2, /--wait takes a number of seconds/);
    const badToken = path.join(daemon().dir, 'bad.token');
    fs.writeFileSync(badToken, 'yello_agent_nope\n');
    const started = Date.now();
    const r = await cli().run(['--token-file', badToken, 'status', '--wait', '20']);
    expectOneLine(r, 1, /UNAUTHENTICATED/);
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});

describe('a daemon start that fails', () => {
  it('exit 74 (something else answers on the socket) leaves no data dir behind', async () => {
    const dir = await tempDir();
    const socketPath = path.join(dir, 'y.sock');
    const foreign = net.createServer((s) => s.end());
    await new Promise<void>((r) => foreign.listen(socketPath, r));
    cleanups.push(() => new Promise((r) => foreign.close(r)));
    const dataDir = path.join(dir, 'data');
    const r = await runCli(['daemon', '--socket', socketPath, '--data-dir', dataDir, '--log-level', 'warn'], {
      timeoutMs: 20_000,
      process: true,
    });
    expectOneLine(r, 74, /another daemon is listening on/);
    expect(fs.existsSync(dataDir)).toBe(false);

    // A data dir that existed (empty, as systemd's StateDirectory makes it) is left as it was.
    const given = path.join(dir, 'given');
    fs.mkdirSync(given, { mode: 0o700 });
    expectExit(
      await runCli(['daemon', '--socket', socketPath, '--data-dir', given, '--log-level', 'warn'], { timeoutMs: 20_000, process: true }),
      74,
    );
    expect(fs.readdirSync(given)).toEqual([]);
  });

  it('exit 73 (the store is locked) names the daemon holding it: pid and socket', async () => {
    const otherSocket = path.join(daemon().dir, 'second.sock');
    const r = await runCli(['daemon', '--socket', otherSocket, '--data-dir', daemon().dataDir, '--log-level', 'warn'], {
      timeoutMs: 20_000,
      process: true,
    });
    expectOneLine(r, 73, /locked by another daemon/);
    expect(r.stderr).toContain(`pid ${String(daemon().holderPid)}`);
    expect(r.stderr).toContain(`socket ${daemon().socketPath}`);
    // The holder keeps its data dir and serves on.
    expect(fs.existsSync(path.join(daemon().dataDir, 'admin.token'))).toBe(true);
    expectExit(await cli().run(['status']), 0);
  });
});

describe('output and help', () => {
  it('an error says its reason once (no "(path=… reason=<the message again>)")', async () => {
    expectExit(await cli().run(['agents', 'add', 'dupe-user']), 0);
    const r = await cli().run(['agents', 'add', 'dupe-user']);
    expectOneLine(r, 1, /already taken/);
    expect(r.stderr.match(/already taken/g)).toHaveLength(1);
    expect(r.stderr).not.toMatch(/reason=/);
  });

  it('verify counts in the singular for one: "1 message"', async () => {
    const p = await pair();
    expectExit(await p.alice.run(['send', p.chatId, 'just one']), 0);
    const exported = path.join(daemon().dir, 'one.jsonl');
    const jwks = path.join(daemon().dir, 'one-jwks.json');
    fs.writeFileSync(exported, expectExit(await cli().run(['chats', 'export', p.chatId]), 0).stdout);
    fs.writeFileSync(jwks, expectExit(await cli().run(['keys', 'list', '--json']), 0).stdout);
    const r = expectExit(await cli().run(['verify', exported, '--jwks', jwks]), 0);
    expect(r.stdout).toMatch(/\b1 message, /);
    expect(r.stdout).toMatch(/\b0 problems\b/);
    expect(r.stdout).not.toMatch(/\b1 (records|messages|checkpoints|problems)\b/);
  });

  it('chats history describes --limit, --direction and --cursor', async () => {
    const r = expectExit(await runCli(['chats', 'history', '--help']), 0);
    for (const opt of ['--limit', '--direction', '--cursor']) {
      const line = r.stdout.split('\n').find((l) => l.trimStart().startsWith(opt));
      expect(line, r.stdout).toBeDefined();
      // An undescribed option's line is the flag and then only its [type] / [choices] tags.
      expect(
        line!
          .replace(opt, '')
          .replace(/\[[^\]]*\]/g, '')
          .trim(),
        line,
      ).not.toBe('');
    }
  });

  it('send --help shows each example command on one line; completion --help is help, not the script', async () => {
    const send = expectExit(await runCli(['send', '--help']), 0);
    expect(send.stdout).toMatch(/^ {2}yello --json streams claim chat_…:agt_… \| jq -r \.coordinatorToken > my\.ct\s*$/m);
    expect(send.stdout).toMatch(/^ {2}yello send chat_… hi --coordinator-token-file my\.ct\s/m);
    const completion = expectExit(await runCli(['completion', '--help']), 0);
    expect(completion.stdout).not.toMatch(/yargs command completion script|_yello_yargs_completions/);
    expect(completion.stdout).toMatch(/shell completion script/);
    // Without --help it still prints the script.
    expect(expectExit(await runCli(['completion']), 0).stdout).toMatch(/_yello_yargs_completions/);
  });
});
