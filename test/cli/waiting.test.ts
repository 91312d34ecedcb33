// Reading and waiting with the CLI (issue 20, docs/protocol.md §9): `chats read` and
// `chats follow` never skip unacknowledged messages across a reset (exit 3, with the way out
// step by step), `chats read --wait` blocks until a message (the peer's receipts do not wake
// it), `yello inbox [--wait]` lists unread counts across chats and waits for any of them, and
// the claim the CLI keeps never locks the agent's other tools out.

import { describe, expect, it, vi } from 'vitest';
import { expectExit, oneLineErrorProblems, parseJson, type CliResult } from '../helpers/cli-runner.js';
import { claim, createAgent, ok, readAll, type Result } from '../helpers/wire-fixtures.js';
import { useCli, type CliPair } from '../helpers/use-daemon.js';
import { sleep } from '../helpers/wait.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const fixture = useCli();
const { admin, cli, track } = fixture;

const types = async (streamId: string, generation = '1') =>
  (await readAll(admin(), streamId, generation)).map((r: { wrapper: { type: string } }) => r.wrapper.type);

function expectOneLine(r: CliResult, code: number, pattern: RegExp): void {
  expectExit(r, code);
  expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
  expect(r.stderr).toMatch(pattern);
}

/** m1 read and acknowledged by bob, m2 unread, then the admin resets alice's stream. */
async function resetWithUnread(): Promise<CliPair> {
  const p = await fixture.pair();
  await p.alice.ok(['send', p.chatId, 'm1']);
  await p.bob.ok(['chats', 'read', p.chatId, '--ack']);
  await p.alice.ok(['send', p.chatId, 'm2']);
  await cli().ok(['streams', 'reset', p.streamA, '--reason', 'test: reset with m2 unread']);
  return p;
}

describe('a reset never skips unacknowledged messages', () => {
  it('chats read: exit 3, saying what happened and how to recover step by step; --from generation-start is the way on', async () => {
    const p = await resetWithUnread();
    const r = await p.bob.run(['chats', 'read', p.chatId]);
    expectOneLine(r, 3, /continuity break/i);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(p.streamA);
    expect(r.stderr).toMatch(/reset/);
    expect(r.stderr).toContain(`yello chats history ${p.chatId}`);
    expect(r.stderr).toContain('--from generation-start');
    expect(r.stderr).not.toMatch(/nothing unacknowledged/);

    await p.alice.ok(['send', p.chatId, 'm3 in generation 2']);
    const on = await p.bob.json<{ generation: string; records: Array<{ wrapper: { type: string } }> }>([
      'chats',
      'read',
      p.chatId,
      '--from',
      'generation-start',
      '--ack',
    ]);
    expect(on.generation).toBe('2');
    expect(on.records.some((rec) => rec.wrapper.type === 'chat.message')).toBe(true);
    // Acknowledged in generation 2: the break is behind bob now.
    const after = await p.bob.run(['chats', 'read', p.chatId]);
    expect(after.code, after.stderr).toBe(0);
  });

  it('chats read --from generation-start shows the whole generation, also when everything in it is acknowledged', async () => {
    const p = await fixture.pair();
    await p.alice.ok(['send', p.chatId, 'g1']);
    await p.alice.ok(['send', p.chatId, 'g2']);
    await p.bob.ok(['chats', 'read', p.chatId, '--ack']);
    const none = await p.bob.run(['chats', 'read', p.chatId]);
    expect(none.stderr).toMatch(/nothing unacknowledged/);
    // The receipt is at the head: "caught up" must still mean the backlog from position 0 came.
    const all = await p.bob.json<{ fromPosition: string; records: Array<{ wrapper: { type: string; message?: { content: string } } }> }>([
      'chats',
      'read',
      p.chatId,
      '--from',
      'generation-start',
    ]);
    expect(all.fromPosition).toBe('0');
    expect(all.records.flatMap((r) => (r.wrapper.message ? [r.wrapper.message.content] : []))).toEqual(['g1', 'g2']);
    // --from end: nothing, at once.
    const end = await p.bob.run(['chats', 'read', p.chatId, '--from', 'end']);
    expect(end.code, end.stderr).toBe(0);
    expect(end.stdout).toBe('');
  });

  it('chats follow without a cursor after such a reset: the break, exit 3', async () => {
    const p = await resetWithUnread();
    const f = track(p.bob.start(['chats', 'follow', p.chatId], { timeoutMs: 20_000 }));
    const res = await f.exited;
    expect(res.code, res.stderr).toBe(3);
    expect(res.stderr).toMatch(/continuity break/i);
    expect(res.stdout).toBe('');
  });
});

