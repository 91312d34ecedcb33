// `yello chats follow` across daemon restarts (docs/protocol.md §9): it reconnects with backoff
// and resumes from the cursor of the last batch it printed — nothing skipped, nothing repeated —
// saying so on stderr; it prints the cursor to resume from on exit, keeps it in --cursor-out
// (0600, after each batch) and resumes from --cursor-in / --cursor FILE. With --ack too.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { ChatBatchNotification } from '../../src/shared/types.js';
import { parseJsonLines } from '../helpers/cli-runner.js';
import { ok, uniq, messageOf, type Result } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

const { daemon, admin, track, pair, restart } = useCli();
type Batch = ChatBatchNotification;
const contents = (batches: Batch[]) =>
  batches
    .flatMap((b) => b.records)
    .filter((r) => r.wrapper.type === 'chat.message')
    .map((r) => messageOf(r).content);

describe('chats follow survives a daemon restart', () => {
  it('reconnects, resumes from the last printed cursor without gaps or repeats, and prints the cursor on exit', async () => {
    const p = await pair();
    const f = track(p.bob.start(['chats', 'follow', p.chatId, '--json']));
    await p.alice.ok(['send', p.chatId, 'before the restart']);
    await f.waitFor(() => f.lines.some((l) => l.includes('before the restart')), 'the first message');
    await restart();
    await f.waitForStderr(/reconnected; resuming from cursor/, 30_000);
    await p.alice.ok(['send', p.chatId, 'after the restart']);
    await f.waitFor(() => f.lines.some((l) => l.includes('after the restart')), 'the message after the restart', 30_000);
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);

    expect(res.stderr).toMatch(/the connection to yellod was lost; reconnecting \(attempt 1\)/);
    const batches: Batch[] = parseJsonLines(res.stdout);
    const fromAlice = batches.filter((b) => b.streamId === p.streamA);
    expect(contents(fromAlice)).toEqual(['before the restart', 'after the restart']);
    // Alice's claim (her fence at 0) is state: absorbed when it is pushed on its own (live), or
    // carried in the catch-up batch that also holds her message, when both were committed before
    // bob's follow read them. Either way the first batch printed holds her message.
    expect(['0', '1']).toContain(fromAlice[0]!.fromPosition);
    for (let i = 1; i < fromAlice.length; i++) expect(fromAlice[i]!.fromPosition, `batch ${i}`).toBe(fromAlice[i - 1]!.nextPosition);
    // The exit names the cursor of the last batch it printed.
    const hint = /resume with --cursor (\S+)/.exec(res.stderr);
    expect(hint, res.stderr).not.toBeNull();
    expect(hint![1]).toBe(batches.at(-1)!.cursor);
  });

  it('--ack keeps showing and acknowledging after a restart', async () => {
    const p = await pair();
    const f = track(p.bob.start(['chats', 'follow', p.chatId, '--ack']));
    const first = await p.alice.json<Result<'streams.append'>>(['send', p.chatId, 'ack me before']);
    await waitFor(
      async () => ok(await admin().call('streams.get', { streamId: p.streamA })).acknowledged?.nextPosition === first.nextPosition,
      'the first receipt',
      20_000,
    );
    await restart();
    await f.waitForStderr(/reconnected; resuming from cursor/, 30_000);
    const second = await p.alice.json<Result<'streams.append'>>(['send', p.chatId, 'ack me after']);
    await f.waitFor(() => f.lines.some((l) => l.includes('ack me after')), 'the message after the restart', 30_000);
    await waitFor(
      async () => ok(await admin().call('streams.get', { streamId: p.streamA })).acknowledged?.nextPosition === second.nextPosition,
      'the second receipt',
      20_000,
    );
    const res = await f.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout.split('\n').filter((l) => l.includes('ack me')).length).toBe(2);
    // Stopping keeps the claim for the next command (as `send` does) but leaves it abandoned: no
    // connection is attached, so the agent's other tools take it over without --replace.
    await waitFor(
      async () => {
        const w = ok(await admin().call('streams.get', { streamId: p.streamB })).writer;
        return w.active && !w.connected;
      },
      'the kept claim, abandoned',
      10_000,
    );
  });
});

describe('cursor files', () => {
  it('--cursor-out keeps the last batch cursor (0600); a later run with --cursor-in shows only what came after', async () => {
    const p = await pair();
    const file = path.join(daemon().dir, `${uniq('bob')}.cursor`);
    const f = track(p.bob.start(['chats', 'follow', p.chatId, '--json', '--cursor-out', file]));
    await p.alice.ok(['send', p.chatId, 'seen by the first run']);
    await f.waitFor(() => f.lines.some((l) => l.includes('seen by the first run')), 'the first message');
    // The cursor is saved right after the batch is printed (printed, then saved: a kill in
    // between shows that batch again, never skips it). Once saved, a kill — not a clean stop —
    // leaves it in the file.
    const last = parseJsonLines(f.lines.join('\n')).at(-1) as Batch;
    await waitFor(() => fs.existsSync(file) && fs.readFileSync(file, 'utf8').trim() === last.cursor, 'the cursor file', 5_000);
    await f.kill();
    expect(fs.readFileSync(file, 'utf8').trim()).toBe(last.cursor);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);

    await p.alice.ok(['send', p.chatId, 'sent while nobody followed']);
    const g = track(p.bob.start(['chats', 'follow', p.chatId, '--json', '--cursor-in', file, '--cursor-out', file]));
    await g.waitFor(() => g.lines.some((l) => l.includes('sent while nobody followed')), 'the missed message');
    const res = await g.stop('SIGINT');
    expect(res.code, res.stderr).toBe(0);
    expect(contents(parseJsonLines(res.stdout))).toEqual(['sent while nobody followed']);
    // --cursor takes a file as well as a token.
    await p.alice.ok(['send', p.chatId, 'third run']);
    const h = track(p.bob.start(['chats', 'follow', p.chatId, '--json', '--cursor', file]));
    await h.waitFor(() => h.lines.some((l) => l.includes('third run')), 'the third message');
    const res3 = await h.stop('SIGINT');
    expect(contents(parseJsonLines(res3.stdout))).toEqual(['third run']);
  });
});
