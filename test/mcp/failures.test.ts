// What `yello mcp` does when things go wrong, seen through the official MCP SDK client: a daemon
// restart, a second server for the same agent (WRITER_ACTIVE, then --replace and FENCED), an
// append whose answer never comes (SIGSTOP, then SIGCONT or SIGKILL), and an admin reset of the
// peer stream. Each is checked against the daemon's own state.

import { describe, expect, it } from 'vitest';
import type { ToolName, ToolOutput } from '../../src/mcp/tool-schemas.js';
import { freeze, messageContents, readStream, thaw } from '../helpers/client-fixtures.js';
import { useMcpWorld, messagesOf, type McpAgent, presentedBatch } from './mcp-fixtures.js';
import { waitFor } from '../helpers/wait.js';

// A daemon in a process of its own: the tests SIGSTOP and SIGKILL it.
const world = useMcpWorld(
  async (w) => {
    if (!w.daemon.running) await w.daemon.restart();
    await w.adminReady();
  },
  { process: true },
);

/** Polls a tool until it succeeds (a daemon coming back); returns its structured content. */
async function eventually<T extends ToolName>(
  agent: McpAgent,
  tool: T,
  args: Record<string, unknown>,
  what: string,
): Promise<ToolOutput<T>> {
  return waitFor(
    async () => {
      const r = await agent.call(tool, args);
      return r.isError ? null : (r.structuredContent as ToolOutput<T>);
    },
    what,
    20_000,
    100,
  );
}

describe('yello mcp across a daemon restart', () => {
  it('keeps working: sends, presents and acknowledges after daemon.restart()', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const bob = await world().serve(chat.bobToken);
    await alice.ok('open_chat', { peer: chat.bob.username });
    await bob.ok('open_chat', { peer: chat.alice.username });
    await alice.ok('send', { chatId: chat.chatId, text: 'before the restart' });
    const before = presentedBatch(await bob.ok('read_new', { chatId: chat.chatId, waitMs: 10_000 }));
    expect(messagesOf(before)).toEqual(['before the restart']);

    await world().daemon.restart();
    await world().adminReady();

    // The presented batch survives the restart (batch ids do), and so do the claims.
    const sent = await alice.ok('send', { chatId: chat.chatId, text: 'after the restart' });
    await bob.ok('acknowledge', { chatId: chat.chatId, batchId: before.batchId });
    const after = presentedBatch(await bob.ok('read_new', { chatId: chat.chatId, waitMs: 10_000 }));
    expect(messagesOf(after)).toEqual(['after the restart']);
    expect(after.fromPosition).toBe(before.nextPosition);
    await bob.ok('send', { chatId: chat.chatId, text: 'got it', acknowledge: true });
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).acknowledged).toEqual({
      generation: '1',
      nextPosition: sent.nextPosition,
    });
    // Live notifications resume too: alice's coordinator follows again after the restart.
    await waitFor(() => alice.notifications.some((n) => n.params.data?.event === 'peer-wrote'), 'peer-wrote after restart', 10_000);
  });
});

describe('yello mcp: one writer per agent and chat', () => {
  it('a second server is WRITER_ACTIVE on its first write; with --replace it takes over and the first answers FENCED and writes nothing more', async () => {
    const chat = await world().chat();
    const first = await world().serve(chat.aliceToken);
    const bob = await world().serve(chat.bobToken);
    await first.ok('open_chat', { peer: chat.bob.username });
    await first.ok('send', { chatId: chat.chatId, text: 'from the first server' });
    const firstEpoch = (await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).writer.epoch;

    const second = await world().serve(chat.aliceToken);
    // Reading is free; writing is one process's.
    await second.ok('open_chat', { peer: chat.bob.username });
    const active = await second.fail('send', { chatId: chat.chatId, text: 'must not be stored' });
    expect(active.type).toBe('WRITER_ACTIVE');
    expect(active.data).toMatchObject({ connected: true, streamId: chat.alice.streamId });
    expect(active.action).toMatch(/--replace/);

    const third = await world().serve(chat.aliceToken, ['--replace']);
    await third.ok('open_chat', { peer: chat.bob.username });
    await third.ok('send', { chatId: chat.chatId, text: 'from the third server' });
    const taken = (await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).writer.epoch;
    expect(BigInt(taken)).toBeGreaterThan(BigInt(firstEpoch));

    const fenced = await first.fail('send', { chatId: chat.chatId, text: 'after being replaced' });
    expect(fenced.type).toBe('FENCED');
    expect(fenced.message).toMatch(/replaced by another coordinator/);
    expect((await first.fail('read_new', { chatId: chat.chatId })).type).toBe('FENCED');
    // It does not claim back on its own, even when asked to open the chat again.
    expect((await first.fail('open_chat', { peer: chat.bob.username })).type).toBe('FENCED');
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).writer.epoch).toBe(taken);
    await waitFor(
      () => first.notifications.some((n) => n.params.data?.event === 'chat-stopped' && n.params.data.type === 'FENCED'),
      'chat-stopped notification',
      10_000,
    );

    expect(messageContents(await readStream(world().admin, chat.alice.streamId))).toEqual([
      'from the first server',
      'from the third server',
    ]);
    // Bob's inbox followed the chat all along: each message came as its own batch.
    const toBob: Array<string | null> = [];
    for (let batch = (await bob.ok('read_new', { chatId: chat.chatId })).batch; batch;) {
      toBob.push(...messagesOf(batch));
      await bob.ok('acknowledge', { chatId: chat.chatId });
      batch = (await bob.ok('read_new', { chatId: chat.chatId })).batch;
    }
    expect(toBob).toEqual(['from the first server', 'from the third server']);
  });
});