describe('chats read --wait', () => {
  it('blocks until a message: the peer acknowledging (a receipt) does not wake it', async () => {
    const p = await fixture.pair();
    await p.bob.ok(['send', p.chatId, 'from bob']);
    const waiting = track(p.bob.start(['chats', 'read', p.chatId, '--wait', '30', '--json']));
    // Alice acknowledges bob's message: a receipt in her stream, not news for bob.
    await p.alice.ok(['chats', 'read', p.chatId, '--ack']);
    expect(await types(p.streamA)).toContain('chat.receipt');
    await sleep(1_500); // time is the subject: the receipt must not end bob's wait
    expect(waiting.result).toBeNull();
    const sentAt = Date.now();
    await p.alice.ok(['send', p.chatId, 'now a message']);
    const res = await waiting.exited;
    expect(res.code, res.stderr).toBe(0);
    const out = parseJson(res) as { records: Array<{ wrapper: { type: string; message?: { content: string } } }> };
    expect(out.records.filter((r) => r.wrapper.type === 'chat.message').map((r) => r.wrapper.message!.content)).toEqual(['now a message']);
    process.stderr.write(`[bench] cli chats read --wait wake latency (incl. the send command): ${Date.now() - sentAt} ms\n`);
  });

  it('ends after SECONDS with nothing, exit 0; with unread messages it returns at once', async () => {
    const p = await fixture.pair();
    const t0 = Date.now();
    const none = await p.bob.run(['chats', 'read', p.chatId, '--wait', '1']);
    expect(none.code, none.stderr).toBe(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_000);
    expect(none.stderr).toMatch(/no new message/i);
    await p.alice.ok(['send', p.chatId, 'already there']);
    const t1 = Date.now();
    const got = await p.bob.ok(['chats', 'read', p.chatId, '--wait', '30']);
    expect(Date.now() - t1).toBeLessThan(10_000);
    expect(got.stdout).toContain('already there');
  });
});

interface InboxEntry {
  chatId: string;
  peer: { agentId: string; username: string };
  unreadMessages: number;
  lastActivityAt: string | null;
}

describe('yello inbox', () => {
  it('lists unread counts and last activity per chat, and --wait waits across chats, a chat opened later included', async () => {
    const p = await fixture.pair();
    const carol = await createAgent(admin(), fixture.daemon().socketPath);
    ok(await admin().call('grants.add', { agentId: carol.id, peerAgentId: p.b.id }));
    ok(await admin().call('grants.add', { agentId: p.b.id, peerAgentId: carol.id }));
    await p.alice.ok(['send', p.chatId, 'one']);
    await p.alice.ok(['send', p.chatId, 'two']);

    const listed = await p.bob.json<{ chats: InboxEntry[] }>(['inbox']);
    expect(listed.chats).toHaveLength(1);
    expect(listed.chats[0]).toMatchObject({ chatId: p.chatId, peer: { agentId: p.a.id }, unreadMessages: 2 });
    expect(listed.chats[0]!.lastActivityAt).toMatch(/^\d{4}-/);
    const human = await p.bob.ok(['inbox']);
    expect(human.stdout).toContain(p.chatId);
    expect(human.stdout).toMatch(/\b2\b/);

    await p.bob.ok(['chats', 'read', p.chatId, '--ack']);
    expect((await p.bob.json<{ chats: InboxEntry[] }>(['inbox'])).chats[0]!.unreadMessages).toBe(0);

    const waiting = track(p.bob.start(['inbox', '--wait', '30', '--json']));
    await sleep(1_000); // time is the subject: nothing unread, so it waits
    expect(waiting.result).toBeNull();
    // A chat opened after the wait began, and a message in it.
    const opened = ok(await carol.client.call('chats.open', { peerAgentId: p.b.id }));
    const c = await claim(carol.client, `${opened.chat.id}:${carol.id}`);
    ok(
      await carol.client.call('streams.append', {
        streamId: `${opened.chat.id}:${carol.id}`,
        coordinatorToken: c.coordinatorToken,
        generation: c.generation,
        expectedPosition: c.nextPosition,
        operationId: 'carol-1',
        records: [{ type: 'chat.message', messageId: 'carol-1', content: 'hi bob, carol here' }],
      }),
    );
    const res = await waiting.exited;
    expect(res.code, res.stderr).toBe(0);
    const woke = parseJson(res) as { chats: InboxEntry[] };
    expect(woke.chats.find((e) => e.chatId === opened.chat.id)).toMatchObject({ unreadMessages: 1, peer: { agentId: carol.id } });
    expect(woke.chats.find((e) => e.chatId === p.chatId)).toMatchObject({ unreadMessages: 0 });
  });
});

describe("the CLI's claim does not lock the agent out", () => {
  it('a connected holder: send exits 1 and the advice names `yello streams release`', async () => {
    const p = await fixture.pair();
    await claim(p.a.client, p.streamA); // held by a live connection
    const r = await p.alice.run(['send', p.chatId, 'blocked']);
    expectOneLine(r, 1, /WRITER_ACTIVE|holds/);
    expect(r.stderr).toContain(`yello streams release ${p.streamA}`);
  });

  it('after the CLI exits its claim is abandoned: a coordinator taking over with if-abandoned needs no --replace', async () => {
    const p = await fixture.pair();
    await p.alice.ok(['send', p.chatId, 'from the CLI']);
    const state = ok(await admin().call('streams.get', { streamId: p.streamA })) as Result<'streams.get'> & {
      writer: { connected?: boolean };
    };
    expect(state.writer.connected).toBe(false);
    const taken = ok(await p.a.client.call('streams.claim', { streamId: p.streamA, replace: 'if-abandoned' }));
    expect(taken.coordinatorToken).toMatch(/^yello_ct_/);
  });
});
