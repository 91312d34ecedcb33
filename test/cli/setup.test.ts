// `yello setup claude-code|codex|gemini --agent <username>` (issue 50, point 3) against temp
// HOME and project directories: what it writes where, that every other entry (and every other
// byte, comments included) stays, that it is idempotent, that --remove puts the files back
// byte for byte, that --dry-run writes nothing, and that no token ever lands in a file.
// test/agent-clis/ checks the same files with the real claude, codex and gemini binaries.

import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { describeRun, type CliResult } from '../helpers/cli-runner.js';
import { useCli, type CliPair } from '../helpers/use-daemon.js';

/** Every file under `root` with its text (a directory listing as one comparable value). */
function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else out[path.relative(root, p)] = readFileSync(p, 'utf8');
    }
  };
  if (existsSync(root)) walk(root);
  return out;
}

function put(file: string, text: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
}

const json = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, unknown>>;

// What a user already has: other servers, other hooks, comments, tabs, no final newline.
const CLAUDE_JSON = '{\n  "numStartups": 3,\n  "mcpServers": {\n    "other": { "command": "other-server", "args": [] }\n  }\n}\n';
const CLAUDE_SETTINGS =
  '{\n\t"permissions": { "allow": ["Bash(npm test)"] },\n\t"hooks": {\n\t\t"Stop": [ { "hooks": [ { "type": "command", "command": "notify-send done" } ] } ]\n\t}\n}';
const CODEX_TOML = '# my Codex config\nmodel = "o3" # the model\n\n[mcp_servers.other]\ncommand = "other-server"\nargs = ["--x"]\n';
const CODEX_HOOKS =
  '{\n  "hooks": {\n    "SessionStart": [ { "matcher": "startup", "hooks": [ { "type": "command", "command": "echo hi" } ] } ]\n  }\n}\n';
const GEMINI_SETTINGS =
  '{\n  // my Gemini settings\n  "theme": "Default",\n  "mcpServers": { "other": { "command": "other-server" } }\n}\n';

