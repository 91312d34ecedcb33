// spawnSync's result without blocking the worker: a test whose daemon runs in the worker
// (daemon-process.ts) cannot wait synchronously for a child that talks to that daemon, since
// the daemon would never get to answer.

import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';

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

/** A running child's output so far, and its exit. */
export interface Watched {
  out: { stdout: string; stderr: string };
  /** The exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  /** The exit code, or 'still running' when the child has not exited within `ms`. */
  exitWithin(ms: number): Promise<number | null | 'still running'>;
}

/** Collects a spawned child's stdout and stderr (both piped) as text, and watches for its exit. */
export function watch(child: ChildProcessByStdio<null, Readable, Readable>): Watched {
  const out = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out.stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (out.stderr += s));
  const exited = new Promise<number | null>((r) =>
    child.on('close', (code) => {
      r(code);
    }),
  );
  const exitWithin = async (ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'still running'>((r) => {
      timer = setTimeout(() => {
        r('still running');
      }, ms);
    });
    try {
      return await Promise.race([exited, late]);
    } finally {
      clearTimeout(timer);
    }
  };
  return { out, exited, exitWithin };
}
