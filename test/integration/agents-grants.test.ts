// agents.* and grants.* (§6 "Agents and grants") over the real socket.

import { beforeAll, describe, expect, it } from 'vitest';
import { claim, createAgent, createPair, listIn, ok, readAll, uniq, type TestAgent, messageOf } from '../helpers/wire-fixtures.js';
import { expectWellFormedErrors } from '../helpers/error-shapes.js';
import { useDaemon } from '../helpers/use-daemon.js';

const AGENT_ID = /^agt_[A-Za-z0-9]{26}$/;
const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

// vitest types its asymmetric matchers `any`; held as `unknown` they fit any expected shape.
const agentIdString: unknown = expect.stringMatching(AGENT_ID);

const { daemon, admin } = useDaemon();
let alice: TestAgent;

beforeAll(async () => {
  alice = await createAgent(admin(), daemon().socketPath, uniq('alice'));
});

async function helloCode(token: string): Promise<number | undefined> {
  const c = await daemon().connect();
  const r = await c.hello(token);
  c.close();
  return r.error?.code;
}

describe('agents.create', () => {
  it('creates an agent with a daemon-made id, image null, and a token shown once', async () => {
    const username = uniq('create');
    const r = ok(await admin().call('agents.create', { username, name: 'Created Agent' }));
    expect(r.agent).toMatchObject({ id: agentIdString, username, name: 'Created Agent', image: null });
    expect(typeof r.token).toBe('string');
    expect(r.token.length).toBeGreaterThanOrEqual(16);
    // The token is never shown again.
    const got = ok(await admin().call('agents.get', { agentId: r.agent.id }));
    expect(JSON.stringify(got)).not.toContain(r.token);
    const listed = ok(await admin().call('agents.list', {}));
    expect(JSON.stringify(listed)).not.toContain(r.token);
  });

  it('keeps an image when given', async () => {
    const r = ok(await admin().call('agents.create', { username: uniq('img'), name: 'Pictured', image: 'https://example.invalid/a.png' }));
    expect(r.agent.image).toBe('https://example.invalid/a.png');
  });

  it('rejects a username that is already taken and creates nothing', async () => {
    const username = uniq('dup');
    ok(await admin().call('agents.create', { username, name: 'First' }));
    const second = await admin().call('agents.create', { username, name: 'Second' });
    expect(second.result).toBeUndefined();
    expect(second.error).toBeDefined();
    expect(second.error?.code).not.toBe(-32603);
    const all = listIn(ok(await admin().call('agents.list', {})), 'agents') as { username: string }[];
    expect(all.filter((a) => a.username === username)).toHaveLength(1);
  });

  it('rejects an invalid username with INVALID_PARAMS and path username', async () => {
    for (const username of ['has space', '', 'x'.repeat(129), 'new\nline']) {
      const r = await admin().call('agents.create', { username, name: 'Bad' });
      expect(r.error?.code, JSON.stringify(username)).toBe(-32602);
      expect(r.error?.data?.type).toBe('INVALID_PARAMS');
      expect(JSON.stringify(r.error?.data?.path)).toContain('username');
    }
  });

  it('is admin only: an agent gets PERMISSION_DENIED 4003 with a reason', async () => {
    const r = await alice.client.call('agents.create', { username: uniq('nope'), name: 'Nope' });
    expect(r.error?.code).toBe(4003);
    expect(r.error?.data?.type).toBe('PERMISSION_DENIED');
    expect(r.error?.data?.reason).toBeDefined();
  });
});

describe('agents.list', () => {
  it('lists agents for admin and for an agent', async () => {
    const forAdmin = listIn(ok(await admin().call('agents.list', {})), 'agents') as { id: string }[];
    expect(forAdmin.map((a) => a.id)).toContain(alice.id);
    const forAgent = listIn(ok(await alice.client.call('agents.list', {})), 'agents') as { id: string }[];
    expect(forAgent.map((a) => a.id)).toContain(alice.id);
  });
});

describe('agents.get', () => {
  it('finds an agent by id and by username, for admin and agent', async () => {
    const byId = ok(await admin().call('agents.get', { agentId: alice.id }));
    expect(byId.agent).toMatchObject({ id: alice.id, username: alice.agent.username, name: alice.agent.name, image: null });
    const byName = ok(await alice.client.call('agents.get', { username: alice.agent.username }));
    expect(byName.agent.id).toBe(alice.id);
  });

  it('answers a missing agent with NOT_FOUND 4004, kind agent and the id', async () => {
    const missing = 'agt_AAAAAAAAAAAAAAAAAAAAAAAAAA';
    const r = await admin().call('agents.get', { agentId: missing });
    expect(r.error?.code).toBe(4004);
    expect(r.error?.data).toMatchObject({ type: 'NOT_FOUND', kind: 'agent', id: missing });
    const byName = await admin().call('agents.get', { username: uniq('ghost') });
    expect(byName.error?.code).toBe(4004);
    expect(byName.error?.data?.kind).toBe('agent');
  });
});

