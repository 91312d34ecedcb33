// spawnSync's result without blocking the worker: a test whose daemon runs in the worker
// (daemon-process.ts) cannot wait synchronously for a child that talks to that daemon, since
// the daemon would never get to answer.

import { spawn } from 'node:child_process';

/** What a finished child left behind (the fields of spawnSync's result that tests read). */
export interface SpawnResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `command` to its end; `timeout` SIGKILLs it (status null, as spawnSync's timeout does). */
export function spawnAsync(
  command: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string; timeout?: number } = {},
): Promise<SpawnResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env ?? process.env, cwd: options.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
    const timer = options.timeout === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), options.timeout);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr });
    });
  });
}
