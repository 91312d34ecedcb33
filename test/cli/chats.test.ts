// The `yello` CLI as an agent front end and stream admin tool (docs/protocol.md §9, §6, §7):
// chats open|list|show|permissions|history, send (args and stdin, redactions), ack,
// streams show|claim|release|trim|reset, ops show|list, and the exit codes 3 (continuity
// break) and 4 (fenced), in human and `--json` form against a real daemon.

import { beforeAll, describe, expect, it, vi } from 'vitest';
import { expectExit, oneLineErrorProblems, writeTokenFile, type AgentCli, type CliResult } from '../helpers/cli-runner.js';
import { messageOf, type Result } from '../helpers/wire-fixtures.js';
import { useCli } from '../helpers/use-daemon.js';
import { anyOf, stringMatching } from '../helpers/matchers.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const { daemon, cli, namedAgents } = useCli();
let alice: AgentCli;
let bob: AgentCli;
let aliceId: string;
let bobId: string;
let chatId: string;
let streamA: string;
let streamB: string;

const TS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const DEC = /^(0|[1-9]\d*)$/;

function expectOneLineError(r: CliResult, code: number, pattern?: RegExp): void {
  expectExit(r, code);
  expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
  if (pattern) expect(r.stderr).toMatch(pattern);
}

beforeAll(async () => {
  // Setup through the wire; the CLI's agents/grants commands have their own file.
  ({ alice, bob, aliceId, bobId } = await namedAgents());
});

describe('chats', () => {
  it('open: the agent creates the chat (prints only its id), reopening finds it, admin opens a pair with --with', async () => {
    const created = await alice.ok(['chats', 'open', 'bob']);
    // stdout is the id alone (for `CHAT=$(yello chats open bob)`); what happened goes to stderr.
    const m = /^(chat_[a-z0-9]{26})\n$/.exec(created.stdout);
    expect(m, created.stdout).not.toBeNull();
    chatId = m![1]!;
    expect(created.stderr).toMatch(new RegExp(`^created chat ${chatId} \\(`));
    // `@bob` names the agent as the MCP tools and people do.
    const reopened = await alice.ok(['chats', 'open', '@bob']);
    expect(reopened.stdout).toBe(`${chatId}\n`);
    expect(reopened.stderr).toMatch(new RegExp(`^found chat ${chatId} \\(`));
    streamA = `${chatId}:${aliceId}`;
    streamB = `${chatId}:${bobId}`;
    const [again, byAdmin] = await Promise.all([
      bob.json<Result<'chats.open'>>(['chats', 'open', aliceId]),
      cli().json<Result<'chats.open'>>(['chats', 'open', 'alice', '--with', 'bob']),
    ]);
    for (const r of [again, byAdmin]) {
      expect(r.created).toBe(false);
      expect(r.chat).toMatchObject({ id: chatId, createdAt: stringMatching(TS) });
      expect([r.chat.agentAId, r.chat.agentBId].sort()).toEqual([aliceId, bobId].sort());
      expect(r.chat.agentA).toMatchObject({ id: r.chat.agentAId, username: anyOf(String), name: anyOf(String), image: null });
    }
  });

  it('list, show, permissions: human and --json', async () => {
    const [listH, listJ, showH, showJ, permH, permJ] = await Promise.all([
      cli().ok(['chats', 'list']),
      alice.json<Result<'chats.list'>>(['chats', 'list']),
      bob.ok(['chats', 'show', chatId]),
      cli().json<Result<'chats.get'>>(['chats', 'show', chatId]),
      bob.ok(['chats', 'permissions', chatId]),
      cli().json<Result<'chats.permissions'>>(['chats', 'permissions', chatId]),
    ]);
    expect(listH.stdout).toContain(chatId);
    expect(listH.stdout).toMatch(/alice/);
    expect(listH.stdout).toMatch(/bob/);
    expect(listJ).toMatchObject({ chats: [{ id: chatId }], nextCursor: null });

    expect(showH.stdout).toContain(chatId);
    expect(showH.stdout).toContain(streamA);
    expect(showH.stdout).toContain(streamB);
    expect(showJ.chat.id).toBe(chatId);
    expect(showJ.streams).toHaveLength(2);
    expect(showJ.streams.map((s: { streamId: string }) => s.streamId).sort()).toEqual([streamA, streamB].sort());
    for (const s of showJ.streams)
      expect(s).toMatchObject({
        chatId,
        generation: '1',
        firstPosition: '0',
        nextPosition: '0',
        acknowledged: null,
        writer: { active: false },
      });

    expect(permH.stdout).toMatch(/grants/);
    expect(permH.stdout).toContain(aliceId);
    expect(permH.stdout).toContain(bobId);
    expect(permJ).toMatchObject({ chatId, policy: 'grants' });
    expect(permJ.participants).toHaveLength(2);
    for (const p of permJ.participants) {
      expect(p).toMatchObject({ canRead: true, canSend: true, canClaim: true, grant: { grantedAt: stringMatching(TS) } });
    }
  });
});

