// Revocations across the daemons of one PostgreSQL database (issue 52 finding 7). What an
// append's admission depends on (the session's token, the agent enabled, the grant) is checked in
// the commit's transaction, and a session's every call is confirmed against the database: a
// revocation answered through A is in force through B before A's call returns, whatever B has
// heard. B is made deaf for each case (its LISTEN session stopped with SIGSTOP: the notices wait
// in the server), so B's memory still allows what the database refuses, every time: one try must
// be refused, never "after about a second". The same deafness shows the refusals a cache could
// make wrongly (NOT_FOUND for a chat or an agent created through A, NO_GRANT for a grant added
// there, UNAUTHENTICATED for a token made there) confirmed against the database before they are
// answered. The last part runs the stores in-process, without the RPC layer's session check, so
// that only the commit's own check stands between a revoked session and a written append.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Caller } from '../../src/daemon/caller.js';
import { SignBatcher } from '../../src/daemon/crypto/sign-batcher.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { Directory } from '../../src/daemon/directory/directory.js';
import { StreamStore } from '../../src/daemon/streams/stream-store.js';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { failure, openInProcessDaemon, type InProcessDaemon } from '../helpers/in-process-pg-daemons.js';
import { PgCluster, pgAvailable } from '../helpers/pg-cluster.mjs';
import { expectError, messages, StreamWriter } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { connectAs, createAgent, ok, uniq, type TestAgent, type Wire } from '../helpers/wire-fixtures.js';

/** The server pid of the LISTEN session of the pool named `app` on `database`. */
async function listenPid(cluster: PgCluster, app: string, database: string): Promise<number> {
  return waitFor(
    async () => {
      const out = await cluster.psql(
        `select pid from pg_stat_activity where application_name = '${app}' and query ilike 'listen %' order by backend_start desc limit 1`,
        database,
      );
      return out === '' ? undefined : Number(out);
    },
    `the LISTEN session of ${app}`,
    10_000,
  );
}

