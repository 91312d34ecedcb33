// Cursor pagination of every list method (docs/protocol.md §6.2, §6.4, §6.9): `agents.list` and
// `grants.list` (like `chats.list` and `operations.list`) return at most `limit` items and a
// `nextCursor` that continues exactly after the last one, so no answer grows with the table and
// the 16 MiB answer cap is never reached by a list; the CLI pages through all of them.

import { beforeAll, describe, expect, it } from 'vitest';
import { useCli } from '../helpers/use-daemon.js';
import { claim, createPair, ok, type Wire } from '../helpers/wire-fixtures.js';
import type { Agent } from '../../src/shared/types.js';

const { daemon, admin, cli } = useCli();
const AGENTS = 1_200;
let ids: string[];

/** Every page of `method` with `limit`, in order. */
async function pages<T>(client: Wire, method: 'agents.list' | 'grants.list', params: object, key: 'agents' | 'grants', limit: number) {
  const out: T[][] = [];
  let cursor: string | null = null;
  do {
    const r = ok(await client.call(method, { ...params, limit, ...(cursor ? { cursor } : {}) })) as Record<string, unknown> & {
      nextCursor: string | null;
    };
    out.push(r[key] as T[]);
    cursor = r.nextCursor;
  } while (cursor !== null);
  return out;
}

beforeAll(async () => {
  // 1,200 agents in batches of 64 (one synced write each), so the test stays quick.
  for (let i = 0; i < AGENTS; i += 64) {
    const n = Math.min(64, AGENTS - i);
    const answers = await admin().batch(
      Array.from({ length: n }, (_, k) => ({
        method: 'agents.create',
        params: { username: `pg${String(i + k).padStart(5, '0')}`, name: 'P' },
      })),
      60_000,
    );
    for (const a of answers) ok(a, 'agents.create');
  }
  const all = (await pages<Agent>(admin(), 'agents.list', {}, 'agents', 500)).flat();
  ids = all.map((a) => a.id);
  // The first agent gets grants to 30 others.
  for (const peer of ids.slice(1, 31)) ok(await admin().call('grants.add', { agentId: ids[0]!, peerAgentId: peer }));
}, 300_000);

describe('agents.list', () => {
  it('returns at most limit agents (default 100), and pages of 500 cover all 1,200 exactly once, in id order', async () => {
    const first = ok(await admin().call('agents.list', {}));
    expect(first.agents).toHaveLength(100);
    expect(typeof first.nextCursor).toBe('string');
    const p = await pages<Agent>(admin(), 'agents.list', {}, 'agents', 500);
    expect(p.map((x) => x.length)).toEqual([500, 500, 200]);
    expect(ids).toHaveLength(AGENTS);
    expect(new Set(ids).size).toBe(AGENTS);
    expect([...ids].sort()).toEqual(ids);
    // Any page size gives the same sequence.
    expect((await pages<Agent>(admin(), 'agents.list', {}, 'agents', 7)).flat().map((a) => a.id)).toEqual(ids);
  }, 120_000);

  it('refuses a limit over 500, and a cursor of another list or a forged one, with INVALID_PARAMS at the param', async () => {
    const big = await admin().call('agents.list', { limit: 501 });
    expect(big.error?.data).toMatchObject({ type: 'INVALID_PARAMS', path: 'limit' });
    const chats = ok(await admin().call('chats.list', { limit: 1 }));
    for (const cursor of ['x', 'eyJ4IjoxfQ.AAAA', ...(chats.nextCursor ? [chats.nextCursor] : [])]) {
      const r = await admin().call('agents.list', { cursor });
      expect(r.error?.data, cursor).toMatchObject({ type: 'INVALID_PARAMS', path: 'cursor' });
    }
  });

  it('the CLI pages through all agents', async () => {
    const listed = await cli().json<{ agents: Agent[] }>(['agents', 'list']);
    expect(listed.agents.map((a) => a.id)).toEqual(ids);
    const human = await cli().ok(['agents', 'list']);
    expect(human.stdout.trim().split('\n')).toHaveLength(AGENTS + 1);
  }, 120_000);
});

