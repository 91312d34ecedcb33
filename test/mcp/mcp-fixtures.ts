// Fixtures for the MCP tests: `yello mcp` runs as a child process exactly as an MCP client
// would run it, and is driven by the official SDK's Client over StdioClientTransport: a client
// nobody on the project wrote. Agents, chats and checks go through the real daemon.

import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeAll, expect } from 'vitest';
import type { YelloClient } from '../../src/client/index.js';
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

/** A running `yello mcp` with an SDK client connected to it. */
export class McpAgent {
  readonly client: Client;
  readonly transport: StdioClientTransport;
  readonly notifications: ReceivedNotification[] = [];
  stderr = '';

  private constructor(client: Client, transport: StdioClientTransport) {
    this.client = client;
    this.transport = transport;
  }

  /**
   * Spawns `node bin/yello mcp` with the environment an MCP client passes (the SDK's default
   * inherited variables plus `YELLO_SOCKET` and `YELLO_TOKEN_FILE`) and connects.
   */
  static async start(daemon: DaemonProcess, tokenPath: string, args: string[] = []): Promise<McpAgent> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [yelloBin, 'mcp', '--log-level', 'debug', ...args],
      env: { YELLO_SOCKET: daemon.socketPath, YELLO_TOKEN_FILE: tokenPath, ...childMutationEnv() },
      cwd: repoRoot,
      stderr: 'pipe',
    });
    const client = new Client({ name: 'yello-mcp-tests', version: '1.0.0' });
    const agent = new McpAgent(client, transport);
    transport.stderr?.on('data', (chunk: Buffer) => (agent.stderr += chunk.toString('utf8')));
    client.fallbackNotificationHandler = (n) => {
      agent.notifications.push({ method: n.method, params: n.params ?? {} });
      return Promise.resolve();
    };
    await client.connect(transport);
    return agent;
  }

  /** The server process id. */
  get pid(): number {
    return this.transport.pid!;
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

  /** Closes the client: stdin ends, the server releases its claims and exits. */
  async close(): Promise<void> {
    await this.client.close().catch(() => undefined);
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

  /** A `yello mcp` for the agent of `token`, closed by `stopServers()`. */
  async serve(token: string, args: string[] = []): Promise<McpAgent> {
    const agent = await McpAgent.start(this.daemon, token, args);
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