/** Run `fn` while `app`'s LISTEN session is stopped: it hears no notice meanwhile. */
async function deaf<T>(cluster: PgCluster, app: string, database: string, fn: () => Promise<T>): Promise<T> {
  const pid = await listenPid(cluster, app, database);
  process.kill(pid, 'SIGSTOP');
  try {
    return await fn();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}

describe.skipIf(!pgAvailable())('revocations and refusals across two daemons, the second one deaf', () => {
  let cluster: PgCluster;
  let a: DaemonProcess;
  let b: DaemonProcess;
  let adminA: Wire;
  let adminB: Wire;
  const wires: Wire[] = [];
  const deafB = <T>(fn: () => Promise<T>) => deaf(cluster, 'yellod-b', 'revoke', fn);

  beforeAll(async () => {
    cluster = await PgCluster.start();
    await cluster.psql('create database revoke');
    const store = (app: string) => ['--store', `${cluster.url('revoke')}&application_name=${app}`, '--policy', 'grants'];
    a = await DaemonProcess.start({ extraArgs: store('yellod-a') });
    b = await DaemonProcess.start({ extraArgs: store('yellod-b') });
    adminA = await a.connectAs();
    adminB = await b.connectAs();
  }, 90_000);

  afterAll(async () => {
    for (const w of [adminA, adminB, ...wires]) w.close();
    await a.cleanup();
    await b.cleanup();
    await cluster.stop();
  }, 60_000);

  /** alice and bob (registered on A), granted both ways, their chat, known to B; alice claimed her stream through B and appended once. */
  async function claimedThroughB(): Promise<{ alice: TestAgent; bob: TestAgent; streamA: string; onB: Wire; w: StreamWriter }> {
    const alice = await createAgent(adminA, a.socketPath);
    const bob = await createAgent(adminA, a.socketPath);
    wires.push(alice.client, bob.client);
    ok(await adminA.call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    ok(await adminA.call('grants.add', { agentId: bob.id, peerAgentId: alice.id }));
    ok(await adminA.call('agents.setPolicy', { agentId: alice.id, pii: 'off' }));
    const chat = ok(await alice.client.call('chats.open', { peerAgentId: bob.id })).chat;
    const streamA = `${chat.id}:${alice.id}`;
    const onB = await connectAs(b.socketPath, alice.token);
    wires.push(onB);
    const w = await StreamWriter.claim(onB, streamA);
    await w.send('before', 1);
    // B has heard every row above (its grant, the policy) before it goes deaf.
    await waitFor(async () => ok(await adminB.call('grants.list', { agentId: alice.id })).grants.length === 1, 'B knows the grant');
    await waitFor(async () => ok(await adminB.call('agents.get', { agentId: alice.id })).agent.pii === 'off', 'B knows the policy');
    return { alice, bob, streamA, onB, w };
  }

  /** The stream's head as the database has it (a daemon's memory could be behind it). */
  const positionOnA = async (streamId: string) =>
    await cluster.psql(`select next_position from heads where stream_id = '${streamId}'`, 'revoke');

  it('grants.remove through A: the next append through B is NO_GRANT, every time, and nothing is written', async () => {
    for (let round = 0; round < 3; round++) {
      const { alice, bob, streamA, w } = await claimedThroughB();
      const before = w.next;
      await deafB(async () => {
        expect(ok(await adminA.call('grants.remove', { agentId: alice.id, peerAgentId: bob.id })).removed).toBe(true);
        expectError(await w.tryAppend(messages(`revoked-${round}`, 1)), 'PERMISSION_DENIED', `round ${round}`);
        const again = await w.tryAppend(messages(`revoked-again-${round}`, 1));
        expect(again.error?.data?.reason, JSON.stringify(again.error)).toBe('NO_GRANT');
      });
      expect(await positionOnA(streamA)).toBe(before);
    }
  });

  it('agents.rotateToken through A: every session of the old token on B is refused at its next call, the new token works there', async () => {
    for (let round = 0; round < 3; round++) {
      const { alice, streamA, onB, w } = await claimedThroughB();
      const reader = await connectAs(b.socketPath, alice.token);
      wires.push(reader);
      const before = w.next;
      await deafB(async () => {
        const { token } = ok(await adminA.call('agents.rotateToken', { agentId: alice.id }));
        expectError(await w.tryAppend(messages(`rotated-${round}`, 1)), 'UNAUTHENTICATED', `append, round ${round}`);
        expectError(await reader.call('streams.get', { streamId: streamA }), 'UNAUTHENTICATED', `read, round ${round}`);
        expectError(await onB.call('chats.list', {}), 'UNAUTHENTICATED', `list, round ${round}`);
        // The token made through A opens a session on B, which has not heard of it.
        const fresh = await connectAs(b.socketPath, token);
        wires.push(fresh);
        const next = new StreamWriter(fresh, streamA, w.token, w.generation, w.next);
        await next.send(`new-token-${round}`, 1);
      });
      expect(Number(await positionOnA(streamA))).toBe(Number(before) + 1);
    }
  });

  it('agents.rotateToken through A: a replay through B of an append the old session committed is UNAUTHENTICATED, not its answer', async () => {
    // A new append is answered on its commit's own session check; a replay commits nothing, so
    // its answer waits for the session check, asked once the replay is found.
    const { alice, streamA, onB, w } = await claimedThroughB();
    const records = messages('replayed', 1);
    const operationId = uniq('op');
    const at = w.next;
    await w.append(records, operationId);
    const replay = () => new StreamWriter(onB, streamA, w.token, w.generation, at).tryAppend(records, operationId);
    expect(ok(await replay()).duplicate).toBe(true);
    await deafB(async () => {
      ok(await adminA.call('agents.rotateToken', { agentId: alice.id }));
      expectError(await replay(), 'UNAUTHENTICATED', 'the replay after the rotation');
    });
  });

  it('agents.disable through A: the agent on B is refused at its next call, every time, and nothing is written', async () => {
    for (let round = 0; round < 3; round++) {
      const { alice, streamA, onB, w } = await claimedThroughB();
      const before = w.next;
      await deafB(async () => {
        ok(await adminA.call('agents.disable', { agentId: alice.id }));
        expectError(await w.tryAppend(messages(`disabled-${round}`, 1)), 'UNAUTHENTICATED', `append, round ${round}`);
        expectError(await onB.call('streams.get', { streamId: streamA }), 'UNAUTHENTICATED', `read, round ${round}`);
        // A new session with the token of a disabled agent can do nothing either (B may still
        // accept its hello, unheard: its first call is refused).
        const late = await connectWireQuiet(b.socketPath);
        await late.call('session.hello', { token: alice.token });
        expectError(await late.call('streams.get', { streamId: streamA }), 'UNAUTHENTICATED', `new session, round ${round}`);
      });
      expect(await positionOnA(streamA)).toBe(before);
    }
  });

  async function connectWireQuiet(socketPath: string): Promise<Wire> {
    const { connectWire } = await import('../helpers/wire-fixtures.js');
    const wire = await connectWire(socketPath);
    wires.push(wire);
    return wire;
  }

  it('a chat, an agent and a grant made through A are found through B before B hears of them (no NOT_FOUND, NO_GRANT from its memory)', async () => {
    const alice = await createAgent(adminA, a.socketPath);
    const bob = await createAgent(adminA, a.socketPath);
    wires.push(alice.client, bob.client);
    ok(await adminA.call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    const aliceOnB = await connectAs(b.socketPath, alice.token);
    wires.push(aliceOnB);
    await deafB(async () => {
      // An agent made through A: B's admin finds it, by id and by username.
      const carol = ok(await adminA.call('agents.create', { username: uniq('carol'), name: 'Carol' }));
      expect(ok(await adminB.call('agents.get', { agentId: carol.agent.id })).agent.id).toBe(carol.agent.id);
      expect(ok(await adminB.call('agents.get', { username: carol.agent.username })).agent.id).toBe(carol.agent.id);
      // Its token opens a session on B.
      const carolOnB = await connectAs(b.socketPath, carol.token);
      wires.push(carolOnB);
      // A chat opened through A: B reads it and claims its stream (the flaky cursors test).
      const chat = ok(await alice.client.call('chats.open', { peerAgentId: bob.id })).chat;
      expect(ok(await aliceOnB.call('chats.get', { chatId: chat.id })).chat.id).toBe(chat.id);
      const claimed = ok(await aliceOnB.call('streams.claim', { streamId: `${chat.id}:${alice.id}` }));
      expect(claimed.epoch).toBe('1');
      // A grant added through A: carol opens her chat with bob through B.
      ok(await adminA.call('grants.add', { agentId: carol.agent.id, peerAgentId: bob.id }));
      expect(ok(await carolOnB.call('chats.open', { peerAgentId: bob.id })).created).toBe(true);
    });
  });
});

describe.skipIf(!pgAvailable())(
  "a revoked session's append is refused by the commit itself (in-process, no session check before it)",
  () => {
    let cluster: PgCluster;
    let dir: string;
    const opened: InProcessDaemon[] = [];
    let stores: Array<{ directory: Directory; streams: StreamStore }> = [];

    beforeAll(async () => {
      cluster = await PgCluster.start();
      await cluster.psql('create database inproc');
      dir = mkdtempSync(path.join(tmpdir(), 'yl-revoke-'));
      for (const name of ['a', 'b'])
        opened.push(await openInProcessDaemon(name, `${cluster.url('inproc')}&application_name=inproc-${name}`, dir));
      // Each daemon's domain under policy `grants` (the helper's is `open`), as daemon.ts builds it.
      stores = opened.map((d) => {
        const directory = new Directory(d.port, d.codec, 'admin-token', 'grants');
        const signer = new Signer(path.join(dir, `${d.name}-grants`, 'keys'));
        return { directory, streams: new StreamStore(d.port, directory, signer, d.codec, d.integrity, new SignBatcher(signer)) };
      });
    }, 90_000);

    afterAll(async () => {
      for (const d of opened) await d.port.close().catch(() => {});
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    const admin: Caller = { role: 'admin' };
    const deafB = <T>(fn: () => Promise<T>) => deaf(cluster, 'inproc-b', 'inproc', fn);

    /** alice and bob through A, granted, their chat; alice's session and claim on B; B has heard all of it. */
    async function setup() {
      const [A, B] = stores as [(typeof stores)[0], (typeof stores)[0]];
      const alice = await A.directory.createAgent(uniq('alice'), 'Alice', undefined);
      const bob = await A.directory.createAgent(uniq('bob'), 'Bob', undefined);
      await A.directory.addGrant(alice.agent.id, bob.agent.id);
      await A.directory.setPolicy(alice.agent.id, 'off');
      const chat = (await A.directory.openChat(admin, alice.agent.id, bob.agent.id)).chat;
      const streamId = `${chat.id}:${alice.agent.id}`;
      const caller = await waitFor(() => {
        const c = B.directory.authenticate(alice.token);
        return c && B.directory.maySend(alice.agent.id, bob.agent.id) && B.directory.chatRow(chat.id) ? c : undefined;
      }, 'B knows alice, her grant and the chat');
      const claim = await B.streams.claim(caller, { streamId, replace: false });
      let position = Number(claim.nextPosition);
      const append = (id: string) =>
        B.streams.append(caller, {
          streamId,
          coordinatorToken: claim.coordinatorToken,
          generation: 1,
          expectedPosition: position,
          operationId: id,
          records: [{ type: 'chat.message', messageId: id, content: id }],
        });
      await append('first');
      position += 1;
      return { A, B, alice, bob, caller, streamId, append, position: () => position };
    }

    it.each([
      ['grants.remove', 'NO_GRANT'],
      ['agents.rotateToken', 'UNAUTHENTICATED'],
      ['agents.disable', 'UNAUTHENTICATED'],
    ] as const)('%s through A: the next append through B is %s, every time', async (revocation, answer) => {
      for (let round = 0; round < 3; round++) {
        const s = await setup();
        await deafB(async () => {
          if (revocation === 'grants.remove') await s.A.directory.removeGrant(s.alice.agent.id, s.bob.agent.id);
          else if (revocation === 'agents.rotateToken') await s.A.directory.rotateToken(s.alice.agent.id);
          else await s.A.directory.disableAgent(s.alice.agent.id);
          // B's memory still allows it: only the commit can refuse.
          expect(s.B.directory.stillValid(s.caller) && s.B.directory.maySend(s.alice.agent.id, s.bob.agent.id)).toBe(true);
          const refused = await failure(s.append(`revoked-${round}`));
          expect(refused.type === 'PERMISSION_DENIED' ? refused.reason : refused.type).toBe(answer);
        });
        // Nothing of it was written.
        expect(Number(await cluster.psql(`select next_position from heads where stream_id = '${s.streamId}'`, 'inproc'))).toBe(
          s.position(),
        );
      }
    });
  },
);
