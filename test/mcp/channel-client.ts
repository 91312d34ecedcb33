// A client written from the Claude Code channel contract (code.claude.com/docs/en/channels-reference):
// a plain MCP client that takes the server as a channel when its capabilities declare
// `experimental["claude/channel"]`, and records every `notifications/claude/channel` after
// checking it has the documented shape (`content` a string, `meta` string → string with
// identifier keys). The server is `createMcpServer` itself, in the test's process, over the SDK's
// InMemoryTransport; the daemon is the real one.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { expect } from 'vitest';
import { createMcpServer, type YelloMcpServer } from '../../src/mcp/create-server.js';
import type { ChannelPacing } from '../../src/mcp/channel-presenter.js';
import { waitFor } from '../helpers/wait.js';

/** One channel event as Claude Code would receive it. */
export interface ReceivedEvent {
  content: string;
  meta: Record<string, string>;
}

/** Meta keys Claude Code keeps ("letters, digits, underscores only"; others are silently dropped). */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

function checkedEvent(params: unknown): ReceivedEvent {
  const p = params as { content?: unknown; meta?: unknown };
  expect(typeof p.content).toBe('string');
  const meta = (p.meta ?? {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(meta)) {
    expect(k, `meta key ${k}`).toMatch(IDENTIFIER);
    expect(k, 'source is set by Claude Code').not.toBe('source');
    expect(typeof v, `meta ${k}`).toBe('string');
  }
  return { content: p.content as string, meta: meta as Record<string, string> };
}

/** A `yello mcp --channel` in this process, and a channel client connected to it. */
export class ChannelSession {
  readonly events: ReceivedEvent[] = [];
  /** Every notification method received, in order. */
  readonly methods: string[] = [];

  private constructor(
    readonly server: YelloMcpServer,
    readonly client: Client,
  ) {}

  static async start(
    socketPath: string,
    token: string,
    options: { channel?: boolean; pacing?: Partial<ChannelPacing>; resumeAfterBreak?: boolean } = {},
  ): Promise<ChannelSession> {
    const server = await createMcpServer({
      token,
      socketPath,
      replace: false,
      resumeAfterBreak: options.resumeAfterBreak ?? false,
      channel: options.channel ?? true,
      log: pino({ level: 'silent' }),
      settleMs: 5000,
      reconnect: { minDelayMs: 20, maxDelayMs: 200 },
      ...(options.pacing ? { channelPacing: options.pacing } : {}),
    });
    const client = new Client({ name: 'channel-contract-client', version: '1.0.0' });
    const session = new ChannelSession(server, client);
    client.fallbackNotificationHandler = (n) => {
      session.methods.push(n.method);
      if (n.method === 'notifications/claude/channel') session.events.push(checkedEvent(n.params));
      return Promise.resolve();
    };
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    await client.connect(clientSide);
    return session;
  }

  /** The events of one chat (`event` left out: every kind). */
  of(chatId: string, event?: string): ReceivedEvent[] {
    return this.events.filter((e) => e.meta.chat_id === chatId && (event === undefined || e.meta.event === event));
  }

  /** Waits until `count` events of `chatId` (of kind `event`) arrived; returns them. */
  async await(chatId: string, count: number, event = 'messages', timeoutMs = 15_000): Promise<ReceivedEvent[]> {
    await waitFor(() => this.of(chatId, event).length >= count, `${count} ${event} event(s) in ${chatId}`, timeoutMs);
    return this.of(chatId, event);
  }

  /** Calls a tool that must succeed; returns its structured content. */
  async ok(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
    const r = (await this.client.callTool({ name, arguments: args })) as CallToolResult;
    expect(r.isError, `${name}: ${JSON.stringify(r.content)}`).toBeFalsy();
    return r.structuredContent as Record<string, unknown>;
  }

  /** Calls a tool that must succeed; returns its text. */
  async text(name: string, args: Record<string, unknown>): Promise<string> {
    const r = (await this.client.callTool({ name, arguments: args })) as CallToolResult;
    expect(r.isError, `${name}: ${JSON.stringify(r.content)}`).toBeFalsy();
    return r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
  }

  /** Calls a tool that must fail; returns its error type. */
  async fail(name: string, args: Record<string, unknown>): Promise<string> {
    const r = (await this.client.callTool({ name, arguments: args })) as CallToolResult;
    expect(r.isError, `${name} was expected to fail: ${JSON.stringify(r.structuredContent)}`).toBe(true);
    return (r._meta?.['yello/error'] as { type: string }).type;
  }

  async close(): Promise<void> {
    await this.client.close().catch(() => undefined);
    await this.server.close();
  }
}

/** The positions of the records an event's content shows (`#<position> …` lines inside the fence). */
export function positionsIn(event: ReceivedEvent): string[] {
  return [...event.content.matchAll(/^#(\d+) /gm)].map((m) => m[1] ?? '');
}

/** The positions of the messages an event's content shows (receipts and fences left out). */
export function messagePositionsIn(event: ReceivedEvent): string[] {
  return [...event.content.matchAll(/^#(\d+) \S+ \S+: "/gm)].map((m) => m[1] ?? '');
}