let firstOpId: string;

describe('send', () => {
  it('text arguments are joined into one message; human and --json', async () => {
    const [human, fromBob] = await Promise.all([
      alice.ok(['send', chatId, 'hello', 'bob,', 'how', 'are', 'you?']),
      bob.json<Result<'streams.append'>>(['send', chatId, 'fine, thanks']),
    ]);
    expect(human.stdout).toMatch(new RegExp(`sent at position \\d+ of ${streamA}`));
    expect(fromBob).toMatchObject({
      streamId: streamB,
      generation: '1',
      duplicate: false,
      redactions: [],
      firstPosition: stringMatching(DEC),
      nextPosition: stringMatching(DEC),
    });
    expect(fromBob.operationId).toEqual(anyOf(String));
    expect(fromBob.records).toHaveLength(1);
    expect(messageOf(fromBob.records[0])).toMatchObject({ content: 'fine, thanks', fromAgentId: bobId, toAgentId: aliceId });
    // A message from the CLI is a short-lived coordinator: the claim's fence precedes it.
    expect(fromBob.firstPosition).toBe('1');
    firstOpId = fromBob.operationId;
  });

  it('redactions are printed under the default redact policy', async () => {
    const [human, json] = await Promise.all([
      alice.ok(['send', chatId, 'write to alice@example.com please']),
      bob.json<Result<'streams.append'>>(['send', chatId, 'call me at +1 415 555 0100 or bob@example.org']),
    ]);
    expect(human.stdout).toMatch(/redacted 1 × EMAIL/);
    const kinds = json.redactions.map((r: { kind: string }) => r.kind).sort();
    expect(kinds).toEqual(['EMAIL', 'PHONE']);
    for (const r of json.redactions) expect(r).toMatchObject({ recordIndex: 0, count: 1 });
    const content = messageOf(json.records[0]).content;
    expect(content).toContain('[REDACTED:EMAIL]');
    expect(content).toContain('[REDACTED:PHONE]');
    expect(content).not.toContain('bob@example.org');
    expect(content).not.toContain('555 0100');
  });

  it('"-" reads the text from stdin (of a process: a real pipe)', async () => {
    const r = await alice.json<Result<'streams.append'>>(['send', chatId, '-'], {
      input: 'line one from stdin\nline two\n',
      process: true,
    });
    expect(messageOf(r.records[0]).content).toBe('line one from stdin\nline two');
  });
});

let historyCursor: string;
let liveCursor: string;

describe('chats history', () => {
  it('human transcript and --json {entries, nextCursor, liveCursor}, paging with --cursor', async () => {
    const [human, all, page1] = await Promise.all([
      cli().ok(['chats', 'history', chatId]),
      bob.json<Result<'chats.history'>>(['chats', 'history', chatId, '--direction', 'forward', '--limit', '500']),
      alice.json<Result<'chats.history'>>(['chats', 'history', chatId, '--limit', '2']),
    ]);
    expect(human.stdout).toMatch(/alice → bob .*hello bob, how are you\?/);
    expect(human.stdout).toMatch(/bob → alice .*fine, thanks/);
    expect(human.stdout).toContain('[REDACTED:EMAIL]');
    expect(human.stdout).not.toContain('alice@example.com');
    expect(human.stdout).toMatch(/live cursor: \S+/);

    expect(all).toEqual({ entries: anyOf(Array), nextCursor: null, liveCursor: anyOf(String) });
    expect(all.entries.length).toBeGreaterThanOrEqual(5);
    for (const e of all.entries) {
      expect(e).toMatchObject({ streamId: anyOf(String), generation: '1', position: stringMatching(DEC) });
      expect(e.wrapper.type).toBe('chat.message');
    }
    const times = all.entries.map((e) => messageOf(e).signature.createdAt);
    expect([...times].sort()).toEqual(times);

    expect(page1.entries).toHaveLength(2);
    expect(page1.nextCursor).toEqual(anyOf(String));
    expect(page1.liveCursor).toEqual(anyOf(String));
    const page2 = await alice.json<Result<'chats.history'>>(['chats', 'history', chatId, '--cursor', page1.nextCursor!, '--limit', '2']);
    expect(page2.entries).toHaveLength(2);
    const key = (e: { streamId: string; position: string }) => `${e.streamId}#${e.position}`;
    const seen = [...page2.entries, ...page1.entries].map(key);
    expect(new Set(seen).size).toBe(4);
    // Backward pages: page 2 is the two entries before page 1, in ascending order.
    expect(seen).toEqual(all.entries.slice(-4).map(key));
    historyCursor = page1.nextCursor!;
    liveCursor = page1.liveCursor;
  });
});

