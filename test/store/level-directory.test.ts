// Pins behaviour of src/daemon/store/leveldb/level-directory.ts and level-store.ts (the directory
// port, marks, keys and the store facade on LevelDB) that the conformance suite
// (test/store/port-conformance.ts, backend-neutral) does not reach. In-process on a real LevelDB in
// a temp dir: the admitted view while a write waits for its fsync, the committed caches after it,
// and the durability waits.

import { randomUUID } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterEach, describe, expect, it } from 'vitest';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { levelMarkStore } from '../../src/daemon/store/leveldb/level-store.js';
import type { AgentRow, ChatRow, GrantRow, PublicKeyRow } from '../../src/daemon/store/port/values.js';
import { newStreamMeta } from '../../src/daemon/store/stream-meta.js';
import { openInProcess, type InProcessStore } from '../helpers/in-process-store.js';
import { outcomeOf } from '../../src/daemon/store/port/stream-port.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

async function fresh(): Promise<InProcessStore> {
  const s = await openInProcess();
  open.push(s);
  return s;
}

const id = (prefix: string) => `${prefix}${randomUUID().replaceAll('-', '')}`;
const now = () => new Date().toISOString();

function agentRow(): AgentRow {
  const username = id('u');
  return { id: id('agt_'), username, name: username, image: null, disabled: false, pii: 'off', createdAt: now(), tokenHash: id('th') };
}

function grantRow(a: AgentRow, b: AgentRow): GrantRow {
  return { agentId: a.id, peerAgentId: b.id, grantedAt: now() };
}

describe('LevelDirectory: the admitted view while a write is pending, the committed view after', () => {
  it('a created agent is in the admitted view at once and in the committed view only once durable', async () => {
    const s = await fresh();
    const d = s.port.directory;
    const row = agentRow();
    const written = outcomeOf(d.createAgent(row));
    expect(d.agentPending(row.id)).toBe(true);
    expect(d.agent(row.id, 'admitted')).toEqual(row);
    expect(d.agent(row.id, 'committed')).toBeUndefined();
    expect(d.agentIdByUsername(row.username, 'admitted')).toBe(row.id);
    expect(d.agentIdByUsername(row.username, 'committed')).toBeUndefined();
    expect(await written).toEqual({ status: 'ok' });
    expect(d.agentPending(row.id)).toBe(false);
    expect(d.agent(row.id, 'committed')).toEqual(row);
    expect(d.agent(row.id, 'admitted')).toEqual(row);
    expect(d.agentIdByUsername(row.username, 'committed')).toBe(row.id);
    expect(d.agentIdByToken(row.tokenHash)).toBe(row.id);
  });

  it('an updated agent: the pending row in the admitted view, the cached committed row replaced once durable', async () => {
    const s = await fresh();
    const d = s.port.directory;
    const row = agentRow();
    await outcomeOf(d.createAgent(row));
    expect(d.agent(row.id, 'committed')).toEqual(row); // cached now
    const next = { ...row, name: 'renamed', tokenHash: id('th') };
    const written = outcomeOf(d.updateAgent(next, row));
    expect(d.agent(row.id, 'admitted')).toEqual(next);
    expect(d.agent(row.id, 'committed')).toEqual(row);
    expect(await written).toEqual({ status: 'ok' });
    expect(d.agent(row.id, 'committed')).toEqual(next);
    expect(d.agentIdByToken(next.tokenHash)).toBe(row.id);
    expect(d.agentIdByToken(row.tokenHash)).toBeUndefined();
    // The same token kept: the index entry stays.
    const same = { ...next, name: 'again' };
    await outcomeOf(d.updateAgent(same, next));
    expect(d.agentIdByToken(next.tokenHash)).toBe(row.id);
  });

  it('a grant: cached absent, then the pending grant, then cached present; a delete likewise', async () => {
    const s = await fresh();
    const d = s.port.directory;
    const a = agentRow();
    const b = agentRow();
    await outcomeOf(d.createAgent(a));
    await outcomeOf(d.createAgent(b));
    expect(d.grant(a.id, b.id, 'admitted')).toBeUndefined(); // cached as absent
    const g = grantRow(a, b);
    const written = outcomeOf(d.putGrant(g));
    expect(d.grantPending(a.id, b.id)).toBe(true);
    expect(d.grant(a.id, b.id, 'admitted')).toEqual(g);
    expect(d.grant(a.id, b.id, 'committed')).toBeUndefined();
    expect(d.grant(b.id, a.id, 'admitted')).toBeUndefined();
    await d.grantDurable(a.id, b.id);
    expect(d.grant(a.id, b.id, 'committed')).toEqual(g);
    expect(await written).toEqual({ status: 'ok' });
    expect(d.grantPending(a.id, b.id)).toBe(false);
    expect(d.grant(a.id, b.id, 'admitted')).toEqual(g);
    const removed = outcomeOf(d.deleteGrant(a.id, b.id));
    expect(d.grant(a.id, b.id, 'admitted')).toBeUndefined();
    expect(d.grant(a.id, b.id, 'committed')).toEqual(g);
    expect(await removed).toEqual({ status: 'ok' });
    expect(d.grant(a.id, b.id, 'admitted')).toBeUndefined();
    expect(d.grant(a.id, b.id, 'committed')).toBeUndefined();
  });

  it('a chat: its pair in the admitted view at once, durable with pairDurable; chatIds pages after a key', async () => {
    const s = await fresh();
    const d = s.port.directory;
    const a = agentRow();
    await outcomeOf(d.createAgent(a));
    const chats: string[] = [];
    for (let i = 0; i < 3; i++) {
      const b = agentRow();
      await outcomeOf(d.createAgent(b));
      const row: ChatRow = { id: id('chat_'), agentAId: a.id, agentBId: b.id, createdAt: now() };
      const heads = [newStreamMeta(row.id, a.id, b.id, row.createdAt), newStreamMeta(row.id, b.id, a.id, row.createdAt)] as const;
      const written = outcomeOf(d.createChat(row, heads));
      expect(d.chatOfPair(a.id, b.id, 'admitted')).toBe(row.id);
      expect(d.chatOfPair(a.id, b.id, 'committed')).toBeUndefined();
      await d.pairDurable(a.id, b.id);
      expect(d.chatOfPair(a.id, b.id, 'committed')).toBe(row.id);
      expect(await written).toEqual({ status: 'ok' });
      chats.push(row.id);
    }
    chats.sort();
    expect(await d.chatIds(a.id, { limit: 10 })).toEqual(chats);
    expect(await d.chatIds(a.id, { after: chats[0], limit: 10 })).toEqual(chats.slice(1));
    expect(await d.chatIds(a.id, { after: chats[0], limit: 1 })).toEqual(chats.slice(1, 2));
    expect(await d.chatIds(undefined, { after: chats[1], limit: 10 })).toEqual(chats.slice(2));
  });

  it('agents pages after an id, in id order', async () => {
    const s = await fresh();
    const d = s.port.directory;
    const rows = [agentRow(), agentRow(), agentRow()];
    for (const r of rows) await outcomeOf(d.createAgent(r));
    const ids = rows.map((r) => r.id).sort();
    expect((await d.agents({ limit: 10 })).map((r) => r.id)).toEqual(ids);
    expect((await d.agents({ after: ids[0], limit: 10 })).map((r) => r.id)).toEqual(ids.slice(1));
    expect((await d.agents({ after: ids[0], limit: 1 })).map((r) => r.id)).toEqual(ids.slice(1, 2));
  });
});

