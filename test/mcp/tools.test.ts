// The tool surface of `yello mcp` through the official MCP SDK client: what tools/list shows
// (schemas generated from the protocol's zod schemas), every tool with valid and with invalid
// input (a tool error or an MCP invalid-params error, never a crash), and a stdout that carries
// MCP messages only.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { TEXT_MAX_BYTES } from '../../src/mcp/tool-schemas.js';
import { paramSchemas } from '../../src/shared/schemas.js';
import { createChat } from '../helpers/client-fixtures.js';
import { cliEnv, yelloBin } from '../helpers/cli-runner.js';
import { repoRoot } from '../helpers/daemon-process.js';
import { useMcpWorld, tokenFile, type McpAgent, presentedBatch } from './mcp-fixtures.js';
import { waitFor } from '../helpers/wait.js';

const world = useMcpWorld();

const TOOLS = [
  'whoami',
  'list_chats',
  'list_peers',
  'wait_for_message',
  'open_chat',
  'read_new',
  'acknowledge',
  'send',
  'history',
  'permissions',
  'operation_status',
];
const inputJson = (schema: z.ZodType) => z.toJSONSchema(schema, { io: 'input' }) as { properties: Record<string, Record<string, unknown>> };

/** A call with invalid input: a tool error result, or an MCP error the SDK raises; never a dead server. */
async function expectRejected(agent: McpAgent, name: string, args: Record<string, unknown>): Promise<string> {
  const outcome = await rejectionKind(agent, name, args);
  // The server is still there and still itself.
  expect((await agent.call('whoami')).isError).toBeFalsy();
  return outcome;
}

/** How `name(args)` was refused. Only the call sits in the try: an assertion fails with its own message. */
async function rejectionKind(agent: McpAgent, name: string, args: Record<string, unknown>): Promise<string> {
  let r: Awaited<ReturnType<McpAgent['call']>>;
  try {
    r = await agent.call(name, args);
  } catch (err) {
    if (err instanceof McpError) return `MCP_${err.code}`;
    throw err;
  }
  expect(r.isError, `${name}(${JSON.stringify(args)}) should fail, got ${JSON.stringify(r.structuredContent)}`).toBe(true);
  return (r._meta?.['yello/error'] as { type?: string } | undefined)?.type ?? 'INPUT_VALIDATION';
}

describe('yello mcp: tools/list', () => {
  it("lists every tool with an output schema, and input schemas generated from the protocol's zod schemas", async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const { tools } = await alice.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort());
    for (const t of tools) {
      expect(t.description, t.name).toBeTruthy();
      expect(t.outputSchema?.type, t.name).toBe('object');
      expect(t.inputSchema.additionalProperties, t.name).toBe(false);
    }
    const byName = Object.fromEntries(
      tools.map((t) => [t.name, t.inputSchema as { properties: Record<string, Record<string, unknown>>; required?: string[] }]),
    );
    const strip = (schema: Record<string, unknown>) => Object.fromEntries(Object.entries(schema).filter(([k]) => k !== 'description'));
    const history = inputJson(paramSchemas['chats.history']).properties;
    for (const key of ['chatId', 'cursor', 'limit', 'direction'])
      expect(strip(byName.history!.properties[key]!), key).toEqual(history[key]);
    const read = inputJson(paramSchemas['streams.read']).properties;
    for (const key of ['waitMs']) expect(strip(byName.read_new!.properties[key]!), key).toEqual(read[key]);
    expect(Object.keys(byName.read_new!.properties).sort()).toEqual(['chatId', 'waitMs']);
    expect(strip(byName.send!.properties.text!)).toMatchObject({ type: 'string', minLength: 1, maxLength: TEXT_MAX_BYTES });
    expect(byName.send!.required).toEqual(['chatId', 'text']);
    expect(strip(byName.operation_status!.properties.operationId!)).toEqual({
      anyOf: [inputJson(paramSchemas['operations.get']).properties.operationId, { type: 'null' }],
    });
  });

  it('says what it is at initialize: tools, resources with subscribe, logging, instructions', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    expect(alice.client.getServerVersion()?.name).toBe('yello');
    expect(alice.client.getServerCapabilities()).toMatchObject({ tools: {}, resources: { subscribe: true }, logging: {} });
    expect(alice.client.getInstructions()).toMatch(/operation_status/);
  });
});

