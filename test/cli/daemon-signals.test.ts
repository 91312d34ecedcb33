// A Ctrl-C that reaches `yello daemon` as its start completes stops it (CI, test/cli/npm-start:
// the daemon logged "yellod ready" and then ignored both SIGINTs, from the terminal and from
// npm). The start's "stop asked while starting" listener was removed and another registered
// for the run, and Node drops a signal it has received but not yet delivered to a listener that
// goes away. The fixture sends SIGINT at exactly that moment: before any registration goes.

import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { cliEnv } from '../helpers/cli-runner.js';
import { makeTempDir, repoRoot } from '../helpers/daemon-process.js';
import { watch } from '../helpers/spawn-async.js';
import { waitFor } from '../helpers/wait.js';

vi.setConfig({ testTimeout: 60_000 });

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => fs.rm(d, { recursive: true, force: true })));
});

/** The fixture's daemon on a temporary socket and data dir, its output collected. */
async function fixtureDaemon(env: Record<string, string> = {}) {
  const dir = await makeTempDir('yl-sig-');
  dirs.push(dir);
  const socket = path.join(dir, 'y.sock');
  const child = spawn(
    process.execPath,
    [path.join(repoRoot, 'test/fixtures/daemon-signal-handover.mjs'), '--socket', socket, '--data-dir', path.join(dir, 'data')],
    { env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const { out, exitWithin } = watch(child);
  /** The exit code, or 'still running' 15 s on. */
  const exit = () => exitWithin(15_000);
  return { child, out, socket, exit };
}

describe('yello daemon and signals', () => {
  it('a SIGINT that arrives as the start completes stops the daemon: "stopped", exit 0, no socket', async () => {
    const { child, out, socket, exit } = await fixtureDaemon();
    try {
      await waitFor(() => out.stdout.includes('"msg":"yellod ready"'), `yellod ready (stderr: ${out.stderr})`, 30_000, 20);
      // A handover, if there is one, comes in the same turn as the start's end; give its line
      // time to arrive before deciding whether this test must send the Ctrl-C itself.
      await new Promise((r) => setTimeout(r, 500));
      const injected = out.stderr.includes('fixture: SIGINT as a signal registration is removed');
      if (!injected) child.kill('SIGINT');
      expect(await exit(), `injected at a handover: ${injected}; stdout: ${out.stdout.slice(-800)}`).toBe(0);
      expect(out.stdout).toMatch(/"msg":"stopped"/);
      await expect(fs.access(socket)).rejects.toThrow(/ENOENT/);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a SIGINT while starting is honoured once the store is open: ready, then stopped, exit 0, no socket', async () => {
    const { child, out, socket, exit } = await fixtureDaemon({ SIGNAL_AT: 'register' });
    try {
      expect(await exit(), `stderr: ${out.stderr}; stdout: ${out.stdout.slice(-800)}`).toBe(0);
      expect(out.stderr).toMatch(/fixture: SIGINT as the first signal registration is made/);
      const events = out.stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => (JSON.parse(l) as { msg: string }).msg);
      expect(events).toEqual(['yellod ready', 'stopping', 'stopped']);
      await expect(fs.access(socket)).rejects.toThrow(/ENOENT/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