describe('yello setup', () => {
  const { cli, pair, daemon } = useCli();

  function dirs(): { home: string; project: string } {
    const root = mkdtempSync(path.join(tmpdir(), 'yl-setup-'));
    const home = path.join(root, 'home');
    const project = path.join(root, 'project');
    mkdirSync(home);
    mkdirSync(project);
    return { home, project };
  }

  function setup(p: CliPair, home: string, project: string, args: string[], token = p.alice.tokenFile): Promise<CliResult> {
    // --project-dir: an in-process run has the worker's cwd (the default, process.cwd(), is the spawned CLI's).
    return cli().run(['--token-file', token, 'setup', ...args, '--project-dir', project], {
      env: { HOME: home, CODEX_HOME: undefined, CLAUDE_CONFIG_DIR: undefined, XDG_STATE_HOME: path.join(home, '.state') },
    });
  }

  /** The tree without the CLI's own state (the setup record and hook state live there). */
  const config = (root: string) => Object.fromEntries(Object.entries(tree(root)).filter(([k]) => !k.startsWith('.state')));

  function noToken(p: CliPair, ...roots: string[]): void {
    for (const root of roots) for (const [file, text] of Object.entries(tree(root))) expect(text.includes(p.a.token), file).toBe(false);
  }

  const cases = [
    {
      target: 'claude-code',
      flags: ['--hooks'],
      files: { '.claude.json': CLAUDE_JSON, '.claude/settings.json': CLAUDE_SETTINGS },
      check(home: string, name: string, p: CliPair) {
        const global = json(path.join(home, '.claude.json'));
        expect(global.numStartups).toBe(3);
        expect(Object.keys(global.mcpServers!)).toEqual(['other', name]);
        expect(global.mcpServers![name]).toMatchObject({
          args: [expect.stringMatching(/bin\/yello$/), 'mcp'],
          env: { YELLO_TOKEN_FILE: p.alice.tokenFile },
        });
        const settings = json(path.join(home, '.claude/settings.json'));
        expect(settings.permissions).toEqual({ allow: ['Bash(npm test)'] });
        const stop = settings.hooks!.Stop as Array<{ hooks: Array<{ command: string }> }>;
        expect(stop.map((g) => g.hooks[0]!.command)).toEqual([
          'notify-send done',
          expect.stringMatching(/hook claude-code Stop .*# yello setup: /),
        ]);
        expect(readFileSync(path.join(home, '.claude/settings.json'), 'utf8')).toMatch(/^\t"permissions"/m); // its tabs kept
      },
    },
    {
      target: 'codex',
      flags: ['--hooks'],
      files: { '.codex/config.toml': CODEX_TOML, '.codex/hooks.json': CODEX_HOOKS },
      check(home: string, name: string, p: CliPair) {
        const text = readFileSync(path.join(home, '.codex/config.toml'), 'utf8');
        expect(text.startsWith(CODEX_TOML)).toBe(true); // every byte before the block as it was
        const doc = parseToml(text) as { model: string; mcp_servers: Record<string, { args: string[]; env: Record<string, string> }> };
        expect(doc.model).toBe('o3');
        expect(Object.keys(doc.mcp_servers)).toEqual(['other', name]);
        expect(doc.mcp_servers[name]!.env.YELLO_TOKEN_FILE).toBe(p.alice.tokenFile);
        const hooks = json(path.join(home, '.codex/hooks.json')).hooks!;
        expect(Object.keys(hooks)).toEqual(['SessionStart', 'UserPromptSubmit', 'Stop']);
        expect((hooks.SessionStart as unknown[]).length).toBe(2);
      },
    },
    {
      target: 'gemini',
      flags: [],
      files: { '.gemini/settings.json': GEMINI_SETTINGS },
      check(home: string, name: string) {
        const text = readFileSync(path.join(home, '.gemini/settings.json'), 'utf8');
        expect(text).toContain('// my Gemini settings');
        expect(text).toContain(`"${name}"`);
      },
    },
  ] as const;

  for (const c of cases)
    it(`${c.target}: keeps every other entry, is idempotent, and --remove puts every byte back`, async () => {
      const p = await pair();
      const { home, project } = dirs();
      for (const [f, text] of Object.entries(c.files)) put(path.join(home, f), text);
      const before = config(home);
      const name = `yello-${p.a.agent.username}`;
      const first = await setup(p, home, project, [c.target, '--agent', p.a.agent.username, ...c.flags]);
      expect(first.code, describeRun(first)).toBe(0);
      for (const f of Object.keys(c.files)) expect(first.stdout).toContain(`${path.join(home, f)}: edited`);
      c.check(home, name, p);
      noToken(p, home, project);
      const after = config(home);
      const again = await setup(p, home, project, [c.target, '--agent', p.a.agent.username, ...c.flags]);
      expect(again.stdout).toContain('set up already: nothing to change');
      expect(config(home)).toEqual(after);
      const removed = await setup(p, home, project, [c.target, '--agent', p.a.agent.username, '--remove']);
      expect(removed.code, describeRun(removed)).toBe(0);
      expect(config(home)).toEqual(before);
      // Without the record (a lost state dir), removal takes out exactly the entries: the same bytes again.
      expect((await setup(p, home, project, [c.target, '--agent', p.a.agent.username, ...c.flags])).code).toBe(0);
      rmSync(path.join(home, '.state'), { recursive: true });
      expect((await setup(p, home, project, [c.target, '--agent', p.a.agent.username, '--remove'])).code).toBe(0);
      expect(config(home)).toEqual(before);
    });

  it('creates the files it needs and --remove takes them (and the directories it made) away; --dry-run writes nothing', async () => {
    const p = await pair();
    const { home, project } = dirs();
    const args = ['claude-code', '--agent', p.a.agent.username, '--hooks', '--scope', 'project'];
    const dry = await setup(p, home, project, [...args, '--dry-run']);
    expect(dry.stdout).toContain(`${path.join(project, '.mcp.json')}: would be created`);
    expect(dry.stdout).toContain('(dry run: nothing was written)');
    expect([tree(project), config(home)]).toEqual([{}, {}]);
    const r = await setup(p, home, project, args);
    expect(r.code, describeRun(r)).toBe(0);
    expect(Object.keys(tree(project)).sort()).toEqual(['.claude/settings.json', '.mcp.json']);
    expect(statSync(path.join(project, '.mcp.json')).mode & 0o777).toBe(0o644);
    expect(r.stdout).toContain('approve');
    noToken(p, home, project);
    await setup(p, home, project, [...args.slice(0, 3), '--scope', 'project', '--remove']);
    expect(existsSync(path.join(project, '.claude'))).toBe(false);
    expect(tree(project)).toEqual({});
  });

  it('--remove after another program changed the file takes out only what setup added', async () => {
    const p = await pair();
    const { home, project } = dirs();
    put(path.join(home, '.claude.json'), CLAUDE_JSON);
    expect((await setup(p, home, project, ['claude-code', '--agent', p.a.agent.username])).code).toBe(0);
    expect(Object.keys(json(path.join(home, '.claude.json')).mcpServers!)).toEqual(['other', `yello-${p.a.agent.username}`]);
    const edited = readFileSync(path.join(home, '.claude.json'), 'utf8').replace('"numStartups": 3', '"numStartups": 4');
    writeFileSync(path.join(home, '.claude.json'), edited);
    await setup(p, home, project, ['claude-code', '--agent', p.a.agent.username, '--remove']);
    expect(readFileSync(path.join(home, '.claude.json'), 'utf8')).toBe(CLAUDE_JSON.replace('"numStartups": 3', '"numStartups": 4'));
  });

  it('--channel: the Claude Code entry runs yello mcp --channel and the launch line is printed', async () => {
    const p = await pair();
    const { home, project } = dirs();
    const r = await setup(p, home, project, ['claude-code', '--agent', p.a.agent.username, '--channel']);
    const name = `yello-${p.a.agent.username}`;
    expect(json(path.join(home, '.claude.json')).mcpServers![name]).toMatchObject({ args: [expect.any(String), 'mcp', '--channel'] });
    expect(r.stdout).toContain(`claude --dangerously-load-development-channels server:${name}`);
  });

  it('refuses what it must not write, changing nothing', async () => {
    const p = await pair();
    const { home, project } = dirs();
    put(path.join(home, '.codex/config.toml'), `[mcp_servers.yello-${p.a.agent.username}]\ncommand = "mine"\n`);
    const loose = path.join(home, 'loose.token');
    writeFileSync(loose, p.a.token + '\n');
    chmodSync(loose, 0o644);
    const before = config(home);
    const refused: Array<[string[], string, number, RegExp]> = [
      [['codex', '--agent', p.a.agent.username], p.alice.tokenFile, 2, /already defines \[mcp_servers\.yello-/],
      [['claude-code', '--agent', p.a.agent.username], loose, 2, /chmod 600/],
      [['claude-code', '--agent', p.b.agent.username], p.alice.tokenFile, 2, new RegExp(`is the token of ${p.a.agent.username}`)],
      [['codex', '--agent', p.a.agent.username, '--channel'], p.alice.tokenFile, 2, /--channel is for Claude Code only/],
      [['gemini', '--agent', p.a.agent.username, '--hooks'], p.alice.tokenFile, 2, /no hooks for Gemini CLI/],
    ];
    for (const [args, token, code, message] of refused) {
      const r = await setup(p, home, project, args, token);
      expect(r.code, describeRun(r)).toBe(code);
      expect(r.stderr).toMatch(message);
    }
    const noFile = await cli().run(['setup', 'gemini', '--agent', p.a.agent.username], { env: { HOME: home, YELLO_TOKEN: p.a.token } });
    expect([noFile.code, noFile.stderr]).toEqual([2, expect.stringContaining('never the token')]);
    const down = await cli().run(['--token-file', p.alice.tokenFile, 'setup', 'gemini', '--agent', p.a.agent.username], {
      env: { HOME: home, YELLO_SOCKET: path.join(home, 'none.sock') },
    });
    expect([down.code, down.stderr]).toEqual([1, expect.stringContaining('--no-check')]);
    expect(config(home)).toEqual(before);
    const unchecked = await cli().run(['--token-file', p.alice.tokenFile, 'setup', 'gemini', '--agent', 'someone', '--no-check'], {
      env: { HOME: home, YELLO_SOCKET: path.join(home, 'none.sock'), XDG_STATE_HOME: path.join(home, '.state') },
    });
    expect(unchecked.code, describeRun(unchecked)).toBe(0);
    expect(Object.keys(json(path.join(home, '.gemini/settings.json')).mcpServers!)).toEqual(['yello-someone']);
    expect(daemon().socketPath).not.toBe(path.join(home, 'none.sock'));
  });
});
