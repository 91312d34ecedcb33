// A raw stdio client for `yello mcp`: the test writes JSON-RPC lines itself (or any bytes at
// all) and reads the server's stdout line by line, without the SDK in between. For what the SDK
// client cannot send (malformed JSON, batches, requests before initialize) and to check that
// what the SDK shows is what the server put on the wire.

import { spawn, type ChildProcess } from 'node:child_process';
import { cliEnv, yelloBin } from '../helpers/cli-runner.js';
import { repoRoot } from '../helpers/daemon-process.js';
import { waitFor } from '../helpers/wait.js';

/** One JSON-RPC message the server wrote. */
export interface RawMessage {
  jsonrpc?: string;
  id?: string | number | null;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

/** The `initialize` request of a client speaking protocol 2025-06-18. */
export const INITIALIZE = {
  jsonrpc: '2.0',
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-stdio-test', version: '1' } },
} as const;

/** A `yello mcp` child driven through its stdin and stdout. */
export class RawMcp {
  readonly lines: string[] = [];
  stderr = '';
  exitCode: number | null | undefined;
  readonly #child: ChildProcess;
  #partial = '';
  #nextId = 1000;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.stdin!.on('error', () => undefined);
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.#partial += chunk;
      for (let nl = this.#partial.indexOf('\n'); nl >= 0; nl = this.#partial.indexOf('\n')) {
        this.lines.push(this.#partial.slice(0, nl));
        this.#partial = this.#partial.slice(nl + 1);
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    child.on('exit', (code) => (this.exitCode = code));
  }

  /** Spawns `yello mcp` with `YELLO_SOCKET` and `YELLO_TOKEN_FILE`, as an MCP client would. */
  static start(socketPath: string, tokenFile: string, args: string[] = []): RawMcp {
    const child = spawn(process.execPath, [yelloBin, 'mcp', ...args], {
      cwd: repoRoot,
      env: cliEnv({ YELLO_SOCKET: socketPath, YELLO_TOKEN_FILE: tokenFile }),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return new RawMcp(child);
  }

  /** Every line the server wrote, parsed (a line that is not JSON fails the test that reads it). */
  messages(): RawMessage[] {
    return this.lines.map((l) => JSON.parse(l) as RawMessage);
  }

  /** Writes `line` and a newline, exactly as given. */
  writeLine(line: string): void {
    this.#child.stdin!.write(line + '\n');
  }

  /** Sends a message (a notification when it has no id). */
  send(message: Record<string, unknown>): void {
    this.writeLine(JSON.stringify(message));
  }

  /** Waits for the first message the server wrote after `from` lines that `match` accepts. */
  async next(match: (m: RawMessage) => boolean, what: string, from = 0, timeoutMs = 20_000): Promise<RawMessage> {
    let found: RawMessage | undefined;
    await waitFor(
      () => {
        found = this.messages().slice(from).find(match);
        return found !== undefined;
      },
      `${what} (server stderr tail: ${this.stderr.slice(-1500)})`,
      timeoutMs,
    );
    return found!;
  }

  /** Sends a request and waits for its response. */
  async request(method: string, params: Record<string, unknown> = {}, timeoutMs = 20_000): Promise<RawMessage> {
    const id = this.#nextId++;
    this.send({ jsonrpc: '2.0', id, method, params });
    return this.next((m) => m.id === id && m.method === undefined, `the answer to ${method} (id ${id})`, 0, timeoutMs);
  }

  /** `initialize` and `notifications/initialized`: the handshake of docs/mcp.md. */
  async initialize(): Promise<RawMessage> {
    const id = this.#nextId++;
    this.send({ ...INITIALIZE, id });
    const answer = await this.next((m) => m.id === id, 'the initialize answer');
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return answer;
  }

  /** Calls a tool; returns the JSON-RPC response (result or error). */
  callTool(name: string, args: Record<string, unknown> = {}): Promise<RawMessage> {
    return this.request('tools/call', { name, arguments: args });
  }

  /** Ends stdin and waits for the exit (kills after 10 s). */
  async close(): Promise<void> {
    if (this.exitCode !== undefined) return;
    const exited = new Promise<void>((resolve) => {
      this.#child.once('exit', () => {
        resolve();
      });
    });
    this.#child.stdin!.end();
    const timer = setTimeout(() => {
      this.#child.kill('SIGKILL');
    }, 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** The text content of a tools/call result. */
export function rawText(m: RawMessage): string {
  const content = (m.result?.content ?? []) as Array<{ type: string; text?: string }>;
  return content.map((c) => c.text ?? '').join('\n');
}