describe('yello mcp: appends of unknown outcome', () => {
  it('a send that times out pauses the chat; send refuses with the operationId until operation_status settles it as stored', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken, ['--call-timeout-ms', '1500']);
    await alice.ok('open_chat', { peer: chat.bob.username });
    await alice.ok('send', { chatId: chat.chatId, text: 'a known message' });

    freeze(world().daemon); // the request waits, unread, in the socket
    let uncertain;
    try {
      uncertain = await alice.fail('send', { chatId: chat.chatId, text: 'slow but stored' });
      const paused = await alice.fail('send', { chatId: chat.chatId, text: 'while paused' });
      expect(paused.type).toBe('PAUSED');
      expect(paused.data.operationId).toBe(uncertain.data.operationId);
      expect(paused.text).toContain(uncertain.data.operationId);
      expect((await alice.fail('acknowledge', { chatId: chat.chatId, batchId: 'x' })).type).toBe('NOTHING_PRESENTED');
    } finally {
      thaw(world().daemon);
    }
    expect(uncertain.type).toBe('OUTCOME_UNKNOWN');
    expect(uncertain.data).toMatchObject({ chatId: chat.chatId, cause: 'TIMEOUT' });
    expect(uncertain.action).toMatch(/operation_status/);

    const status = await alice.ok('operation_status', { chatId: chat.chatId });
    expect(status).toMatchObject({
      operationId: uncertain.data.operationId,
      state: 'committed',
      committed: true,
      resolved: true,
      kind: 'send',
      paused: false,
    });
    // Nothing was resent: stored once; and sending works again.
    await alice.ok('send', { chatId: chat.chatId, text: 'next one' });
    expect(messageContents(await readStream(world().admin, chat.alice.streamId))).toEqual([
      'a known message',
      'slow but stored',
      'next one',
    ]);
    expect(await alice.ok('operation_status', { chatId: chat.chatId })).toMatchObject({ state: 'none', paused: false });
    expect(await alice.ok('operation_status', { chatId: chat.chatId, operationId: uncertain.data.operationId })).toMatchObject({
      state: 'committed',
      committed: true,
      resolved: false,
    });
  });

  it('a send lost with the daemon (SIGSTOP, then SIGKILL) settles as not stored after the restart, and nothing is resent', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken, ['--call-timeout-ms', '1500']);
    await alice.ok('open_chat', { peer: chat.bob.username });
    await alice.ok('send', { chatId: chat.chatId, text: 'claims the stream' }); // the claim comes with the first write
    freeze(world().daemon);
    const uncertain = await alice.fail('send', { chatId: chat.chatId, text: 'never stored' });
    expect(uncertain.type).toBe('OUTCOME_UNKNOWN');
    await world().daemon.kill(); // the unread request dies with the process
    // Paused, the chat refuses at once: it does not first wait for the daemon to come back (15 s).
    const t0 = performance.now();
    expect((await alice.fail('send', { chatId: chat.chatId, text: 'while paused' })).type).toBe('PAUSED');
    expect(performance.now() - t0, 'PAUSED without waiting for a reconnect').toBeLessThan(5_000);
    await world().daemon.restart();
    await world().adminReady();

    const status = await eventually(alice, 'operation_status', { chatId: chat.chatId }, 'operation_status after the restart');
    expect(status).toMatchObject({
      operationId: uncertain.data.operationId,
      state: 'unknown',
      committed: false,
      resolved: true,
      kind: 'send',
    });
    await alice.ok('send', { chatId: chat.chatId, text: 'sent again by the agent' });
    expect(messageContents(await readStream(world().admin, chat.alice.streamId))).toEqual(['claims the stream', 'sent again by the agent']);
  });

  it('an acknowledgement of unknown outcome that was stored advances presentation once settled', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const bob = await world().serve(chat.bobToken, ['--call-timeout-ms', '1500']);
    await alice.ok('open_chat', { peer: chat.bob.username });
    await alice.ok('send', { chatId: chat.chatId, text: 'please acknowledge' });
    const batch = presentedBatch(await bob.ok('read_new', { chatId: chat.chatId, waitMs: 10_000 }));
    await bob.ok('send', { chatId: chat.chatId, text: 'claims the stream' }); // the claim comes with the first write
    freeze(world().daemon);
    let uncertain;
    try {
      uncertain = await bob.fail('acknowledge', { chatId: chat.chatId, batchId: batch.batchId });
    } finally {
      thaw(world().daemon);
    }
    expect(uncertain.type).toBe('OUTCOME_UNKNOWN');
    expect(await bob.ok('operation_status', { chatId: chat.chatId })).toMatchObject({
      committed: true,
      resolved: true,
      kind: 'acknowledge',
    });
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).acknowledged).toEqual({
      generation: '1',
      nextPosition: batch.nextPosition,
    });
    expect(await bob.ok('read_new', { chatId: chat.chatId })).toMatchObject({ batch: null });
  });
});

