// The examples/ scripts as a user runs them from a fresh clone, against a real daemon: with the
// paths they show (the daemon's defaults under $XDG_RUNTIME_DIR and $XDG_STATE_HOME, here in a
// temp home), failing with one line and what to do when something is missing, and writing
// nothing into the repository. `yello daemon --help` suggests no path the daemon refuses.

import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cliEnv, expectExit, oneLineErrorProblems, runCli, type CliResult } from '../helpers/cli-runner.js';
import { DaemonProcess, makeTempDir, repoRoot } from '../helpers/daemon-process.js';
import { Teardown } from '../helpers/teardown.js';
import { waitFor } from '../helpers/wait.js';
import { claim, createPair, ok, type Wire } from '../helpers/wire-fixtures.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const teardown = new Teardown();
let home = '';
let daemon: DaemonProcess;
let admin: Wire;
/** The environment of a user whose daemon runs on its defaults: no YELLO_* variables. */
let userEnv: Record<string, string>;

/** A running example: its output so far, and its end. */
interface Example {
  stdout: string;
  stderr: string;
  done: boolean;
  exited: Promise<CliResult>;
  signal(sig: NodeJS.Signals): void;
}

function startExample(args: string[], env: Record<string, string | undefined>): Example {
  const child = spawn(process.execPath, args, { cwd: repoRoot, env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const ex: Example = {
    stdout: '',
    stderr: '',
    done: false,
    signal: (sig) => child.kill(sig),
    exited: new Promise((resolve) => {
      child.on('close', (code, signal) => {
        ex.done = true;
        resolve({ args, code, signal, stdout: ex.stdout, stderr: ex.stderr, timedOut: false });
      });
    }),
  };
  child.stdout.setEncoding('utf8').on('data', (c: string) => (ex.stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (ex.stderr += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
  void ex.exited.then(() => {
    clearTimeout(timer);
  });
  return ex;
}

function runExample(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  return startExample(args, env).exited;
}

/** Untracked files in the repo (what a run may have left there), as git sees them. */
async function untrackedFiles(): Promise<string[]> {
  const r = await new Promise<string>((resolve, reject) => {
    const child = spawn('git', ['status', '--porcelain', '--untracked-files=all', '--ignored'], { cwd: repoRoot });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.on('error', reject);
    child.on('close', () => {
      resolve(out);
    });
  });
  return r
    .split('\n')
    .filter((l) => l.startsWith('??') || l.startsWith('!!'))
    .map((l) => l.slice(3))
    .filter((f) => !f.startsWith('node_modules') && !f.startsWith('dist/'));
}

function expectOneLine(r: CliResult, pattern: RegExp): void {
  expect(r.code, r.stderr).not.toBe(0);
  expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
  expect(r.stderr).toMatch(pattern);
}

beforeAll(async () => {
  home = teardown.add(await makeTempDir('yl-ex-'), (d) => fs.rm(d, { recursive: true, force: true }));
  const runtimeDir = path.join(home, 'run');
  const stateHome = path.join(home, 'state');
  await fs.mkdir(runtimeDir, { mode: 0o700 });
  await fs.mkdir(path.join(home, 'home'));
  userEnv = { XDG_RUNTIME_DIR: runtimeDir, XDG_STATE_HOME: stateHome, HOME: path.join(home, 'home') };
  // Where `npm start` puts them with this environment (docs/protocol.md §2).
  daemon = teardown.add(
    await DaemonProcess.start({ dir: home, socketPath: path.join(runtimeDir, 'yello/yello.sock'), dataDir: path.join(stateHome, 'yello') }),
    (d) => d.cleanup(),
  );
  admin = await daemon.connectAs();
});

afterAll(() => teardown.run());

describe('examples/two-agents.mjs', () => {
  it("runs on the daemon's defaults as its header says, verifies the transcript and leaves nothing in the repo", async () => {
    const before = await untrackedFiles();
    const r = expectExit(await runExample(['examples/two-agents.mjs'], userEnv), 0);
    expect(r.stdout).toMatch(/alice: hello, bob/);
    expect(r.stdout).toMatch(/bob {2}: got "are you there\?"/);
    expect(r.stdout).toMatch(/\b4 messages, all signatures verified/);
    expect(r.stderr).toBe('');
    expect(await untrackedFiles()).toEqual(before);
  });

  it('leaves no extra agents behind: a second run reuses the agents of the first (issue 52, item 14)', async () => {
    const agents = async () => ok(await admin.call('agents.list', { limit: 500 }), 'agents.list').agents.map((a) => a.username);
    expectExit(await runExample(['examples/two-agents.mjs'], userEnv), 0);
    const afterFirst = await agents();
    const second = expectExit(await runExample(['examples/two-agents.mjs'], userEnv), 0);
    // This run's conversation only, verified, however many runs came before.
    expect(second.stdout).toMatch(/\b4 messages, all signatures verified/);
    expect((second.stdout.match(/: hello, bob$/gm) ?? []).length).toBe(1);
    expect((await agents()).sort()).toEqual(afterFirst.sort());
  });

  it('with the socket the old docs suggested (/tmp/y.sock): one line that says to use a private directory', async () => {
    const r = await runExample(['examples/two-agents.mjs'], { ...userEnv, YELLO_SOCKET: '/tmp/y.sock' });
    expectOneLine(r, /^two-agents: UNTRUSTED_SOCKET: .*use a private directory \(mode 0700\) such as \$XDG_RUNTIME_DIR\/yello$/m);
  });

  it('with no daemon on the socket: one line that says to start it', async () => {
    const r = await runExample(['examples/two-agents.mjs'], { ...userEnv, YELLO_SOCKET: path.join(home, 'run/nothing/y.sock') });
    expectOneLine(r, /^two-agents: cannot connect to yellod at .*start the daemon first: npm start/m);
  });

  it('with a data dir that has no admin token: one line that names the file and the variable', async () => {
    const r = await runExample(['examples/two-agents.mjs'], { ...userEnv, YELLO_DATA_DIR: path.join(home, 'empty') });
    expectOneLine(r, /^two-agents: cannot read the admin token .*empty\/admin\.token \(ENOENT\): set YELLO_DATA_DIR/m);
    expect(r.code).toBe(2);
  });
});

describe('examples/echo-adapter.mjs', () => {
  it('echoes what it is shown, keeps its cursor in the state dir (not the repo) and stops on Ctrl-C', async () => {
    const before = await untrackedFiles();
    const pair = await createPair(admin, daemon.socketPath);
    const echo = startExample(['examples/echo-adapter.mjs', pair.chatId], { ...userEnv, YELLO_TOKEN: pair.b.token });
    await waitFor(() => echo.stdout.includes('cursor file ') || echo.done, 'the adapter started', 30_000);
    expect(echo.done, echo.stderr).toBe(false);
    const c = await claim(pair.a.client, pair.streamA);
    ok(
      await pair.a.client.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: c.coordinatorToken,
        generation: c.generation,
        expectedPosition: c.nextPosition,
        operationId: 'op-echo-1',
        records: [{ type: 'chat.message', messageId: 'm-echo-1', content: 'hello, echo' }],
      }),
      'streams.append',
    );
    await waitFor(
      async () => {
        const h = ok(await admin.call('chats.history', { chatId: pair.chatId, direction: 'forward' }), 'chats.history');
        return h.entries.some((e) => e.wrapper.type === 'chat.message' && e.wrapper.message.content === 'HELLO, ECHO');
      },
      'the echo reply',
      30_000,
    );
    echo.signal('SIGINT');
    const r = expectExit(await echo.exited, 0);
    expect(r.stdout).toMatch(/presented .*: hello, echo/);
    const cursorFile = path.join(userEnv.XDG_STATE_HOME!, 'yello-examples', `echo-${pair.chatId}.json`);
    expect(r.stdout).toContain(`cursor file ${cursorFile}`);
    await fs.access(cursorFile);
    expect(await untrackedFiles()).toEqual(before);
  });

  it('without a token: one usage line, exit 2', async () => {
    const r = await runExample(['examples/echo-adapter.mjs', 'chat_x'], userEnv);
    expectOneLine(r, /^echo-adapter: usage: /m);
    expect(r.code).toBe(2);
  });
});

describe('suggested paths', () => {
  it('neither the examples nor yello daemon --help suggest a socket directly in /tmp (the daemon refuses it, exit 78)', async () => {
    const help = expectExit(await runCli(['daemon', '--help']), 0);
    const texts = [help.stdout];
    for (const f of await fs.readdir(path.join(repoRoot, 'examples')))
      texts.push(await fs.readFile(path.join(repoRoot, 'examples', f), 'utf8'));
    for (const t of texts) expect(t).not.toMatch(/\/tmp\/[\w.-]+\.sock\b/);
  });

  it('the socket yello daemon --help shows is one the daemon accepts', async () => {
    const help = expectExit(await runCli(['daemon', '--help']), 0);
    const m = /yello daemon --socket (\S+) --data-dir (\S+)/.exec(help.stdout);
    expect(m, help.stdout).not.toBeNull();
    const expand = (p: string) =>
      p
        .replaceAll('"', '')
        .replace(/^~/, userEnv.HOME!)
        .replaceAll('$XDG_RUNTIME_DIR', userEnv.XDG_RUNTIME_DIR!)
        .replaceAll('$XDG_STATE_HOME', userEnv.XDG_STATE_HOME!);
    const d = teardown.add(
      await DaemonProcess.start({ dir: home, socketPath: expand(m![1]!), dataDir: expand(m![2]!), env: userEnv }),
      (x) => x.cleanup(),
    );
    const st = await (await d.connectAs()).call('daemon.status', {});
    expect(st.error).toBeUndefined();
    await d.stop();
  });
});
