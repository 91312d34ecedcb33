// `yello setup` against the real agent programs (issue 50, point 3): Claude Code 2.1.328,
// Codex 0.169.0 and Gemini CLI 0.61.0, installed from this directory's lockfile by
// `npm run test:agent-clis` (not part of npm test). Each runs with a temp HOME against a real
// daemon: after setup, `claude mcp list` shows the server connected, `codex mcp list` and
// `gemini mcp list` list it; Claude Code and Codex run the yello hooks and accept their output
// (no model is reachable here, but both run SessionStart before they ask one); after
// `--remove` the files are as before and the CLIs no longer list it.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, describeRun } from '../helpers/cli-runner.js';
import { StreamWriter } from '../helpers/reading-fixtures.js';
import { useCli, type CliPair } from '../helpers/use-daemon.js';
import { uniq } from '../helpers/wire-fixtures.js';

const BIN = path.join(import.meta.dirname, 'node_modules', '.bin');

/** The files under `root` (a comparable listing), leaving out what the agent programs keep for themselves. */
function files(root: string, only: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const rel of only) {
    const p = path.join(root, rel);
    if (existsSync(p)) out[rel] = readFileSync(p, 'utf8');
  }
  return out;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('yello setup with the real agent CLIs', () => {
  // A daemon process of its own: the agent programs run here with spawnSync, and the yello mcp and
  // yello hook processes they start must reach a daemon that the blocked worker cannot run.
  const { cli, pair } = useCli({ process: true });
  let p: CliPair;
  let home: string;
  let work: string;

  beforeAll(async () => {
    for (const b of ['claude', 'codex', 'gemini'])
      if (!existsSync(path.join(BIN, b)))
        throw new Error(`${b} is not installed: run npm run test:agent-clis (it installs test/agent-clis from its lockfile)`);
    p = await pair();
    // Something unread for bob, so that his hooks have context to give.
    const w = await StreamWriter.claim(p.a.client, p.streamA, true);
    await w.append([{ type: 'chat.message', messageId: uniq('m'), content: 'hello bob, from the agent-clis suite' }]);
  });

  function fresh(): void {
    const root = mkdtempSync(path.join(tmpdir(), 'yl-agent-clis-'));
    home = path.join(root, 'home');
    work = path.join(root, 'work');
    mkdirSync(home);
    mkdirSync(work);
  }

  const env = () => cliEnv({ HOME: home, CODEX_HOME: undefined, CLAUDE_CONFIG_DIR: undefined, XDG_STATE_HOME: path.join(home, '.state') });

  /** An agent program with the temp HOME, in the work dir, to completion. */
  function agentCli(bin: string, args: string[], timeoutMs = 120_000): Run {
    const r = spawnSync(path.join(BIN, bin), args, { cwd: work, env: env(), encoding: 'utf8', timeout: timeoutMs, input: '' });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  /** An agent program that cannot finish here (no model): its output until `until` shows, then it is killed. */
  function agentCliUntil(bin: string, args: string[], until: RegExp, timeoutMs = 120_000): Promise<string> {
    return new Promise((resolve) => {
      const child = spawn(path.join(BIN, bin), args, { cwd: work, env: env(), stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      const done = () => {
        clearTimeout(timer);
        child.kill('SIGKILL');
        resolve(out);
      };
      const timer = setTimeout(done, timeoutMs);
      const take = (c: Buffer) => {
        out += c.toString('utf8');
        if (until.test(out)) done();
      };
      child.stdout.on('data', take);
      child.stderr.on('data', take);
      child.on('close', done);
      child.stdin.end();
    });
  }

  async function setup(args: string[]): Promise<void> {
    // A real process, as a person runs it, in the project directory (the default of --project-dir).
    const r = await cli().run(['--token-file', p.bob.tokenFile, 'setup', ...args, '--agent', p.b.agent.username], {
      cwd: work,
      process: true,
      env: { HOME: home, CODEX_HOME: undefined, CLAUDE_CONFIG_DIR: undefined, XDG_STATE_HOME: path.join(home, '.state') },
    });
    expect(r.code, describeRun(r)).toBe(0);
  }

  const name = () => `yello-${p.b.agent.username}`;

  it('Claude Code: claude mcp list shows the server connected, claude runs the hooks and takes their output; --remove restores', async () => {
    fresh();
    const CONFIG = ['.claude.json', '.claude/settings.json'];
    agentCli('claude', ['mcp', 'list']); // Claude Code makes its own ~/.claude.json first, as on a real machine
    const before = files(home, CONFIG);
    await setup(['claude-code', '--hooks']);
    const listed = agentCli('claude', ['mcp', 'list']);
    expect(listed.stdout, listed.stderr).toMatch(new RegExp(`^${name()}: .*bin/yello mcp - ✔ Connected$`, 'm'));
    const log = path.join(home, 'claude-debug.log');
    agentCli('claude', ['-p', 'hi', '--debug-file', log]); // not logged in: it stops after the SessionStart hooks
    const debug = readFileSync(log, 'utf8');
    expect(debug).toMatch(
      /Hook SessionStart \(\S+ \S+bin\/yello hook claude-code SessionStart .*\) provided additionalContext \(\d+ chars\)/,
    );
    expect(debug).toContain('Successfully parsed and validated hook JSON output');
    expect(debug).not.toMatch(/yello hook[^\n]*(failed|error|invalid)/i);
    await setup(['claude-code', '--remove']);
    expect(agentCli('claude', ['mcp', 'list']).stdout).not.toContain(name());
    // Byte for byte: setup then --remove over the files Claude Code itself wrote.
    const settled = files(home, CONFIG);
    await setup(['claude-code', '--hooks']);
    await setup(['claude-code', '--remove']);
    expect(files(home, CONFIG)).toEqual(settled);
    expect(Object.keys(before)).toEqual(['.claude.json']);
  });

  it('Claude Code, project scope: claude mcp list lists the .mcp.json server (pending the approval Claude Code asks for)', async () => {
    fresh();
    await setup(['claude-code', '--scope', 'project']);
    expect(agentCli('claude', ['mcp', 'list']).stdout).toMatch(new RegExp(`^${name()}: .*Pending approval`, 'm'));
    await setup(['claude-code', '--scope', 'project', '--remove']);
    expect(readdirSync(work)).toEqual([]);
  });

  it('Codex: codex mcp list lists the server, codex runs the hooks and completes them; --remove restores', async () => {
    fresh();
    const CONFIG = ['.codex/config.toml', '.codex/hooks.json'];
    mkdirSync(path.join(home, '.codex'));
    writeFileSync(path.join(home, '.codex/config.toml'), '# kept as it is\nmodel_reasoning_effort = "low"\n');
    const before = files(home, CONFIG);
    await setup(['codex', '--hooks']);
    const listed = JSON.parse(agentCli('codex', ['mcp', 'list', '--json']).stdout) as Array<{
      name: string;
      enabled: boolean;
      transport: { command: string; args: string[]; env: Record<string, string> };
    }>;
    const entry = listed.find((s) => s.name === name());
    expect(entry?.enabled).toBe(true);
    expect(entry?.transport.args.slice(1)).toEqual(['mcp']);
    expect(entry?.transport.env.YELLO_TOKEN_FILE).toBe(p.bob.tokenFile);
    // Hooks need the person's trust in Codex (/hooks); this one run bypasses it, as its flag says.
    const out = await agentCliUntil(
      'codex',
      ['exec', '--skip-git-repo-check', '--dangerously-bypass-hook-trust', 'hi'],
      /hook: UserPromptSubmit (Completed|Failed|Blocked)/,
    );
    expect(out).toContain('hook: SessionStart Completed');
    expect(out).toContain('hook: UserPromptSubmit Completed');
    expect(out).not.toMatch(/hook: \w+ Failed|invalid .*hook JSON output/);
    await setup(['codex', '--remove']);
    expect(files(home, CONFIG)).toEqual(before);
    expect(agentCli('codex', ['mcp', 'list']).stdout).not.toContain(name());
  });

  it('Gemini CLI: gemini mcp list lists the server (connected once the folder is trusted); --remove restores', async () => {
    fresh();
    const CONFIG = ['.gemini/settings.json'];
    mkdirSync(path.join(home, '.gemini'));
    writeFileSync(path.join(home, '.gemini/settings.json'), '{\n  // kept as it is\n  "ui": { "theme": "Default" }\n}\n');
    const before = files(home, CONFIG);
    await setup(['gemini']);
    const all = (r: Run) => r.stdout + r.stderr; // gemini mcp list writes its list on stderr
    expect(all(agentCli('gemini', ['mcp', 'list']))).toMatch(new RegExp(`${name()}: .*bin/yello mcp \\(stdio\\)`));
    // The person's trust of the folder (Gemini CLI connects no MCP server in an untrusted one).
    writeFileSync(path.join(home, '.gemini/trustedFolders.json'), JSON.stringify({ [work]: 'TRUST_FOLDER' }));
    expect(all(agentCli('gemini', ['mcp', 'list']))).toMatch(new RegExp(`✓ ${name()}: .* - Connected`));
    await setup(['gemini', '--remove']);
    expect(files(home, CONFIG)).toEqual(before);
    expect(all(agentCli('gemini', ['mcp', 'list']))).not.toContain(name());
  });
});
