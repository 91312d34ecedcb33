// Pins behaviour of src/mcp/chat-session.ts. The MCP tests (test/mcp/*) spawn `yello mcp` through
// the SDK's StdioClientTransport, which passes the child only its default environment: neither
// __STRYKER_ACTIVE_MUTANT__ nor the coverage preload reaches the server, so no mutant of the
// session is ever switched on there. These tests build the server's AgentSessions (and
// ChatSession.start itself) in the vitest worker, against a real daemon: what read_new presents
// again, what acknowledge and send acknowledge, the errors without a presented batch, which
// batch is presented (the conversation's oldest one not acknowledged), the state and view,
// fences, breaks, WRITER_ACTIVE, appends of unknown outcome and their settling, reconnects, and
// stop().

import { pino } from 'pino';
import { describe, expect, it, afterAll } from 'vitest';
import {
  ContinuityBreakError,
  FencedError,
  WriterActiveError,
  type MessageBatch,
  type YelloClient,
  ChatWriter,
  ConnectionLostError,
  Conversation,
  LineTooLargeError,
  type Chat,
} from '../../src/client/index.js';
import { PeerHead } from '../../src/client/peer-head.js';
import { AgentSessions } from '../../src/mcp/agent-sessions.js';
import { ChatSession, type ChatSessionOptions } from '../../src/mcp/chat-session.js';
import { ToolFailure } from '../../src/mcp/tool-errors.js';
import {
  appendMessages,
  connectAgent,
  createChat,
  freeze,
  messageContents,
  readStream,
  rejectionOf,
  thaw,
  type Hold,
  type TestChat,
  type Participant,
  connectAdmin,
} from '../helpers/client-fixtures.js';
import { useClientDaemon } from '../helpers/use-client-daemon.js';
import { waitFor, sleep } from '../helpers/wait.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { useDaemon } from '../helpers/use-daemon.js';

// A process of its own: the tests freeze (SIGSTOP) and SIGKILL it.
const { daemon, admin, clients } = useClientDaemon({ reconnect: { minDelayMs: 20, maxDelayMs: 200 }, process: true });
const log = pino({ level: 'silent' });

interface World {
  chat: TestChat;
  alice: YelloClient;
  hold: Hold;
  bob: AgentSessions;
  stopped: Array<{ chatId: string; error: Error }>;
}

const worlds: AgentSessions[] = [];

function sessionsOf(token: string, stopped: World['stopped'], extra: Partial<ConstructorParameters<typeof AgentSessions>[0]> = {}) {
  const s = new AgentSessions({
    token,
    socketPath: daemon().socketPath,
    replace: false,
    resumeAfterBreak: false,
    settleMs: 4000,
    reconnect: { minDelayMs: 20, maxDelayMs: 200 },
    log,
    onPeerWrote: () => {},
    onStopped: (info) => stopped.push(info),
    ...extra,
  });
  worlds.push(s);
  return s;
}

/** alice (a plain client holding her stream) writes; bob is the MCP server's agent. */
async function world(extra: Partial<ConstructorParameters<typeof AgentSessions>[0]> = {}): Promise<World> {
  const chat = await createChat(admin());
  const alice = await connectAgent(daemon(), chat.alice);
  clients.push(alice);
  const claim = await alice.rpc.streams.claim({ streamId: chat.alice.streamId });
  const stopped: World['stopped'] = [];
  const bob = sessionsOf(chat.bob.token, stopped, extra);
  return { chat, alice, hold: { streamId: chat.alice.streamId, token: claim.coordinatorToken, next: claim.nextPosition }, bob, stopped };
}

function contents(b: MessageBatch | null): string[] {
  return messageContents(b?.records ?? []);
}

async function failure(p: Promise<unknown>): Promise<ToolFailure> {
  const e = await rejectionOf(p);
  expect(e).toBeInstanceOf(ToolFailure);
  return e as ToolFailure;
}

/** The daemon's cap of subscriptions (follows and watches) per connection. */
const MAX_SUBS = 64;

/** How many more subscriptions `client` has room for (the watches taken are freed again). */
async function freeSubscriptions(client: YelloClient): Promise<number> {
  const ids: string[] = [];
  for (;;) {
    try {
      ids.push((await client.call('chats.watch', {})).subscriptionId);
    } catch {
      break;
    }
  }
  for (const subscriptionId of ids) await client.call('chats.unfollow', { subscriptionId });
  return ids.length;
}

async function closeAll(): Promise<void> {
  for (const s of worlds.splice(0)) await s.close().catch(() => {});
}

