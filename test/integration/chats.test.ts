// chats.open / get / list / permissions (§5 "Chat", §6 "Chats") over the real socket.

import { describe, expect, it } from 'vitest';
import { type Wire, connectAs, createAgent, createPair, ok, uniq, type Result, type TestAgent } from '../helpers/wire-fixtures.js';
import { expectWellFormedErrors } from '../helpers/error-shapes.js';
import { useDaemon } from '../helpers/use-daemon.js';

const CHAT_ID = /^chat_[A-Za-z0-9]{26}$/;
const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

// vitest types its asymmetric matchers `any`; held as `unknown` they fit any expected shape.
const chatIdString: unknown = expect.stringMatching(CHAT_ID);
const rfc3339Ms: unknown = expect.stringMatching(RFC3339_MS);

const { daemon, admin } = useDaemon();

function expectChatShape(chat: object, x: TestAgent, y: TestAgent): void {
  const [lo, hi] = [x, y].sort((p, q) => (p.id < q.id ? -1 : p.id > q.id ? 1 : 0));
  expect(chat).toMatchObject({
    id: chatIdString,
    agentAId: lo!.id,
    agentBId: hi!.id,
    agentA: { id: lo!.id, name: lo!.agent.name, username: lo!.agent.username, image: null },
    agentB: { id: hi!.id, name: hi!.agent.name, username: hi!.agent.username, image: null },
    createdAt: rfc3339Ms,
  });
}

function expectFreshStream(state: object, chatId: string, authorAgentId: string): void {
  expect(state).toMatchObject({
    streamId: `${chatId}:${authorAgentId}`,
    chatId,
    authorAgentId,
    generation: '1',
    firstPosition: '0',
    nextPosition: '0',
    acknowledged: null,
    writer: { active: false },
  });
}

describe('chats.open', () => {
  it('creates the chat once with both streams at generation 1, then finds it', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const b = await createAgent(admin(), daemon().socketPath);
    ok(await admin().call('grants.add', { agentId: a.id, peerAgentId: b.id }));
    ok(await admin().call('grants.add', { agentId: b.id, peerAgentId: a.id }));

    const first = ok(await a.client.call('chats.open', { peerAgentId: b.id }));
    expect(first.created).toBe(true);
    expectChatShape(first.chat, a, b);

    const again = ok(await a.client.call('chats.open', { peerAgentId: b.id }));
    expect(again.created).toBe(false);
    expect(again.chat).toEqual(first.chat);

    const fromPeer = ok(await b.client.call('chats.open', { peerAgentId: a.id }));
    expect(fromPeer.created).toBe(false);
    expect(fromPeer.chat.id).toBe(first.chat.id);

    const got = ok(await a.client.call('chats.get', { chatId: first.chat.id }));
    expect(got.chat).toEqual(first.chat);
    expect(got.streams).toHaveLength(2);
    const byAuthor = new Map(got.streams.map((s: { authorAgentId: string }) => [s.authorAgentId, s]));
    expectFreshStream(byAuthor.get(a.id) as Record<string, unknown>, first.chat.id, a.id);
    expectFreshStream(byAuthor.get(b.id) as Record<string, unknown>, first.chat.id, b.id);
    for (const s of [a.id, b.id]) {
      const st = ok(await a.client.call('streams.get', { streamId: `${first.chat.id}:${s}` }));
      expectFreshStream(st, first.chat.id, s);
    }
  });

  it('needs a grant: without one an agent gets PERMISSION_DENIED', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const b = await createAgent(admin(), daemon().socketPath);
    const r = await a.client.call('chats.open', { peerAgentId: b.id });
    expect(r.error?.code).toBe(4003);
    expect(r.error?.data?.type).toBe('PERMISSION_DENIED');
    expect(r.error?.data?.reason).toBeDefined();
    // A grant in the other direction does not help a.
    ok(await admin().call('grants.add', { agentId: b.id, peerAgentId: a.id }));
    const still = await a.client.call('chats.open', { peerAgentId: b.id });
    expect(still.error?.code).toBe(4003);
  });

  it('admin form {agentAId, agentBId} creates or finds, in either order', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const b = await createAgent(admin(), daemon().socketPath);
    const [hi, lo] = a.id > b.id ? [a, b] : [b, a];
    const first = ok(await admin().call('chats.open', { agentAId: hi.id, agentBId: lo.id }));
    expect(first.created).toBe(true);
    expectChatShape(first.chat, a, b);
    const second = ok(await admin().call('chats.open', { agentAId: lo.id, agentBId: hi.id }));
    expect(second.created).toBe(false);
    expect(second.chat.id).toBe(first.chat.id);
  });

  it('refuses a chat with oneself', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    // A self-grant may itself be refused; either way the chat must not open.
    await admin().call('grants.add', { agentId: a.id, peerAgentId: a.id });
    const r = await a.client.call('chats.open', { peerAgentId: a.id });
    expect(r.result).toBeUndefined();
    expect([-32602, 4003]).toContain(r.error?.code);
    const adminForm = await admin().call('chats.open', { agentAId: a.id, agentBId: a.id });
    expect(adminForm.result).toBeUndefined();
    expect([-32602, 4003]).toContain(adminForm.error?.code);
  });

  it('admin form names a missing agent with NOT_FOUND', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const missing = 'agt_ZZZZZZZZZZZZZZZZZZZZZZZZZZ';
    const r = await admin().call('chats.open', { agentAId: a.id, agentBId: missing });
    expect(r.error?.code).toBe(4004);
    expect(r.error?.data).toMatchObject({ type: 'NOT_FOUND', kind: 'agent', id: missing });
  });

  it('is race-free: 10 concurrent opens on separate connections yield one chat and one created:true', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const b = await createAgent(admin(), daemon().socketPath);
    ok(await admin().call('grants.add', { agentId: a.id, peerAgentId: b.id }));
    ok(await admin().call('grants.add', { agentId: b.id, peerAgentId: a.id }));
    const clients = await Promise.all(
      Array.from({ length: 10 }, (_, i) => connectAs(daemon().socketPath, i % 2 === 0 ? a.token : b.token)),
    );
    try {
      const results = await Promise.all(clients.map((c, i) => c.call('chats.open', { peerAgentId: i % 2 === 0 ? b.id : a.id })));
      for (const r of results) expect(r.error).toBeUndefined();
      const ids = new Set(results.map((r) => r.result!.chat.id));
      expect(ids.size).toBe(1);
      expect(results.filter((r) => r.result!.created)).toHaveLength(1);
      const all = (await listAllChats(admin())).filter(
        (c) => c.agentAId === (a.id < b.id ? a.id : b.id) && c.agentBId === (a.id < b.id ? b.id : a.id),
      );
      expect(all).toHaveLength(1);
    } finally {
      for (const c of clients) c.close();
    }
  });

  it('is race-free for the admin form too', async () => {
    const a = await createAgent(admin(), daemon().socketPath);
    const b = await createAgent(admin(), daemon().socketPath);
    const clients = await Promise.all(Array.from({ length: 10 }, () => connectAs(daemon().socketPath, daemon().adminToken)));
    try {
      const results = await Promise.all(
        clients.map((c, i) => c.call('chats.open', i % 2 ? { agentAId: a.id, agentBId: b.id } : { agentAId: b.id, agentBId: a.id })),
      );
      for (const r of results) expect(r.error).toBeUndefined();
      expect(new Set(results.map((r) => r.result!.chat.id)).size).toBe(1);
      expect(results.filter((r) => r.result!.created)).toHaveLength(1);
    } finally {
      for (const c of clients) c.close();
    }
  });
});

