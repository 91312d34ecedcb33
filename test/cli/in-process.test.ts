// The CLI run inside a test worker (src/cli/program.ts runCli with its own I/O): it reads the
// environment it is given and nothing of the worker's process.env, so runs that share one
// worker never see each other's variables, and a developer's own $YELLO_TOKEN never reaches one.

import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const { daemon, pair } = useCli();

afterEach(() => {
  vi.unstubAllEnvs();
});

/** `yello …args` with exactly `env`, its output collected. */
async function run(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const sink = (add: (s: string) => void) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        add(chunk.toString());
        done();
      },
    });
  const code = await runCli(args, {
    stdout: sink((s) => (stdout += s)),
    stderr: sink((s) => (stderr += s)),
    env,
  });
  return { code, stdout, stderr };
}

describe('the CLI in a test worker', () => {
  it("reads the env it is given, not the worker's process.env", async () => {
    const p = await pair();
    const elsewhere = path.join(daemon().dir, 'elsewhere');
    vi.stubEnv('YELLO_TOKEN', 'yello_agent_not-a-token');
    vi.stubEnv('YELLO_SOCKET', path.join(elsewhere, 'y.sock'));
    vi.stubEnv('YELLO_DATA_DIR', elsewhere);
    vi.stubEnv('XDG_STATE_HOME', path.join(elsewhere, 'state'));
    vi.stubEnv('HOME', elsewhere);
    const given = { YELLO_SOCKET: daemon().socketPath, YELLO_DATA_DIR: daemon().dataDir, XDG_STATE_HOME: path.join(daemon().dir, 'given') };

    // Admin: the data dir's admin.token, not the worker's $YELLO_TOKEN or $YELLO_DATA_DIR.
    const status = await run(['status', '--json'], given);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ storage: 'ok' });

    // An agent command without a token in its env is refused, whatever the worker's env holds.
    const noToken = await run(['send', p.chatId, 'hi'], given);
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/--token-file|YELLO_TOKEN/);

    // The claim `send` keeps goes to the given $XDG_STATE_HOME, never the worker's (or its $HOME).
    const sent = await run(['send', p.chatId, 'hi'], { ...given, YELLO_TOKEN: p.a.token });
    expect(sent.code, sent.stderr).toBe(0);
    expect(fs.readdirSync(path.join(daemon().dir, 'given', 'yello-cli')).some((f) => f.startsWith('writer-'))).toBe(true);
    expect(fs.existsSync(elsewhere)).toBe(false);
  });
});