describe('agents.rotateToken', () => {
  it('returns a new token; the old one stops working at once', async () => {
    const bob = await createAgent(admin(), daemon().socketPath);
    const r = ok(await admin().call('agents.rotateToken', { agentId: bob.id }));
    expect(typeof r.token).toBe('string');
    expect(r.token).not.toBe(bob.token);
    expect(await helloCode(bob.token)).toBe(4001);
    expect(await helloCode(r.token)).toBeUndefined();
    // "At once": a session that said hello with the old token is no longer served either.
    const stale = await bob.client.call('agents.list', {});
    expect(stale.error?.code).toBe(4001);
    expect(stale.error?.data?.type).toBe('UNAUTHENTICATED');
  });

  it('is admin only', async () => {
    const r = await alice.client.call('agents.rotateToken', { agentId: alice.id });
    expect(r.error?.code).toBe(4003);
    expect(r.error?.data?.type).toBe('PERMISSION_DENIED');
  });

  it('answers a missing agent with NOT_FOUND', async () => {
    const r = await admin().call('agents.rotateToken', { agentId: 'agt_BBBBBBBBBBBBBBBBBBBBBBBBBB' });
    expect(r.error?.code).toBe(4004);
    expect(r.error?.data).toMatchObject({ type: 'NOT_FOUND', kind: 'agent', id: 'agt_BBBBBBBBBBBBBBBBBBBBBBBBBB' });
  });
});

describe('agents.disable', () => {
  it('stops its token, and its chats stay readable by the peer', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    ok(
      await pair.a.client.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: c.coordinatorToken,
        generation: c.generation,
        expectedPosition: c.nextPosition,
        operationId: uniq('op'),
        records: [{ type: 'chat.message', messageId: 'm1', content: 'before disable' }],
      }),
    );
    ok(await admin().call('agents.disable', { agentId: pair.a.id }));
    expect(await helloCode(pair.a.token)).toBe(4001);
    const stale = await pair.a.client.call('streams.get', { streamId: pair.streamA });
    expect(stale.error?.code).toBe(4001);
    const records = await readAll(pair.b.client, pair.streamA);
    expect(records.some((r) => r.wrapper.type === 'chat.message' && messageOf(r).content === 'before disable')).toBe(true);
    const chat = ok(await pair.b.client.call('chats.get', { chatId: pair.chatId }));
    expect(chat.chat.id).toBe(pair.chatId);
  });

  it('is admin only and answers a missing agent with NOT_FOUND', async () => {
    const denied = await alice.client.call('agents.disable', { agentId: alice.id });
    expect(denied.error?.code).toBe(4003);
    const missing = await admin().call('agents.disable', { agentId: 'agt_CCCCCCCCCCCCCCCCCCCCCCCCCC' });
    expect(missing.error?.code).toBe(4004);
    expect(missing.error?.data?.kind).toBe('agent');
  });
});

describe('agents.setPolicy', () => {
  it('accepts off, redact and reject', async () => {
    const agent = await createAgent(admin(), daemon().socketPath);
    for (const pii of ['off', 'redact', 'reject']) {
      const r = await admin().call('agents.setPolicy', { agentId: agent.id, pii });
      expect(r.error, pii).toBeUndefined();
    }
  });

  it('rejects an unknown policy with INVALID_PARAMS path pii', async () => {
    const r = await admin().call('agents.setPolicy', { agentId: alice.id, pii: 'shout' });
    expect(r.error?.code).toBe(-32602);
    expect(JSON.stringify(r.error?.data?.path)).toContain('pii');
  });

  it('is admin only and answers a missing agent with NOT_FOUND', async () => {
    const denied = await alice.client.call('agents.setPolicy', { agentId: alice.id, pii: 'off' });
    expect(denied.error?.code).toBe(4003);
    const missing = await admin().call('agents.setPolicy', { agentId: 'agt_DDDDDDDDDDDDDDDDDDDDDDDDDD', pii: 'off' });
    expect(missing.error?.code).toBe(4004);
    expect(missing.error?.data).toMatchObject({ type: 'NOT_FOUND', kind: 'agent', id: 'agt_DDDDDDDDDDDDDDDDDDDDDDDDDD' });
  });
});