describe('yello mcp: every tool, valid and invalid input', () => {
  it('answers valid calls and refuses invalid ones without dying', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const bob = await world().serve(chat.bobToken);
    const { chatId } = chat;
    const rejected: Record<string, string[]> = {};
    const reject = async (agent: McpAgent, name: string, args: Record<string, unknown>) => {
      (rejected[name] ??= []).push(await expectRejected(agent, name, args));
    };

    // whoami
    expect(await alice.ok('whoami')).toMatchObject({
      agentId: chat.alice.id,
      username: chat.alice.username,
      socket: world().daemon.socketPath,
      sessions: [],
    });
    await reject(alice, 'whoami', { extra: 1 });

    // list_chats
    const listed = await alice.ok('list_chats', { limit: 10 });
    expect(listed).toEqual({
      chats: [
        {
          chatId,
          peer: { agentId: chat.bob.id, username: chat.bob.username, name: 'Bob' },
          unreadMessages: 0,
          lastActivityAt: null,
          preview: null,
          session: null,
          followed: true,
          problem: null,
        },
      ],
      total: 1,
    });
    await reject(alice, 'list_chats', { limit: 0 });
    await reject(alice, 'list_chats', { cursor: 'not-a-cursor' });

    // list_peers
    expect((await alice.ok('list_peers')).peers).toContainEqual({
      agentId: chat.bob.id,
      username: chat.bob.username,
      name: 'Bob',
      chatId,
    });
    await reject(alice, 'list_peers', { extra: 1 });

    // open_chat
    expect(await alice.ok('open_chat', { peer: chat.bob.username })).toMatchObject({ chatId, session: { state: 'running' } });
    await reject(alice, 'open_chat', {});
    await reject(alice, 'open_chat', { peer: 'not a username' });
    await reject(alice, 'open_chat', { peer: 'nobody-by-that-name' });
    await reject(alice, 'open_chat', { peer: chat.alice.username });

    // send
    const sent = await alice.ok('send', { chatId, text: 'first', messageId: 'alice-msg-1' });
    expect(sent.position).toBe('1');
    await reject(alice, 'send', { chatId, text: 5 });
    await reject(alice, 'send', { chatId, text: 'x', messageId: 'has spaces' });
    await reject(alice, 'send', { chatId, text: 'lone \uD800 surrogate' });
    await reject(alice, 'send', { chatId, text: 'again', messageId: 'alice-msg-1' });
    await reject(alice, 'send', { chatId, text: 'reply to nothing', acknowledge: true });
    await reject(alice, 'send', { chatId, text: 'x', batchId: 'b' });
    await reject(alice, 'send', { chatId: 'chat_missing', text: 'x' });

    // read_new
    const batch = presentedBatch(await bob.ok('read_new', { chatId, waitMs: 0 }));
    // Bob's inbox followed the chat from his server's start: alice's claim (her fence) came on its own, as state.
    expect(batch.records.map((r: { type: string }) => r.type)).toEqual(['message']);
    await reject(bob, 'read_new', { chatId: 'bad id!' });
    await reject(bob, 'read_new', { chatId, limit: 10 }); // batches are the daemon's: no limit any more
    await reject(bob, 'read_new', { chatId, waitMs: 30_001 });
    await reject(bob, 'read_new', { chatId: 'chat_missing' });

    // acknowledge
    await reject(bob, 'acknowledge', { chatId: 'bad id!' });
    await reject(bob, 'acknowledge', { chatId, batchId: 'not-the-presented-batch' });
    expect(await bob.ok('acknowledge', { chatId, batchId: batch.batchId })).toMatchObject({
      acknowledged: { nextPosition: batch.nextPosition },
    });
    await reject(bob, 'acknowledge', { chatId, batchId: batch.batchId });

    // wait_for_message
    expect(await bob.ok('wait_for_message', { waitMs: 0 })).toMatchObject({ chatId: null, batch: null });
    await reject(bob, 'wait_for_message', { waitMs: 600_001 });
    await reject(bob, 'wait_for_message', { chatId });

    // history
    const hist = await bob.ok('history', { chatId, limit: 5, direction: 'backward' });
    expect(hist.messages.map((m: { content: string }) => m.content)).toEqual(['first']);
    await reject(bob, 'history', { chatId, cursor: 'not-a-cursor' });
    await reject(bob, 'history', { chatId, direction: 'sideways' });

    // permissions
    expect(await bob.ok('permissions', { chatId })).toMatchObject({
      chatId,
      policy: 'open',
      participants: [expect.any(Object), expect.any(Object)],
    });
    await reject(bob, 'permissions', { chatId: '' });
    await reject(bob, 'permissions', { chatId: 'chat_missing' });

    // operation_status
    expect(await alice.ok('operation_status', { chatId, operationId: sent.operationId })).toMatchObject({
      state: 'committed',
      committed: true,
      firstPosition: '1',
    });
    expect(await alice.ok('operation_status', { chatId, operationId: 'op-never-used' })).toMatchObject({
      state: 'unknown',
      committed: false,
    });
    expect(await bob.ok('operation_status', { chatId })).toMatchObject({ state: 'none', paused: false });
    await reject(alice, 'operation_status', { chatId, operationId: 'bad id!' });
    await reject(alice, 'operation_status', { chatId: 'chat_missing', operationId: 'op-x' });

    // A tool that does not exist.
    await reject(alice, 'no_such_tool', {});

    // The daemon's own answers come through with their stable types.
    expect(rejected.list_chats).toEqual(['INPUT_VALIDATION', 'INPUT_VALIDATION']);
    expect(rejected.list_peers).toEqual(['INPUT_VALIDATION']);
    expect(rejected.wait_for_message).toEqual(['INPUT_VALIDATION', 'INPUT_VALIDATION']);
    expect(rejected.open_chat).toEqual(['INPUT_VALIDATION', 'NOT_FOUND', 'NOT_FOUND', 'INVALID_PARAMS']);
    expect(rejected.send).toEqual([
      'INPUT_VALIDATION',
      'INPUT_VALIDATION',
      'INPUT_VALIDATION',
      'DUPLICATE_MESSAGE',
      'NOTHING_PRESENTED',
      'INVALID_PARAMS',
      'NOT_FOUND',
    ]);
    expect(rejected.read_new).toEqual(['INPUT_VALIDATION', 'INPUT_VALIDATION', 'INPUT_VALIDATION', 'NOT_FOUND']);
    expect(rejected.acknowledge).toEqual(['INPUT_VALIDATION', 'NOT_PRESENTED', 'NOTHING_PRESENTED']);
    expect(rejected.history).toEqual(['INVALID_PARAMS', 'INPUT_VALIDATION']);
    expect(rejected.permissions).toEqual(['INPUT_VALIDATION', 'NOT_FOUND']);
    expect(rejected.operation_status).toEqual(['INPUT_VALIDATION', 'NOT_FOUND']);
    // Nothing invalid reached the streams: alice wrote her fence and one message, bob his fence and one receipt.
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).nextPosition).toBe('2');
    expect((await world().admin.rpc.streams.get({ streamId: chat.bob.streamId })).nextPosition).toBe('2');
  });

  it('refuses a chat the agent is not part of with PERMISSION_DENIED', async () => {
    const chat = await world().chat();
    const other = await createChat(world().admin);
    const carol = await world().serve(tokenFile(world().dir, other.alice.username, other.alice.token));
    const denied = await carol.fail('read_new', { chatId: chat.chatId });
    expect(denied).toMatchObject({ type: 'PERMISSION_DENIED', data: { reason: 'NOT_PARTICIPANT' } });
    expect((await carol.fail('history', { chatId: chat.chatId })).type).toBe('PERMISSION_DENIED');
  });
});

