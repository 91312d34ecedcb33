// Setup that helps (issue 22, finding 6): with a token the daemon refuses (garbage, or an
// agent's rotated one) or the admin token, `yello mcp` still starts, so initialize works and
// every tool answers an isError result saying what is wrong and what to do (before, it exited
// 2 before initialize and the model saw nothing). `--print-config` checks the token with the
// daemon, refuses the admin token and garbage, and names the server after the agent
// (`yello-alice`). The README's `--token-out ~/.config/yello/alice.token` works on a fresh
// machine: the missing directories are created with mode 0700.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { useMcpWorld, McpAgent, text, tokenFile } from './mcp-fixtures.js';
import { RawMcp, rawText } from './raw-stdio.js';

const world = useMcpWorld();

/** Arguments that pass a tool's input schema, from its JSON schema's required properties. */
function sampleArgs(schema: { properties?: Record<string, { type?: string }>; required?: string[] }): Record<string, unknown> {
  const samples: Record<string, unknown> = {
    chatId: 'chat_x',
    peer: 'someone',
    text: 'hello',
    batchId: 'b_x',
    operationId: 'op_x',
  };
  return Object.fromEntries(
    (schema.required ?? []).map((name) => {
      const type = schema.properties?.[name]?.type;
      const value = name in samples ? samples[name] : type === 'number' || type === 'integer' ? 1 : type === 'boolean' ? false : 'x';
      return [name, value];
    }),
  );
}

/** Calls every tool the server lists; each must answer an isError result of `type` with advice. */
async function everyToolRefuses(agent: McpAgent, type: string, advice: RegExp): Promise<number> {
  const { tools } = await agent.client.listTools();
  expect(tools.length).toBeGreaterThanOrEqual(9);
  for (const tool of tools) {
    const r = await agent.call(tool.name, sampleArgs(tool.inputSchema));
    expect(r.isError, `${tool.name}: ${text(r)}`).toBe(true);
    expect((r._meta?.['yello/error'] as { type?: string } | undefined)?.type, `${tool.name}: ${text(r)}`).toBe(type);
    expect(text(r), tool.name).toMatch(/What to do: /);
    expect(text(r), tool.name).toMatch(advice);
  }
  return tools.length;
}

describe('yello mcp with a token that cannot work (SDK client)', () => {
  it('a garbage token: initialize works and every tool says the token is refused and how to fix it', async () => {
    const bad = tokenFile(world().dir, 'garbage', 'not-a-token-at-all');
    const agent = await world().serve(bad, [], { stdio: true }); // what yello mcp prints on stderr
    expect(agent.client.getServerVersion()?.name).toBe('yello');
    await everyToolRefuses(agent, 'BAD_TOKEN', /--token-out FILE.*YELLO_TOKEN_FILE/s);
    expect(agent.stderr).toMatch(/BAD_TOKEN/);
  });

  it("an agent's rotated (unknown) token: the same", async () => {
    const chat = await world().chat();
    await world().admin.rpc.agents.rotateToken({ agentId: chat.alice.id });
    const agent = await world().serve(chat.aliceToken);
    await everyToolRefuses(agent, 'BAD_TOKEN', /does not accept the token/);
  });

  it('the admin token: every tool refuses it (none acts as admin), with what to do', async () => {
    const agent = await world().serve(path.join(world().daemon.dataDir, 'admin.token'));
    await everyToolRefuses(agent, 'BAD_TOKEN', /admin token/);
  });
});

describe('yello mcp with a refused token (raw stdio client)', () => {
  it('answers initialize, then a tool call with an isError result that says what to do', async () => {
    const raw = RawMcp.start(world().daemon.socketPath, tokenFile(world().dir, 'garbage2', 'yt_nope'));
    try {
      const init = await raw.initialize();
      expect(init.result).toMatchObject({ serverInfo: { name: 'yello' } });
      const who = await raw.callTool('whoami');
      expect(who.result?.isError).toBe(true);
      expect(rawText(who)).toMatch(/^BAD_TOKEN: .*\nWhat to do: .*yello agents add/s);
      expect(raw.exitCode).toBeUndefined();
    } finally {
      await raw.close();
    }
  });
});

describe('yello mcp --print-config checks the token', () => {
  it('names the server after the agent, so two agents fit in one client config', async () => {
    const chat = await world().chat();
    const a = await world().cli.run(['--token-file', chat.aliceToken, 'mcp', '--print-config']);
    const b = await world().cli.run(['--token-file', chat.bobToken, 'mcp', '--print-config']);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    const merged = {
      ...(JSON.parse(a.stdout) as { mcpServers: Record<string, unknown> }).mcpServers,
      ...(JSON.parse(b.stdout) as { mcpServers: Record<string, unknown> }).mcpServers,
    };
    expect(Object.keys(merged).sort()).toEqual([`yello-${chat.alice.username}`, `yello-${chat.bob.username}`].sort());
  });

  it('refuses the admin token and a token the daemon does not know, and prints nothing', async () => {
    const admin = await world().cli.run(['--token-file', path.join(world().daemon.dataDir, 'admin.token'), 'mcp', '--print-config']);
    expect(admin.code).not.toBe(0);
    expect(admin.stdout).toBe('');
    expect(admin.stderr).toMatch(/admin token/);
    const garbage = await world().cli.run(['--token-file', tokenFile(world().dir, 'garbage3', 'nope'), 'mcp', '--print-config']);
    expect(garbage.code).not.toBe(0);
    expect(garbage.stdout).toBe('');
    expect(garbage.stderr).toMatch(/UNAUTHENTICATED/);
  });

  it('--no-check prints without asking the daemon, named after the token file', async () => {
    const file = tokenFile(world().dir, 'carol', 'whatever');
    const r = await world().cli.run([
      '--socket',
      path.join(world().dir, 'nothing-here.sock'),
      '--token-file',
      file,
      'mcp',
      '--print-config',
      '--no-check',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(Object.keys((JSON.parse(r.stdout) as { mcpServers: Record<string, unknown> }).mcpServers)).toEqual(['yello-carol']);
  });
});

describe("the README's MCP commands on a fresh machine", () => {
  it('agents add --token-out into a directory that does not exist creates it 0700, and --print-config reads it', async () => {
    const home = fs.mkdtempSync(path.join(world().dir, 'home-'));
    const file = path.join(home, '.config', 'yello', 'dana.token');
    const add = await world().cli.run(['agents', 'add', 'dana', '--name', 'Dana', '--token-out', file], { env: { HOME: home } });
    expect(add.code, add.stderr).toBe(0);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.join(home, '.config', 'yello')).mode & 0o777).toBe(0o700);
    expect(fs.statSync(path.join(home, '.config')).mode & 0o777).toBe(0o700);
    const config = await world().cli.run(['--token-file', file, 'mcp', '--print-config'], { env: { HOME: home } });
    expect(config.code, config.stderr).toBe(0);
    expect(Object.keys((JSON.parse(config.stdout) as { mcpServers: Record<string, unknown> }).mcpServers)).toEqual(['yello-dana']);
  });
});
