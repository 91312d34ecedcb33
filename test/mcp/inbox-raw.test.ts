// The inbox findings of issue 22 (1, 3, 4 and the notifications of 5) through a raw stdio
// client: JSON lines written by the test, read back line by line, nothing of the SDK between
// (see raw-client.ts). Progress tokens, list_changed and resource updates are checked as they
// travel.

import { describe, expect, it } from 'vitest';
import { TEXT_MAX_BYTES } from '../../src/mcp/tool-schemas.js';
import { waitFor } from '../helpers/wait.js';
import { RawMcpClient, rawText } from './raw-client.js';
import { useMcpWorld } from './mcp-fixtures.js';

const raws: RawMcpClient[] = [];
const world = useMcpWorld(async () => {
  await Promise.all(raws.splice(0).map((r) => r.close()));
});

async function raw(tokenPath: string): Promise<RawMcpClient> {
  const client = await RawMcpClient.start(world().daemon, tokenPath);
  raws.push(client);
  return client;
}

describe('yello mcp over raw JSON lines: the inbox', () => {
  it('wait_for_message with a progressToken: progress while waiting, list_changed when a peer opens a chat, then the chat and its batch', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const bob = await w.agent('bob', 'Bob');
    const ab = (await w.admin.rpc.chats.open({ agentAId: alice.id, agentBId: bob.id })).chat.id;
    const client = await raw(alice.tokenPath);
    const waiting = client.callTool('wait_for_message', { waitMs: 20_000 }, { progressToken: 'wait-1' });
    await waitFor(() => client.notifications('notifications/progress').length >= 1, 'a progress notification', 10_000);
    const progress = client.notifications('notifications/progress')[0]!.params!;
    expect(progress).toMatchObject({ progressToken: 'wait-1', total: 20_000 });
    expect(progress.progress).toBeGreaterThan(0);

    const carol = await w.agent('carol', 'Carol');
    const carolMcp = await w.serve(carol.tokenPath);
    const { chatId } = await carolMcp.ok('open_chat', { peer: `@${alice.username.toUpperCase()}` });
    await waitFor(() => client.notifications('notifications/resources/list_changed').length >= 1, 'resources/list_changed', 10_000);
    await carolMcp.ok('send', { chatId, text: 'raw hello' });
    const got = await waiting;
    expect(got.isError).toBeFalsy();
    expect(got.structuredContent).toMatchObject({ chatId, peer: { agentId: carol.id }, batch: { streamId: `${chatId}:${carol.id}` } });
    expect(rawText(got)).toContain('raw hello');

    const listed = await client.callTool('list_chats');
    const chats = (listed.structuredContent as { chats: Array<{ chatId: string; unreadMessages: number }> }).chats;
    expect(chats.find((c) => c.chatId === chatId)?.unreadMessages).toBe(1);
    expect(chats.find((c) => c.chatId === ab)?.unreadMessages).toBe(0);
    const peers = await client.callTool('list_peers');
    expect((peers.structuredContent as { peers: Array<{ agentId: string }> }).peers.map((p) => p.agentId)).toEqual(
      expect.arrayContaining([bob.id, carol.id]),
    );
    const opened = await client.callTool('open_chat', { peer: bob.username.toUpperCase() });
    expect(opened.isError).toBeFalsy();
    expect((opened.structuredContent as { chatId: string }).chatId).toBe(ab);
  });

  it('acknowledge without batchId; send {acknowledge: true} with nothing presented and empty text are refused', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const bob = await w.agent('bob', 'Bob');
    const ab = (await w.admin.rpc.chats.open({ agentAId: alice.id, agentBId: bob.id })).chat.id;
    const client = await raw(alice.tokenPath);
    const refused = await client.callTool('send', { chatId: ab, text: 'reply to nothing', acknowledge: true });
    expect(refused.isError).toBe(true);
    expect(refused._meta?.['yello/error']).toMatchObject({ type: 'NOTHING_PRESENTED' });
    for (const text of ['', '  \n '])
      expect((await client.callTool('send', { chatId: ab, text })).isError, JSON.stringify(text)).toBe(true);
    expect((await w.admin.rpc.streams.get({ streamId: `${ab}:${alice.id}` })).nextPosition).toBe('0');

    const bobMcp = await w.serve(bob.tokenPath);
    await bobMcp.ok('send', { chatId: ab, text: 'ack me' });
    const shown = await client.callTool('wait_for_message', { waitMs: 10_000 });
    const batch = (shown.structuredContent as { batch: { nextPosition: string } }).batch;
    const ack = await client.callTool('acknowledge', { chatId: ab });
    expect(ack.isError).toBeFalsy();
    expect((await w.admin.rpc.streams.get({ streamId: `${ab}:${bob.id}` })).acknowledged?.nextPosition).toBe(batch.nextPosition);
  });

  it('a text over the byte limit is refused in bytes, pointing at docs/mcp.md', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const bob = await w.agent('bob', 'Bob');
    const ab = (await w.admin.rpc.chats.open({ agentAId: alice.id, agentBId: bob.id })).chat.id;
    const client = await raw(alice.tokenPath);
    const r = await client.callTool('send', { chatId: ab, text: 'é'.repeat(TEXT_MAX_BYTES / 2 + 1) });
    expect(r.isError).toBe(true);
    expect(rawText(r)).toMatch(new RegExp(`${TEXT_MAX_BYTES + 2} bytes of UTF-8.*limit of ${TEXT_MAX_BYTES} bytes`));
    expect(rawText(r)).toMatch(/docs\/mcp\.md, "Limits"/);
    const tools = await client.request('tools/list');
    const send = (tools.result!.tools as Array<{ name: string; inputSchema: { properties: { text: { maxLength: number } } } }>).find(
      (t) => t.name === 'send',
    )!;
    expect(send.inputSchema.properties.text.maxLength).toBe(TEXT_MAX_BYTES);
  });

  it('after logging/setLevel warning, a subscribed yello://inbox still gets resources/updated when a peer writes', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const bob = await w.agent('bob', 'Bob');
    const ab = (await w.admin.rpc.chats.open({ agentAId: alice.id, agentBId: bob.id })).chat.id;
    const client = await raw(alice.tokenPath);
    expect((await client.request('logging/setLevel', { level: 'warning' })).result).toBeDefined();
    expect((await client.request('resources/subscribe', { uri: 'yello://inbox' })).result).toBeDefined();
    const bobMcp = await w.serve(bob.tokenPath);
    await bobMcp.ok('send', { chatId: ab, text: 'still there?' });
    await waitFor(
      () => client.notifications('notifications/resources/updated').some((n) => n.params?.uri === 'yello://inbox'),
      'resources/updated of yello://inbox',
      10_000,
    );
    expect(
      client
        .notifications('notifications/message')
        .filter((n) => (n.params?.data as { event?: string } | undefined)?.event === 'peer-wrote'),
    ).toEqual([]);
  });
});