describe('yello mcp: stdout', () => {
  it('carries MCP messages only, also while tools fail and sessions start', async () => {
    const chat = await world().chat();
    const child = spawn(process.execPath, [yelloBin, 'mcp', '--log-level', 'trace'], {
      cwd: repoRoot,
      env: cliEnv({ YELLO_SOCKET: world().daemon.socketPath, YELLO_TOKEN_FILE: chat.aliceToken }),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const exited = new Promise<number | null>((r) => {
      child.on('close', (code) => {
        r(code);
      });
    });
    const send = (msg: object) => child.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n');
    send({
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    await waitFor(() => stdout.includes('"id":1'), 'initialize answer', 10_000);
    send({ method: 'notifications/initialized' });
    send({ id: 2, method: 'tools/call', params: { name: 'open_chat', arguments: { peer: chat.bob.username } } });
    send({ id: 3, method: 'tools/call', params: { name: 'send', arguments: { chatId: chat.chatId, text: 'hello' } } });
    send({ id: 4, method: 'tools/call', params: { name: 'read_new', arguments: { chatId: 'chat_missing' } } });
    send({ id: 5, method: 'no/such/method' });
    await waitFor(() => ['"id":2', '"id":3', '"id":4', '"id":5'].every((s) => stdout.includes(s)), 'answers', 10_000);
    child.stdin.end();
    expect(await exited).toBe(0);
    const lines = stdout.split('\n').filter((l) => l !== '');
    for (const line of lines) expect(JSON.parse(line), line).toMatchObject({ jsonrpc: '2.0' });
    expect(stderr).toMatch(/"msg":"chat session started"/);
    // Logs never carry the token or message content.
    expect(stderr).not.toContain(chat.alice.token);
    expect(stderr).not.toContain('"hello"');
  });

  it('loads the MCP SDK only for `yello mcp`: no other CLI module imports src/mcp statically', () => {
    const dir = path.join(repoRoot, 'src/cli');
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const source = fs.readFileSync(path.join(dir, file), 'utf8');
      expect(source, file).not.toMatch(/^import[^;]*from '(\.\.\/mcp\/|@modelcontextprotocol)/m);
    }
    expect(fs.readFileSync(path.join(dir, 'mcp-command.ts'), 'utf8')).toMatch(/await import\('\.\.\/mcp\/server\.js'\)/);
  });
});
