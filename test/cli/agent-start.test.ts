// Where an agent's reading starts (docs/protocol.md §9, §6.5 `from`): with no cursor, `chats
// follow` (with or without --ack) and `chats read` start at what the agent has not
// acknowledged yet, so messages sent before it started are shown, never skipped; --from-end
// opts out; `chats read --ack` acknowledges what it showed.

import { describe, expect, it, vi } from 'vitest';
import type { ChatBatchNotification, StoredRecord } from '../../src/shared/types.js';
import { expectExit, oneLineErrorProblems, parseJsonLines } from '../helpers/cli-runner.js';
import { ok, type Result } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 60_000 });

const { admin, cli, track, pair } = useCli();
const acknowledged = async (streamId: string) => ok(await admin().call('streams.get', { streamId })).acknowledged;

describe('chats follow without a cursor (agent)', () => {
  it('shows the messages sent before it started', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'hello, bob']);
    await p.alice.ok(['send', p.chatId, 'are you there?']);
    const f = track(p.bob.start(['chats', 'follow', p.chatId]));
    await f.waitFor(() => f.lines.some((l) => l.includes('are you there?')), 'the earlier messages');
    await p.alice.ok(['send', p.chatId, 'live one']);
    await f.waitFor(() => f.lines.some((l) => l.includes('live one')), 'the live message');
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);
    const shown = res.stdout.split('\n').filter((l) => l.includes(' → '));
    expect(shown.map((l) => l.replace(/^.*#\d+\s+/, ''))).toEqual(['hello, bob', 'are you there?', 'live one']);
    // Following does not acknowledge.
    expect(await acknowledged(p.streamA)).toBeNull();
  });

  it('--from-end starts at the current ends', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'old news']);
    const f = track(p.bob.start(['chats', 'follow', p.chatId, '--from-end']));
    await f.waitForStderr('following'); // subscribed
    await p.alice.ok(['send', p.chatId, 'fresh']);
    await f.waitFor(() => f.lines.some((l) => l.includes('fresh')), 'the new message');
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).not.toContain('old news');
  });

  it('--ack on a first run shows and acknowledges what came before it', async () => {
    const p = await pair();
    const sent = await p.alice.json<Result<'streams.append'>>(['send', p.chatId, 'hello, bob']);
    const f = track(p.bob.start(['chats', 'follow', p.chatId, '--ack']));
    await f.waitFor(() => f.lines.some((l) => l.includes('hello, bob')), 'the earlier message');
    await waitFor(async () => (await acknowledged(p.streamA))?.nextPosition === sent.nextPosition, 'the receipt', 20_000);
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);
  });
});

describe('chats read', () => {
  it('prints what is not acknowledged yet, once; --ack acknowledges it; then there is nothing', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'first']);
    await p.alice.ok(['send', p.chatId, 'second']);
    const peek = await p.bob.ok(['chats', 'read', p.chatId]);
    expect(peek.stdout).toMatch(/ → .*#1\s+first\n.* → .*#2\s+second\n$/);
    expect(await acknowledged(p.streamA)).toBeNull();

    const json = await p.bob.json<{ records: StoredRecord[] }>(['chats', 'read', p.chatId, '--ack']);
    expect(json).toMatchObject({
      chatId: p.chatId,
      streamId: p.streamA,
      generation: '1',
      fromPosition: '0',
      nextPosition: '3',
      acknowledged: { generation: '1', nextPosition: '3' },
    });
    expect(json.records.map((r) => r.wrapper.type)).toEqual(['chat.writer-fence', 'chat.message', 'chat.message']);
    expect(await acknowledged(p.streamA)).toEqual({ generation: '1', nextPosition: '3' });

    const empty = await p.bob.json(['chats', 'read', p.chatId]);
    expect(empty).toMatchObject({ fromPosition: '3', nextPosition: '3', records: [], acknowledged: null });
    await p.alice.ok(['send', p.chatId, 'third']);
    const next = await p.bob.ok(['chats', 'read', p.chatId]);
    expect(next.stdout).toContain('third');
    expect(next.stdout).not.toContain('second');
  });

  it('unacknowledged messages that were trimmed away are a continuity break (exit 3), not skipped', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'gone']);
    await cli().ok(['streams', 'trim', p.streamA, '2', '--force']);
    const r = await p.bob.run(['chats', 'read', p.chatId]);
    expectExit(r, 3);
    expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
    expect(r.stderr).toMatch(/PREFIX_UNAVAILABLE/);
    const f = await p.bob.run(['chats', 'follow', p.chatId], { timeoutMs: 20_000 });
    expectExit(f, 3);
    expect(f.stderr).toMatch(/PREFIX_UNAVAILABLE/);
  });

  it('is an agent command', async () => {
    const p = await pair();
    expectExit(await cli().run(['chats', 'read', p.chatId]), 2);
  });
});

describe('JSON lines', () => {
  it('the first-run backlog comes as contiguous batches from position 0', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'a']);
    await p.alice.ok(['send', p.chatId, 'b']);
    const f = track(p.bob.start(['chats', 'follow', p.chatId, '--json']));
    await f.waitFor(() => f.lines.some((l) => l.includes('"content":"b"')), 'the backlog');
    const res = await f.stop('SIGINT');
    const batches = parseJsonLines<ChatBatchNotification>(res.stdout).filter((b) => b.streamId === p.streamA);
    expect(batches[0]!.fromPosition).toBe('0');
    for (let i = 1; i < batches.length; i++) expect(batches[i]!.fromPosition).toBe(batches[i - 1]!.nextPosition);
    expect(batches.at(-1)!.nextPosition).toBe('3');
  });
});
