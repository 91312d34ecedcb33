// README.md's "Quickstart with the CLI", followed literally: its shell block is extracted and run
// by bash against a fresh daemon in a temp dir (the README's scratch dir `Q` pointed there).
// Bob's `chats follow` runs in the background and is stopped once it printed "hello, bob",
// which Alice sent before he started following.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { cliEnv } from '../helpers/cli-runner.js';
import { makeTempDir, repoRoot } from '../helpers/daemon-process.js';

vi.setConfig({ testTimeout: 180_000 });

const SCRATCH = '/tmp/yello-quickstart';

/** The lines of the first ```sh block after the Quickstart heading. */
function quickstartLines(): string[] {
  const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Quickstart with the CLI'));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error('no sh block in the Quickstart');
  return block[1]!.split('\n').filter((l) => l.trim() !== '');
}

/**
 * The block as a bash script: comments dropped, the scratch dir moved, the daemon's pid kept
 * for cleanup, and the (endless) follow run in the background until it printed the message.
 */
function script(lines: string[], scratch: string): string {
  const out = ['set -euo pipefail', 'DAEMON=', 'trap \'[ -n "$DAEMON" ] && kill $DAEMON; wait\' EXIT'];
  for (const raw of lines) {
    const line = raw.replace(/\s+#\s.*$/, '').replaceAll(SCRATCH, scratch);
    if (/ daemon\b.*&$/.test(line)) out.push(line, 'DAEMON=$!');
    else if (/ chats follow /.test(line)) {
      out.push(
        `( ${line} ) > "${scratch}/follow.out" 2> "${scratch}/follow.err" & FOLLOW=$!`,
        `for i in $(seq 1 300); do grep -q "hello, bob" "${scratch}/follow.out" && break; sleep 0.2; done`,
        'kill -INT $FOLLOW; wait $FOLLOW || true',
      );
    } else out.push(line);
  }
  return out.join('\n') + '\n';
}

let dir = '';
afterAll(async () => {
  if (dir) await fs.promises.rm(dir, { recursive: true, force: true });
});

describe('README Quickstart', () => {
  it('followed literally, Bob is shown "hello, bob", which Alice sent before he started following', async () => {
    const lines = quickstartLines();
    expect(lines.join('\n')).toContain(SCRATCH);
    expect(lines.some((l) => / chats follow /.test(l))).toBe(true);
    dir = await makeTempDir('yl-qs-');
    const scratch = path.join(dir, 'q');
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn('bash', ['-c', script(lines, scratch)], { cwd: repoRoot, env: cliEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
      child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
      const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
    const follow = fs.existsSync(path.join(scratch, 'follow.out')) ? fs.readFileSync(path.join(scratch, 'follow.out'), 'utf8') : '';
    const followErr = fs.existsSync(path.join(scratch, 'follow.err')) ? fs.readFileSync(path.join(scratch, 'follow.err'), 'utf8') : '';
    const context = `exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}\nfollow: ${follow}\nfollow stderr: ${followErr}`;
    expect(follow, context).toMatch(/alice → bob\s+#\d+\s+hello, bob/);
    expect(run.code, context).toBe(0);
    // `demo` and the closing `verify` both report no problems.
    expect(run.stdout, context).toMatch(/^verified: .*\b0 problems$/m);
    expect(run.stdout.trimEnd().split('\n').at(-1), context).toMatch(/^\d+ records, .*\b0 problems$/);
    // Token files went to the scratch dir, not the repository.
    expect(fs.statSync(path.join(scratch, 'alice.token')).mode & 0o777).toBe(0o600);
    expect(fs.existsSync(path.join(repoRoot, 'alice.token'))).toBe(false);
  });
});
