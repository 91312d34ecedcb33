// daemon.status, keys.list and keys.rotate (§6 "Session, daemon, keys") over the real socket.

import { beforeAll, describe, expect, it } from 'vitest';
import {
  claim,
  createAgent,
  createPair,
  fetchKeys,
  findValues,
  jwkThumbprint,
  messageProblems,
  ok,
  readAll,
  uniq,
  type TestPair,
  messageOf,
} from '../helpers/wire-fixtures.js';
import { expectWellFormedErrors } from '../helpers/error-shapes.js';
import { useDaemon } from '../helpers/use-daemon.js';

const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
// vitest types its asymmetric matchers `any`; held as `unknown` they fit any expected shape.
const rfc3339Ms: unknown = expect.stringMatching(RFC3339_MS);
const coordinate: unknown = expect.stringMatching(/^[A-Za-z0-9_-]{43}$/);
const keyStatus: unknown = expect.stringMatching(/^(active|retired)$/);
const anyString: unknown = expect.any(String);

const { daemon, admin, restart } = useDaemon();
let pair: TestPair;

beforeAll(async () => {
  pair = await createPair(admin(), daemon().socketPath);
});

describe('daemon.status', () => {
  it('reports version, uptime, counts, storage ok and the active kid', async () => {
    const hello = ok(await (await daemon().connect()).hello(daemon().adminToken));
    const status = ok(await admin().call('daemon.status', {}));
    expect(status.version).toBe(hello.daemon.version);
    const text = JSON.stringify(status);
    expect(text).toContain(hello.signing.kid);
    expect(
      findValues(status, 'uptime').length + findValues(status, 'uptimeMs').length + findValues(status, 'uptimeSeconds').length,
    ).toBeGreaterThan(0);
    // storage state is "ok" (or "read-only"); a fresh daemon is ok.
    const topLevel: unknown[] = Object.values(status);
    expect([...topLevel, ...findValues(status, 'storage'), ...findValues(status, 'state')]).toContain('ok');
    // counts of agents/chats/streams/records: the pair above made 2 agents, 1 chat, 2 streams.
    const agents = findValues(status, 'agents').filter((v) => typeof v === 'number');
    const chats = findValues(status, 'chats').filter((v) => typeof v === 'number');
    const streams = findValues(status, 'streams').filter((v) => typeof v === 'number');
    const records = findValues(status, 'records').filter((v) => typeof v === 'number');
    expect(agents[0]).toBeGreaterThanOrEqual(2);
    expect(chats[0]).toBeGreaterThanOrEqual(1);
    expect(streams[0]).toBeGreaterThanOrEqual(2);
    expect(records[0]).toBeGreaterThanOrEqual(0);
  });

  it('counts what was created', async () => {
    const count = (status: unknown, key: string): number => findValues(status, key).find((v) => typeof v === 'number') ?? NaN;
    const before = ok(await admin().call('daemon.status', {}));
    const p = await createPair(admin(), daemon().socketPath);
    const c = await claim(p.a.client, p.streamA);
    ok(
      await p.a.client.call('streams.append', {
        streamId: p.streamA,
        coordinatorToken: c.coordinatorToken,
        generation: '1',
        expectedPosition: c.nextPosition,
        operationId: uniq('op'),
        records: [
          { type: 'chat.message', messageId: 'c1', content: 'one' },
          { type: 'chat.message', messageId: 'c2', content: 'two' },
        ],
      }),
    );
    const after = ok(await admin().call('daemon.status', {}));
    expect(count(after, 'agents') - count(before, 'agents')).toBe(2);
    expect(count(after, 'chats') - count(before, 'chats')).toBe(1);
    expect(count(after, 'streams') - count(before, 'streams')).toBe(2);
    expect(count(after, 'records') - count(before, 'records')).toBeGreaterThanOrEqual(3);
  });

  it('answers an agent too', async () => {
    const r = await pair.a.client.call('daemon.status', {});
    expect(r.error?.code === undefined || r.error.code === 4003).toBe(true);
  });
});

describe('keys.list', () => {
  it('returns a JWKS of public ES256 keys whose kid is the RFC 7638 thumbprint', async () => {
    const r = ok(await admin().call('keys.list', {}));
    expect(Array.isArray(r.keys)).toBe(true);
    expect(r.keys.length).toBeGreaterThanOrEqual(1);
    for (const k of r.keys) {
      expect(k).toMatchObject({
        kty: 'EC',
        crv: 'P-256',
        x: coordinate,
        y: coordinate,
        kid: anyString,
        alg: 'ES256',
        use: 'sig',
        status: keyStatus,
        createdAt: rfc3339Ms,
      });
      expect(k).not.toHaveProperty('d');
      expect(jwkThumbprint(k)).toBe(k.kid);
    }
    expect(r.keys.filter((k: { status: string }) => k.status === 'active')).toHaveLength(1);
  });

  it('names the same active kid as session.hello', async () => {
    const hello = ok(await (await daemon().connect()).hello(pair.a.token));
    const keys = await fetchKeys(pair.a.client);
    const active = keys.find((k) => (k as { status?: string }).status === 'active');
    expect(active?.kid).toBe(hello.signing.kid);
  });
});