describe('ChatSession (in-process)', () => {
  it('presents a batch again until acknowledged, acknowledges the presented one, sends with and without a receipt', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      expect(s.chatId).toBe(w.chat.chatId);
      expect(s.streamId).toBe(w.chat.bob.streamId);
      expect(s.peerStreamId).toBe(w.chat.alice.streamId);
      expect(s.agentId).toBe(w.chat.bob.id);
      const v0 = s.view();
      expect(v0).toMatchObject({
        state: 'running',
        streamId: w.chat.bob.streamId,
        peerStreamId: w.chat.alice.streamId,
        presentedBatchId: null,
        uncertainOperationId: null,
      });
      expect(v0.next).toEqual(s.view().next);
      expect(s.hasPending).toBe(false);
      expect(await s.unreadMessages()).toBe(0);
      expect(await s.operationStatus(undefined)).toEqual({ operation: null, committed: null, resolved: false, kind: null, paused: false });

      await appendMessages(w.alice, w.hold, ['one']);
      await appendMessages(w.alice, w.hold, ['two', 'three']);
      await waitFor(async () => (await s.unreadMessages()) === 3, 'bob to count 3 unread', 10_000, 20);
      const r1 = await s.readNew({ waitMs: 5000 });
      expect(contents(r1.batch)).toEqual(['one']);
      expect(r1.repeated).toBe(false);
      // the second batch waits in the conversation: read_new says more follow
      await waitFor(async () => (await s.readNew({ waitMs: 0 })).more, 'read_new to say more follow', 5000, 20);
      expect(s.hasPending).toBe(true);
      expect(s.presented?.batchId).toBe(r1.batch!.batchId);
      expect(s.view().presentedBatchId).toBe(r1.batch!.batchId);
      const again = await s.readNew({ waitMs: 0 });
      expect(again.batch?.batchId).toBe(r1.batch!.batchId);
      expect(again.repeated).toBe(true);

      const wrong = await failure(s.acknowledge('bat_not_this_one'));
      expect(wrong.type).toBe('NOT_PRESENTED');
      expect(wrong.data).toEqual({ chatId: w.chat.chatId, presentedBatchId: r1.batch!.batchId });
      expect(wrong.message).not.toContain('restarted');
      const wrongReply = await failure(s.send({ text: 'x', acknowledge: true, batchId: 'bat_not_this_one' }));
      expect(wrongReply.type).toBe('NOT_PRESENTED');
      expect(wrongReply.message).toContain('nothing was sent and nothing acknowledged');
      const stray = await failure(s.send({ text: 'x', batchId: r1.batch!.batchId }));
      expect(stray.type).toBe('INVALID_PARAMS');
      expect(stray.data).toEqual({ path: 'batchId' });
      expect(stray.message).toContain('only used together with acknowledge');
      expect(stray.action).toContain('Pass acknowledge: true');
      expect(await readStream(w.alice, w.chat.bob.streamId).catch(() => [])).toEqual([]);

      const t0 = Date.now();
      const ack = await s.acknowledge(r1.batch!.batchId);
      expect(Date.now() - t0).toBeLessThan(3000); // connected: no wait for a reconnect (settleMs is 4 s)
      expect(ack.batch.batchId).toBe(r1.batch!.batchId);
      expect(ack.result.streamId).toBe(w.chat.bob.streamId);
      expect(s.view().next).toEqual({ generation: r1.batch!.generation, position: r1.batch!.nextPosition });
      expect(s.view().epoch).not.toBeNull();
      expect(s.presented).toBeNull();
      expect(s.hasPending).toBe(false);
      expect(await s.unreadMessages()).toBe(2);
      const nothing = await failure(s.acknowledge(undefined));
      expect(nothing.type).toBe('NOTHING_PRESENTED');
      expect(nothing.data).toEqual({ chatId: w.chat.chatId });
      const nothingReply = await failure(s.send({ text: 'x', acknowledge: true }));
      expect(nothingReply.type).toBe('NOTHING_PRESENTED');
      expect(nothingReply.action).toContain('to send without a receipt');

      const r2 = await s.readNew({ waitMs: 5000 });
      expect(contents(r2.batch)).toEqual(['two', 'three']);
      expect(r2).toMatchObject({ repeated: false, more: false });
      const reply = await s.send({ text: 'reply', acknowledge: true, messageId: 'mid-reply-1' });
      expect(reply.acknowledged?.batchId).toBe(r2.batch!.batchId);
      expect(s.view().next).toEqual({ generation: r2.batch!.generation, position: r2.batch!.nextPosition });
      const plain = await s.send({ text: 'plain' });
      expect(plain.acknowledged).toBeNull();
      const none = await s.readNew({ waitMs: 0 });
      expect(none).toEqual({ batch: null, repeated: false, more: false });
      expect(s.hasPending).toBe(false);
      expect((await s.readNew({ waitMs: 0 })).batch).toBeNull();

      const records = await readStream(w.alice, w.chat.bob.streamId);
      const kinds = records.map((r) => r.wrapper.type);
      expect(kinds.filter((k) => k === 'chat.message')).toHaveLength(2);
      expect(kinds.filter((k) => k === 'chat.receipt')).toHaveLength(2);
      // the messageId was passed on: a second message with it is refused
      const dup = (await rejectionOf(s.send({ text: 'reply again', messageId: 'mid-reply-1' }))) as { type?: string };
      expect(dup.type).toBe('DUPLICATE_MESSAGE');
      expect((dup as { data?: Record<string, unknown> }).data?.streamId).toBeUndefined();
      const fence = records.find((r) => r.wrapper.type === 'chat.writer-fence');
      expect(fence?.wrapper.type === 'chat.writer-fence' ? fence.wrapper.fence.reason : null).toBe('yello mcp');

      const st = await s.operationStatus(plain.result.operationId);
      expect(st).toMatchObject({ committed: true, resolved: false, kind: null, paused: false });
      expect(st.operation?.state).toBe('committed');

      // stop(): the session refuses, and the claim is released (a new holder needs no takeover)
      await s.stop();
      expect(s.state).toBe('stopped');
      expect((await failure(s.readNew({ waitMs: 0 }))).type).toBe('STOPPED');
      expect((await failure(s.send({ text: 'late' }))).type).toBe('STOPPED');
      const stoppedErr = await failure(s.acknowledge(undefined));
      expect(stoppedErr.message).toContain('has stopped');
      expect(stoppedErr.action).toBe('Start the MCP server again.');
      // the inbox's conversation is not the session's own: it still delivers
      await appendMessages(w.alice, w.hold, ['after stop']);
      const inbox = await w.bob.inbox();
      const got = await inbox.wait({ waitMs: 5000 });
      expect(contents(got?.batch ?? null)).toEqual(['after stop']);
      const other = await connectAgent(daemon(), w.chat.bob);
      clients.push(other);
      await other.rpc.streams.claim({ streamId: w.chat.bob.streamId });
    } finally {
      await closeAll();
    }
  });

  it('acknowledges a batchId shown before a restart by presenting again; reports what waits instead', async () => {
    const w = await world();
    try {
      // written before the first session opens: every session reads it as the same batch (same batchId)
      await appendMessages(w.alice, w.hold, ['first']);
      const s1 = await w.bob.session(w.chat.chatId);
      const r = await s1.readNew({ waitMs: 5000 });
      expect(contents(r.batch)).toEqual(['first']);
      await w.bob.close();
      const stopped: World['stopped'] = [];
      const bob2 = sessionsOf(w.chat.bob.token, stopped);
      const s2 = await bob2.session(w.chat.chatId);
      const other = await failure(s2.acknowledge('bat_never_shown'));
      expect(other.type).toBe('NOT_PRESENTED');
      expect(other.data).toEqual({ chatId: w.chat.chatId, presentedBatchId: r.batch!.batchId });
      expect(other.message).toContain('restarted');
      // the lookup presented it: now it is the presented batch
      expect(s2.presented?.batchId).toBe(r.batch!.batchId);
      const bob3 = sessionsOf(w.chat.bob.token, stopped);
      await bob2.close();
      const s3 = await bob3.session(w.chat.chatId);
      const ack = await s3.acknowledge(r.batch!.batchId);
      expect(ack.batch.batchId).toBe(r.batch!.batchId);
      const gone = await failure(s3.acknowledge(r.batch!.batchId));
      expect(gone.type).toBe('NOTHING_PRESENTED');
      expect(gone.message).toContain('acknowledged already');
      await appendMessages(w.alice, w.hold, ['second']);
      await waitFor(async () => (await s3.unreadMessages()) === 1, 'bob to count 1 unread', 10_000, 20);
      const bob4 = sessionsOf(w.chat.bob.token, stopped);
      await bob3.close();
      const s4 = await bob4.session(w.chat.chatId);
      const reply = await s4.send({ text: 'r', acknowledge: true, batchId: 'bat_other' }).catch((e: unknown) => e as ToolFailure);
      expect((reply as ToolFailure).type).toBe('NOT_PRESENTED');
      expect((reply as ToolFailure).message).toContain('nothing was sent and nothing acknowledged');
    } finally {
      await closeAll();
    }
  });

  it('a session opened after a receipt at the head is caught up at once (its head starts at the receipt)', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      await appendMessages(w.alice, w.hold, ['read']);
      await s.acknowledge((await s.readNew({ waitMs: 5000 })).batch!.batchId);
      await w.bob.close();
      const bob2 = sessionsOf(w.chat.bob.token, [], { settleMs: 5000 });
      const s2 = await bob2.session(w.chat.chatId);
      const t0 = Date.now();
      expect(await s2.unreadMessages()).toBe(0);
      expect((await s2.readNew({ waitMs: 0 })).batch).toBeNull();
      expect(Date.now() - t0).toBeLessThan(2500);
    } finally {
      await closeAll();
    }
  });

  it("presents the conversation's oldest batch no receipt covers, whoever took it (read_new, or the inbox for wait_for_message)", async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      await appendMessages(w.alice, w.hold, ['b1']);
      await appendMessages(w.alice, w.hold, ['b2']);
      await waitFor(async () => (await s.unreadMessages()) === 2, 'bob to count 2 unread', 10_000, 20);
      // The inbox takes b1 (wait_for_message would, then adopt it): the conversation keeps it
      // pending, so read_new presents it, as new, though read_new did not take it.
      const inbox = await w.bob.inbox();
      const got = await inbox.wait({ waitMs: 5000 });
      expect(contents(got?.batch ?? null)).toEqual(['b1']);
      expect(s.hasPending).toBe(true);
      expect(s.presented).toBeNull();
      const r1 = await s.readNew({ waitMs: 0 });
      expect(r1).toMatchObject({ batch: { batchId: got!.batch.batchId }, repeated: false, more: true });
      // read_new takes b2 only once b1 is acknowledged; the inbox taking it meanwhile changes nothing shown
      const got2 = await inbox.wait({ waitMs: 5000 });
      expect(contents(got2?.batch ?? null)).toEqual(['b2']);
      expect(s.adopt(got2!.batch)).toMatchObject({ batch: { batchId: got!.batch.batchId }, repeated: true, more: true });
      await s.acknowledge(undefined);
      expect(await s.readNew({ waitMs: 0 })).toMatchObject({ batch: { batchId: got2!.batch.batchId }, repeated: false, more: false });
    } finally {
      await closeAll();
    }
  });

  it('a receipt covers the presented batch, not the one taken after it', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      await appendMessages(w.alice, w.hold, ['b1']);
      await appendMessages(w.alice, w.hold, ['b2']);
      const r1 = await s.readNew({ waitMs: 5000 });
      expect(contents(r1.batch)).toEqual(['b1']);
      const inbox = await w.bob.inbox();
      const got = await inbox.wait({ waitMs: 5000 });
      expect(contents(got?.batch ?? null)).toEqual(['b2']);
      const shown = s.adopt(got!.batch);
      expect(shown).toMatchObject({ batch: { batchId: r1.batch!.batchId }, repeated: true, more: true });
      await s.acknowledge(undefined);
      expect(s.hasPending).toBe(true);
      const r2 = await s.readNew({ waitMs: 0 });
      expect(r2.batch?.batchId).toBe(got!.batch.batchId);
      expect(r2.repeated).toBe(false);
      expect(r2.more).toBe(false);
      await s.acknowledge(got!.batch.batchId);
      expect(s.hasPending).toBe(false);
      expect((await s.readNew({ waitMs: 0 })).batch).toBeNull();
    } finally {
      await closeAll();
    }
  });

  it('a batch taken by wait_for_message says more follow while the conversation holds the next', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      await appendMessages(w.alice, w.hold, ['m1']);
      await appendMessages(w.alice, w.hold, ['m2']);
      await waitFor(async () => (await s.unreadMessages()) === 2, 'bob to count 2 unread', 10_000, 20);
      await new Promise((r) => setTimeout(r, 300));
      const inbox = await w.bob.inbox();
      const got = await inbox.wait({ waitMs: 5000 });
      expect(contents(got?.batch ?? null)).toEqual(['m1']);
      expect(s.adopt(got!.batch)).toMatchObject({ batch: { batchId: got!.batch.batchId }, repeated: false, more: true });
    } finally {
      await closeAll();
    }
  });

  it('two waiting read_new calls take one batch: the second is shown it again', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      const p1 = s.readNew({ waitMs: 6000 });
      const p2 = s.readNew({ waitMs: 6000 });
      await new Promise((r) => setTimeout(r, 200));
      await appendMessages(w.alice, w.hold, ['only']);
      const [a, b] = await Promise.all([p1, p2]);
      expect(contents(a.batch)).toEqual(['only']);
      expect(a.repeated).toBe(false);
      expect(b.batch?.batchId).toBe(a.batch!.batchId);
      expect(b.repeated).toBe(true);
      expect(await w.bob.session(w.chat.chatId)).toBe(s);
    } finally {
      await closeAll();
    }
  });

  it('read_new waits at most waitMs when nothing comes', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      const t0 = Date.now();
      const r = await s.readNew({ waitMs: 400 });
      const took = Date.now() - t0;
      expect(r.batch).toBeNull();
      expect(took).toBeGreaterThanOrEqual(350);
      expect(took).toBeLessThan(3000);
    } finally {
      await closeAll();
    }
  });

  it('WRITER_ACTIVE names the stream; with replace the server takes the stream over', async () => {
    const w = await world();
    try {
      const holder = await connectAgent(daemon(), w.chat.bob);
      clients.push(holder);
      await holder.rpc.streams.claim({ streamId: w.chat.bob.streamId });
      const s = await w.bob.session(w.chat.chatId);
      const e = await rejectionOf(s.send({ text: 'refused' }));
      expect(e).toBeInstanceOf(WriterActiveError);
      expect((e as WriterActiveError).data.streamId).toBe(w.chat.bob.streamId);
      expect(s.state).toBe('running');
      const stopped: World['stopped'] = [];
      const bobR = sessionsOf(w.chat.bob.token, stopped, { replace: true });
      const sr = await bobR.session(w.chat.chatId);
      const sent = await sr.send({ text: 'taken over' });
      expect(sent.result.streamId).toBe(w.chat.bob.streamId);
    } finally {
      await closeAll();
    }
  });

  it('a fence of the own stream stops the session as fenced', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      await s.send({ text: 'mine' });
      const thief = await connectAgent(daemon(), w.chat.bob);
      clients.push(thief);
      await thief.rpc.streams.claim({ streamId: w.chat.bob.streamId, replace: true });
      await thief.rpc.streams.append({
        streamId: w.chat.bob.streamId,
        coordinatorToken: (await thief.rpc.streams.claim({ streamId: w.chat.bob.streamId, replace: true })).coordinatorToken,
        generation: '1',
        expectedPosition: (await thief.rpc.streams.get({ streamId: w.chat.bob.streamId })).nextPosition,
        operationId: 'op-thief-1',
        records: [{ type: 'chat.message', messageId: 'm-thief-1', content: 'thief' }],
      });
      await waitFor(() => s.state === 'fenced', 'the session to be fenced', 10_000, 20);
      expect(w.stopped).toHaveLength(1);
      expect(w.stopped[0]!.chatId).toBe(w.chat.chatId);
      expect(w.stopped[0]!.error).toBeInstanceOf(FencedError);
      expect(s.view().state).toBe('fenced');
      expect(await rejectionOf(s.send({ text: 'again' }))).toBeInstanceOf(FencedError);
      expect(() => {
        s.assertUsable();
      }).toThrow(FencedError);
    } finally {
      await closeAll();
    }
  });

  it('a continuity break stops the session; a session opened on it fails unless resumeAfterBreak', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      await appendMessages(w.alice, w.hold, ['lost']);
      await waitFor(async () => (await s.unreadMessages()) === 1, 'bob to count 1 unread', 10_000, 20);
      // the inbox takes the batch (as wait_for_message would before adopting it): it is pending, presented by read_new
      const inbox = await w.bob.inbox();
      expect(contents((await inbox.wait({ waitMs: 5000 }))?.batch ?? null)).toEqual(['lost']);
      expect(contents((await s.readNew({ waitMs: 0 })).batch)).toEqual(['lost']);
      // the reset of a stream with a message unacknowledged stops the session
      await admin().rpc.streams.reset({ streamId: w.chat.alice.streamId, reason: 'test' });
      await waitFor(() => s.state === 'needs-intervention', 'the session to stop', 10_000, 20);
      expect(w.stopped).toHaveLength(1);
      expect(w.stopped[0]!.error).toBeInstanceOf(ContinuityBreakError);
      expect(await rejectionOf(s.readNew({ waitMs: 0 }))).toBeInstanceOf(ContinuityBreakError);
      expect(await rejectionOf(s.send({ text: 'x' }))).toBeInstanceOf(ContinuityBreakError);
      const st = await s.operationStatus(undefined);
      expect(st.paused).toBe(false);

      // a break seen with no read pending stops the session too (the conversation's break event)
      const w2 = await world();
      const quiet = await w2.bob.session(w2.chat.chatId);
      await appendMessages(w2.alice, w2.hold, ['unread']);
      await waitFor(async () => (await quiet.unreadMessages()) === 1, 'bob to count 1 unread', 10_000, 20);
      await admin().rpc.streams.reset({ streamId: w2.chat.alice.streamId, reason: 'test' });
      await waitFor(() => quiet.state === 'needs-intervention', 'the quiet session to stop', 10_000, 20);
      expect(w2.stopped.map((x) => x.error instanceof ContinuityBreakError)).toEqual([true]);

      // ChatSession.start without a followed conversation (the inbox could not follow it)
      const client = await connectAgent(daemon(), w.chat.bob, { reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
      clients.push(client);
      const { chat } = await client.call('chats.get', { chatId: w.chat.chatId });
      const opts = (resumeAfterBreak: boolean) => ({
        client,
        replace: false,
        resumeAfterBreak,
        settleMs: 3000,
        log,
        onStopped: () => {},
      });
      const head1 = PeerHead.watch(client, chat);
      expect(await rejectionOf(ChatSession.start(opts(false), chat, null, head1))).toBeInstanceOf(ContinuityBreakError);
      head1.close();
      const head2 = PeerHead.watch(client, chat);
      const own = await ChatSession.start(opts(true), chat, null, head2);
      expect(own.state).toBe('running');
      expect(own.view().next).toEqual({ generation: '2', position: '0' });
      await own.stop();
      expect(own.state).toBe('stopped');
      head2.close();
      // the session's own conversation was closed: its subscription is free again
      await waitFor(
        async () => (await freeSubscriptions(client)) === MAX_SUBS,
        'every subscription of the connection to be free',
        5000,
        50,
      );
    } finally {
      await closeAll();
    }
  });

  it('an append of unknown outcome pauses the chat until operation_status settles it', async () => {
    const w = await world({ callTimeoutMs: 1500, settleMs: 1000 });
    try {
      const s = await w.bob.session(w.chat.chatId);
      await s.send({ text: 'claims first' });
      await appendMessages(w.alice, w.hold, ['q']);
      const r = await s.readNew({ waitMs: 5000 });
      expect(contents(r.batch)).toEqual(['q']);
      freeze(daemon());
      let unknown: ToolFailure;
      try {
        unknown = await failure(s.send({ text: 'answer', acknowledge: true }));
        expect(unknown.type).toBe('OUTCOME_UNKNOWN');
        expect(s.state).toBe('paused');
        const opId = String(unknown.data.operationId);
        expect(s.view().uncertainOperationId).toBe(opId);
        const timeout = await failure(s.operationStatus(undefined));
        expect(timeout.type).toBe('TIMEOUT');
        expect(timeout.data).toEqual({ chatId: w.chat.chatId, operationId: opId });
      } finally {
        thaw(daemon());
      }
      const opId = String(unknown.data.operationId);
      // another id while paused: reported, paused, not settled
      const elsewhere = await s.operationStatus('op-not-ours').catch(() => null);
      if (elsewhere) expect(elsewhere).toMatchObject({ resolved: false, kind: null, paused: true });
      const settled = await s.operationStatus(opId);
      expect(settled).toMatchObject({ resolved: true, committed: true, kind: 'reply', paused: false });
      expect(s.state).toBe('running');
      // the receipt went with it: the batch is no longer presented
      expect(s.presented).toBeNull();
      expect((await s.readNew({ waitMs: 0 })).batch).toBeNull();
      const later = await s.operationStatus(opId);
      expect(later).toMatchObject({ resolved: false, committed: true, kind: null, paused: false });

      // a message of unknown outcome while a batch is held, settled by two calls at once: one of them reports its kind
      await appendMessages(w.alice, w.hold, ['held']);
      const heldBatch = await s.readNew({ waitMs: 5000 });
      expect(contents(heldBatch.batch)).toEqual(['held']);
      freeze(daemon());
      let sendId: string;
      try {
        const u = await failure(s.send({ text: 'lonely' }));
        expect(u.type).toBe('OUTCOME_UNKNOWN');
        sendId = String(u.data.operationId);
      } finally {
        thaw(daemon());
      }
      const both = await Promise.all([s.operationStatus(undefined), s.operationStatus(sendId)]);
      expect(both.map((b) => b.resolved)).toEqual([true, true]);
      expect(both.map((b) => b.committed)).toEqual([true, true]);
      expect(both.map((b) => b.kind).sort()).toEqual([null, 'send']);
      expect(s.state).toBe('running');
      expect(s.presented?.batchId).toBe(heldBatch.batch!.batchId); // a message alone acknowledges nothing
      await s.acknowledge(undefined);

      // a receipt of unknown outcome; settled with a new resolution (not the last one's)
      await appendMessages(w.alice, w.hold, ['q2']);
      const r2 = await s.readNew({ waitMs: 5000 });
      expect(contents(r2.batch)).toEqual(['q2']);
      freeze(daemon());
      let ackId: string;
      try {
        const u = await failure(s.acknowledge(undefined));
        expect(u.type).toBe('OUTCOME_UNKNOWN');
        ackId = String(u.data.operationId);
      } finally {
        thaw(daemon());
      }
      const ackSettled = await s.operationStatus(undefined);
      expect(ackSettled).toMatchObject({ resolved: true, committed: true, kind: 'acknowledge', paused: false });
      expect(ackSettled.operation?.operationId).toBe(ackId);
      expect(s.state).toBe('running');
      expect(s.presented).toBeNull();
    } finally {
      await closeAll();
    }
  });

  it('an append the daemon never read settles as not committed: the batch stays presented', async () => {
    const w = await world({ callTimeoutMs: 1500, settleMs: 8000 });
    try {
      const s = await w.bob.session(w.chat.chatId);
      await s.send({ text: 'claims first' });
      await appendMessages(w.alice, w.hold, ['q']);
      const r = await s.readNew({ waitMs: 5000 });
      freeze(daemon());
      const u = await failure(s.send({ text: 'lost reply', acknowledge: true }));
      expect(u.type).toBe('OUTCOME_UNKNOWN');
      await daemon().kill();
      await daemon().restart();
      const opId = String(u.data.operationId);
      const settled = await s.operationStatus(undefined);
      expect(settled).toMatchObject({ resolved: true, committed: false, kind: 'reply' });
      const again = await s.readNew({ waitMs: 0 });
      expect(again.batch?.batchId).toBe(r.batch!.batchId);
      expect(again.repeated).toBe(true);
      const asked = await s.operationStatus(opId);
      expect(asked.operation?.state).toBe('unknown');
      expect(asked).toMatchObject({ committed: false, resolved: false, paused: false });
    } finally {
      await closeAll();
      await waitFor(() => admin().connected, 'the admin client to reconnect', 15_000, 20);
    }
  });

  it('a send during a reconnect waits for the connection', async () => {
    const w = await world();
    try {
      const s = await w.bob.session(w.chat.chatId);
      await s.send({ text: 'before' });
      await daemon().stop();
      await waitFor(() => s.state === 'reconnecting', 'the session to see the connection lost', 10_000, 20);
      const sending = s.send({ text: 'after' });
      await daemon().restart();
      const t0 = Date.now();
      const sent = await sending;
      expect(Date.now() - t0).toBeLessThan(3000); // the reconnect ends the wait, not settleMs (4 s)
      expect(sent.result.streamId).toBe(w.chat.bob.streamId);
      expect(s.state).toBe('running');
    } finally {
      await closeAll();
      await admin()
        .call('daemon.status', {})
        .catch(() => undefined);
    }
  });
});