describe('yello mcp: continuity breaks', () => {
  it('an admin reset of the peer stream is a tool error naming what a person must do; the chat stops; --resume-after-break is the way on', async () => {
    const chat = await world().chat();
    const alice = await world().serve(chat.aliceToken);
    const bob = await world().serve(chat.bobToken);
    await alice.ok('open_chat', { peer: chat.bob.username });
    await alice.ok('send', { chatId: chat.chatId, text: 'before the reset' });
    const presented = presentedBatch(await bob.ok('read_new', { chatId: chat.chatId, waitMs: 10_000 }));
    expect(messagesOf(presented)).toEqual(['before the reset']);

    await world().admin.rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'test: rewrite history' });
    // The daemon pushes the break (chats.break); the session stops on it.
    await waitFor(
      () =>
        bob.notifications.some(
          (n) => n.params.level === 'error' && n.params.data?.event === 'chat-stopped' && n.params.data.type === 'CONTINUITY_BREAK',
        ),
      'chat-stopped',
      10_000,
    );

    const broken = await bob.fail('read_new', { chatId: chat.chatId });
    expect(broken.type).toBe('CONTINUITY_BREAK');
    expect(broken.data).toMatchObject({ reason: 'GENERATION_CHANGED', streamId: chat.alice.streamId, expected: '1', chatId: chat.chatId });
    expect(broken.action).toMatch(/person/);
    expect(broken.action).toMatch(/yello chats export/);
    expect(broken.action).toMatch(/--resume-after-break/);
    expect((await bob.fail('acknowledge', { chatId: chat.chatId, batchId: presented.batchId })).type).toBe('CONTINUITY_BREAK');
    expect((await bob.fail('send', { chatId: chat.chatId, text: 'must not be stored' })).type).toBe('CONTINUITY_BREAK');
    await waitFor(
      () =>
        bob.notifications.some(
          (n) => n.params.level === 'error' && n.params.data?.event === 'chat-stopped' && n.params.data.type === 'CONTINUITY_BREAK',
        ),
      'chat-stopped',
      10_000,
    );
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).acknowledged).toBeNull();
    expect(messageContents(await readStream(world().admin, chat.bob.streamId))).toEqual([]);
    // Alice's own stream was reset: her session stopped as well, and wrote nothing.
    expect((await alice.fail('send', { chatId: chat.chatId, text: 'after the reset' })).type).toBe('CONTINUITY_BREAK');
    expect(messageContents(await readStream(world().admin, chat.alice.streamId, '2'))).toEqual([]);
    await world().stopServers();

    // A restarted server meets the same break: bob never acknowledged what generation 1 held.
    const bob2 = await world().serve(chat.bobToken, ['--replace']);
    const again = await bob2.fail('read_new', { chatId: chat.chatId });
    expect(again.type).toBe('CONTINUITY_BREAK');
    await world().stopServers();

    // A person looked and decides to go on: the agents continue in generation 2.
    const alice2 = await world().serve(chat.aliceToken);
    await alice2.ok('open_chat', { peer: chat.bob.username });
    await alice2.ok('send', { chatId: chat.chatId, text: 'in generation 2' });
    const bob3 = await world().serve(chat.bobToken, ['--replace', '--resume-after-break']);
    const next = presentedBatch(await bob3.ok('read_new', { chatId: chat.chatId }));
    expect(next).toMatchObject({ generation: '2', fromPosition: '0' });
    expect(messagesOf(next)).toEqual(['in generation 2']);
    await bob3.ok('send', { chatId: chat.chatId, text: 'continuing', acknowledge: true });
    expect((await world().admin.rpc.streams.get({ streamId: chat.alice.streamId })).acknowledged).toEqual({
      generation: '2',
      nextPosition: next.nextPosition,
    });
  });
});