describe('grants', () => {
  it('add, list and remove a directional grant', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const b = await createAgent(admin(), daemon().socketPath);
    ok(await admin().call('grants.add', { agentId: a.id, peerAgentId: b.id }));

    const forA = listIn(ok(await admin().call('grants.list', { agentId: a.id })), 'grants') as {
      agentId: string;
      peerAgentId: string;
      grantedAt?: string;
    }[];
    expect(forA).toHaveLength(1);
    expect(forA[0]).toMatchObject({ agentId: a.id, peerAgentId: b.id });
    if (forA[0]!.grantedAt !== undefined) expect(forA[0]!.grantedAt).toMatch(RFC3339_MS);
    // Directional: b has no grant to a.
    const forB = listIn(ok(await admin().call('grants.list', { agentId: b.id })), 'grants');
    expect(forB).toHaveLength(0);
    // Admin without agentId sees it among all grants.
    const all = listIn(ok(await admin().call('grants.list', {})), 'grants') as { agentId: string; peerAgentId: string }[];
    expect(all.some((g) => g.agentId === a.id && g.peerAgentId === b.id)).toBe(true);

    // The grant works: a can open the chat with b.
    ok(await a.client.call('chats.open', { peerAgentId: b.id }));

    ok(await admin().call('grants.remove', { agentId: a.id, peerAgentId: b.id }));
    expect(listIn(ok(await admin().call('grants.list', { agentId: a.id })), 'grants')).toHaveLength(0);
  });

  it("lets an agent list its own grants but not another agent's", async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const b = await createAgent(admin(), daemon().socketPath);
    ok(await admin().call('grants.add', { agentId: a.id, peerAgentId: b.id }));
    const own = listIn(ok(await a.client.call('grants.list', { agentId: a.id })), 'grants') as { peerAgentId: string }[];
    expect(own.map((g) => g.peerAgentId)).toEqual([b.id]);
    const implicit = listIn(ok(await a.client.call('grants.list', {})), 'grants') as { agentId: string }[];
    expect(implicit.every((g) => g.agentId === a.id)).toBe(true);
    const other = await b.client.call('grants.list', { agentId: a.id });
    expect(other.error?.code).toBe(4003);
    expect(other.error?.data?.type).toBe('PERMISSION_DENIED');
  });

  it('grants.add and grants.remove are admin only', async () => {
    const b = await createAgent(admin(), daemon().socketPath);
    const add = await alice.client.call('grants.add', { agentId: alice.id, peerAgentId: b.id });
    expect(add.error?.code).toBe(4003);
    const remove = await alice.client.call('grants.remove', { agentId: alice.id, peerAgentId: b.id });
    expect(remove.error?.code).toBe(4003);
  });

  it('grants.add names a missing agent with NOT_FOUND', async () => {
    const r = await admin().call('grants.add', { agentId: alice.id, peerAgentId: 'agt_EEEEEEEEEEEEEEEEEEEEEEEEEE' });
    expect(r.error?.code).toBe(4004);
    expect(r.error?.data).toMatchObject({ type: 'NOT_FOUND', kind: 'agent', id: 'agt_EEEEEEEEEEEEEEEEEEEEEEEEEE' });
  });

  it('revocation applies to the next append', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    const first = ok(
      await pair.a.client.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: c.coordinatorToken,
        generation: '1',
        expectedPosition: c.nextPosition,
        operationId: uniq('op'),
        records: [{ type: 'chat.message', messageId: 'g1', content: 'granted' }],
      }),
    );
    ok(await admin().call('grants.remove', { agentId: pair.a.id, peerAgentId: pair.b.id }));
    const second = await pair.a.client.call('streams.append', {
      streamId: pair.streamA,
      coordinatorToken: c.coordinatorToken,
      generation: '1',
      expectedPosition: first.nextPosition,
      operationId: uniq('op'),
      records: [{ type: 'chat.message', messageId: 'g2', content: 'revoked' }],
    });
    expect(second.error?.code).toBe(4003);
    expect(second.error?.data?.type).toBe('PERMISSION_DENIED');
    const state = ok(await admin().call('streams.get', { streamId: pair.streamA }));
    expect(state.nextPosition).toBe(first.nextPosition);
  });
});

describe('error responses', () => {
  it('never use code 0 and never carry a stack (errors provoked here, and every one seen in this file)', async () => {
    await expectWellFormedErrors(async () => {
      const missing = 'agt_zzzzzzzzzzzzzzzzzzzzzzzzzz';
      await admin().call('agents.get', { agentId: missing });
      await admin().call('agents.create', { username: 'not a username', name: 'x' });
      await admin().call('grants.add', { agentId: missing, peerAgentId: missing });
    });
  });
});
