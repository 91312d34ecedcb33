// An agent's inbox over MCP, through the official SDK client (issue 22, findings 1, 3, 4 and the
// notifications of 5): list_chats with unread counts, wait_for_message across chats (chats
// opened later included), list_peers, open_chat by display name or "@username", resources
// list_changed when a peer opens a chat, message events that no logging level silences,
// progress during waits; acknowledging without traps; a text limit in UTF-8 bytes.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RequestTooLargeError, YelloClient } from '../../src/client/index.js';
import { receiptFor } from '../../src/client/message-batch.js';
import { describeError } from '../../src/mcp/tool-errors.js';
import { APPEND_ENVELOPE_BYTES, TEXT_MAX_BYTES } from '../../src/mcp/tool-schemas.js';
import { ERROR_CODES } from '../../src/shared/errors.js';
import { MAX_APPEND_REQUEST_BYTES } from '../../src/shared/paths.js';
import { repoRoot } from '../helpers/daemon-process.js';
import { waitFor } from '../helpers/wait.js';
import { messagesOf, presentedBatch, useMcpWorld } from './mcp-fixtures.js';

const world = useMcpWorld();

/** Three fresh agents; alice has a chat with bob and one with carol (opened by the admin). */
async function threeAgents() {
  const w = world();
  const alice = await w.agent('alice', 'Alice');
  const bob = await w.agent('bob', 'Bob');
  const carol = await w.agent('carol', 'Carol');
  const ab = (await w.admin.rpc.chats.open({ agentAId: alice.id, agentBId: bob.id })).chat.id;
  const ac = (await w.admin.rpc.chats.open({ agentAId: alice.id, agentBId: carol.id })).chat.id;
  return { alice, bob, carol, ab, ac };
}

const streamOf = (chatId: string, agentId: string) => `${chatId}:${agentId}`;

