// `yello mcp` stdin framing (docs/mcp.md): one stdin line over 10 MiB is answered with a
// JSON-RPC error (-32600, id null) and discarded; the server stays up and answers the next
// request. Before, the SDK's read buffer threw and the server exited 0 without a word.

import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/daemon-process.js';
import { yelloBin, writeTokenFile } from '../helpers/cli-runner.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { ok } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';

const { daemon, admin } = useDaemon();

describe('yello mcp stdin', () => {
  it('answers a line over 10 MiB with -32600 and keeps serving', async () => {
    const created = ok(await admin().call('agents.create', { username: 'mcpbig', name: 'Big' }));
    const tokenFile = writeTokenFile(daemon().dir, 'mcpbig.token', created.token);
    const child = spawn(process.execPath, [yelloBin, 'mcp'], {
      cwd: repoRoot,
      env: { ...process.env, YELLO_SOCKET: daemon().socketPath, YELLO_TOKEN_FILE: tokenFile },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let exited: number | null | undefined;
    child.on('exit', (code) => (exited = code));
    // A server that died mid-write (the bug) must fail the assertions, not crash the run with EPIPE.
    child.stdin.on('error', () => undefined);
    const lines: string[] = [];
    let partial = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      partial += chunk;
      let nl: number;
      while ((nl = partial.indexOf('\n')) >= 0) {
        lines.push(partial.slice(0, nl));
        partial = partial.slice(nl + 1);
      }
    });
    try {
      const big = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + 'a'.repeat(11 * 1024 * 1024) + '"}}\n';
      child.stdin.write(big);
      const init = {
        jsonrpc: '2.0',
        id: 2,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      };
      child.stdin.write(JSON.stringify(init) + '\n');
      await waitFor(() => lines.some((l) => l.includes('"id":2')), 'the initialize answer', 30_000);
      const parsed = lines.map((l) => JSON.parse(l) as { id: unknown; error?: { code: number; message: string }; result?: unknown });
      expect(parsed[0]).toMatchObject({ id: null, error: { code: -32600 } });
      expect(parsed[0]?.error?.message).toMatch(/longer than/);
      expect(parsed.find((p) => p.id === 2)?.result).toBeDefined();
      expect(exited).toBeUndefined();
    } finally {
      child.kill('SIGTERM');
    }
  }, 60_000);
});
