// Fixtures for the MCP tests. The server is `yello mcp`'s own (createMcpServer, src/mcp), driven
// by the official SDK's Client: a client nobody on the project wrote. By default it runs in the
// test worker over the SDK's in-memory transport; `{ stdio: true }` spawns `node bin/yello mcp`
// exactly as an MCP client would run it, for the tests whose subject is the process (its stdio
// framing, its exit, what it prints on stderr). Agents, chats and checks go through the real daemon.

import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeAll, expect } from 'vitest';
import type { YelloClient } from '../../src/client/index.js';
import { createMcpServer, type YelloMcpServer } from '../../src/mcp/create-server.js';
import { createMcpLogger } from '../../src/mcp/log.js';
import type { ToolName, ToolOutput } from '../../src/mcp/tool-schemas.js';
import { connectAdmin, createChat, makeTempDir, startDaemon, uniqueName, type TestChat } from '../helpers/client-fixtures.js';
import { Cli, yelloBin } from '../helpers/cli-runner.js';
import { waitFor } from '../helpers/wait.js';
import { DaemonProcess, repoRoot } from '../helpers/daemon-process.js';
import { childMutationEnv } from '../mutation/child-env.js';

/** What a tool error carries for programs (`_meta["yello/error"]`). */
export interface ToolErrorMeta {
  type: string;
  message: string;
  action: string;
  data: Record<string, unknown>;
}

/** One notification the server sent, as the client received it. */
export interface ReceivedNotification {
  method: string;
  /** As sent: logging messages carry `data`, resource updates `uri`. */
  params: { data?: Record<string, unknown>; uri?: string; [key: string]: unknown };
}

/** Writes `token` to a 0600 file and returns its path. */
export function tokenFile(dir: string, name: string, token: string): string {
  const file = path.join(dir, `${name}.token`);
  fs.writeFileSync(file, token + '\n', { mode: 0o600 });
  return file;
}

/** The options of `yello mcp` the tests pass: --replace, --resume-after-break, --channel, --call-timeout-ms N. */
function serverFlags(args: string[]): { replace: boolean; resumeAfterBreak: boolean; channel: boolean; callTimeoutMs?: number } {
  const known = new Set(['--replace', '--resume-after-break', '--channel', '--call-timeout-ms']);
  for (const a of args)
    if (a.startsWith('--') && !known.has(a)) throw new Error(`McpAgent: ${a} needs { stdio: true } (a yello mcp process)`);
  const timeout = args.indexOf('--call-timeout-ms');
  return {
    replace: args.includes('--replace'),
    resumeAfterBreak: args.includes('--resume-after-break'),
    channel: args.includes('--channel'),
    ...(timeout >= 0 ? { callTimeoutMs: Number(args[timeout + 1]) } : {}),
  };
}

/** A `yello mcp` server with an SDK client connected to it. */
export class McpAgent {
  readonly client: Client;
  readonly transport: Transport;
  readonly notifications: ReceivedNotification[] = [];
  /** The server's log lines (pino JSON), and with `stdio` all else it wrote on stderr. */
  stderr = '';
  /** The server when it runs in this worker. */
  #server: YelloMcpServer | null = null;

  private constructor(client: Client, transport: Transport) {
    this.client = client;
    this.transport = transport;
  }