describe('keys.rotate', () => {
  it('is admin only: an agent gets PERMISSION_DENIED 4003', async () => {
    const r = await pair.a.client.call('keys.rotate', {});
    expect(r.error?.code).toBe(4003);
    expect(r.error?.data?.type).toBe('PERMISSION_DENIED');
  });

  it('retires the old key (still listed), and new records are signed with the new kid', async () => {
    const c = await claim(pair.a.client, pair.streamA);
    const before = ok(
      await pair.a.client.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: c.coordinatorToken,
        generation: c.generation,
        expectedPosition: c.nextPosition,
        operationId: uniq('op'),
        records: [{ type: 'chat.message', messageId: 'before-rotate', content: 'signed by the first key' }],
      }),
    );
    const oldKeys = await fetchKeys(admin());
    const oldKid = oldKeys.find((k) => (k as { status?: string }).status === 'active')!.kid;

    const rotated = ok(await admin().call('keys.rotate', {}));
    expect(typeof rotated.kid).toBe('string');
    expect(rotated.kid).not.toBe(oldKid);

    const keys = await fetchKeys(admin());
    const byKid = new Map(keys.map((k) => [k.kid, k as typeof k & { status: string }]));
    expect(byKid.get(oldKid)?.status).toBe('retired');
    expect(byKid.get(rotated.kid)?.status).toBe('active');
    expect(keys.filter((k) => (k as { status?: string }).status === 'active')).toHaveLength(1);

    const hello = ok(await (await daemon().connect()).hello(daemon().adminToken));
    expect(hello.signing.kid).toBe(rotated.kid);
    const status = ok(await admin().call('daemon.status', {}));
    expect(JSON.stringify(status)).toContain(rotated.kid);

    const after = ok(
      await pair.a.client.call('streams.append', {
        streamId: pair.streamA,
        coordinatorToken: c.coordinatorToken,
        generation: c.generation,
        expectedPosition: before.nextPosition,
        operationId: uniq('op'),
        records: [{ type: 'chat.message', messageId: 'after-rotate', content: 'signed by the second key' }],
      }),
    );
    expect(after.firstPosition).toBe(before.nextPosition);

    const records = await readAll(pair.b.client, pair.streamA);
    const messages = records.filter((r) => r.wrapper.type === 'chat.message');
    expect(messages).toHaveLength(2);
    const [m1, m2] = [messageOf(messages[0]), messageOf(messages[1])];
    expect(m1.signature.kid).toBe(oldKid);
    expect(m2.signature.kid).toBe(rotated.kid);
    // Both verify against the listed keys: the retired key still checks the old signature.
    expect(messageProblems(m1, keys, 'before-rotate')).toEqual([]);
    expect(messageProblems(m2, keys, 'after-rotate')).toEqual([]);
    // And the old one does not verify with the new key.
    expect(messageProblems({ ...m1, signature: { ...m1.signature, kid: rotated.kid } }, keys)).not.toEqual([]);
  });

  it('keeps retired keys listed across a restart', async () => {
    const before = await fetchKeys(admin());
    await restart();
    const after = await fetchKeys(admin());
    expect(after.map((k) => k.kid).sort()).toEqual(before.map((k) => k.kid).sort());
    // The rotated key stays the active one.
    const activeBefore = before.find((k) => (k as { status?: string }).status === 'active')!.kid;
    expect(after.find((k) => (k as { status?: string }).status === 'active')?.kid).toBe(activeBefore);
    const hello = ok(await (await daemon().connect()).hello(daemon().adminToken));
    expect(hello.signing.kid).toBe(activeBefore);
    expect(after.filter((k) => (k as { status?: string }).status === 'retired').length).toBeGreaterThanOrEqual(1);
  });
});

describe('error responses', () => {
  it('never use code 0 and never carry a stack (errors provoked here, and every one seen in this file)', async () => {
    await expectWellFormedErrors(async () => {
      const agent = await createAgent(admin(), daemon().socketPath);
      try {
        await agent.client.call('keys.rotate', {});
        await admin().call('keys.list', { unexpected: true });
      } finally {
        agent.client.close();
      }
    });
  });
});