describe('grants.list', () => {
  it('pages with limit and nextCursor, by agent then peer; a cursor of one agent does not continue another', async () => {
    const p = await pages<{ agentId: string; peerAgentId: string }>(admin(), 'grants.list', { agentId: ids[0] }, 'grants', 8);
    expect(p.map((x) => x.length)).toEqual([8, 8, 8, 6]);
    expect(p.flat().map((g) => g.peerAgentId)).toEqual(ids.slice(1, 31).sort());
    const r = ok(await admin().call('grants.list', { agentId: ids[0], limit: 8 }));
    const other = await admin().call('grants.list', { agentId: ids[1], cursor: r.nextCursor });
    expect(other.error?.data).toMatchObject({ type: 'INVALID_PARAMS', path: 'cursor' });
    // The admin's list of all grants pages the same way.
    expect((await pages(admin(), 'grants.list', {}, 'grants', 500)).flat()).toHaveLength(30);
  });

  it('the CLI pages through all grants', async () => {
    const listed = await cli().json<{ grants: unknown[] }>(['grants', 'list', ids[0]!]);
    expect(listed.grants).toHaveLength(30);
  });
});

describe('the answer cap', () => {
  it('a page of 500 agents stays far below the 16 MiB answer cap', async () => {
    const r = ok(await admin().call('agents.list', { limit: 500 }));
    expect(JSON.stringify(r).length).toBeLessThan(1_048_576);
    expect(daemon().running).toBe(true);
  });
});

describe('the CLI pages through chats.list and operations.list', () => {
  it('`chats list` prints every chat (more than one page of 500); --limit gives one page and the cursor to go on', async () => {
    // The admin opens chats between the first agent and 520 others, 64 to a batch.
    const peers = ids.slice(1, 521);
    for (let i = 0; i < peers.length; i += 64) {
      const answers = await admin().batch(
        peers.slice(i, i + 64).map((peer) => ({ method: 'chats.open', params: { agentAId: ids[0]!, agentBId: peer } })),
        60_000,
      );
      for (const a of answers) ok(a, 'chats.open');
    }
    const all = await cli().json<{ chats: Array<{ id: string }>; nextCursor: string | null }>(['chats', 'list']);
    expect(all.chats.length).toBeGreaterThanOrEqual(520);
    expect(new Set(all.chats.map((c) => c.id)).size).toBe(all.chats.length);
    expect(all.nextCursor).toBeNull();
    const one = await cli().json<{ chats: unknown[]; nextCursor: string | null }>(['chats', 'list', '--limit', '10']);
    expect(one.chats).toHaveLength(10);
    expect(typeof one.nextCursor).toBe('string');
  }, 120_000);

  it('`ops list` prints every operation of a stream (more than one page of 500)', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const held = await claim(pair.a.client, pair.streamA);
    let next = held.nextPosition;
    for (let i = 0; i < 520; i += 64) {
      const answers = await pair.a.client.batch(
        Array.from({ length: Math.min(64, 520 - i) }, (_, k) => ({
          method: 'streams.append',
          params: {
            streamId: pair.streamA,
            coordinatorToken: held.coordinatorToken,
            generation: '1',
            expectedPosition: String(Number(next) + k),
            operationId: `op-${String(i + k)}`,
            records: [{ type: 'chat.message', messageId: `m-${String(i + k)}`, content: 'x' }],
          },
        })),
        60_000,
      );
      for (const a of answers) ok(a, 'streams.append');
      next = String(Number(next) + answers.length);
    }
    const listed = await cli().json<{ operations: Array<{ operationId: string }>; nextCursor: string | null }>([
      'ops',
      'list',
      pair.streamA,
    ]);
    expect(listed.operations.map((o) => o.operationId).filter((id) => id.startsWith('op-'))).toHaveLength(520);
    expect(listed.nextCursor).toBeNull();
    const one = await cli().json<{ operations: unknown[]; nextCursor: string | null }>(['ops', 'list', pair.streamA, '--limit', '5']);
    expect(one.operations).toHaveLength(5);
    expect(typeof one.nextCursor).toBe('string');
  }, 120_000);
});
