// The built binary (bin/yello → dist/cli/main.js) end to end. The other CLI tests run the same
// program inside the test worker (test/helpers/cli-runner.ts); what only a process shows is
// spawned: here, the exit code main.ts gives each way a run ends, and that the binary prints
// exactly what the in-process run prints. Elsewhere: a closed stdout (ergonomics.test.ts), stdin
// for `send -` (chats.test.ts), SIGINT to `chats follow` (follow.test.ts), `yello daemon`'s exit
// codes and its fast start path (admin.test.ts, scripting.test.ts), the installed package
// (test/package/pack-install.test.ts).

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { expectExit, oneLineErrorProblems, runCli, type CliResult } from '../helpers/cli-runner.js';
import { repoRoot } from '../helpers/daemon-process.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const { daemon, cli, pair } = useCli();

/** The parts of a run both ways must agree on. */
const seen = (r: CliResult) => ({ code: r.code, signal: r.signal, stdout: r.stdout, stderr: r.stderr });

describe('the binary', () => {
  it("--version prints package.json's version, and --help the usage, exit 0, as the in-process run does", async () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    const [v, help, helpHere] = await Promise.all([
      runCli(['--version'], { process: true }),
      runCli(['--help'], { process: true }),
      runCli(['--help']),
    ]);
    expect(seen(v)).toEqual({ code: 0, signal: null, stdout: `${version}\n`, stderr: '' });
    expect(expectExit(help, 0).stdout).toMatch(/^yello <command> \[options\]\n/);
    expect(seen(help)).toEqual(seen(helpHere));
  });

  it('a usage error exits 2 and a failure 1, with the same lines as in-process', async () => {
    const usage = await runCli(['frobnicate'], { process: true });
    expectExit(usage, 2);
    expect(usage.stderr).toBe('yello: Unknown argument: frobnicate\n(see yello --help)\n');
    expect(seen(usage)).toEqual(seen(await runCli(['frobnicate'])));

    const missing = await cli().run(['chats', 'show', 'chat_nope'], { process: true });
    expectExit(missing, 1);
    expect(oneLineErrorProblems(missing), missing.stderr).toEqual([]);
    expect(seen(missing)).toEqual(seen(await cli().run(['chats', 'show', 'chat_nope'])));
  });

  it('problems found (verify of a changed export) exit 1 with the report on stdout', async () => {
    const p = await pair();
    expectExit(await p.alice.run(['send', p.chatId, 'hello bob']), 0);
    const exported = expectExit(await cli().run(['chats', 'export', p.chatId]), 0).stdout;
    const jwks = path.join(daemon().dir, 'binary-jwks.json');
    fs.writeFileSync(jwks, expectExit(await cli().run(['keys', 'list', '--json']), 0).stdout);
    const changed = path.join(daemon().dir, 'binary-changed.jsonl');
    expect(exported).toContain('hello bob');
    fs.writeFileSync(changed, exported.replace('hello bob', 'hello rob'));
    const r = await cli().run(['verify', changed, '--jwks', jwks], { process: true });
    expectExit(r, 1);
    expect(r.stdout).toMatch(/^line \d+: .*CONTENT_HASH/m);
    expect(r.stdout).toMatch(/\b2 problems\n$/);
    expect(seen(r)).toEqual(seen(await cli().run(['verify', changed, '--jwks', jwks])));
  });
});
