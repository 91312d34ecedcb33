// `yello mcp --channel` as Claude Code runs it: a child process on stdio, driven by a raw
// JSON-RPC client written from the channel contract (no SDK in between), and
// `yello mcp --print-config --channel`. Also what docs/mcp.md decides for the same agent replying
// through the CLI while its channel server runs: one writer per stream, so `yello send` is refused
// (WRITER_ACTIVE, nothing written) while the server holds the stream, and `yello send --replace`
// takes it, which the channel says once (a `replaced` event) before it goes quiet in that chat.

import { describe, expect, it } from 'vitest';
import type { McpClientConfig } from '../../src/mcp/config.js';
import { readStream } from '../helpers/client-fixtures.js';
import { useMcpWorld } from './mcp-fixtures.js';
import { RawMcp, type RawMessage } from './raw-stdio.js';

const world = useMcpWorld();
const CHANNEL = 'notifications/claude/channel';
const isChannel = (m: RawMessage) => m.method === CHANNEL;

describe('yello mcp --channel on stdio', () => {
  it('declares the channel at initialize, pushes a peer message as a notification line, and goes quiet once replaced', async () => {
    const chat = await world().chat();
    const bob = RawMcp.start(world().daemon.socketPath, chat.bobToken, ['--channel', '--log-level', 'warn']);
    try {
      const init = await bob.initialize();
      const result = init.result as { capabilities: { experimental?: Record<string, unknown> }; instructions?: string };
      expect(result.capabilities.experimental).toEqual({ 'claude/channel': {} });
      expect(result.instructions).toContain('batch_id');

      const sent = await world().cli.run(['--token-file', chat.aliceToken, 'send', chat.chatId, 'hello over the channel']);
      expect(sent.code, sent.stderr).toBe(0);
      const push = await bob.next(isChannel, 'the channel event');
      const params = push.params as { content: string; meta: Record<string, string> };
      expect(params.meta).toMatchObject({ event: 'messages', chat_id: chat.chatId, from: chat.alice.username, messages: '1' });
      expect(params.content).toContain('"hello over the channel"');
      expect(push.id).toBeUndefined();

      // Bob replies and acknowledges through the server: it now holds his stream.
      const reply = await bob.callTool('send', { chatId: chat.chatId, text: 'hi', acknowledge: true, batchId: params.meta.batch_id });
      expect((reply.result as { isError?: boolean }).isError).toBeFalsy();

      // The CLI as bob meanwhile: refused, nothing written.
      const before = await readStream(world().admin, chat.bob.streamId);
      const refused = await world().cli.run(['--token-file', chat.bobToken, 'send', chat.chatId, 'from the cli']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/WRITER_ACTIVE|another/i);
      expect(await readStream(world().admin, chat.bob.streamId)).toEqual(before);

      // With --replace the CLI takes the stream: the channel says so once and pushes nothing more there.
      const replacing = await world().cli.run(['--token-file', chat.bobToken, 'send', '--replace', chat.chatId, 'the cli took over']);
      expect(replacing.code, replacing.stderr).toBe(0);
      const from = bob.lines.length;
      expect((await world().cli.run(['--token-file', chat.aliceToken, 'send', chat.chatId, 'after the takeover'])).code).toBe(0);
      const replaced = await bob.next(
        (m) => isChannel(m) && (m.params as { meta: { event: string } }).meta.event === 'replaced',
        'replaced',
        from,
      );
      expect((replaced.params as { content: string }).content).toContain('REPLACED');
      const events = bob.messages().filter(isChannel);
      expect(events.map((m) => (m.params as { meta: { event: string } }).meta.event)).toEqual(['messages', 'replaced']);
    } finally {
      await bob.close();
    }
    expect(bob.exitCode).toBe(0);
  });
});

describe('yello mcp --print-config --channel', () => {
  it('prints the entry with --channel on stdout (one JSON document) and the claude launch line on stderr', async () => {
    const chat = await world().chat();
    const r = await world().cli.run(['--token-file', chat.aliceToken, 'mcp', '--print-config', '--channel']);
    expect(r.code, r.stderr).toBe(0);
    const config = JSON.parse(r.stdout) as McpClientConfig;
    const name = `yello-${chat.alice.username}`;
    expect(config.mcpServers[name]?.args.slice(1)).toEqual(['mcp', '--channel']);
    expect(r.stderr).toContain(`claude --dangerously-load-development-channels server:${name}`);
    expect(r.stdout).not.toContain(chat.alice.token);
  });
});