describe('LevelDirectory caches across a restart', () => {
  it('a grant stored by an earlier process, never read since, is found in the admitted view (no stale cache)', async () => {
    const s = await openInProcess();
    const d = s.port.directory;
    const a = agentRow();
    const b = agentRow();
    await outcomeOf(d.createAgent(a));
    await outcomeOf(d.createAgent(b));
    const g = grantRow(a, b);
    await outcomeOf(d.putGrant(g));
    await s.store.storage.close();
    const again = await openInProcess(s.dir);
    try {
      expect(again.port.directory.grant(a.id, b.id, 'admitted')).toEqual(g);
      expect(again.port.directory.grant(a.id, b.id, 'admitted')).toEqual(g); // from the cache now
      expect(again.port.directory.grant(b.id, a.id, 'admitted')).toBeUndefined();
      expect(again.port.directory.agent(a.id, 'committed')).toEqual(a);
    } finally {
      await again.store.storage.close();
      rmSync(s.dir, { recursive: true, force: true });
    }
  });
});

describe('LevelDirectory.damaged', () => {
  it('lists a token-index entry and a grant whose checksum fails', async () => {
    const s = await openInProcess();
    const d = s.port.directory;
    const a = agentRow();
    const b = agentRow();
    await outcomeOf(d.createAgent(a));
    await outcomeOf(d.createAgent(b));
    await outcomeOf(d.putGrant(grantRow(a, b)));
    await s.store.storage.close();
    const db = new ClassicLevel<string, string>(path.join(s.dir, 'db'));
    await db.open();
    for (const key of [K.token(a.tokenHash), K.grant(a.id, b.id)]) {
      const stored = (await db.get(key))!;
      await db.put(key, `00000000${stored.slice(8)}`);
    }
    await db.close();
    const again = await openInProcess(s.dir);
    try {
      expect(await again.port.directory.damaged()).toEqual({ tokenIndex: [K.token(a.tokenHash)], grants: [K.grant(a.id, b.id)] });
    } finally {
      await again.store.storage.close();
      rmSync(s.dir, { recursive: true, force: true });
    }
  });
});

