// Protocol conformance of `yello mcp` (issue 22, finding 5; docs/mcp.md "Protocol conformance"):
// an unknown tool is a JSON-RPC error -32602 (not a tool result), an unknown resource -32002,
// an invalid logging/setLevel -32602 naming the field (not -32603 with a zod dump), a line
// that is not JSON -32700, a batch or a non-message -32600, and requests before initialize
// are refused. Through the official SDK (its Client, or its stdio transport where the Client
// would not send such a thing) and through raw JSON lines.

import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { EmptyResultSchema, McpError, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { yelloBin } from '../helpers/cli-runner.js';
import { repoRoot } from '../helpers/daemon-process.js';
import { waitFor } from '../helpers/wait.js';
import { useMcpWorld } from './mcp-fixtures.js';
import { INITIALIZE, RawMcp } from './raw-stdio.js';

const world = useMcpWorld();

/** The McpError a request rejected with. */
async function rpcError(p: Promise<unknown>): Promise<McpError> {
  const err = await p.then(
    (v) => {
      throw new Error(`expected a JSON-RPC error, got ${JSON.stringify(v).slice(0, 300)}`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(McpError);
  return err as McpError;
}

// These answers are the gate's (src/mcp/request-gate.ts), in front of the SDK on any transport:
// the server built by createMcpServer in this process, and `yello mcp` as a process on stdio.
const STDIO = { stdio: true };

describe.each([
  ['in memory', {}],
  ['over stdio', STDIO],
])('conformance through the SDK client, %s', (_, how) => {
  it('an unknown tool is JSON-RPC -32602, not a tool result', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken, [], how);
    const err = await rpcError(alice.client.callTool({ name: 'no_such_tool', arguments: {} }));
    expect(err.code).toBe(-32602);
    expect(err.message).toMatch(/Unknown tool: "no_such_tool"/);
    expect(err.message).toMatch(/read_new/); // names the tools there are
  });

  it('an unknown resource is -32002: a URI of no resource, and the transcript of a chat that does not exist', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken, [], how);
    const other = await rpcError(alice.client.readResource({ uri: 'yello://nothing/here' }));
    expect(other.code).toBe(-32002);
    expect(other.message).toMatch(/yello:\/\/chats\/\{chatId\}\/transcript/);
    const missing = await rpcError(alice.client.readResource({ uri: 'yello://chats/chat_doesnotexist/transcript' }));
    expect(missing.code).toBe(-32002);
    // The real transcript still reads.
    const ok = await alice.client.readResource({ uri: `yello://chats/${chat.chatId}/transcript` });
    expect(ok.contents).toHaveLength(1);
  });

  it('an invalid logging/setLevel is -32602 naming the field, without a zod dump; a valid one works', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken, [], how);
    const err = await rpcError(alice.client.request({ method: 'logging/setLevel', params: { level: 'loud' } }, EmptyResultSchema));
    expect(err.code).toBe(-32602);
    expect(err.message).toMatch(/params\.level/);
    expect(err.message).not.toMatch(/"code":|invalid_value|invalid_enum|\n/);
    await expect(alice.client.setLoggingLevel('warning')).resolves.toBeDefined();
  });
});

describe('conformance through the SDK stdio transport', () => {
  it('the SDK stdio transport: a request before initialize is refused, initialize then works', async () => {
    const chat = await world().chat();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [yelloBin, 'mcp'],
      env: { YELLO_SOCKET: world().daemon.socketPath, YELLO_TOKEN_FILE: chat.aliceToken },
      cwd: repoRoot,
      stderr: 'ignore',
    });
    const got: JSONRPCMessage[] = [];
    transport.onmessage = (m) => got.push(m);
    await transport.start();
    try {
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
      await waitFor(() => got.some((m) => 'id' in m && m.id === 1), 'the answer to tools/list', 20_000);
      const early = got.find((m) => 'id' in m && m.id === 1) as { error?: { code: number; message: string } };
      expect(early.error?.code).toBe(-32600);
      expect(early.error?.message).toMatch(/not initialized/);
      await transport.send({ ...INITIALIZE, id: 2 });
      await waitFor(() => got.some((m) => 'id' in m && m.id === 2), 'the initialize answer', 20_000);
      expect((got.find((m) => 'id' in m && m.id === 2) as { result?: { serverInfo?: unknown } }).result?.serverInfo).toBeDefined();
      await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      await transport.send({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} });
      await waitFor(() => got.some((m) => 'id' in m && m.id === 3), 'the second tools/list answer', 20_000);
      expect(Array.isArray((got.find((m) => 'id' in m && m.id === 3) as { result?: { tools?: unknown } }).result?.tools)).toBe(true);
    } finally {
      await transport.close();
    }
  });
});

describe('conformance through raw JSON lines', () => {
  it('parse errors, batches and non-messages are answered; requests before initialize are refused; the server keeps serving', async () => {
    const chat = await world().chat();
    const raw = RawMcp.start(world().daemon.socketPath, chat.aliceToken);
    try {
      // Before initialize: refused, ping allowed.
      const early = await raw.request('tools/list');
      expect(early.error).toMatchObject({ code: -32600 });
      expect(early.error?.message).toMatch(/initialize/);
      expect((await raw.request('ping')).result).toEqual({});

      raw.writeLine('{"jsonrpc":"2.0","id":7,"method":"tools/list"');
      const parse = await raw.next((m) => m.error?.code === -32700, 'the parse error');
      expect(parse.id).toBeNull();

      let from = raw.lines.length;
      raw.writeLine(JSON.stringify([{ jsonrpc: '2.0', id: 8, method: 'ping' }]));
      const batch = await raw.next((m) => m.error !== undefined, 'the batch refusal', from);
      expect(batch).toMatchObject({ id: null, error: { code: -32600 } });
      expect(batch.error?.message).toMatch(/batch/i);

      from = raw.lines.length;
      raw.writeLine('42');
      expect(await raw.next((m) => m.error !== undefined, 'the refusal of a number', from)).toMatchObject({
        id: null,
        error: { code: -32600 },
      });
      from = raw.lines.length;
      raw.writeLine(JSON.stringify({ jsonrpc: '1.0', id: 9, method: 'ping' }));
      expect(await raw.next((m) => m.id === 9, 'the refusal of jsonrpc 1.0', from)).toMatchObject({ error: { code: -32600 } });

      await raw.initialize();
      const unknownTool = await raw.callTool('no_such_tool');
      expect(unknownTool.error).toMatchObject({ code: -32602 });
      expect(unknownTool.result).toBeUndefined();
      const unknownResource = await raw.request('resources/read', { uri: 'file:///etc/passwd' });
      expect(unknownResource.error).toMatchObject({ code: -32002, data: { uri: 'file:///etc/passwd' } });
      const badLevel = await raw.request('logging/setLevel', { level: 'loud' });
      expect(badLevel.error).toMatchObject({ code: -32602 });
      expect(badLevel.error?.message).toMatch(/params\.level/);
      const noName = await raw.request('tools/call', { arguments: {} });
      expect(noName.error).toMatchObject({ code: -32602 });

      // Still serving: a real tool call answers.
      const who = await raw.callTool('whoami');
      expect(who.result?.isError).toBeFalsy();
      expect(who.result?.structuredContent).toMatchObject({ agentId: chat.alice.id });
      // Every line the server wrote is one JSON-RPC message.
      expect(raw.messages().every((m) => m.jsonrpc === '2.0')).toBe(true);
      expect(raw.exitCode).toBeUndefined();
    } finally {
      await raw.close();
    }
  });
});