describe('ack and streams show', () => {
  it('ack appends a receipt; streams show of the peer stream then shows it acknowledged', async () => {
    const before = await cli().json<Result<'streams.get'>>(['streams', 'show', streamA]);
    // alice's CLI keeps its claim between sends: one fence (#0), epoch 1, still held.
    expect(before).toMatchObject({
      streamId: streamA,
      chatId,
      authorAgentId: aliceId,
      generation: '1',
      firstPosition: '0',
      acknowledged: null,
      writer: { epoch: '1', active: true },
    });
    const acked = await bob.ok(['ack', chatId]);
    expect(acked.stdout).toContain(`acknowledged ${streamA} before position ${before.nextPosition}`);
    const [json, human, nothing] = await Promise.all([
      alice.json<Result<'streams.get'>>(['streams', 'show', streamA]),
      cli().ok(['streams', 'show', streamA]),
      bob.json<Result<'streams.append'>>(['ack', chatId]),
    ]);
    expect(json.acknowledged).toEqual({ generation: '1', nextPosition: before.nextPosition });
    expect(human.stdout).toMatch(new RegExp(`acknowledged\\s+1/${before.nextPosition}\\b`));
    expect(human.stdout).toContain(streamA);
    // Nothing new since: no second receipt.
    expect(nothing).toEqual({ acknowledged: null });
  });
});

describe('streams claim | release and fencing', () => {
  it('claim prints the coordinator token; a held stream refuses another claim, and send takes an abandoned claim over', async () => {
    // Give up the claim the CLI kept from alice's sends, so that a manual claim needs no takeover.
    const released = await alice.json<Result<'streams.release'>>(['streams', 'release', streamA]);
    expect(released.writer).toMatchObject({ epoch: '1', active: false });
    const human = await alice.ok(['streams', 'claim', streamA, '--reason', 'manual']);
    expect(human.stdout).toMatch(/coordinatorToken\s+yello_ct_\S+/);
    expect(human.stdout).toMatch(/epoch\s+\d+/);
    const again = await alice.run(['streams', 'claim', streamA]);
    expectOneLineError(again, 1, /WRITER_ACTIVE/);
    // The claiming command has exited, so its claim is abandoned: send takes it over (if-abandoned).
    const send = await alice.ok(['send', chatId, 'takes the abandoned claim over']);
    expect(send.stderr).toMatch(/took over the claim/);
  });

  it('a replaced coordinator token is fenced: send --coordinator-token-file exits 4; the current one works; release frees the stream', async () => {
    const first = await alice.json<Result<'streams.claim'>>(['streams', 'claim', streamA, '--replace']);
    expect(first).toEqual({
      streamId: streamA,
      generation: '1',
      epoch: stringMatching(DEC),
      coordinatorToken: stringMatching(/^yello_ct_/),
      nextPosition: stringMatching(DEC),
    });
    const second = await alice.json<Result<'streams.claim'>>(['streams', 'claim', streamA, '--replace']);
    expect(BigInt(second.epoch)).toBeGreaterThan(BigInt(first.epoch));
    const firstFile = writeTokenFile(daemon().dir, 'first-ct', first.coordinatorToken);
    const secondFile = writeTokenFile(daemon().dir, 'second-ct', second.coordinatorToken);
    const fenced = await alice.run(['send', chatId, 'from the old coordinator', '--coordinator-token-file', firstFile]);
    expectOneLineError(fenced, 4, /fenced/i);
    const sent = await alice.json<Result<'streams.append'>>(
      ['send', chatId, 'from the current coordinator', '--coordinator-token-file', '-'],
      { input: second.coordinatorToken + '\n' },
    );
    expect(messageOf(sent.records[0]).content).toBe('from the current coordinator');
    // Sending under a held claim leaves it held.
    expect((await cli().json<Result<'streams.get'>>(['streams', 'show', streamA])).writer).toMatchObject({
      epoch: second.epoch,
      active: true,
    });
    const released = await alice.ok(['streams', 'release', streamA, '--coordinator-token-file', secondFile]);
    expect(released.stdout).toMatch(/writer\s+free/);
    // Admin release needs no token; --json is the stream state.
    // bob's CLI still holds the claim of his sends and his ack: take it over.
    const b = await bob.json<Result<'streams.claim'>>(['streams', 'claim', streamB, '--replace']);
    expect(b.coordinatorToken).toMatch(/^yello_ct_/);
    const adminRelease = await cli().json<Result<'streams.release'>>(['streams', 'release', streamB]);
    expect(adminRelease).toMatchObject({ streamId: streamB, writer: { active: false } });
  });
});

