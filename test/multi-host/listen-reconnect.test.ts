// A daemon's LISTEN session dies (issue 24): PostgreSQL delivers a notice only to a session
// listening when it is sent, so what daemon A commits while B's LISTEN session is being replaced
// is never told to B. B must reconnect its LISTEN by itself and re-read the heads it may have
// missed notices for, and wake what waits on them: a follower on B gets every record appended
// through A exactly once and in order, and B's view (streams.get, the unread count an Inbox on B
// shows, B's records gauge) is A's.
//
// To lose the notices every time (not only when an append happens to fall into the reconnect),
// B's LISTEN server process is stopped (SIGSTOP) while A appends, so the notices queue for it in
// the server; then it is terminated (pg_terminate_backend) and continued: it handles the
// termination before it reads its queue, and dies without delivering them.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Inbox, YelloClient } from '../../src/client/index.js';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { batchesOf, notificationsOf, StreamWriter } from '../helpers/reading-fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { connectAs, createAgent, messageOf, ok, type TestAgent, type Wire } from '../helpers/wire-fixtures.js';

let cluster: FileDatabases;
let a: DaemonProcess;
let b: DaemonProcess;
let adminA: Wire;
let adminB: Wire;

/** The server pids of a daemon's LISTEN session (its last statement was a LISTEN). */
async function listenPids(app: string): Promise<number[]> {
  const out = await cluster.psql(
    `select pid from pg_stat_activity where datname = current_database() and application_name = '${app}' and query ilike 'listen %' order by pid`,
    'multi',
  );
  return out === '' ? [] : out.split('\n').map(Number);
}

/** The value of the `yello_records` gauge of a daemon. */
async function recordsGauge(admin: Wire): Promise<number> {
  const { text } = ok(await admin.call('daemon.metrics'));
  const line = text.split('\n').find((l) => l.startsWith('yello_records '));
  return Number(line?.split(' ')[1]);
}

