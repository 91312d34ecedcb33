// Two agents, each behind its own `yello mcp`, hold a conversation through the tools, driven by
// the official MCP SDK client. Checked against the daemon itself: receipts, atomic replies,
// where presentation starts, notifications, and an export that `yello verify` accepts.

import fs from 'node:fs';
import path from 'node:path';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { describe, expect, it } from 'vitest';
import { readStream } from '../helpers/client-fixtures.js';
import { useMcpWorld, messagesOf, text, presentedBatch } from './mcp-fixtures.js';
import type { McpClientConfig } from '../../src/mcp/config.js';
import type { ExportLine } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';

const world = useMcpWorld();

describe('yello mcp: a conversation between two agents', () => {
  it('exchanges messages; read_new re-presents until acknowledged; send with acknowledge appends reply and receipt in one operation', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const bob = await world().serve(chat.bobToken);

    const opened = await alice.ok('open_chat', { peer: chat.bob.username });
    expect(opened).toMatchObject({
      chatId: chat.chatId,
      created: false,
      peer: { agentId: chat.bob.id },
      session: { state: 'running', streamId: chat.alice.streamId },
      unreadMessages: 0,
    });
    expect((await bob.ok('open_chat', { peer: chat.alice.id })).chatId).toBe(chat.chatId);

    const sent = await alice.ok('send', { chatId: chat.chatId, text: 'hello bob' });
    expect(sent).toMatchObject({ chatId: chat.chatId, streamId: chat.alice.streamId, acknowledged: null });

    const first = presentedBatch(await bob.ok('read_new', { chatId: chat.chatId, waitMs: 10_000 }));
    // Alice's claim (her fence at 0) arrived on its own while bob followed: state, not a batch.
    expect(first).toMatchObject({ streamId: chat.alice.streamId, generation: '1', fromPosition: '1' });
    expect(messagesOf(first)).toEqual(['hello bob']);
    // Not acknowledged: the same batch again, flagged as repeated.
    const again = await bob.ok('read_new', { chatId: chat.chatId });
    expect(again).toMatchObject({ repeated: true, batch: { batchId: first.batchId, nextPosition: first.nextPosition } });
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).acknowledged).toBeNull();

    const reply = await bob.ok('send', { chatId: chat.chatId, text: 'hi alice', acknowledge: true, batchId: first.batchId });
    expect(reply.acknowledged).toEqual({ streamId: chat.alice.streamId, generation: '1', nextPosition: first.nextPosition });
    // One operation holds both records, at consecutive positions: the reply and the receipt.
    const op = await world().admin.rpc.operations.get({ streamId: chat.bob.streamId, operationId: reply.operationId });
    expect(op).toMatchObject({ state: 'committed', firstPosition: reply.position, nextPosition: reply.nextPosition });
    expect(BigInt(op.nextPosition!) - BigInt(op.firstPosition!)).toBe(2n);
    const ofOp = (await readStream(world().admin, chat.bob.streamId)).filter((r) => r.wrapper.operationId === reply.operationId);
    expect(ofOp.map((r) => r.wrapper.type)).toEqual(['chat.message', 'chat.receipt']);
    expect(ofOp[1]!.wrapper.type === 'chat.receipt' && ofOp[1]!.wrapper.receipt).toMatchObject({
      peerStreamId: chat.alice.streamId,
      nextPosition: first.nextPosition,
      batchId: first.batchId,
    });
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).acknowledged).toEqual({
      generation: '1',
      nextPosition: first.nextPosition,
    });

    expect(await bob.ok('read_new', { chatId: chat.chatId })).toMatchObject({ batch: null, repeated: false });

    // Alice hears about it (a logging notification), reads it, acknowledges it.
    await waitFor(
      () =>
        alice.notifications.some(
          (n) => n.method === 'notifications/message' && n.params.data?.event === 'peer-wrote' && n.params.data.chatId === chat.chatId,
        ),
      'peer-wrote notification',
      10_000,
    );
    const toAlice = presentedBatch(await alice.ok('read_new', { chatId: chat.chatId, waitMs: 10_000 }));
    expect(messagesOf(toAlice)).toEqual(['hi alice']);
    expect(toAlice.records.find((r: { type: string }) => r.type === 'receipt')).toMatchObject({
      authorAgentId: chat.bob.id,
      acknowledgedBefore: first.nextPosition,
    });
    const ack = await alice.ok('acknowledge', { chatId: chat.chatId, batchId: toAlice.batchId });
    expect(ack).toMatchObject({ acknowledged: { streamId: chat.bob.streamId, nextPosition: toAlice.nextPosition } });
    expect((await world().admin.rpc.streams.get({ streamId: chat.bob.streamId })).acknowledged).toEqual({
      generation: '1',
      nextPosition: toAlice.nextPosition,
    });
    // The receipt is spent: nothing is presented any more.
    expect((await alice.fail('acknowledge', { chatId: chat.chatId, batchId: toAlice.batchId })).type).toBe('NOTHING_PRESENTED');
  });

  it("a new server starts presenting at the agent's last receipt; history and the transcript resource acknowledge nothing", async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    await alice.ok('open_chat', { peer: chat.bob.username });
    for (const t of ['one', 'two', 'three']) await alice.ok('send', { chatId: chat.chatId, text: t });

    const bob1 = await world().serve(chat.bobToken);
    const b1 = presentedBatch(await bob1.ok('read_new', { chatId: chat.chatId }));
    expect(messagesOf(b1)).toEqual(['one', 'two', 'three']);
    await bob1.ok('acknowledge', { chatId: chat.chatId, batchId: b1.batchId });
    for (const t of ['four', 'five']) await alice.ok('send', { chatId: chat.chatId, text: t });
    // Reading without acknowledging: history, the transcript resource.
    const hist = await bob1.ok('history', { chatId: chat.chatId, direction: 'forward' });
    expect(hist.messages.map((m: { content: string }) => m.content)).toEqual(['one', 'two', 'three', 'four', 'five']);
    const res = await bob1.client.readResource({ uri: `yello://chats/${chat.chatId}/transcript` });
    expect((res.contents[0] as { text: string }).text).toContain('five');
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).acknowledged).toEqual({
      generation: '1',
      nextPosition: b1.nextPosition,
    });
    await bob1.close();

    const bob2 = await world().serve(chat.bobToken);
    const opened = await bob2.ok('open_chat', { peer: chat.alice.username });
    expect(opened.session.next).toEqual({ generation: '1', position: b1.nextPosition });
    expect(opened.unreadMessages).toBe(2);
    const b2 = presentedBatch(await bob2.ok('read_new', { chatId: chat.chatId }));
    expect(b2.fromPosition).toBe(b1.nextPosition);
    expect(messagesOf(b2)).toEqual(['four', 'five']);
  });

  it('sends notifications/resources/updated for a subscribed transcript when the peer writes', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const bob = await world().serve(chat.bobToken);
    const uri = `yello://chats/${chat.chatId}/transcript`;
    const listed = await bob.client.listResources();
    expect(listed.resources.map((r) => r.uri)).toContain(uri);
    const templates = await bob.client.listResourceTemplates();
    expect(templates.resourceTemplates.map((t) => t.uriTemplate)).toContain('yello://chats/{chatId}/transcript');
    await bob.client.subscribeResource({ uri });
    await alice.ok('send', { chatId: chat.chatId, text: 'ping' });
    await waitFor(
      () => bob.notifications.some((n) => n.method === 'notifications/resources/updated' && n.params.uri === uri),
      'resources/updated',
      10_000,
    );
    const res = await bob.client.readResource({ uri });
    expect((res.contents[0] as { text: string }).text).toMatch(/alice.* → .*bob.*: "ping"/);
    await expect(bob.client.subscribeResource({ uri: 'yello://chats/not a chat/transcript' })).rejects.toThrow(
      /not a yello transcript URI/,
    );
  });

  it('ends in an export that `yello verify` accepts with 0 problems', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const bob = await world().serve(chat.bobToken);
    await alice.ok('open_chat', { peer: chat.bob.username });
    await alice.ok('send', { chatId: chat.chatId, text: 'Shall we verify this? ✓ «unicode» and\nnew lines' });
    for (let turn = 0; turn < 3; turn++) {
      const toBob = presentedBatch(await bob.ok('read_new', { chatId: chat.chatId, waitMs: 10_000 }));
      await bob.ok('send', { chatId: chat.chatId, text: `bob turn ${turn}`, acknowledge: true });
      const toAlice = await waitFor(async () => (await alice.ok('read_new', { chatId: chat.chatId })).batch, 'bob reply', 10_000);
      expect(messagesOf(toAlice)).toContain(`bob turn ${turn}`);
      await alice.ok('send', { chatId: chat.chatId, text: `alice turn ${turn}`, acknowledge: true });
      expect(toBob).not.toBeNull();
    }
    const out = path.join(world().dir, `${chat.chatId}.jsonl`);
    const jwks = path.join(world().dir, 'jwks.json');
    await world().cli.ok(['chats', 'export', chat.chatId, '--out', out]);
    fs.writeFileSync(jwks, (await world().cli.ok(['keys', 'list', '--json'])).stdout);
    const verified = await world().cli.json<{ problems: unknown[]; messages: number }>(['verify', out, '--jwks', jwks]);
    expect(verified.problems).toEqual([]);
    expect(verified.messages).toBe(7);
    const exported = fs
      .readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as ExportLine);
    expect(exported.filter((r) => r.wrapper?.type === 'chat.receipt')).toHaveLength(6);
  });
});

