// The inbox loop of docs/mcp.md ("An inbox loop") with three agents, each behind its own
// `yello mcp` driven by the official SDK client: alice waits with wait_for_message; bob and
// carol write to her in two chats at once; alice answers each with a reply that carries the
// receipt (send {acknowledge: true}); bob and carol read the answers, and the daemon holds the
// receipts.

import { describe, expect, it } from 'vitest';
import { messagesOf, presentedBatch, useMcpWorld } from './mcp-fixtures.js';

const world = useMcpWorld();

describe('yello mcp: three agents, one inbox', () => {
  it('alice waits across her chats and answers bob and carol, each with reply and receipt in one append', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const bob = await w.agent('bob', 'Bob');
    const carol = await w.agent('carol', 'Carol');
    const [aliceMcp, bobMcp, carolMcp] = await Promise.all([w.serve(alice.tokenPath), w.serve(bob.tokenPath), w.serve(carol.tokenPath)]);

    // Alice starts waiting before either chat exists.
    const firstWait = aliceMcp.ok('wait_for_message', { waitMs: 60_000 });
    const [withBob, withCarol] = await Promise.all([
      bobMcp.ok('open_chat', { peer: alice.username }),
      carolMcp.ok('open_chat', { peer: `@${alice.username}` }),
    ]);
    await Promise.all([
      bobMcp.ok('send', { chatId: withBob.chatId, text: 'bob: what time is the meeting?' }),
      carolMcp.ok('send', { chatId: withCarol.chatId, text: 'carol: can you review my draft?' }),
    ]);

    // The inbox loop: wait, answer with reply + receipt, wait again, until both are answered.
    const answered = new Map<string, string[]>();
    let wait = await firstWait;
    for (let round = 0; round < 2; round++) {
      expect(wait.chatId, `round ${round}: ${JSON.stringify(wait)}`).not.toBeNull();
      const batch = presentedBatch(wait as never);
      const chatId = wait.chatId!;
      const texts = messagesOf(batch) as string[];
      answered.set(chatId, texts);
      const reply = await aliceMcp.ok('send', { chatId, text: `alice: got "${texts.join(' / ')}"`, acknowledge: true });
      expect(reply.acknowledged).toEqual({ streamId: batch.streamId, generation: batch.generation, nextPosition: batch.nextPosition });
      if (round === 0) wait = await aliceMcp.ok('wait_for_message', { waitMs: 30_000 });
    }
    expect(new Set(answered.keys())).toEqual(new Set([withBob.chatId, withCarol.chatId]));
    expect(answered.get(withBob.chatId)).toEqual(['bob: what time is the meeting?']);
    expect(answered.get(withCarol.chatId)).toEqual(['carol: can you review my draft?']);
    // Nothing else waits: a short wait ends empty.
    expect(await aliceMcp.ok('wait_for_message', { waitMs: 300 })).toMatchObject({ chatId: null });

    // Bob and carol each read alice's answer, which carries her receipt of their message.
    for (const [mcp, chatId, agentId, asked] of [
      [bobMcp, withBob.chatId, bob.id, 'bob: what time is the meeting?'],
      [carolMcp, withCarol.chatId, carol.id, 'carol: can you review my draft?'],
    ] as const) {
      const got = presentedBatch(await mcp.ok('read_new', { chatId, waitMs: 10_000 }));
      expect(messagesOf(got)).toEqual([`alice: got "${asked}"`]);
      const own = await w.admin.rpc.streams.get({ streamId: `${chatId}:${agentId}` });
      expect(own.acknowledged?.nextPosition).toBe(own.nextPosition);
      await mcp.ok('acknowledge', { chatId });
    }
    const lists = await aliceMcp.ok('list_chats', {});
    expect(lists.chats.map((c) => c.unreadMessages)).toEqual([0, 0]);
  });
});
