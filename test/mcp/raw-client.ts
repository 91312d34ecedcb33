// A raw MCP client over stdio, written from the specification and not from the SDK: the test
// writes JSON-RPC lines to `yello mcp`'s stdin and reads its stdout line by line. It catches what
// an SDK client would smooth over (a notification the SDK drops, a progress token it adds itself).

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { yelloBin } from '../helpers/cli-runner.js';
import { repoRoot, type DaemonProcess } from '../helpers/daemon-process.js';
import { waitFor } from '../helpers/wait.js';

/** One JSON-RPC message the server wrote. */
export interface RawMessage {
  jsonrpc: '2.0';
  id?: number | string | null;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

/** A tool result as it travels (content, structuredContent, isError, _meta). */
export interface RawToolResult {
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
}

/** `yello mcp` as a child process, spoken to in JSON lines. */
export class RawMcpClient {
  readonly messages: RawMessage[] = [];
  stderr = '';
  #nextId = 1;
  #partial = '';

  private constructor(readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      this.#partial += chunk;
      let nl: number;
      while ((nl = this.#partial.indexOf('\n')) >= 0) {
        const line = this.#partial.slice(0, nl);
        this.#partial = this.#partial.slice(nl + 1);
        if (line.trim()) this.messages.push(JSON.parse(line) as RawMessage);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (this.stderr += chunk.toString('utf8')));
    child.stdin.on('error', () => undefined);
  }

  /** Spawns `yello mcp` for the agent of `tokenPath` and runs the initialize handshake. */
  static async start(daemon: DaemonProcess, tokenPath: string): Promise<RawMcpClient> {
    const child = spawn(process.execPath, [yelloBin, 'mcp', '--log-level', 'debug'], {
      cwd: repoRoot,
      env: { ...process.env, YELLO_SOCKET: daemon.socketPath, YELLO_TOKEN_FILE: tokenPath },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const client = new RawMcpClient(child);
    const init = await client.request('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'raw-test-client', version: '1' },
    });
    if (!init.result) throw new Error(`initialize failed: ${JSON.stringify(init)}`);
    client.notify('notifications/initialized');
    return client;
  }

  /** Writes one request line; resolves with the answer of the same id. */
  async request(method: string, params: Record<string, unknown> = {}, timeoutMs = 30_000): Promise<RawMessage> {
    const id = this.#nextId++;
    this.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    let answer: RawMessage | undefined;
    await waitFor(
      () => (answer = this.messages.find((m) => m.id === id && (m.result !== undefined || m.error !== undefined))) !== undefined,
      `the answer to ${method} (id ${id}); stderr tail: ${this.stderr.slice(-1500)}`,
      timeoutMs,
    );
    return answer!;
  }

  /** Writes one notification line. */
  notify(method: string, params: Record<string, unknown> = {}): void {
    this.child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method, params }) + '\n');
  }

  /** `tools/call`; `meta` goes into `params._meta` (a progressToken, say). */
  async callTool(
    name: string,
    args: Record<string, unknown> = {},
    meta?: Record<string, unknown>,
    timeoutMs?: number,
  ): Promise<RawToolResult> {
    const answer = await this.request('tools/call', { name, arguments: args, ...(meta ? { _meta: meta } : {}) }, timeoutMs);
    if (!answer.result) throw new Error(`tools/call ${name} answered an error: ${JSON.stringify(answer.error)}`);
    return answer.result as unknown as RawToolResult;
  }

  /** Notifications (messages with a method and no id) of `method` received so far. */
  notifications(method: string): RawMessage[] {
    return this.messages.filter((m) => m.method === method && m.id === undefined);
  }

  /** Ends stdin (the server exits on its own) and waits for the exit. */
  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => {
      this.child.once('exit', () => {
        resolve();
      });
    });
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGTERM'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** The text content of a raw tool result. */
export const rawText = (r: RawToolResult): string => r.content.map((c) => c.text ?? '').join('\n');
