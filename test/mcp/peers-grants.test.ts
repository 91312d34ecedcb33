// list_peers under the daemon's default policy `grants` (issue 22, finding 1): an agent is shown
// the agents it holds a grant to, and nobody else, through the SDK client and a raw stdio client.

import { describe, expect, it } from 'vitest';
import { RawMcpClient } from './raw-client.js';
import { useMcpWorld } from './mcp-fixtures.js';

const world = useMcpWorld(undefined, { policy: 'grants' });

describe('yello mcp: list_peers under policy grants', () => {
  it('lists the granted peers only; with no grant it says who must act', async () => {
    const w = world();
    const alice = await w.agent('alice', 'Alice');
    const bob = await w.agent('bob', 'Bob');
    const carol = await w.agent('carol', 'Carol');
    const aliceMcp = await w.serve(alice.tokenPath);
    const none = await aliceMcp.call('list_peers');
    expect(none.structuredContent).toEqual({ policy: 'grants', peers: [] });
    expect((none.content[0] as { text: string }).text).toMatch(/yello grants add/);

    await w.admin.rpc.grants.add({ agentId: alice.id, peerAgentId: bob.id });
    // carol granted alice, not the other way round: alice may not open a chat with carol.
    await w.admin.rpc.grants.add({ agentId: carol.id, peerAgentId: alice.id });
    const listed = await aliceMcp.ok('list_peers', {});
    expect(listed).toEqual({ policy: 'grants', peers: [{ agentId: bob.id, username: bob.username, name: 'Bob', chatId: null }] });
    const opened = await aliceMcp.ok('open_chat', { peer: 'BOB' });
    expect(opened.peer.agentId).toBe(bob.id);
    expect((await aliceMcp.ok('list_peers', {})).peers[0]?.chatId).toBe(opened.chatId);

    const raw = await RawMcpClient.start(w.daemon, alice.tokenPath);
    try {
      const r = await raw.callTool('list_peers');
      expect(r.isError).toBeFalsy();
      expect(r.structuredContent).toEqual({
        policy: 'grants',
        peers: [{ agentId: bob.id, username: bob.username, name: 'Bob', chatId: opened.chatId }],
      });
    } finally {
      await raw.close();
    }
  });
});