describe('yello mcp: an inbox', () => {
  it('list_chats shows unread message counts, last activity and a preview, newest activity first', async () => {
    const { alice, bob, carol, ab, ac } = await threeAgents();
    const bobMcp = await world().serve(bob.tokenPath);
    const carolMcp = await world().serve(carol.tokenPath);
    await bobMcp.ok('send', { chatId: ab, text: 'one' });
    await bobMcp.ok('send', { chatId: ab, text: 'two' });
    await carolMcp.ok('send', { chatId: ac, text: 'from carol' });

    const aliceMcp = await world().serve(alice.tokenPath);
    const listed = await aliceMcp.ok('list_chats', {});
    expect(listed.total).toBe(2);
    expect(listed.chats.map((c) => c.chatId)).toEqual([ac, ab]);
    expect(listed.chats[0]).toMatchObject({
      peer: { agentId: carol.id, username: carol.username },
      unreadMessages: 1,
      preview: 'from carol',
    });
    expect(listed.chats[1]).toMatchObject({ peer: { agentId: bob.id }, unreadMessages: 2, preview: 'two' });
    expect(listed.chats[1]!.lastActivityAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    // Receipts count nothing: after alice acknowledges bob's chat, it shows 0 unread.
    presentedBatch(await aliceMcp.ok('read_new', { chatId: ab }));
    await aliceMcp.ok('acknowledge', { chatId: ab });
    const after = await aliceMcp.ok('list_chats', {});
    expect(after.chats.find((c) => c.chatId === ab)?.unreadMessages).toBe(0);
    expect(after.chats.find((c) => c.chatId === ac)?.unreadMessages).toBe(1);
  });

  it('wait_for_message waits across every chat, a chat opened later included; acknowledge without batchId acknowledges what it presented', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const bob = await w.agent('bob', 'Bob');
    await w.admin.rpc.chats.open({ agentAId: alice.id, agentBId: bob.id });
    const aliceMcp = await w.serve(alice.tokenPath);
    const waiting = aliceMcp.ok('wait_for_message', { waitMs: 30_000 });

    // carol does not exist yet when alice starts waiting: her chat is opened later, by her.
    const carol = await w.agent('carol', 'Carol');
    const carolMcp = await w.serve(carol.tokenPath);
    const opened = await carolMcp.ok('open_chat', { peer: alice.username });
    expect(opened.created).toBe(true);
    await carolMcp.ok('send', { chatId: opened.chatId, text: 'hi from carol' });

    const got = await waiting;
    expect(got).toMatchObject({ chatId: opened.chatId, peer: { agentId: carol.id, username: carol.username }, repeated: false });
    const batch = presentedBatch(got as never);
    expect(messagesOf(batch)).toEqual(['hi from carol']);

    // The batch stays presented: the next wait shows it again at once.
    const again = await aliceMcp.ok('wait_for_message', { waitMs: 5000 });
    expect(again).toMatchObject({ chatId: opened.chatId, repeated: true, batch: { batchId: batch.batchId } });
    expect(again.waitedMs).toBeLessThan(5000);

    const ack = await aliceMcp.ok('acknowledge', { chatId: opened.chatId });
    expect(ack.acknowledged).toEqual({ streamId: streamOf(opened.chatId, carol.id), generation: '1', nextPosition: batch.nextPosition });
    expect((await w.admin.rpc.streams.get({ streamId: streamOf(opened.chatId, carol.id) })).acknowledged).toEqual({
      generation: '1',
      nextPosition: batch.nextPosition,
    });
    // Nothing new anywhere: a short wait ends empty (and carol's receipt-free chat stays quiet).
    expect(await aliceMcp.ok('wait_for_message', { waitMs: 500 })).toMatchObject({ chatId: null, batch: null });
    expect((await aliceMcp.fail('acknowledge', { chatId: opened.chatId })).type).toBe('NOTHING_PRESENTED');
  });

  it('sends notifications/resources/list_changed when a peer opens a chat, and lists its transcript', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const aliceMcp = await w.serve(alice.tokenPath);
    // The server watches for chats from the start (nothing was called yet).
    await waitFor(
      () => aliceMcp.logs().some((l) => typeof l.msg === 'string' && l.msg.startsWith('serving MCP')),
      'the server to serve',
      10_000,
    );
    await aliceMcp.client.listResources();
    const bob = await w.agent('bob', 'Bob');
    const bobMcp = await w.serve(bob.tokenPath);
    const { chatId } = await bobMcp.ok('open_chat', { peer: alice.username });
    await waitFor(
      () => aliceMcp.notifications.some((n) => n.method === 'notifications/resources/list_changed'),
      'resources/list_changed at alice',
      10_000,
    );
    const { resources } = await aliceMcp.client.listResources();
    expect(resources.map((r) => r.uri)).toContain(`yello://chats/${chatId}/transcript`);
  });

  it('message events come as resources/updated of yello://inbox, which logging/setLevel warning does not silence', async () => {
    const { alice, bob, ab } = await threeAgents();
    const aliceMcp = await world().serve(alice.tokenPath);
    await aliceMcp.client.setLoggingLevel('warning');
    await aliceMcp.client.subscribeResource({ uri: 'yello://inbox' });
    const bobMcp = await world().serve(bob.tokenPath);
    await bobMcp.ok('send', { chatId: ab, text: 'are you there?' });
    await waitFor(
      () => aliceMcp.notifications.some((n) => n.method === 'notifications/resources/updated' && n.params.uri === 'yello://inbox'),
      'resources/updated for yello://inbox',
      10_000,
    );
    const inbox = await aliceMcp.client.readResource({ uri: 'yello://inbox' });
    expect((inbox.contents[0] as { text: string }).text).toMatch(new RegExp(`${ab} with ${bob.username} \\(Bob\\): 1 unread`));
    // The log notification of the same event is silenced at warning, as the level asks.
    expect(aliceMcp.notifications.some((n) => n.method === 'notifications/message' && n.params.data?.event === 'peer-wrote')).toBe(false);
  });

  it('sends notifications/progress during wait_for_message and read_new waits when the request carries a progressToken', async () => {
    const { alice, ab } = await threeAgents();
    const aliceMcp = await world().serve(alice.tokenPath);
    for (const [name, args] of [
      ['wait_for_message', { waitMs: 3500 }],
      ['read_new', { chatId: ab, waitMs: 3500 }],
    ] as const) {
      const progress: Array<{ progress: number; total?: number }> = [];
      const r = await aliceMcp.client.callTool({ name, arguments: args }, undefined, { onprogress: (p) => progress.push(p) });
      expect(r.isError, name).toBeFalsy();
      expect(progress.length, name).toBeGreaterThanOrEqual(2);
      expect(
        progress.every((p, i) => p.total === 3500 && (i === 0 || p.progress > progress[i - 1]!.progress)),
        name,
      ).toBe(true);
    }
  });

  it('wait_for_message honours cancellation: the cancelled wait takes nothing, the next one presents the message', async () => {
    const { alice, bob, ab } = await threeAgents();
    const aliceMcp = await world().serve(alice.tokenPath);
    const cancel = new AbortController();
    let progressed = 0;
    const waiting = aliceMcp.client.callTool({ name: 'wait_for_message', arguments: { waitMs: 10_000 } }, undefined, {
      signal: cancel.signal,
      onprogress: () => (progressed += 1),
    });
    // The first progress notification says the wait is running on the server.
    await waitFor(() => progressed > 0, 'the wait to run', 10_000);
    cancel.abort();
    await expect(waiting).rejects.toThrow();
    const bobMcp = await world().serve(bob.tokenPath);
    await bobMcp.ok('send', { chatId: ab, text: 'after the cancel' });
    const got = await aliceMcp.ok('wait_for_message', { waitMs: 10_000 });
    expect(got.chatId).toBe(ab);
    expect(messagesOf(presentedBatch(got as never))).toEqual(['after the cancel']);
  });

  it('read_new honours cancellation: the cancelled wait takes nothing, the next read_new presents the message as new', async () => {
    const { alice, bob, ab } = await threeAgents();
    const aliceMcp = await world().serve(alice.tokenPath);
    const cancel = new AbortController();
    let progressed = 0;
    const waiting = aliceMcp.client.callTool({ name: 'read_new', arguments: { chatId: ab, waitMs: 10_000 } }, undefined, {
      signal: cancel.signal,
      onprogress: () => (progressed += 1),
    });
    await waitFor(() => progressed > 0, 'the wait to run', 10_000);
    cancel.abort();
    await expect(waiting).rejects.toThrow();
    const bobMcp = await world().serve(bob.tokenPath);
    await bobMcp.ok('send', { chatId: ab, text: 'after the cancel' });
    // A wait that went on after its cancel would take the message and show it to nobody: this
    // read_new would then queue behind it and get it as "shown before".
    const got = await aliceMcp.ok('read_new', { chatId: ab, waitMs: 10_000 });
    expect(got.repeated).toBe(false);
    expect(messagesOf(presentedBatch(got as never))).toEqual(['after the cancel']);
  });

  it('a chat that broke ends a wait once with its error, naming the chat; later waits go on, and list_chats shows the problem', async () => {
    const chat = await world().chat();
    const cli = world().cli;
    await cli.ok(['--token-file', chat.aliceToken, 'send', chat.chatId, 'm1']);
    await cli.ok(['streams', 'reset', chat.alice.streamId, '--reason', 'test: reset with m1 unread']);
    const bob = await world().serve(chat.bobToken);
    const broken = await bob.fail('wait_for_message', { waitMs: 10_000 });
    expect(broken.type).toBe('CONTINUITY_BREAK');
    expect(broken.data).toMatchObject({ chatId: chat.chatId, streamId: chat.alice.streamId, reason: 'GENERATION_CHANGED' });
    expect(broken.message).toContain(chat.chatId);
    expect(await bob.ok('wait_for_message', { waitMs: 300 })).toMatchObject({ chatId: null });
    expect((await bob.ok('list_chats', {})).chats).toEqual([expect.objectContaining({ chatId: chat.chatId, problem: 'CONTINUITY_BREAK' })]);
  });

  it('list_peers lists the agents one may talk to (policy open: every other agent), with their chat', async () => {
    const { alice, bob, carol, ab } = await threeAgents();
    const aliceMcp = await world().serve(alice.tokenPath);
    const { policy, peers } = await aliceMcp.ok('list_peers', {});
    expect(policy).toBe('open');
    expect(peers.map((p) => p.agentId)).not.toContain(alice.id);
    expect(peers.find((p) => p.agentId === bob.id)).toEqual({ agentId: bob.id, username: bob.username, name: 'Bob', chatId: ab });
    expect(peers.find((p) => p.agentId === carol.id)).toMatchObject({ username: carol.username, name: 'Carol' });
  });

  it('open_chat takes a display name in any case, a username in any case and "@username"; ambiguity and strangers say what to do', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const dave = await w.agent('dave', `Dave ${Date.now().toString(36)}`);
    const aliceMcp = await w.serve(alice.tokenPath);
    const byName = await aliceMcp.ok('open_chat', { peer: dave.name.toUpperCase() });
    expect(byName).toMatchObject({ created: true, peer: { agentId: dave.id } });
    expect(await aliceMcp.ok('open_chat', { peer: `@${dave.username.toUpperCase()}` })).toMatchObject({
      chatId: byName.chatId,
      created: false,
    });
    expect(await aliceMcp.ok('open_chat', { peer: `@${dave.username}` })).toMatchObject({ chatId: byName.chatId });
    const twin = `Twin ${Date.now().toString(36)}`;
    await w.agent('twin', twin);
    await w.agent('twin', twin);
    const ambiguous = await aliceMcp.fail('open_chat', { peer: twin.toLowerCase() });
    expect(ambiguous.type).toBe('AMBIGUOUS');
    expect(ambiguous.action).toMatch(/username or agent id/);
    const stranger = await aliceMcp.fail('open_chat', { peer: 'Nobody By That Name' });
    expect(stranger).toMatchObject({ type: 'NOT_FOUND' });
    expect(stranger.action).toMatch(/list_peers/);
  });
});