interface ChatSummary {
  id: string;
  agentAId: string;
  agentBId: string;
}

/** Every chat visible to `client`, following nextCursor with the default page size. */
async function listAllChats(client: Wire): Promise<ChatSummary[]> {
  const out: ChatSummary[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 1000; page++) {
    // Annotated: `cursor` comes from `r`, and TypeScript does not infer through that loop.
    const r: Result<'chats.list'> = ok(await client.call('chats.list', cursor ? { cursor } : {}));
    out.push(...(r.chats as ChatSummary[]));
    cursor = r.nextCursor;
    if (!cursor) break;
  }
  return out;
}

describe('chats.get', () => {
  it('answers a participant and admin; a non-participant gets PERMISSION_DENIED', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const outsider = await createAgent(admin(), daemon().socketPath);
    expect(ok(await pair.b.client.call('chats.get', { chatId: pair.chatId })).chat.id).toBe(pair.chatId);
    expect(ok(await admin().call('chats.get', { chatId: pair.chatId })).streams).toHaveLength(2);
    const denied = await outsider.client.call('chats.get', { chatId: pair.chatId });
    expect(denied.error?.code).toBe(4003);
    expect(denied.error?.data?.type).toBe('PERMISSION_DENIED');
  });

  it('answers a missing chat with NOT_FOUND, kind chat and the id', async () => {
    const missing = 'chat_QQQQQQQQQQQQQQQQQQQQQQQQQQ';
    const r = await admin().call('chats.get', { chatId: missing });
    expect(r.error?.code).toBe(4004);
    expect(r.error?.data).toMatchObject({ type: 'NOT_FOUND', kind: 'chat', id: missing });
  });

  it('rejects a malformed chatId with INVALID_PARAMS path chatId', async () => {
    const r = await admin().call('chats.get', { chatId: 'bad id' });
    expect(r.error?.code).toBe(-32602);
    expect(JSON.stringify(r.error?.data?.path)).toContain('chatId');
  });
});

