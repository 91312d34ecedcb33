// `npm start` (README "The two commands"): with a current dist/ it starts the daemon without
// building, and SIGTERM to the npm process stops the daemon too — nothing is left running.
// Ctrl-C in the terminal sends SIGINT to npm and the daemon at once, and npm forwards its own to
// the daemon: a second SIGINT arrives mid-shutdown (issue 52 finding 14). It used to end the
// daemon by the signal, with no "stopped" line, and once left its socket file behind.

import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { cliEnv } from '../helpers/cli-runner.js';
import { makeTempDir, repoRoot } from '../helpers/daemon-process.js';
import fs from 'node:fs/promises';
import { watch, type Watched } from '../helpers/spawn-async.js';
import { waitFor } from '../helpers/wait.js';

vi.setConfig({ testTimeout: 90_000 });

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

let dir = '';
let daemonPid = 0;

afterAll(async () => {
  // Only if the test failed: never leave the daemon it started behind.
  if (daemonPid && alive(daemonPid)) process.kill(daemonPid, 'SIGKILL');
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** `npm start` on a temporary socket and data dir, its output collected, until `yellod ready`. */
async function npmStart(options: { detached?: boolean } = {}) {
  dir = await makeTempDir('yl-npm-');
  const socket = path.join(dir, 'y.sock');
  const npm = spawn('npm', ['start', '--', '--socket', socket, '--data-dir', path.join(dir, 'data')], {
    cwd: repoRoot,
    env: cliEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached === true,
  });
  const { out, exitWithin } = watch(npm);
  const ready = await waitFor(
    () =>
      out.stdout
        .split('\n')
        .map((l) => {
          try {
            return JSON.parse(l) as { msg?: string; pid?: number };
          } catch {
            return null;
          }
        })
        .find((l) => l?.msg === 'yellod ready'),
    `yellod ready (stderr: ${out.stderr})`,
    60_000,
    50,
  );
  daemonPid = ready.pid!;
  return { npm, out, exitWithin, socket };
}

/** npm's exit, or a failure after 30 s that shows what the daemon logged (where its stop stood). */
async function ended(exitWithin: Watched['exitWithin'], out: Watched['out']): Promise<void> {
  if ((await exitWithin(30_000)) === 'still running')
    throw new Error(`npm start did not end within 30 s; stdout (tail): ${out.stdout.slice(-2000)}\nstderr: ${out.stderr.slice(-1000)}`);
}

describe('npm start', () => {
  it('Ctrl-C (SIGINT to npm and the daemon, and npm forwarding its own) stops the daemon cleanly: "stopped", no socket left', async () => {
    // Its own process group, as a terminal's foreground job is: -pid signals the whole group.
    const { npm, out, exitWithin, socket } = await npmStart({ detached: true });
    await fs.access(socket);
    process.kill(-npm.pid!, 'SIGINT');
    await ended(exitWithin, out);
    await waitFor(() => !alive(daemonPid), `daemon ${daemonPid} to exit after Ctrl-C`, 10_000, 50);
    expect(out.stdout).toMatch(/"msg":"stopped"/);
    await expect(fs.access(socket)).rejects.toThrow(/ENOENT/);
    expect(out.stderr).not.toMatch(/shutdown failed/);
  });

  it('runs the daemon from a current dist/ without building, and SIGTERM to npm leaves no daemon behind', async () => {
    const { npm, out, exitWithin } = await npmStart();
    expect(out.stderr).not.toMatch(/building/);
    npm.kill('SIGTERM');
    await ended(exitWithin, out);
    await waitFor(() => !alive(daemonPid), `daemon ${daemonPid} to exit after SIGTERM to npm`, 10_000, 50);
    expect(out.stdout).toMatch(/"msg":"stopped"/);
  });
});