  /**
   * In this worker (default): `yello mcp`'s server for the token in `tokenPath`, its log lines in
   * `stderr`, over an in-memory transport pair. With `stdio`: spawns `node bin/yello mcp` with
   * the environment an MCP client passes (the SDK's default inherited variables plus
   * `YELLO_SOCKET` and `YELLO_TOKEN_FILE`) and connects over its stdio.
   */
  static async start(daemon: DaemonProcess, tokenPath: string, args: string[] = [], options: { stdio?: boolean } = {}): Promise<McpAgent> {
    const client = new Client({ name: 'yello-mcp-tests', version: '1.0.0' });
    if (options.stdio === true) {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [yelloBin, 'mcp', '--log-level', 'debug', ...args],
        env: { YELLO_SOCKET: daemon.socketPath, YELLO_TOKEN_FILE: tokenPath, ...childMutationEnv() },
        cwd: repoRoot,
        stderr: 'pipe',
      });
      const agent = new McpAgent(client, transport);
      transport.stderr?.on('data', (chunk: Buffer) => (agent.stderr += chunk.toString('utf8')));
      agent.#listen();
      await client.connect(transport);
      return agent;
    }
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const agent = new McpAgent(client, clientSide);
    const lines = new Writable({
      write(chunk: Buffer, _encoding, done) {
        agent.stderr += chunk.toString('utf8');
        done();
      },
    });
    const log = createMcpLogger('debug', lines);
    const server = await createMcpServer({
      token: fs.readFileSync(tokenPath, 'utf8').trim(),
      socketPath: daemon.socketPath,
      log,
      ...serverFlags(args),
    });
    agent.#server = server;
    await server.connect(serverSide);
    log.info('serving MCP in memory');
    agent.#listen();
    await client.connect(clientSide);
    return agent;
  }

  /** The server process id (`stdio` only). */
  get pid(): number {
    if (!(this.transport instanceof StdioClientTransport) || this.transport.pid === null)
      throw new Error('McpAgent: this server runs in the test worker; start it with { stdio: true } to signal its process');
    return this.transport.pid;
  }

  #listen(): void {
    this.client.fallbackNotificationHandler = (n) => {
      this.notifications.push({ method: n.method, params: n.params ?? {} });
      return Promise.resolve();
    };
  }

  /** Calls a tool and returns the raw result. */
  call(name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
    return this.client.callTool({ name, arguments: args }) as Promise<CallToolResult>;
  }

  /** Calls a tool that must succeed; returns its `structuredContent`. */
  async ok<T extends ToolName>(name: T, args: Record<string, unknown> = {}): Promise<ToolOutput<T>> {
    const r = await this.call(name, args);
    expect(r.isError, `${name} failed: ${text(r)}\nserver stderr (tail): ${this.stderr.slice(-3000)}`).toBeFalsy();
    expect(text(r).length).toBeGreaterThan(0);
    return r.structuredContent as ToolOutput<T>;
  }

  /** Calls a tool that must answer a tool error; returns the error's meta and text. */
  async fail(name: string, args: Record<string, unknown> = {}): Promise<ToolErrorMeta & { text: string }> {
    const r = await this.call(name, args);
    const got = r.structuredContent === undefined ? 'no structuredContent' : JSON.stringify(r.structuredContent).slice(0, 400);
    expect(r.isError, `${name} was expected to fail, got ${got}`).toBe(true);
    const meta = (r._meta?.['yello/error'] ?? { type: 'SDK_VALIDATION', message: text(r), action: '', data: {} }) as ToolErrorMeta;
    return { ...meta, text: text(r) };
  }

  /** Parsed stderr log lines of the server. */
  logs(): Array<Record<string, unknown>> {
    return this.stderr
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, unknown>;
        } catch {
          return { __unparsed: l };
        }
      });
  }

  /**
   * Closes the client, and the server releases its claims (a process: its stdin ends, and it
   * releases them and exits).
   */
  async close(): Promise<void> {
    await this.client.close().catch(() => undefined);
    await this.#server?.close().catch(() => undefined);
  }
}

/** The batch a `read_new` presented; fails when it presented nothing. */
export function presentedBatch(out: ToolOutput<'read_new'>): NonNullable<ToolOutput<'read_new'>['batch']> {
  expect(out.batch, `read_new presented nothing: ${JSON.stringify(out)}`).not.toBeNull();
  return out.batch!;
}