describe('yello mcp --print-config', () => {
  it('prints the mcpServers snippet with absolute paths and never the token, and the snippet runs', async () => {
    const chat = await world().chat();
    const relative = path.relative(world().dir, chat.aliceToken);
    // Its own process in another directory: the relative path resolves from there.
    const r = await world().cli.run(['--token-file', relative, 'mcp', '--print-config'], { cwd: world().dir, process: true });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain(chat.alice.token);
    const config = JSON.parse(r.stdout) as McpClientConfig;
    // Named after the agent (test/mcp/setup.test.ts): two agents in one client do not collide.
    expect(Object.keys(config.mcpServers)).toEqual([`yello-${chat.alice.username}`]);
    const entry = config.mcpServers[`yello-${chat.alice.username}`]!;
    expect(entry.command).toBe(process.execPath);
    expect(path.isAbsolute(entry.args[0] ?? '')).toBe(true);
    expect(entry.args.slice(1)).toEqual(['mcp']);
    expect(entry.env).toEqual({ YELLO_SOCKET: world().daemon.socketPath, YELLO_TOKEN_FILE: chat.aliceToken });

    // What an MCP client does with it.
    const client = new Client({ name: 'config-check', version: '1.0.0' });
    await client.connect(new StdioClientTransport({ command: entry.command, args: entry.args, env: entry.env, stderr: 'ignore' }));
    try {
      const who = await client.callTool({ name: 'whoami', arguments: {} });
      expect(who.structuredContent).toMatchObject({ agentId: chat.alice.id, username: chat.alice.username });
    } finally {
      await client.close();
    }
  });

  it('refuses to print a config for a token given only as $YELLO_TOKEN (usage, exit 2)', async () => {
    const chat = await world().chat();
    const r = await world().cli.run(['mcp', '--print-config'], { env: { YELLO_TOKEN: chat.alice.token } });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/token file/);
    expect(r.stderr).not.toContain(chat.alice.token);
  });
});

describe('yello mcp as a process', () => {
  it('exits 2 with a clear message for no token (the admin token is served, refused by every tool: setup.test.ts)', async () => {
    const none = await world().cli.run(['mcp'], { process: true });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--token-file/);
  });

  it('releases its claims when the client goes away, so the next server needs no --replace', async () => {
    const chat = await world().chat();
    const first = await world().serve(chat.aliceToken);
    await first.ok('open_chat', { peer: chat.bob.username });
    // Opening claims nothing; the first write does.
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).writer.active).toBe(false);
    await first.ok('send', { chatId: chat.chatId, text: 'claims the stream' });
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).writer.active).toBe(true);
    await first.close();
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).writer.active).toBe(false);
    const second = await world().serve(chat.aliceToken);
    await second.ok('send', { chatId: chat.chatId, text: 'claims it again' });
    expect(text(await second.call('whoami'))).toContain(chat.alice.username);
  });
});
