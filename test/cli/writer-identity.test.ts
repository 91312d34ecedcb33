// The CLI's writer identity (docs/protocol.md §9): `send` and `ack` keep their coordinator
// token in a 0600 file under the CLI state dir and reuse it, so consecutive sends add no
// writer fences; they claim only when they hold none or were fenced, taking over an abandoned
// claim by themselves and a connected holder's only with --replace (else WRITER_ACTIVE, exit 1);
// --release and `streams release` give the stream up. Size (and UTF-8) checks run before any claim.

import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { expectExit, oneLineErrorProblems, writeTokenFile, type CliResult } from '../helpers/cli-runner.js';
import { claim, ok, readAll, uniq, messageOf, type Result } from '../helpers/wire-fixtures.js';
import { useCli, type CliPair } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 60_000 });

const fixture = useCli();
const { daemon, admin, cli } = fixture;
let stateDir: string;

beforeAll(() => {
  stateDir = path.join(daemon().dir, 'state', 'yello-cli');
});

/** A fresh pair (see useCli), alice's PII policy off. */
async function pair(): Promise<CliPair> {
  const p = await fixture.pair();
  ok(await admin().call('agents.setPolicy', { agentId: p.a.id, pii: 'off' }));
  return p;
}

const types = async (streamId: string) => (await readAll(admin(), streamId)).map((r: { wrapper: { type: string } }) => r.wrapper.type);
const state = async (streamId: string) => ok(await admin().call('streams.get', { streamId }));
const mode = (p: string) => fs.statSync(p).mode & 0o777;

function expectOneLine(r: CliResult, code: number, pattern: RegExp): void {
  expectExit(r, code);
  expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
  expect(r.stderr).toMatch(pattern);
}

describe('send keeps one writer', () => {
  it('three sends add one writer fence, not three; the token is kept in a 0600 file in a 0700 dir', async () => {
    const p = await pair();
    for (const text of ['one', 'two', 'three']) await p.alice.ok(['send', p.chatId, text]);
    expect(await types(p.streamA)).toEqual(['chat.writer-fence', 'chat.message', 'chat.message', 'chat.message']);
    expect((await state(p.streamA)).writer).toMatchObject({ epoch: '1', active: true });
    const files = fs.readdirSync(stateDir).filter((f) => fs.readFileSync(path.join(stateDir, f), 'utf8').includes(p.streamA));
    expect(files).toHaveLength(1);
    expect(mode(stateDir)).toBe(0o700);
    expect(mode(path.join(stateDir, files[0]!))).toBe(0o600);
    // ack reuses the same identity for bob's stream: one fence, then the receipt.
    await p.bob.ok(['ack', p.chatId]);
    await p.bob.ok(['send', p.chatId, 'thanks']);
    expect(await types(p.streamB)).toEqual(['chat.writer-fence', 'chat.receipt', 'chat.message']);
  });

  it('--state-dir puts the claim elsewhere', async () => {
    const p = await pair();
    const own = path.join(daemon().dir, uniq('own-state'));
    await p.alice.ok(['--state-dir', own, 'send', p.chatId, 'hi']);
    await p.alice.ok(['--state-dir', own, 'send', p.chatId, 'again']);
    expect(await types(p.streamA)).toEqual(['chat.writer-fence', 'chat.message', 'chat.message']);
    expect(fs.readdirSync(own)).toHaveLength(1);
    expect(mode(own)).toBe(0o700);
  });

  it('a stored claim taken over by a coordinator that is connected: WRITER_ACTIVE naming `yello streams release`, nothing written; --replace takes over and says so', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'first']);
    const other = await claim(p.a.client, p.streamA, true); // held by this live connection
    const before = await state(p.streamA);
    const refused = await p.alice.run(['send', p.chatId, 'not without --replace']);
    expectOneLine(refused, 1, /WRITER_ACTIVE.*connected right now.*--replace.*yello streams release/);
    expect((await state(p.streamA)).nextPosition).toBe(before.nextPosition);
    expect((await state(p.streamA)).writer.epoch).toBe(other.epoch);

    const taken = await p.alice.ok(['send', p.chatId, 'taken over', '--replace']);
    expect(taken.stderr).toMatch(/took over the claim on .* from another coordinator/);
    const after = await state(p.streamA);
    expect(BigInt(after.writer.epoch)).toBe(BigInt(other.epoch) + 1n);
    // And the takeover is the CLI's writer from now on: the next send adds no fence.
    await p.alice.ok(['send', p.chatId, 'and on']);
    expect(await types(p.streamA)).toEqual([
      'chat.writer-fence',
      'chat.message', // the CLI's claim, "first"
      'chat.writer-fence', // the other coordinator
      'chat.writer-fence',
      'chat.message',
      'chat.message', // the takeover, "taken over", "and on"
    ]);
    expect((await state(p.streamA)).writer.epoch).toBe(after.writer.epoch);
  });

  it('a stored claim taken over by a coordinator that has gone: claimed again without --replace', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'first']);
    await p.alice.ok(['streams', 'claim', p.streamA, '--replace']); // a CLI process: gone when it exits
    const again = await p.alice.ok(['send', p.chatId, 'second']);
    expect(again.stderr).toMatch(/claimed it again/);
    expect(await types(p.streamA)).toEqual(['chat.writer-fence', 'chat.message', 'chat.writer-fence', 'chat.writer-fence', 'chat.message']);
  });

  it('a claim released by the admin is claimed again with a note', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'first']);
    await cli().ok(['streams', 'release', p.streamA]);
    const again = await p.alice.ok(['send', p.chatId, 'second']);
    expect(again.stderr).toMatch(/released or reset; claimed it again/);
    expect((await state(p.streamA)).writer).toMatchObject({ epoch: '2', active: true });
  });

  it('--release gives the stream up after sending; `streams release` releases the kept claim', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'and goodbye', '--release']);
    expect((await state(p.streamA)).writer).toMatchObject({ epoch: '1', active: false });
    await p.alice.ok(['send', p.chatId, 'back again']);
    expect((await state(p.streamA)).writer).toMatchObject({ epoch: '2', active: true });
    const released = await p.alice.json<Result<'streams.release'>>(['streams', 'release', p.streamA]);
    expect(released.writer).toMatchObject({ epoch: '2', active: false });
    const nothing = await p.alice.run(['streams', 'release', p.streamA]);
    expectOneLine(nothing, 1, /holds no claim/);
  });
});