// Pins behaviour of src/mcp/chat-session.ts that the tests above leave unchecked:
// how a session turns a conversation's failure into why it stopped. The failures above are all
// continuity breaks and fences, and each comes while the session listens, so two paths were never
// taken. (1) A failure that is neither a break nor a fence, seen by the session's `break` listener,
// must become CHAT_STOPPED (113:24): here the daemon stops under a client that does not reconnect.
// (2) A conversation that failed before the session listened (the inbox's conversation, broken
// before any tool opened the chat) reaches the session only through its first read_new, in
// `#absorb` (187–189): a break is kept as it is, any other failure of the conversation (a line over
// the client's `maxInboundLineBytes`) becomes CHAT_STOPPED, and either way the session stops and
// `onStopped` is called once with the chat and the error. These tests build ChatSession.start in
// the vitest worker against a real daemon, as those above do.
describe('failures that are not a break or a fence', () => {
  const { daemon, admin, clients } = useClientDaemon({ reconnect: { minDelayMs: 20, maxDelayMs: 200 } });
  const log = pino({ level: 'silent' });

  type Stopped = Array<{ chatId: string; error: Error }>;

  async function clientOf(who: Participant, extra: Partial<Parameters<typeof connectAgent>[2]> = {}): Promise<YelloClient> {
    const c = await connectAgent(daemon(), who, { reconnect: { minDelayMs: 20, maxDelayMs: 200 }, ...extra });
    clients.push(c);
    return c;
  }

  function optionsOf(client: YelloClient, stopped: Stopped): ChatSessionOptions {
    return { client, replace: false, resumeAfterBreak: false, settleMs: 3000, log, onStopped: (info) => stopped.push(info) };
  }

  async function chatOf(client: YelloClient, chatId: string): Promise<Chat> {
    return (await client.call('chats.get', { chatId })).chat;
  }

  function toolFailure(e: unknown): ToolFailure {
    expect(e).toBeInstanceOf(ToolFailure);
    return e as ToolFailure;
  }

  /**
   * After its first read failed with `error`: the session stopped, told `onStopped` once with
   * `{chatId, error}`, and keeps `error` as why (thrown again without reading, `onStopped` not
   * called again).
   */
  async function expectStoppedBy(s: ChatSession, stopped: Stopped, chatId: string, error: Error): Promise<void> {
    expect(s.state).toBe('needs-intervention');
    expect(stopped).toEqual([{ chatId, error }]);
    expect(stopped[0]!.error).toBe(error);
    expect(() => {
      s.assertUsable();
    }).toThrow(error);
    expect(await rejectionOf(s.readNew({ waitMs: 0 }))).toBe(error);
    expect(stopped).toHaveLength(1);
  }

  describe('ChatSession: failures that are not a break or a fence, and failures from before the session listened', () => {
    it('a conversation broken before the session listened: the first read_new throws the break, the session stops, onStopped once', async () => {
      const chat = await createChat(admin());
      const alice = await clientOf(chat.alice);
      const bob = await clientOf(chat.bob);
      // The conversation the inbox would hand over: it read alice's message, then the reset broke it.
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      await wa.send('lost');
      expect(await conv.next({ waitMs: 5000 })).not.toBeNull();
      await admin().rpc.streams.reset({ streamId: chat.alice.streamId, reason: 'guard' });
      const broken = await waitFor(() => conv.failure, 'the break of the conversation');
      expect(broken).toBeInstanceOf(ContinuityBreakError);
      const head = PeerHead.watch(bob, await chatOf(bob, chat.chatId));
      const stopped: Stopped = [];
      try {
        const s = await ChatSession.start(optionsOf(bob, stopped), await chatOf(bob, chat.chatId), conv, head);
        // It missed the break event: nothing says it stopped until it reads.
        expect(s.state).toBe('running');
        expect(stopped).toEqual([]);
        expect(await rejectionOf(s.readNew({ waitMs: 0 }))).toBe(broken);
        await expectStoppedBy(s, stopped, chat.chatId, broken);
      } finally {
        head.close();
        await conv.close();
        await wa.release().catch(() => undefined);
      }
    });

    it('a conversation ended by a line over maxInboundLineBytes before the session listened: read_new throws CHAT_STOPPED, the session stops', async () => {
      const chat = await createChat(admin());
      const alice = await clientOf(chat.alice);
      const bob = await clientOf(chat.bob, { maxInboundLineBytes: 16 * 1024 });
      const conv = await Conversation.open(bob, { chatId: chat.chatId });
      const wa = new ChatWriter(alice, { chatId: chat.chatId });
      await wa.send('x'.repeat(32 * 1024));
      const tooLarge = await waitFor(() => conv.failure, 'the over-size line to end the conversation');
      expect(tooLarge).toBeInstanceOf(LineTooLargeError);
      // The client is back on a new connection; the conversation stays failed.
      await waitFor(() => bob.connected, 'bob to reconnect');
      const head = PeerHead.watch(bob, await chatOf(bob, chat.chatId));
      const stopped: Stopped = [];
      try {
        const s = await ChatSession.start(optionsOf(bob, stopped), await chatOf(bob, chat.chatId), conv, head);
        expect(s.state).toBe('running');
        const e = toolFailure(await rejectionOf(s.readNew({ waitMs: 0 })));
        expect(e.type).toBe('CHAT_STOPPED');
        expect(e.cause).toBe(tooLarge);
        expect(e.data).toMatchObject({ chatId: chat.chatId, cause: 'LINE_TOO_LARGE' });
        await expectStoppedBy(s, stopped, chat.chatId, e);
      } finally {
        head.close();
        await conv.close();
        await wa.release().catch(() => undefined);
      }
    });

    it('the connection lost for good (no reconnect, the daemon stopped) under a listening session: it stops with CHAT_STOPPED, not the raw loss', async () => {
      const chat = await createChat(admin());
      const bob = await clientOf(chat.bob, { reconnect: false });
      const head = PeerHead.watch(bob, await chatOf(bob, chat.chatId));
      const stopped: Stopped = [];
      const s = await ChatSession.start(optionsOf(bob, stopped), await chatOf(bob, chat.chatId), null, head);
      expect(s.state).toBe('running');
      try {
        await daemon().stop();
        await waitFor(() => stopped.length > 0, 'the session to stop');
        expect(s.state).toBe('needs-intervention');
        const e = toolFailure(stopped[0]!.error);
        expect(e.type).toBe('CHAT_STOPPED');
        expect(e.cause).toBeInstanceOf(ConnectionLostError);
        expect(e.data).toMatchObject({ chatId: chat.chatId, cause: 'CONNECTION_LOST' });
        expect(stopped).toEqual([{ chatId: chat.chatId, error: e }]);
        expect(() => {
          s.assertUsable();
        }).toThrow(e);
        expect(await rejectionOf(s.readNew({ waitMs: 0 }))).toBe(e);
        expect(stopped).toHaveLength(1);
      } finally {
        head.close();
        await s.stop();
        await daemon().restart();
        await waitFor(() => admin().connected, 'the admin to reconnect', 15_000, 20);
      }
    });
  });
});