describe('yello mcp: acknowledging without traps', () => {
  it('a batchId shown before a server restart is acknowledged by the new server; one the peer wrote past is re-presented', async () => {
    const { alice, bob, ab } = await threeAgents();
    const bobMcp = await world().serve(bob.tokenPath);
    await bobMcp.ok('send', { chatId: ab, text: 'x' });
    const first = await world().serve(alice.tokenPath);
    const shown = presentedBatch(await first.ok('read_new', { chatId: ab }));
    await first.close();

    const second = await world().serve(alice.tokenPath);
    const ack = await second.ok('acknowledge', { chatId: ab, batchId: shown.batchId });
    expect(ack.acknowledged.nextPosition).toBe(shown.nextPosition);
    expect((await world().admin.rpc.streams.get({ streamId: streamOf(ab, bob.id) })).acknowledged?.nextPosition).toBe(shown.nextPosition);

    await second.close();
    // Shown, then the server restarts and the peer writes on: that batchId is no longer the next one.
    await bobMcp.ok('send', { chatId: ab, text: 'y' });
    const third = await world().serve(alice.tokenPath);
    const y = presentedBatch(await third.ok('read_new', { chatId: ab }));
    await third.close();
    await bobMcp.ok('send', { chatId: ab, text: 'z' });
    const fourth = await world().serve(alice.tokenPath);
    const stale = await fourth.fail('acknowledge', { chatId: ab, batchId: y.batchId });
    expect(stale.type).toBe('NOT_PRESENTED');
    expect(stale.action).toMatch(/read_new/);
    expect((await world().admin.rpc.streams.get({ streamId: streamOf(ab, bob.id) })).acknowledged?.nextPosition).toBe(shown.nextPosition);
    const now = presentedBatch(await fourth.ok('read_new', { chatId: ab }));
    expect(messagesOf(now)).toEqual(['y', 'z']);
    await fourth.ok('acknowledge', { chatId: ab });
  });

  it('send {acknowledge: true} with nothing presented is refused and sends nothing', async () => {
    const { alice, bob, ab } = await threeAgents();
    const aliceMcp = await world().serve(alice.tokenPath);
    await aliceMcp.ok('open_chat', { peer: bob.username });
    const refused = await aliceMcp.fail('send', { chatId: ab, text: 'a reply to nothing', acknowledge: true });
    expect(refused.type).toBe('NOTHING_PRESENTED');
    expect(refused.message).toMatch(/nothing was sent/);
    const history = await aliceMcp.ok('history', { chatId: ab });
    expect(history.messages).toEqual([]);
  });

  it('empty and whitespace-only text is refused, and nothing is stored', async () => {
    const { alice, ab } = await threeAgents();
    const aliceMcp = await world().serve(alice.tokenPath);
    for (const text of ['', '   ', ' \n\t ']) {
      const r = await aliceMcp.call('send', { chatId: ab, text });
      expect(r.isError, JSON.stringify(text)).toBe(true);
    }
    expect((await aliceMcp.fail('send', { chatId: ab, text: ' \n ' })).message).toMatch(/empty or only whitespace/);
    expect((await aliceMcp.ok('history', { chatId: ab })).messages).toEqual([]);
  });
});

