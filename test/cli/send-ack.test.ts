// `yello send <chatId> <text…|-> --ack` (docs/protocol.md §9): the reply and the receipt of
// every peer message so far in one atomic append, as the CLI's writer (the kept claim, like
// `send` and `ack`); nothing unread sends the message alone; a break sends nothing (exit 3).

import { describe, expect, it, vi } from 'vitest';
import { AnswerCutter } from '../helpers/answer-cutter.js';
import { expectExit, oneLineErrorProblems } from '../helpers/cli-runner.js';
import { ok, readAll, receiptOf, messageOf } from '../helpers/wire-fixtures.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 60_000 });

const fixture = useCli();
const { admin, cli, daemon } = fixture;

const state = async (streamId: string) => ok(await admin().call('streams.get', { streamId }));
const operations = async (streamId: string) => ok(await admin().call('operations.list', { streamId })).operations;

describe('send --ack', () => {
  it('appends the reply and a receipt for the last peer batch with a message as one operation, after one claim fence', async () => {
    const p = await fixture.pair();
    await p.alice.ok(['send', p.chatId, 'question one']);
    await p.alice.ok(['send', p.chatId, 'question two']);
    const head = await state(p.streamA);

    const r = await p.bob.ok(['send', p.chatId, '--ack', 'both', 'answered']);
    expect(r.stdout).toBe(`sent at position 1 of ${p.streamB}\nacknowledged ${p.streamA} before position ${head.nextPosition}\n`);
    const records = await readAll(admin(), p.streamB);
    expect(records.map((x) => x.wrapper.type)).toEqual(['chat.writer-fence', 'chat.message', 'chat.receipt']);
    expect(messageOf(records[1]).content).toBe('both answered');
    expect(receiptOf(records[2])).toMatchObject({ peerStreamId: p.streamA, peerGeneration: '1', nextPosition: head.nextPosition });
    // One append: the message and the receipt committed together.
    const ops = await operations(p.streamB);
    expect(ops.filter((o) => !o.operationId.startsWith('fence.'))).toHaveLength(1);
    expect(ops.at(-1)).toMatchObject({ firstPosition: '1', nextPosition: '3' });
    expect((await state(p.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: head.nextPosition });

    // The next one reuses the kept claim (no new fence); --json says what it acknowledged.
    await p.alice.ok(['send', p.chatId, 'question three']);
    const head2 = await state(p.streamA);
    const j = await p.bob.json<{ firstPosition: string; records: unknown[]; acknowledged: unknown }>([
      'send',
      p.chatId,
      'three answered',
      '--ack',
    ]);
    expect(j.firstPosition).toBe('3');
    expect(j.records).toHaveLength(2);
    expect(j.acknowledged).toEqual({ streamId: p.streamA, generation: '1', nextPosition: head2.nextPosition });
    expect((await readAll(admin(), p.streamB)).filter((x) => x.wrapper.type === 'chat.writer-fence')).toHaveLength(1);
  });

  it('text from stdin with "-" works with --ack too', async () => {
    const p = await fixture.pair();
    await p.alice.ok(['send', p.chatId, 'ping']);
    await p.bob.ok(['send', p.chatId, '--ack', '-'], { input: 'pong\nover two lines\n' });
    const records = await readAll(admin(), p.streamB);
    expect(messageOf(records.at(-2)).content).toBe('pong\nover two lines');
    expect(records.at(-1)?.wrapper.type).toBe('chat.receipt');
  });

  it('nothing unread: the message alone, and a line saying nothing was acknowledged', async () => {
    const p = await fixture.pair();
    const r = await p.bob.ok(['send', p.chatId, 'first word', '--ack']);
    expect(r.stdout).toBe(`sent at position 1 of ${p.streamB}\nnothing new to acknowledge\n`);
    expect((await readAll(admin(), p.streamB)).map((x) => x.wrapper.type)).toEqual(['chat.writer-fence', 'chat.message']);
    const j = await p.bob.json<{ acknowledged: unknown }>(['send', p.chatId, 'again', '--ack']);
    expect(j.acknowledged).toBeNull();
  });

  it('under a claim the caller holds (--coordinator-token-file) the receipt goes in the same append', async () => {
    const p = await fixture.pair();
    await p.alice.ok(['send', p.chatId, 'hello']);
    const claimed = await p.bob.json<{ coordinatorToken: string }>(['streams', 'claim', p.streamB]);
    await p.bob.ok(['send', p.chatId, 'hi back', '--ack', '--coordinator-token-file', '-'], { input: claimed.coordinatorToken });
    const records = await readAll(admin(), p.streamB);
    expect(records.map((x) => x.wrapper.type)).toEqual(['chat.writer-fence', 'chat.message', 'chat.receipt']);
    expect((await state(p.streamA)).acknowledged).not.toBeNull();
  });

  it('unread messages behind a reset: exit 3 with the way out, nothing sent', async () => {
    const p = await fixture.pair();
    await p.alice.ok(['send', p.chatId, 'm1']);
    await p.bob.ok(['ack', p.chatId]);
    await p.alice.ok(['send', p.chatId, 'm2 unread']);
    await cli().ok(['streams', 'reset', p.streamA, '--reason', 'test: reset with m2 unread']);
    const before = await state(p.streamB);
    const r = await p.bob.run(['send', p.chatId, 'not now', '--ack']);
    expectExit(r, 3);
    expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
    expect(r.stderr).toContain('--from generation-start');
    expect((await state(p.streamB)).nextPosition).toBe(before.nextPosition);
  });

  it('--help names --ack', async () => {
    const r = await cli().ok(['send', '--help']);
    expect(r.stdout).toMatch(/--ack\s+also acknowledge every message the peer has sent so far/);
  });
});

describe('an append of unknown outcome pauses the kept claim', () => {
  it('the lost answer names `ops show`; sends under the claim are refused until `ops show` settled it; nothing is resent', async () => {
    const p = await fixture.pair();
    const cutter = await AnswerCutter.start(daemon().socketPath);
    try {
      const env = { env: { YELLO_SOCKET: cutter.socketPath } };
      await p.alice.ok(['send', p.chatId, 'question']);
      cutter.cutNextAppend();
      const lost = await p.bob.run(['send', p.chatId, '--ack', 'answer'], env);
      expectExit(lost, 1);
      expect(oneLineErrorProblems(lost)).toEqual([]);
      const op = cutter.cut[0]!;
      expect(lost.stderr).toContain(`yello ops show ${p.streamB} ${op}`);

      // The lost append committed with its receipt: alice writes again, so that ack has something to acknowledge.
      await p.alice.ok(['send', p.chatId, 'another question']);
      for (const cmd of [
        ['send', p.chatId, 'again'],
        ['ack', p.chatId],
      ]) {
        const refused = await p.bob.run(cmd, env);
        expectExit(refused, 1);
        expect(refused.stderr).toContain(
          `unknown outcome (operation ${op}); nothing was sent: run \`yello ops show ${p.streamB} ${op}\` first`,
        );
      }
      const shown = await p.bob.ok(['ops', 'show', p.streamB, op], env);
      expect(shown.stdout).toMatch(/state\s+committed/);
      expect(shown.stderr).toMatch(/settled \(committed\)/);
      await p.bob.ok(['send', p.chatId, 'after settling'], env);
      const contents = (await readAll(admin(), p.streamB))
        .filter((r) => r.wrapper.type === 'chat.message')
        .map((r) => messageOf(r).content);
      expect(contents).toEqual(['answer', 'after settling']);
      expect((await readAll(admin(), p.streamB)).filter((r) => r.wrapper.type === 'chat.writer-fence')).toHaveLength(1);
    } finally {
      await cutter.close();
    }
  });
});
