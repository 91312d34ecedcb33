// Kills two mutants of src/mcp/chat-session.ts's operationStatus() that r1 called killable but
// not built (test/MUTATION.md, "Twelfth round"), both in the branch that asks `operations.get`:
//   390:59 `operation.state === 'unknown'` → true: an operation the daemon still calls `pending`
//          (its synced write failed, the outcome shows only after a restart) read as
//          `committed: false`, as if it were known not to be stored;
//   392:13 `this.#pending?.operationId === id` → false: a session stopped (its peer stream reset)
//          with an append of unknown outcome still reports which tool made that operation.
// And two of #whenConnected (296:41 its body emptied, 298:9 `client.connected` → true): a send
// while the daemon is down waits up to `settleMs` for the reconnect before the writer's own 10 s,
// so an outage between the two is ridden out.
// The daemon runs with `--fault-fail-sync-file` (LevelDB only: the hook is LevelDB's), as
// test/faults/storage-faults.test.ts does.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ChatWriter, type Chat, type YelloClient } from '../../src/client/index.js';
import { PeerHead } from '../../src/client/peer-head.js';
import { ChatSession } from '../../src/mcp/chat-session.js';
import { ToolFailure } from '../../src/mcp/tool-errors.js';
import { connectAdmin, connectAgent, createChat, rejectionOf, type Participant } from '../helpers/client-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { sleep, waitFor } from '../helpers/wait.js';

const faultDir = mkdtempSync(path.join(tmpdir(), 'yello-fault-'));
const trigger = path.join(faultDir, 'fail-sync');
afterAll(() => {
  rmSync(faultDir, { recursive: true, force: true });
});

const reconnect = { minDelayMs: 20, maxDelayMs: 200 };
const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open', '--fault-fail-sync-file', trigger] }, (d) =>
  connectAdmin(d, { reconnect }),
);
const clients: YelloClient[] = [];
afterAll(() => {
  for (const c of clients) c.close();
});

async function clientOf(who: Participant): Promise<YelloClient> {
  const c = await connectAgent(daemon(), who, { reconnect });
  clients.push(c);
  return c;
}

async function chatOf(client: YelloClient, chatId: string): Promise<Chat> {
  return (await client.call('chats.get', { chatId })).chat;
}

/** A session of `client`'s agent in `chatId` with no conversation handed over, and its peer head (to close). */
async function sessionOf(client: YelloClient, chatId: string, settleMs = 3000): Promise<{ s: ChatSession; head: PeerHead }> {
  const chat = await chatOf(client, chatId);
  const head = PeerHead.watch(client, chat);
  const options = { client, replace: false, resumeAfterBreak: false, settleMs, log: pino({ level: 'silent' }), onStopped: () => {} };
  return { s: await ChatSession.start(options, chat, null, head), head };
}

/** Synced writes fail while `run` runs; then the daemon restarts without the fault (it turned read-only). */
async function withFailingSync<T>(run: () => Promise<T>): Promise<T> {
  writeFileSync(trigger, '');
  try {
    return await run();
  } finally {
    rmSync(trigger, { force: true });
    await daemon().restart();
    await waitFor(() => admin().connected, 'the admin to reconnect', 15_000, 20);
  }
}

describe('ChatSession.operationStatus: operations the daemon looks up', () => {
  it("another writer's operation still pending (its fsync failed, no restart yet) is reported committed: null, not false", async () => {
    const chat = await createChat(admin());
    const alice = await clientOf(chat.alice);
    const { s, head } = await sessionOf(alice, chat.chatId);
    const w = new ChatWriter(alice, { chatId: chat.chatId });
    try {
      await w.send('claimed and stored'); // the claim, before writes fail
      const status = await withFailingSync(async () => {
        await rejectionOf(w.send('in doubt'));
        const opId = w.uncertainOperationId;
        expect(opId).not.toBeNull();
        // The daemon's own answer first: the operation is pending, neither stored nor known lost.
        expect((await alice.call('operations.get', { streamId: s.streamId, operationId: opId! })).state).toBe('pending');
        return s.operationStatus(opId!);
      });
      expect(status).toMatchObject({ committed: null, resolved: false, kind: null, paused: false });
      expect(status.operation?.state).toBe('pending');
    } finally {
      head.close();
      await s.stop();
    }
  });

  it('a session stopped by a reset with its send of unknown outcome: the lookup names the tool that made it (kind: send)', async () => {
    const chat = await createChat(admin());
    const alice = await clientOf(chat.alice);
    const { s, head } = await sessionOf(alice, chat.chatId);
    try {
      await s.send({ text: 'claimed and stored' });
      const failure = await withFailingSync(() => rejectionOf(s.send({ text: 'in doubt' })));
      expect(failure).toBeInstanceOf(ToolFailure);
      expect((failure as ToolFailure).type).toBe('OUTCOME_UNKNOWN');
      const opId = (failure as ToolFailure).data.operationId as string;
      await waitFor(() => alice.connected, 'alice to reconnect', 15_000, 20);
      // The peer stream reset: the session stops, its unknown send still on record.
      await admin().rpc.streams.reset({ streamId: chat.bob.streamId, reason: 'guard' });
      await waitFor(() => s.state === 'needs-intervention', 'the session to stop at the break');
      const status = await s.operationStatus(opId);
      // Stopped: it does not settle (no resolve), it looks the operation up; after the restart it is `unknown`.
      expect(status).toMatchObject({ committed: false, resolved: false, kind: 'send', paused: false });
      expect(status.operation?.state).toBe('unknown');
    } finally {
      head.close();
      await s.stop();
    }
  });

  it('a send while the daemon is down waits settleMs for the reconnect before the writer waits its own 10 s: an 11 s outage is ridden out', async () => {
    const chat = await createChat(admin());
    const alice = await clientOf(chat.alice);
    const { s, head } = await sessionOf(alice, chat.chatId, 6000);
    try {
      await s.send({ text: 'before' });
      await daemon().stop();
      const started = Date.now();
      const sending = s.send({ text: 'across the outage' });
      const settled = sending.then(
        () => 'sent',
        (e: unknown) => e,
      );
      // Down for longer than the writer's 10 s alone would wait.
      await sleep(11_000);
      await daemon().restart();
      const outcome = await settled;
      expect(outcome, `after ${Date.now() - started} ms`).toBe('sent');
      await waitFor(() => admin().connected, 'the admin to reconnect', 15_000, 20);
      const { entries } = await admin().rpc.chats.history({ chatId: chat.chatId, limit: 5 });
      expect(entries.map((r) => (r.wrapper.type === 'chat.message' ? r.wrapper.message.content : ''))).toEqual([
        'before',
        'across the outage',
      ]);
    } finally {
      head.close();
      await s.stop();
    }
  }, 40_000);
});