describe('yello mcp: the text limit in UTF-8 bytes', () => {
  it('the schema states the byte limit; exactly that many bytes are sent, one more is refused with a TEXT_TOO_LARGE that points at docs/mcp.md', async () => {
    const { alice, bob, ab } = await threeAgents();
    const aliceMcp = await world().serve(alice.tokenPath);
    const { tools } = await aliceMcp.client.listTools();
    const textSchema = (
      tools.find((t) => t.name === 'send')!.inputSchema as { properties: Record<string, { maxLength?: number; description?: string }> }
    ).properties.text!;
    expect(textSchema.maxLength).toBe(TEXT_MAX_BYTES);
    expect(textSchema.description).toMatch(new RegExp(`${TEXT_MAX_BYTES} bytes of UTF-8`));

    // The largest envelope: a reply with its receipt and a 256-character messageId.
    const bobMcp = await world().serve(bob.tokenPath);
    await bobMcp.ok('send', { chatId: ab, text: 'q' });
    const shown = presentedBatch(await aliceMcp.ok('read_new', { chatId: ab, waitMs: 10_000 }));
    const messageId = 'm'.repeat(256);
    const full = await aliceMcp.ok('send', { chatId: ab, text: 'a'.repeat(TEXT_MAX_BYTES), messageId, acknowledge: true });
    expect(full.acknowledged).not.toBeNull();
    await aliceMcp.ok('send', { chatId: ab, text: 'é'.repeat(TEXT_MAX_BYTES / 2) });

    for (const text of ['é'.repeat(TEXT_MAX_BYTES / 2 + 1), 'a'.repeat(TEXT_MAX_BYTES - 1) + '"', '😀'.repeat(TEXT_MAX_BYTES / 4) + 'a']) {
      const refused = await aliceMcp.fail('send', { chatId: ab, text });
      expect(refused.type).toBe('TEXT_TOO_LARGE');
      expect(refused.message).toMatch(new RegExp(`limit of ${TEXT_MAX_BYTES} bytes`));
      expect(refused.action).toMatch(/docs\/mcp\.md, "Limits"/);
    }
    // The limit is the daemon's append cap minus the envelope: measured here with real values
    // (this agent's coordinator token, the batchId of a reply, the longest messageId and
    // positions), the envelope takes well under the room left for it.
    const agent = await YelloClient.connect({ socketPath: world().daemon.socketPath, token: alice.token, clientName: 'envelope' });
    try {
      const streamId = streamOf(ab, alice.id);
      const claim = await agent.call('streams.claim', { streamId, replace: true });
      const line = JSON.stringify({
        jsonrpc: '2.0',
        id: 9_999_999_999,
        method: 'streams.append',
        params: {
          streamId,
          coordinatorToken: claim.coordinatorToken,
          generation: '18446744073709551615',
          expectedPosition: '18446744073709551615',
          operationId: `op-${randomUUID()}`,
          records: [
            { type: 'chat.message', messageId, content: '' },
            receiptFor({
              streamId: streamOf(ab, bob.id),
              generation: '18446744073709551615',
              nextPosition: '18446744073709551615',
              batchId: shown.batchId,
            }),
          ],
        },
      });
      const envelope = Buffer.byteLength(line, 'utf8') + 1;
      expect(envelope).toBeLessThan(APPEND_ENVELOPE_BYTES / 2);
      expect(TEXT_MAX_BYTES).toBe(MAX_APPEND_REQUEST_BYTES - APPEND_ENVELOPE_BYTES);
    } finally {
      agent.close();
    }
    const docs = fs.readFileSync(path.join(repoRoot, 'docs/mcp.md'), 'utf8');
    const limits = docs.slice(docs.indexOf('### 4.5 Limits'), docs.indexOf('## 5.'));
    expect(limits).toContain(TEXT_MAX_BYTES.toLocaleString('en-US'));
    expect(limits).toContain('TEXT_TOO_LARGE');
    expect(limits).toContain('REQUEST_TOO_LARGE');
  });

  it("REQUEST_TOO_LARGE's advice points at the Limits section of docs/mcp.md", () => {
    const err = new RequestTooLargeError({
      code: ERROR_CODES.REQUEST_TOO_LARGE,
      message: 'request of 300000 bytes exceeds the limit of 262144',
      data: { type: 'REQUEST_TOO_LARGE', limit: 262_144, size: 300_000 },
    });
    const info = describeError(err, { chatId: 'chat_x', socketPath: '/s' });
    expect(info.type).toBe('REQUEST_TOO_LARGE');
    expect(info.action).toMatch(/docs\/mcp\.md, "Limits"/);
  });
});