/** The text content of a tool result. */
export function text(r: CallToolResult): string {
  return r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

/**
 * One daemon (policy open) with an admin client and a temp dir for token files; `chat()` makes
 * two fresh agents and their chat, `serve()` starts a tracked `yello mcp`, `stopServers()`
 * closes them (afterEach).
 */
export class McpWorld {
  readonly servers: McpAgent[] = [];
  private constructor(
    readonly daemon: DaemonProcess,
    readonly admin: YelloClient,
    readonly dir: string,
    readonly cli: Cli,
  ) {}

  /**
   * `policy: 'grants'` starts the daemon with its default policy (chats need grants); default
   * `open`. `process: true` runs the daemon in a process of its own (for tests that SIGSTOP or
   * SIGKILL it); by default it runs in the test worker.
   */
  static async start(options: { policy?: 'open' | 'grants'; process?: boolean } = {}): Promise<McpWorld> {
    const inProcess = options.process === true ? { process: true } : {};
    const daemon =
      options.policy === 'grants' ? await DaemonProcess.start({ extraArgs: [], ...inProcess }) : await startDaemon([], inProcess);
    const admin = await connectAdmin(daemon, { reconnect: { minDelayMs: 50, maxDelayMs: 500 } });
    const dir = await makeTempDir('ym-');
    return new McpWorld(daemon, admin, dir, new Cli(daemon.socketPath, daemon.dataDir));
  }

  /** Alice and Bob in a new chat, with token files. */
  async chat(): Promise<TestChat & { aliceToken: string; bobToken: string }> {
    const chat = await createChat(this.admin);
    return {
      ...chat,
      aliceToken: tokenFile(this.dir, chat.alice.username, chat.alice.token),
      bobToken: tokenFile(this.dir, chat.bob.username, chat.bob.token),
    };
  }

  /** One more agent (a username of `prefix-…`, the display name `name`), with its token file. */
  async agent(prefix: string, name: string): Promise<{ id: string; username: string; name: string; token: string; tokenPath: string }> {
    const { agent, token } = await this.admin.rpc.agents.create({ username: uniqueName(prefix), name });
    return { id: agent.id, username: agent.username, name: agent.name, token, tokenPath: tokenFile(this.dir, agent.username, token) };
  }

  /** A `yello mcp` for the agent of `token`, closed by `stopServers()`; `stdio`: a process of its own. */
  async serve(token: string, args: string[] = [], options: { stdio?: boolean } = {}): Promise<McpAgent> {
    const agent = await McpAgent.start(this.daemon, token, args, options);
    this.servers.push(agent);
    return agent;
  }

  /** Waits until the admin client has reconnected after a daemon restart. */
  async adminReady(): Promise<void> {
    await waitFor(() => this.admin.connected, 'the admin client to reconnect', 15_000, 20);
  }

  async stopServers(): Promise<void> {
    await Promise.all(this.servers.splice(0).map((s) => s.close()));
  }

  async cleanup(): Promise<void> {
    await this.stopServers();
    this.admin.close();
    await this.daemon.cleanup();
    await fs.promises.rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * One McpWorld for the file: started in beforeAll (and cleaned up after the file, only if it
 * started), its MCP servers stopped after each test. `beforeEachStop` runs first, after each test.
 */
export function useMcpWorld(
  beforeEachStop?: (world: McpWorld) => Promise<void>,
  options: { policy?: 'open' | 'grants'; process?: boolean } = {},
): () => McpWorld {
  let world: McpWorld | undefined;
  beforeAll(async () => {
    const started = await McpWorld.start(options);
    world = started;
    // vitest runs a cleanup returned from beforeAll after the file, and only if the start succeeded.
    return () => started.cleanup();
  });
  const get = (): McpWorld => {
    if (!world) throw new Error('useMcpWorld: the world exists only inside hooks and tests (it starts in beforeAll)');
    return world;
  };
  afterEach(async () => {
    if (beforeEachStop) await beforeEachStop(get());
    await get().stopServers();
  });
  return get;
}

/** The contents of the messages of a presented batch (receipts and fences left out). */
export const messagesOf = (batch: { records: Array<{ type: string; content: string | null }> }): Array<string | null> =>
  batch.records.filter((r) => r.type === 'message').map((r) => r.content);
