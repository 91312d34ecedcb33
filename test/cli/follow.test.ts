// `yello chats follow` (docs/protocol.md §9, §6 chats.follow, §8 Coordinator): a long-running
// command that prints peer batches (JSON lines with --json, one batch per line), stops with
// exit 0 on SIGINT, acknowledges what it shows with --ack, and exits 3 when a reset breaks
// continuity under it.

import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChatBatchNotification } from '../../src/shared/types.js';
import { expectExit, oneLineErrorProblems, parseJsonLines, type AgentCli } from '../helpers/cli-runner.js';
import { ok, messageOf, type Result } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useCli } from '../helpers/use-daemon.js';
import { anyOf } from '../helpers/matchers.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const { admin, cli, track, namedAgents } = useCli();
let alice: AgentCli;
let bob: AgentCli;
let aliceId: string;
let bobId: string;
let chatId: string;
let streamA: string;
let streamB: string;

beforeAll(async () => {
  ({ alice, bob, aliceId, bobId } = await namedAgents());
  chatId = ok(await admin().call('chats.open', { agentAId: aliceId, agentBId: bobId })).chat.id;
  streamA = `${chatId}:${aliceId}`;
  streamB = `${chatId}:${bobId}`;
});

/** The live cursor at the chat's current end (so a follow started now misses nothing). */
async function liveCursorNow(): Promise<string> {
  return ok(await admin().call('chats.history', { chatId, limit: 1 })).liveCursor;
}

async function streamState(streamId: string) {
  return ok(await admin().call('streams.get', { streamId }));
}

type Batch = ChatBatchNotification;

describe('chats follow --json', () => {
  it('prints one batch per line as JSON while the peer sends, and exits 0 on SIGINT', async () => {
    const cursor = await liveCursorNow();
    // A process, so that the SIGINT is a real one (the other follows run in this worker).
    const f = track(alice.start(['chats', 'follow', chatId, '--json', '--cursor', cursor], { process: true }));
    await bob.ok(['send', chatId, 'first from bob']);
    await bob.ok(['send', chatId, 'second from bob']);
    // Two messages, in one batch or two: a follower that reads after both were appended gets
    // them together (CI, 2026-12-07: one batch of both, and a wait for two batches timed out).
    const messageRecords = () =>
      parseJsonLines<Batch>(f.lines.join('\n')).flatMap((b) => b.records.filter((r) => r.wrapper.type === 'chat.message'));
    await f.waitFor(() => messageRecords().length >= 2, 'both messages');
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);

    const batches = parseJsonLines<Batch>(res.stdout);
    // Every line is one batch: at least one record, one stream, positions in order.
    for (const b of batches) {
      expect(b).toMatchObject({
        batchId: anyOf(String),
        streamId: streamB,
        generation: '1',
        cursor: anyOf(String),
      });
      expect(b.records.length).toBeGreaterThan(0);
      expect(b.records[0]!.position).toBe(b.fromPosition);
      expect(String(BigInt(b.records.at(-1)!.position) + 1n)).toBe(b.nextPosition);
      for (const r of b.records) expect(r.streamId).toBe(b.streamId);
    }
    const contents = batches
      .flatMap((b) => b.records)
      .filter((r) => r.wrapper.type === 'chat.message')
      .map((r) => messageOf(r).content);
    expect(contents).toEqual(['first from bob', 'second from bob']);
    // The batches follow each other without gaps.
    for (let i = 1; i < batches.length; i++) expect(batches[i]!.fromPosition).toBe(batches[i - 1]!.nextPosition);
  });

  it('human form (admin): a readable line per record, a "following" notice on stderr, exit 0 on SIGINT', async () => {
    const f = track(cli().start(['chats', 'follow', chatId], { process: true }));
    await f.waitForStderr('following');
    await alice.ok(['send', chatId, 'hi bob, alice here']);
    await f.waitFor(() => f.lines.some((l) => l.includes('hi bob, alice here')), 'the message line');
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/alice → bob\s+#\d+\s+hi bob, alice here/);
  });
});