describe('checks before any claim', () => {
  it('a 300 KiB message is refused locally: no claim, no fence, no record', async () => {
    const p = await pair();
    const r = await p.alice.run(['send', p.chatId, '-'], { input: 'x'.repeat(300 * 1024) });
    expectOneLine(r, 1, /too large.*262144/);
    expect(await state(p.streamA)).toMatchObject({ nextPosition: '0', writer: { epoch: '0', active: false } });
  });

  it('the local size check agrees with the daemon: just under the limit is sent, just over is refused before any claim', async () => {
    const p = await pair();
    // The request line around a message: measure it with a tiny message, then fill up to the limit.
    const small = await p.alice.json<Result<'streams.append'>>(['send', p.chatId, 'x', '--message-id', 'size-probe']);
    const overhead = Buffer.byteLength(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'streams.append',
        params: {
          streamId: p.streamA,
          coordinatorToken: 'yello_ct_' + 'x'.repeat(43),
          generation: '1',
          expectedPosition: small.nextPosition,
          operationId: 'cli-00000000-0000-0000-0000-000000000000',
          records: [{ type: 'chat.message', messageId: 'size-fill', content: '' }],
        },
      }),
    );
    const fits = 262_144 - overhead - 20; // the CLI counts a 16-digit request id
    const sent = await p.alice.json<Result<'streams.append'>>(['send', p.chatId, '-', '--message-id', 'size-fill'], {
      input: 'y'.repeat(fits),
    });
    expect(messageOf(sent.records[0]).content).toHaveLength(fits);
    const before = await state(p.streamA);
    const over = await p.alice.run(['send', p.chatId, '-', '--message-id', 'size-over'], { input: 'z'.repeat(262_144 - overhead + 1) });
    expectOneLine(over, 1, /too large/);
    expect(await state(p.streamA)).toEqual(before);
  });

  it('without a writable state dir (a service user with no home) still sends: it claims, appends and releases, and says why', async () => {
    const p = await pair();
    const r = await p.alice.run([
      '--state-dir',
      path.join(writeTokenFile(daemon().dir, uniq('a-file'), 'not a directory'), 'state'),
      'send',
      p.chatId,
      'from a homeless user',
    ]);
    expectExit(r, 0);
    expect(r.stderr).toMatch(/cannot keep the claim between commands .*this command claims and releases the stream/);
    expect(await types(p.streamA)).toEqual(['chat.writer-fence', 'chat.message']);
    expect((await state(p.streamA)).writer).toMatchObject({ epoch: '1', active: false });
  });
});