describe('chats.list', () => {
  it("lists only the caller's chats, all of them for admin, paging with nextCursor", async () => {
    const hub = await createAgent(admin(), daemon().socketPath);
    const chatIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const peer = await createAgent(admin(), daemon().socketPath);
      ok(await admin().call('grants.add', { agentId: hub.id, peerAgentId: peer.id }));
      chatIds.push(ok(await hub.client.call('chats.open', { peerAgentId: peer.id })).chat.id);
    }
    const other = await createPair(admin(), daemon().socketPath);

    // Page through the hub's chats one at a time.
    const seen: string[] = [];
    let cursor: string | null | undefined;
    for (let page = 0; page < 10; page++) {
      const r = ok(await hub.client.call('chats.list', cursor ? { cursor, limit: 1 } : { limit: 1 }));
      expect(r.chats.length).toBeLessThanOrEqual(1);
      seen.push(...r.chats.map((c: { id: string }) => c.id));
      expect('nextCursor' in r).toBe(true);
      cursor = r.nextCursor;
      if (cursor === null) break;
    }
    expect(cursor).toBeNull();
    expect(seen.sort()).toEqual([...chatIds].sort());
    expect(seen).not.toContain(other.chatId);

    const allIds = (await listAllChats(admin())).map((c) => c.id);
    for (const id of [...chatIds, other.chatId]) expect(allIds).toContain(id);
  });

  it('rejects a tampered cursor with INVALID_PARAMS path cursor', async () => {
    const r = await admin().call('chats.list', { cursor: 'definitely-not-a-cursor', limit: 1 });
    expect(r.error?.code).toBe(-32602);
    expect(JSON.stringify(r.error?.data?.path)).toContain('cursor');
  });
});

describe('chats.permissions', () => {
  it('reports read/send/claim and grants per participant, and follows revocation', async () => {
    const pair = await createPair(admin(), daemon().socketPath, { grants: 'a-to-b' });
    const p = ok(await pair.a.client.call('chats.permissions', { chatId: pair.chatId }));
    expect(p.chatId).toBe(pair.chatId);
    expect(p.policy).toBe('grants');
    expect(p.participants).toHaveLength(2);
    const byId = new Map(p.participants.map((x: { agentId: string }) => [x.agentId, x]));
    expect(byId.get(pair.a.id)).toMatchObject({
      agentId: pair.a.id,
      canRead: true,
      canSend: true,
      canClaim: true,
      grant: { grantedAt: rfc3339Ms },
    });
    expect(byId.get(pair.b.id)).toMatchObject({ agentId: pair.b.id, canRead: true, canSend: false, grant: null });

    ok(await admin().call('grants.remove', { agentId: pair.a.id, peerAgentId: pair.b.id }));
    const after = ok(await admin().call('chats.permissions', { chatId: pair.chatId }));
    const a2 = after.participants.find((x: { agentId: string }) => x.agentId === pair.a.id);
    expect(a2).toMatchObject({ canRead: true, canSend: false, grant: null });
  });

  it('is for participants and admin only', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const outsider = await createAgent(admin(), daemon().socketPath);
    const r = await outsider.client.call('chats.permissions', { chatId: pair.chatId });
    expect(r.error?.code).toBe(4003);
    const missing = await admin().call('chats.permissions', { chatId: 'chat_RRRRRRRRRRRRRRRRRRRRRRRRRR' });
    expect(missing.error?.code).toBe(4004);
    expect(missing.error?.data?.kind).toBe('chat');
  });
});

describe('--policy open', () => {
  const { daemon: open, admin: openAdmin } = useDaemon({ extraArgs: ['--policy', 'open'] });

  it('lets every agent open a chat and send without a grant', async () => {
    const a = await createAgent(openAdmin(), open().socketPath, uniq('open-a'));
    const b = await createAgent(openAdmin(), open().socketPath, uniq('open-b'));
    const opened = ok(await a.client.call('chats.open', { peerAgentId: b.id }));
    expect(opened.created).toBe(true);
    const perms = ok(await a.client.call('chats.permissions', { chatId: opened.chat.id }));
    expect(perms.policy).toBe('open');
    for (const part of perms.participants) expect(part.canSend).toBe(true);
    const streamId = `${opened.chat.id}:${b.id}`;
    const c = ok(await b.client.call('streams.claim', { streamId }));
    const r = await b.client.call('streams.append', {
      streamId,
      coordinatorToken: c.coordinatorToken,
      generation: '1',
      expectedPosition: c.nextPosition,
      operationId: uniq('op'),
      records: [{ type: 'chat.message', messageId: 'm', content: 'no grant needed' }],
    });
    expect(r.error).toBeUndefined();
  });
});

describe('error responses', () => {
  it('never use code 0 and never carry a stack (errors provoked here, and every one seen in this file)', async () => {
    await expectWellFormedErrors(async () => {
      await admin().call('chats.get', { chatId: 'chat_zzzzzzzzzzzzzzzzzzzzzzzzzz' });
      await admin().call('chats.open', { agentAId: 'agt_zzzzzzzzzzzzzzzzzzzzzzzzzz', agentBId: 'not an id' });
    });
  });
});