describe('chats follow as the admin, from a cursor behind the head', () => {
  it('shows every batch after an old cursor, then the live ones, none skipped or repeated', async () => {
    const cursor = await liveCursorNow();
    for (const text of ['early one', 'early two', 'early three']) await alice.ok(['send', chatId, text]);
    const f = track(cli().start(['chats', 'follow', chatId, '--json', '--cursor', cursor]));
    const contents = () =>
      parseJsonLines<Batch>(f.lines.join('\n'))
        .flatMap((b) => b.records)
        .filter((r) => r.wrapper.type === 'chat.message')
        .map((r) => messageOf(r).content);
    await alice.ok(['send', chatId, 'live four']);
    await f.waitFor(() => contents().includes('live four'), 'the live message');
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);
    expect(contents()).toEqual(['early one', 'early two', 'early three', 'live four']);
  });
});

describe('chats follow --ack', () => {
  it('claims the follower stream, shows peer messages and acknowledges them', async () => {
    const before = await streamState(streamA);
    // The live cursor closes the window between the coordinator's claim and its subscription.
    const f = track(bob.start(['chats', 'follow', chatId, '--ack', '--cursor', await liveCursorNow()]));
    // It acts as bob's coordinator: bob's outbound stream is claimed.
    await waitFor(async () => (await streamState(streamB)).writer.active, 'bob stream claimed', 20_000, 100);
    const sent = await alice.json<Result<'streams.append'>>(['send', chatId, 'please acknowledge this']);
    await f.waitFor(() => f.lines.some((l) => l.includes('please acknowledge this')), 'the message line');
    const acked = await waitFor(
      async () => {
        const s = await streamState(streamA);
        return s.acknowledged && BigInt(s.acknowledged.nextPosition) >= BigInt(sent.nextPosition) ? s : null;
      },
      'acknowledged to advance',
      20_000,
      100,
    );
    expect(acked.acknowledged).toEqual({ generation: '1', nextPosition: sent.nextPosition });
    if (before.acknowledged) expect(BigInt(acked.acknowledged!.nextPosition)).toBeGreaterThan(BigInt(before.acknowledged.nextPosition));
    // Visible through the CLI too.
    const shown = await cli().json<Result<'streams.get'>>(['streams', 'show', streamA]);
    expect(shown.acknowledged).toEqual({ generation: '1', nextPosition: sent.nextPosition });

    // A second message is acknowledged as well.
    const sent2 = await alice.json<Result<'streams.append'>>(['send', chatId, 'and this one']);
    await waitFor(
      async () => (await streamState(streamA)).acknowledged?.nextPosition === sent2.nextPosition,
      'second acknowledgement',
      20_000,
      100,
    );
    const held = await streamState(streamB);
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/alice → bob\s+#\d+\s+please acknowledge this/);
    expect(res.stdout).toMatch(/and this one/);

    // The claim stays kept after the follow, as after `send`: the next send appends no fence
    // (no release record, no new claim), and a follow --ack after it resumes the same claim.
    const after = await streamState(streamB);
    expect(after.writer.epoch).toBe(held.writer.epoch);
    expect(after.nextPosition).toBe(held.nextPosition);
    const reply = await bob.json<Result<'streams.append'>>(['send', chatId, 'bob after the follow']);
    expect(reply.firstPosition).toBe(held.nextPosition);
    expect((await streamState(streamB)).writer.epoch).toBe(held.writer.epoch);
  });
});

describe('chats follow and continuity', () => {
  it('a reset under a running follow ends it with exit 3 and one line on stderr', async () => {
    const f = track(alice.start(['chats', 'follow', chatId, '--json', '--cursor', await liveCursorNow()]));
    await bob.ok(['send', chatId, 'before the reset']);
    await f.waitFor(() => f.lines.some((l) => l.includes('before the reset')), 'the message batch');
    const reset = await cli().ok(['streams', 'reset', streamB, '--reason', 'follow test']);
    expect(reset.stdout).toMatch(/generation\s+2/);
    const res = await f.exited;
    expectExit(res, 3);
    expect(oneLineErrorProblems(res), res.stderr).toEqual([]);
    expect(res.stderr).toMatch(/continuity break/i);
    // --json prints the break as its last line.
    const last = parseJsonLines(res.stdout).at(-1);
    expect(last).toMatchObject({ streamId: streamB, expected: '1', actual: '2' });
  });
});