// Pins two behaviours of src/mcp/chat-session.ts's operationStatus() that the tests above
// leave unchecked, both in the branch that asks `operations.get`:
//   390:59 `operation.state === 'unknown'` → true: an operation the daemon still calls `pending`
//          (its synced write failed, the outcome shows only after a restart) read as
//          `committed: false`, as if it were known not to be stored;
//   392:13 `this.#pending?.operationId === id` → false: a session stopped (its peer stream reset)
//          with an append of unknown outcome still reports which tool made that operation.
// And two of #whenConnected (296:41 its body emptied, 298:9 `client.connected` → true): a send
// while the daemon is down waits up to `settleMs` for the reconnect before the writer's own wait,
// so an outage between the two is ridden out.
// The daemon runs with `--fault-fail-sync-file` (LevelDB only: the hook is LevelDB's), as
// test/faults/storage-faults.test.ts does.
describe('operationStatus: operations the daemon looks up', () => {
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
  async function sessionOf(
    client: YelloClient,
    chatId: string,
    settleMs = 3000,
    writerConnectWaitMs?: number,
  ): Promise<{ s: ChatSession; head: PeerHead }> {
    const chat = await chatOf(client, chatId);
    const head = PeerHead.watch(client, chat);
    const options = {
      client,
      replace: false,
      resumeAfterBreak: false,
      settleMs,
      ...(writerConnectWaitMs !== undefined ? { writerConnectWaitMs } : {}),
      log: pino({ level: 'silent' }),
      onStopped: () => {},
    };
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

    it('a send while the daemon is down waits settleMs for the reconnect before the writer waits its own: an outage longer than either is ridden out', async () => {
      const chat = await createChat(admin());
      const alice = await clientOf(chat.alice);
      // Shorter than a server's (settleMs 15 s, the writer's 10 s), in the same order, so that the
      // outage lasts seconds: 5.5 s, longer than either wait alone, shorter than both.
      const { s, head } = await sessionOf(alice, chat.chatId, 5_000, 4_000);
      try {
        await s.send({ text: 'before' });
        await daemon().stop();
        const started = Date.now();
        const sending = s.send({ text: 'across the outage' });
        const settled = sending.then(
          () => 'sent',
          (e: unknown) => e,
        );
        // Down for longer than the writer's 4 s (or settleMs's 5 s) alone would wait.
        await sleep(5_500);
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
});