describe('ops', () => {
  it('show and list: human and --json', async () => {
    const [showH, showJ, listH, listJ, unknown] = await Promise.all([
      cli().ok(['ops', 'show', streamB, firstOpId]),
      bob.json<Result<'operations.get'>>(['ops', 'show', streamB, firstOpId]),
      cli().ok(['ops', 'list', streamB]),
      alice.json<Result<'operations.list'>>(['ops', 'list', streamB]),
      cli().json<Result<'operations.get'>>(['ops', 'show', streamB, 'never-used']),
    ]);
    expect(showH.stdout).toMatch(/state\s+committed/);
    expect(showJ).toMatchObject({
      state: 'committed',
      generation: '1',
      firstPosition: '1',
      nextPosition: '2',
      committedAt: stringMatching(TS),
    });
    expect(listH.stdout).toContain(firstOpId);
    expect(listJ.nextCursor).toBeNull();
    expect(listJ.operations.length).toBeGreaterThanOrEqual(3);
    expect(listJ.operations[0]).toMatchObject({ operationId: firstOpId, state: 'committed', firstPosition: '1' });
    expect(unknown.state).toBe('unknown');
    const missing = await cli().run(['ops', 'list', `${chatId}:agt_nosuchagent`]);
    expectOneLineError(missing, 1, /NOT_FOUND/);
  });
});

describe('streams trim | reset and continuity breaks', () => {
  it('trim: refused past the peer acknowledgement without --force; human and --json', async () => {
    // bob acknowledged alice's stream up to its state at the ack; nobody acknowledged bob's.
    const refused = await cli().run(['streams', 'trim', streamB, '1']);
    expectOneLineError(refused, 1, /UNACKNOWLEDGED/);
    const [human, forced] = await Promise.all([
      cli().ok(['streams', 'trim', streamA, '1']),
      cli().json<Result<'streams.trim'>>(['streams', 'trim', streamB, '1', '--force']),
    ]);
    expect(human.stdout).toMatch(/firstPosition\s+1/);
    expect(forced).toEqual({ firstPosition: '1' });
    expect((await cli().json<Result<'streams.get'>>(['streams', 'show', streamB])).firstPosition).toBe('1');
  });

  it('reset starts generation 2; an old history cursor or live cursor then exits 3 with one line', async () => {
    const [human, json] = await Promise.all([
      cli().ok(['streams', 'reset', streamA, '--reason', 'cli test']),
      cli().json<Result<'streams.reset'>>(['streams', 'reset', streamB, '--reason', 'cli test']),
    ]);
    expect(human.stdout).toMatch(/generation\s+2/);
    expect(json).toMatchObject({ streamId: streamB, generation: '2', firstPosition: '0', nextPosition: '0' });
    const [history, follow, followAdmin, fresh] = await Promise.all([
      alice.run(['chats', 'history', chatId, '--cursor', historyCursor]),
      bob.run(['chats', 'follow', chatId, '--cursor', liveCursor]),
      cli().run(['chats', 'follow', chatId, '--cursor', liveCursor, '--json'], { timeoutMs: 15_000 }),
      cli().json<Result<'chats.history'>>(['chats', 'history', chatId]),
    ]);
    for (const r of [history, follow, followAdmin]) {
      expectOneLineError(r, 3, /continuity break/i);
      expect(r.stderr).toMatch(/GENERATION_CHANGED/);
      expect(r.timedOut).toBe(false);
    }
    expect(fresh.entries).toEqual([]);
    // The new generation is writable by the author again.
    const sent = await alice.json<Result<'streams.append'>>(['send', chatId, 'after the reset']);
    expect(sent).toMatchObject({ generation: '2', firstPosition: '1' });
  });
});

describe('error output', () => {
  it('chats show of a missing chat: exit 1, one line, no stack', async () => {
    const r = await alice.run(['chats', 'show', 'chat_aaaaaaaaaaaaaaaaaaaaaaaaaa']);
    expectOneLineError(r, 1);
    expect(r.stdout).toBe('');
  });
});