describe('LevelStreams durability waits (through the port)', () => {
  it('headPending while a commit waits for its fsync; headDurable and operationDurable resolve once it is on disk', async () => {
    const s = await fresh();
    const a = await s.directory.createAgent(id('alice'), 'Alice', undefined);
    const b = await s.directory.createAgent(id('bob'), 'Bob', undefined);
    const alice = s.directory.authenticate(a.token)!;
    const { chat } = await s.directory.openChat(alice, a.agent.id, b.agent.id);
    const streamId = `${chat.id}:${a.agent.id}`;
    const claim = s.streams.claim(alice, { streamId, replace: false });
    await Promise.resolve();
    expect(s.port.streams.headPending(streamId)).toBe(true);
    await s.port.streams.headDurable(streamId);
    expect(s.store.storage.get(K.tail(streamId))).toBeDefined();
    const { coordinatorToken } = await claim;
    expect(s.port.streams.headPending(streamId)).toBe(false);
    const append = s.streams.append(alice, {
      streamId,
      coordinatorToken,
      generation: 1,
      expectedPosition: 1,
      operationId: 'op-durable',
      records: [{ type: 'chat.message', messageId: 'm1', content: 'hello' }],
    });
    await Promise.resolve();
    await s.port.streams.operationDurable(streamId, 'op-durable');
    expect(s.store.storage.get(K.operation(streamId, 'op-durable'))).toBeDefined();
    await append;
    expect(s.port.streams.prepare()).toBeNull();
  });
});

describe('LevelStore', () => {
  it('forwards stats, commit listeners and failure listeners of its Storage', async () => {
    let fail = false;
    const s = await openInProcess(undefined, { injectFailure: () => fail });
    open.push(s);
    const commits: number[] = [];
    s.port.onCommit((writes) => commits.push(writes));
    let failed = 0;
    s.port.onFailure(() => failed++);
    await outcomeOf(s.port.directory.createAgent(agentRow()));
    expect(commits.length).toBeGreaterThan(0);
    expect(commits.every((w) => w > 0)).toBe(true);
    expect(s.port.stats).toBe(s.store.storage.stats);
    expect(s.port.stats).toEqual(s.store.storage.stats);
    expect(failed).toBe(0);
    fail = true;
    expect((await outcomeOf(s.port.directory.createAgent(agentRow()))).status).toBe('unknown');
    expect(failed).toBe(1);
    expect(s.port.readOnly).toBe(true);
    expect(levelMarkStore(s.store.storage).readOnly).toBe(true);
    expect(() => {
      s.port.assertWritable('op-x');
    }).toThrow();
  });

  it('a fresh store is writable; levelMarkStore says so too', async () => {
    const s = await fresh();
    expect(s.port.readOnly).toBe(false);
    expect(levelMarkStore(s.store.storage).readOnly).toBe(false);
    expect(s.port.stopping).toBe(false);
    expect(s.port.storage).toBe(s.store.storage);
  });

  it('backup writes a restorable copy and names the daemon version', async () => {
    const s = await fresh();
    await outcomeOf(s.port.directory.createAgent(agentRow()));
    const target = path.join(s.dir, 'backup-out');
    const manifest = await s.port.backup(target, { dataDir: s.dir, daemonVersion: '9.9.9-test' });
    expect(manifest).toMatchObject({ daemonVersion: '9.9.9-test' });
    expect(existsSync(target)).toBe(true);
  });

  it('keys are listed by kid; putMarks of none writes nothing; a mark without a generation is stored as the whole stream', async () => {
    const s = await fresh();
    const row = (kid: string): PublicKeyRow => ({ kid, daemonId: 'd1', jwk: { kty: 'EC', kid }, createdAt: now(), retiredAt: null });
    await s.port.keys.publish([row('k3'), row('k1'), row('k2')]);
    expect((await s.port.keys.all()).map((k) => k.kid)).toEqual(['k1', 'k2', 'k3']);
    let commits = 0;
    s.port.onCommit(() => commits++);
    await s.port.integrity.putMarks([]);
    expect(commits).toBe(0);
    const mark = { streamId: 'chat_a:agt_b', generation: null, fromPosition: 0, detail: 'whole stream', detectedAt: now() };
    await s.port.integrity.putMarks([mark]);
    expect(s.store.storage.get(K.corruptMark('chat_a:agt_b', 0))).toEqual(mark);
    const marks = async () => {
      const out = [];
      for await (const m of s.port.integrity.marks()) out.push(m);
      return out;
    };
    expect(await marks()).toEqual([mark]);
    // Narrowed to generation 2, the mark is stored as that generation's: a later mark of the
    // same (stream, generation) replaces it.
    await s.port.integrity.narrowMark('chat_a:agt_b', { ...mark, generation: 2, fromPosition: 3 });
    expect(await marks()).toEqual([{ ...mark, generation: 2, fromPosition: 3 }]);
    const later = { ...mark, generation: 2, fromPosition: 1, detail: 'earlier damage' };
    await s.port.integrity.putMarks([later]);
    expect(await marks()).toEqual([later]);
  });
});
