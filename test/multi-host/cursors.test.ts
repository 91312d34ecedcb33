// Cursors and batch ids are deployment-wide on PostgreSQL (issue 24 item 3,
// docs/design/deployment-secret.md): every daemon of one database seals them under the
// deployment secret stored in that database, so a cursor or batch id one daemon issued is
// opened by another daemon of the same database, and by no daemon of another database. The
// cursor never grants access: the chat is checked for the caller first. Two real yellod
// processes with separate data dirs (each its own secret.key) on one database, a third on
// another database of the same cluster.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { expectError, receipt, StreamWriter } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { connectAs, createAgent, messageOf, ok, type TestAgent, type Wire } from '../helpers/wire-fixtures.js';
import type { StoredRecord } from '../../src/shared/types.js';

let cluster: FileDatabases;
let a: DaemonProcess;
let b: DaemonProcess;
let c: DaemonProcess;
let adminA: Wire;
let adminB: Wire;
let adminC: Wire;

const contents = (records: StoredRecord[]): string[] =>
  records.filter((r) => r.wrapper.type === 'chat.message').map((r) => messageOf(r).content);

describe.skipIf(!pgAvailable())('cursors and batch ids across the daemons of one PostgreSQL database', () => {
  beforeAll(async () => {
    cluster = await FileDatabases.open();
    await cluster.createDatabase('shared');
    await cluster.createDatabase('elsewhere');
    const store = ['--store', cluster.url('shared'), '--policy', 'grants'];
    a = await DaemonProcess.start({ extraArgs: store });
    b = await DaemonProcess.start({ extraArgs: store });
    c = await DaemonProcess.start({ extraArgs: ['--store', cluster.url('elsewhere'), '--policy', 'grants'] });
    adminA = await a.connectAs();
    adminB = await b.connectAs();
    adminC = await c.connectAs();
  }, 90_000);

  afterAll(async () => {
    for (const w of [adminA, adminB, adminC]) w.close();
    for (const d of [a, b, c]) await d.cleanup();
    await cluster.stop();
  }, 60_000);

  /** alice on A and bob on B (alice also connected to B), granted both ways, their chat opened. */
  async function crossPair(): Promise<{
    alice: TestAgent;
    aliceOnB: Wire;
    bob: TestAgent;
    chatId: string;
    streamA: string;
    streamB: string;
  }> {
    const alice = await createAgent(adminA, a.socketPath);
    const bob = await createAgent(adminB, b.socketPath);
    await waitFor(async () => (await adminA.call('agents.get', { agentId: bob.id })).result !== undefined, 'A knows bob', 10_000);
    await waitFor(async () => (await adminB.call('agents.get', { agentId: alice.id })).result !== undefined, 'B knows alice', 10_000);
    ok(await adminA.call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    ok(await adminB.call('grants.add', { agentId: bob.id, peerAgentId: alice.id }));
    ok(await adminA.call('agents.setPolicy', { agentId: alice.id, pii: 'off' }));
    ok(await adminB.call('agents.setPolicy', { agentId: bob.id, pii: 'off' }));
    const opened = await waitFor(
      async () => (await alice.client.call('chats.open', { peerAgentId: bob.id })).result,
      'alice opens on A',
      10_000,
    );
    const chatId = opened.chat.id;
    const aliceOnB = await connectAs(b.socketPath, alice.token);
    return { alice, aliceOnB, bob, chatId, streamA: `${chatId}:${alice.id}`, streamB: `${chatId}:${bob.id}` };
  }

  it('a chats.history cursor from A continues on B exactly where the page on A ended', async () => {
    const p = await crossPair();
    const wa = await StreamWriter.claim(p.alice.client, p.streamA);
    await wa.send('h', 5);
    // B has seen all five (its head is refreshed by A's notice) before the paging starts.
    await waitFor(
      async () => ok(await p.aliceOnB.call('streams.get', { streamId: p.streamA })).nextPosition === wa.next,
      'B sees the five messages',
      10_000,
    );
    const first = ok(await p.alice.client.call('chats.history', { chatId: p.chatId, direction: 'forward', limit: 2 }));
    expect(contents(first.entries)).toEqual(['message h number 0', 'message h number 1']);
    expect(first.nextCursor).not.toBeNull();
    const second = ok(
      await p.aliceOnB.call('chats.history', { chatId: p.chatId, direction: 'forward', limit: 2, cursor: first.nextCursor }),
      'the cursor from A, on B',
    );
    expect(contents(second.entries)).toEqual(['message h number 2', 'message h number 3']);
    // And back to A with B's cursor.
    const third = ok(
      await p.alice.client.call('chats.history', { chatId: p.chatId, direction: 'forward', limit: 2, cursor: second.nextCursor }),
    );
    expect(contents(third.entries)).toEqual(['message h number 4']);
    expect(third.nextCursor).toBeNull();
  });

  it('a batch read through A is acknowledged by a receipt appended through B', async () => {
    const p = await crossPair();
    const wa = await StreamWriter.claim(p.alice.client, p.streamA);
    await wa.send('r', 3);
    const bobOnA = await connectAs(a.socketPath, p.bob.token);
    try {
      const shown = ok(await bobOnA.call('streams.read', { streamId: p.streamA, generation: '1', fromPosition: '0' }));
      expect(shown.nextPosition).toBe(wa.next);
      const wb = await StreamWriter.claim(p.bob.client, p.streamB);
      await wb.append([receipt(p.streamA, '1', shown.nextPosition, shown.batchId)]);
      await waitFor(
        async () => ok(await p.alice.client.call('streams.get', { streamId: p.streamA })).acknowledged?.nextPosition === wa.next,
        'A sees the receipt made on B',
        10_000,
      );
    } finally {
      bobOnA.close();
    }
  });

  it('a cursor does not open a chat the caller is not in, on B', async () => {
    const p = await crossPair();
    const wa = await StreamWriter.claim(p.alice.client, p.streamA);
    await wa.send('x', 3);
    const first = ok(await p.alice.client.call('chats.history', { chatId: p.chatId, direction: 'forward', limit: 1 }));
    expect(first.nextCursor).not.toBeNull();
    const carol = await createAgent(adminB, b.socketPath);
    expectError(
      await carol.client.call('chats.history', { chatId: p.chatId, direction: 'forward', limit: 1, cursor: first.nextCursor }),
      'PERMISSION_DENIED',
      "carol with alice's cursor on alice's chat",
    );
    // carol's own chat with bob, asked with alice's cursor: the cursor names another chat.
    ok(await adminB.call('grants.add', { agentId: carol.id, peerAgentId: p.bob.id }));
    const own = ok(await carol.client.call('chats.open', { peerAgentId: p.bob.id }));
    expectError(
      await carol.client.call('chats.history', { chatId: own.chat.id, direction: 'forward', limit: 1, cursor: first.nextCursor }),
      'INVALID_PARAMS',
      "alice's cursor on carol's chat",
    );
  });

  it('a cursor or batch id from a daemon on another database is refused with the documented errors', async () => {
    // agents.list cursors: admin is allowed on both, so only the seal decides.
    for (let i = 0; i < 2; i++) await createAgent(adminA, a.socketPath);
    for (let i = 0; i < 2; i++) await createAgent(adminC, c.socketPath);
    const pageA = ok(await adminA.call('agents.list', { limit: 1 }));
    expect(pageA.nextCursor).not.toBeNull();
    // Sanity: the same cursor continues on B (same database).
    ok(await adminB.call('agents.list', { limit: 1, cursor: pageA.nextCursor }), 'the list cursor from A, on B');
    const refused = expectError(
      await adminC.call('agents.list', { limit: 1, cursor: pageA.nextCursor }),
      'INVALID_PARAMS',
      'cursor from A on C',
    );
    expect(JSON.stringify(refused)).toContain('cursor');
    // A batch id from A in a receipt on C.
    const p = await crossPair();
    const wa = await StreamWriter.claim(p.alice.client, p.streamA);
    await wa.send('o', 1);
    const bobOnA = await connectAs(a.socketPath, p.bob.token);
    let batchId: string;
    try {
      batchId = ok(await bobOnA.call('streams.read', { streamId: p.streamA, generation: '1', fromPosition: '0' })).batchId;
    } finally {
      bobOnA.close();
    }
    const xena = await createAgent(adminC, c.socketPath);
    const yves = await createAgent(adminC, c.socketPath);
    ok(await adminC.call('grants.add', { agentId: xena.id, peerAgentId: yves.id }));
    ok(await adminC.call('grants.add', { agentId: yves.id, peerAgentId: xena.id }));
    ok(await adminC.call('agents.setPolicy', { agentId: xena.id, pii: 'off' }));
    ok(await adminC.call('agents.setPolicy', { agentId: yves.id, pii: 'off' }));
    const chat = ok(await xena.client.call('chats.open', { peerAgentId: yves.id })).chat.id;
    const wx = await StreamWriter.claim(xena.client, `${chat}:${xena.id}`);
    await wx.send('c', 1);
    const wy = await StreamWriter.claim(yves.client, `${chat}:${yves.id}`);
    const shownOnC = ok(await yves.client.call('streams.read', { streamId: wx.streamId, generation: '1', fromPosition: '0' }));
    const bad = expectError(
      await wy.tryAppend([receipt(wx.streamId, '1', shownOnC.nextPosition, batchId)]),
      'INVALID_RECEIPT',
      'batch id from A on C',
    );
    expect(JSON.stringify(bad)).toContain('UNKNOWN_BATCH');
  });

  it('a writer that claimed through A appends through B with its token; a claim through B fences it', async () => {
    const p = await crossPair();
    const wa = await StreamWriter.claim(p.alice.client, p.streamA);
    await wa.send('w', 1);
    const onB = new StreamWriter(p.aliceOnB, p.streamA, wa.token, wa.generation, wa.next);
    await onB.send('w-b', 1);
    const again = await StreamWriter.claim(p.aliceOnB, p.streamA, true);
    expect(again.token).not.toBe(wa.token);
    wa.next = again.next;
    wa.generation = again.generation;
    // Once A has the head B's claim wrote (its notice), the old token is fenced there too.
    await waitFor(
      async () => ok(await p.alice.client.call('streams.get', { streamId: p.streamA })).nextPosition === again.next,
      "A sees B's claim",
      10_000,
    );
    expectError(await wa.tryAppend([{ type: 'chat.message', messageId: 'm-fenced', content: 'late' }]), 'FENCED', 'old token via A');
  });

  it('two daemons starting at once on a fresh database agree on the deployment secret', async () => {
    await cluster.createDatabase('race');
    const args = { extraArgs: ['--store', cluster.url('race'), '--policy', 'grants'] };
    const [x, y] = await Promise.all([DaemonProcess.start(args), DaemonProcess.start(args)]);
    const adminX = await x.connectAs();
    const adminY = await y.connectAs();
    try {
      for (let i = 0; i < 2; i++) await createAgent(adminX, x.socketPath);
      const page = ok(await adminX.call('agents.list', { limit: 1 }));
      expect(page.nextCursor).not.toBeNull();
      ok(await adminY.call('agents.list', { limit: 1, cursor: page.nextCursor }), 'the cursor from X, on Y');
    } finally {
      adminX.close();
      adminY.close();
      await x.cleanup();
      await y.cleanup();
    }
  }, 60_000);
});