describe.skipIf(!pgAvailable())('a daemon whose LISTEN session dies catches up on what it was not told', () => {
  beforeAll(async () => {
    cluster = await FileDatabases.open();
    await cluster.createDatabase('multi');
    const store = (app: string) => ['--store', `${cluster.url('multi')}&application_name=${app}`, '--policy', 'grants'];
    a = await DaemonProcess.start({ extraArgs: store('yellod-a') });
    b = await DaemonProcess.start({ extraArgs: store('yellod-b') });
    adminA = await a.connectAs();
    adminB = await b.connectAs();
  }, 90_000);

  afterAll(async () => {
    adminA.close();
    adminB.close();
    await a.cleanup();
    await b.cleanup();
    await cluster.stop();
  }, 60_000);

  async function chat(): Promise<{ alice: TestAgent; bob: TestAgent; chatId: string; streamA: string }> {
    const alice = await createAgent(adminA, a.socketPath);
    const bob = await createAgent(adminB, b.socketPath);
    await waitFor(async () => (await adminA.call('agents.get', { agentId: bob.id })).result !== undefined, 'A knows bob');
    await waitFor(async () => (await adminB.call('agents.get', { agentId: alice.id })).result !== undefined, 'B knows alice');
    ok(await adminA.call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    ok(await adminB.call('grants.add', { agentId: bob.id, peerAgentId: alice.id }));
    ok(await adminA.call('agents.setPolicy', { agentId: alice.id, pii: 'off' }));
    const opened = await waitFor(async () => (await alice.client.call('chats.open', { peerAgentId: bob.id })).result, 'alice opens');
    await waitFor(async () => (await bob.client.call('chats.open', { peerAgentId: alice.id })).result, 'bob opens on B');
    return { alice, bob, chatId: opened.chat.id, streamA: `${opened.chat.id}:${alice.id}` };
  }

  it('a follower on B gets every record appended through A exactly once, in order, across a killed LISTEN session', async () => {
    const { alice, bob, chatId, streamA } = await chat();
    const wa = await StreamWriter.claim(alice.client, streamA);
    const follower = await connectAs(b.socketPath, bob.token);
    const bobClient = await YelloClient.connect({ socketPath: b.socketPath, token: bob.token });
    try {
      const sub = ok(await follower.call('chats.follow', { chatId }));
      const seen = () =>
        batchesOf(follower, sub.subscriptionId)
          .filter((x) => x.streamId === streamA)
          .flatMap((x) => x.records.filter((r) => r.wrapper.type === 'chat.message').map((r) => messageOf(r).content));
      const sent: string[] = [];
      const send = async (prefix: string, n: number) => {
        const r = await wa.send(prefix, n);
        for (let i = 0; i < n; i++) sent.push(`message ${prefix} number ${i}`);
        return r;
      };

      await send('before', 2);
      await waitFor(() => seen().length === sent.length, 'B pushes what A appended before the kill');

      for (let round = 0; round < 3; round++) {
        const [pid, ...more] = await listenPids('yellod-b');
        expect(more, 'B has one LISTEN session').toEqual([]);
        if (pid === undefined) throw new Error('B has no LISTEN session');
        process.kill(pid, 'SIGSTOP');
        let last;
        try {
          // Acknowledged by A while B's LISTEN session cannot read its notices.
          last = await send(`unheard-${round}`, 3);
        } finally {
          await cluster.psql(`select pg_terminate_backend(${pid})`, 'multi');
          process.kill(pid, 'SIGCONT');
        }
        // Nothing else is appended: only B's catch-up after its reconnect can deliver these.
        await waitFor(() => seen().length === sent.length, `round ${round}: B pushes the appends it was not told of`, 15_000);
        await waitFor(async () => {
          const pids = await listenPids('yellod-b');
          return pids.length === 1 && pids[0] !== pid;
        }, `round ${round}: B listens again`);
        expect(ok(await adminB.call('streams.get', { streamId: streamA })).nextPosition).toBe(last.nextPosition);
        // The unread count an Inbox on B shows is what A committed (bob acknowledged nothing).
        const inbox = await Inbox.open(bobClient);
        try {
          const entry = (await inbox.list()).find((c) => c.chatId === chatId);
          expect(entry?.unreadMessages, `round ${round}: unread on B`).toBe(sent.length);
        } finally {
          await inbox.close();
        }
        // And B counts the records A wrote (the records gauge), as A does.
        await waitFor(async () => (await recordsGauge(adminB)) === (await recordsGauge(adminA)), `round ${round}: B's records gauge`);
      }

      await send('after', 2);
      await waitFor(() => seen().length === sent.length, 'B pushes what A appended after the reconnects');
      await sleep(200);
      // Exactly once, in order: nothing repeated by the catch-up and the notices that followed.
      expect(seen()).toEqual(sent);
    } finally {
      follower.close();
      bobClient.close();
    }
  });

  /** alice registered on A, bob on B, granted both ways, each known to both daemons; no chat yet. */
  async function pair(): Promise<{ alice: TestAgent; bob: TestAgent }> {
    const alice = await createAgent(adminA, a.socketPath);
    const bob = await createAgent(adminB, b.socketPath);
    await waitFor(async () => (await adminA.call('agents.get', { agentId: bob.id })).result !== undefined, 'A knows bob');
    await waitFor(async () => (await adminB.call('agents.get', { agentId: alice.id })).result !== undefined, 'B knows alice');
    ok(await adminA.call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    ok(await adminB.call('grants.add', { agentId: bob.id, peerAgentId: alice.id }));
    return { alice, bob };
  }

  /** The chat ids a chats.watch subscription of `w` was told of. */
  const openedOf = (w: Wire, subscriptionId: string) =>
    notificationsOf(w, subscriptionId)
      .filter((n) => n.method === 'chats.opened')
      .map((n) => (n.params as { chat: { id: string } }).chat.id);

  it('a chats.watch on A is told of a chat opened through B, once', async () => {
    const { alice, bob } = await pair();
    const watch = ok(await alice.client.call('chats.watch', {}));
    const opened = ok(await bob.client.call('chats.open', { peerAgentId: alice.id }), 'bob opens through B');
    expect(opened.created).toBe(true);
    await waitFor(() => openedOf(alice.client, watch.subscriptionId).length > 0, 'alice on A told of the chat');
    await sleep(300);
    expect(openedOf(alice.client, watch.subscriptionId)).toEqual([opened.chat.id]);
    // Opened again through A: found, not created, nothing more told.
    expect(ok(await alice.client.call('chats.open', { peerAgentId: bob.id })).created).toBe(false);
    await sleep(200);
    expect(openedOf(alice.client, watch.subscriptionId)).toEqual([opened.chat.id]);
  });

  it("a chats.watch on A is told of a chat opened through B while A's LISTEN session was lost, once it reconnects", async () => {
    const { alice, bob } = await pair();
    const watch = ok(await alice.client.call('chats.watch', {}));
    const [pid, ...more] = await listenPids('yellod-a');
    expect(more, 'A has one LISTEN session').toEqual([]);
    if (pid === undefined) throw new Error('A has no LISTEN session');
    process.kill(pid, 'SIGSTOP');
    let chatId: string;
    try {
      // Created through B while A's LISTEN session cannot read its notices: the notice is lost.
      chatId = ok(await bob.client.call('chats.open', { peerAgentId: alice.id })).chat.id;
    } finally {
      await cluster.psql(`select pg_terminate_backend(${pid})`, 'multi');
      process.kill(pid, 'SIGCONT');
    }
    await waitFor(() => openedOf(alice.client, watch.subscriptionId).length > 0, 'alice on A told after the reconnect', 15_000);
    await sleep(300);
    expect(openedOf(alice.client, watch.subscriptionId)).toEqual([chatId]);
  });
});
