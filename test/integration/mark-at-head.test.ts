// A corruption mark exactly at a stream's head (docs/protocol.md §5.8, §5.9, §6.11): the head
// was rolled back over records it had acknowledged, so "nothing after position N" cannot be
// vouched for. Every read that would present the stream as complete up to its head refuses
// with STORAGE_FAILURE/CORRUPT naming where the damage starts; `streams.get` shows the mark;
// the CLI's `chats read` and `chats export` fail and say so; and `yello verify` of an export
// that stops short of what the peer acknowledged reports it.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cli, writeTokenFile } from '../helpers/cli-runner.js';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { reconnectChat, receipt, setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { ok, readAll, type Wire, type WireResponse } from '../helpers/wire-fixtures.js';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';

const STORAGE_FAILURE = 5030;

/** The response is STORAGE_FAILURE/CORRUPT of `streamId` from `fromPosition`. */
function expectCorrupt(resp: WireResponse, streamId: string, fromPosition: string, what: string): void {
  expect(resp.result, `${what}: expected CORRUPT, got a result`).toBeUndefined();
  expect(resp.error?.code, what).toBe(STORAGE_FAILURE);
  expect(resp.error?.data, what).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId, fromPosition });
}

let d: DaemonProcess;
let chat: ReadingChat;
let admin: Wire;
let cli: Cli;
let bobToken: string;

beforeAll(async () => {
  d = await DaemonProcess.start();
  admin = await d.connectAs();
  chat = await setupChat(d, admin);
  // alice's stream: fence at 0, messages at 1..5 (head 6); bob's: fence, 2 messages.
  await chat.wa.send('a', 5);
  await chat.wb.send('b', 2);
  // bob reads all of alice's stream and acknowledges it: his receipt names position 6.
  const batch = ok(await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '0' }));
  expect(batch.nextPosition).toBe('6');
  await chat.wb.append([receipt(chat.streamA, '1', batch.nextPosition, batch.batchId)]);
  // ...and replies: his signed reply dates the receipt (it existed before any later checkpoint).
  await chat.wb.send('reply', 1);
  await d.stop();
  // Roll alice's head back to 5 with a valid checksum: the record at 5 now lies past it, and the
  // daemon marks the stream corrupt from 5 — exactly at the head it keeps.
  const db = new ClassicLevel<string, string>(path.join(d.dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  await db.open();
  const hk = `h/${chat.streamA}`;
  const tail = JSON.parse((await db.get(hk))!.slice(8)) as unknown[];
  expect(tail[1]).toBe(6);
  tail[1] = 5;
  await db.put(hk, encodeValue(hk, JSON.stringify(tail)), { sync: true });
  await db.close();
  await d.restart();
  await reconnectChat(d, chat);
  admin = await d.connectAs();
  await waitFor(
    async () => ok(await admin.call('daemon.status', {})).integrity.corruptStreams.some((m) => m.streamId === chat.streamA),
    'the mark of the rolled-back head',
  );
  cli = new Cli(d.socketPath, d.dataDir);
  bobToken = writeTokenFile(d.dir, 'bob.token', chat.bob.token);
}, 60_000);

afterAll(async () => {
  await d.cleanup();
});

describe('a corruption mark at the head', () => {
  it('the mark lies exactly at the head', async () => {
    const status = ok(await admin.call('daemon.status', {}));
    expect(status.integrity.corruptStreams.find((m) => m.streamId === chat.streamA)).toMatchObject({ generation: '1', fromPosition: '5' });
    const s = ok(await admin.call('streams.get', { streamId: chat.streamA }));
    expect(s.nextPosition).toBe('5');
  });

  it('streams.get shows it as corruptFrom; an unmarked stream has no such member', async () => {
    const s = ok(await chat.bob.client.call('streams.get', { streamId: chat.streamA }));
    expect(s).toMatchObject({ corruptFrom: '5' });
    const clean = ok(await chat.bob.client.call('streams.get', { streamId: chat.streamB }));
    expect('corruptFrom' in clean).toBe(false);
    const got = ok(await chat.bob.client.call('chats.get', { chatId: chat.chatId }));
    expect(got.streams.find((x) => x.streamId === chat.streamA)).toMatchObject({ corruptFrom: '5' });
  });

  it('chats.history refuses in both directions', async () => {
    for (const direction of ['backward', 'forward'] as const) {
      for (const client of [chat.bob.client, chat.alice.client, admin]) {
        expectCorrupt(await client.call('chats.history', { chatId: chat.chatId, direction }), chat.streamA, '5', `history ${direction}`);
      }
    }
  });

  it('streams.read at the head refuses; below the mark it serves what verifies, and stops before the mark', async () => {
    expectCorrupt(
      await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '5' }),
      chat.streamA,
      '5',
      'read at the head',
    );
    const below = ok(await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '0' }));
    expect(below.records.map((r) => r.position)).toEqual(['0', '1', '2', '3', '4']);
    expect(below.nextPosition).toBe('5');
  });

  it('streams.checkpoint of the default range refuses; an explicit sub-range below the mark is signed', async () => {
    expectCorrupt(await admin.call('streams.checkpoint', { streamId: chat.streamA, generation: '1' }), chat.streamA, '5', 'checkpoint');
    const part = ok(await admin.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', nextPosition: '5' }));
    expect(part).toMatchObject({ firstPosition: '0', nextPosition: '5', recordCount: '5' });
  });

  it('chats.follow refuses', async () => {
    expectCorrupt(await chat.bob.client.call('chats.follow', { chatId: chat.chatId }), chat.streamA, '5', 'follow');
  });

  it('yello chats read fails and names the damage', async () => {
    const r = await cli.as(bobToken).run(['chats', 'read', chat.chatId]);
    expect(r.code, r.stderr).not.toBe(0);
    expect(r.stderr).toMatch(/CORRUPT/);
    expect(r.stderr).toContain(chat.streamA);
  });

  it('yello chats history fails', async () => {
    const r = await cli.as(bobToken).run(['chats', 'history', chat.chatId]);
    expect(r.code, r.stdout).not.toBe(0);
    expect(r.stderr).toMatch(/CORRUPT/);
  });

  it('yello chats export exits non-zero with a stderr line naming the range, and exports what lies below it', async () => {
    const r = await cli.run(['chats', 'export', chat.chatId]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(new RegExp(`${chat.streamA} generation 1 is exported only below position 5`));
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { streamId?: string; position?: string; checkpoint?: { streamId: string; nextPosition: string } });
    expect(lines.filter((l) => l.streamId === chat.streamA).map((l) => l.position)).toEqual(['0', '1', '2', '3', '4']);
    expect(lines.find((l) => l.checkpoint?.streamId === chat.streamA)?.checkpoint?.nextPosition).toBe('5');
  });

  it('yello verify of an export made before the fix reports the receipt that names records the export lacks', async () => {
    // What the old exporter produced: alice's stream up to the mark with a checkpoint of that
    // range (the daemon then signed it as the whole range), bob's stream in full.
    const out: string[] = [];
    const a = await readAll(admin, chat.streamA, '1', '0');
    for (const rec of a) out.push(JSON.stringify(rec));
    out.push(
      JSON.stringify({
        checkpoint: ok(await admin.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', nextPosition: '5' })),
      }),
    );
    for (const rec of await readAll(admin, chat.streamB, '1', '0')) out.push(JSON.stringify(rec));
    out.push(JSON.stringify({ checkpoint: ok(await admin.call('streams.checkpoint', { streamId: chat.streamB, generation: '1' })) }));
    const file = path.join(d.dir, 'old-export.jsonl');
    writeFileSync(file, out.join('\n') + '\n');
    const jwks = path.join(d.dir, 'jwks.json');
    writeFileSync(jwks, JSON.stringify(ok(await admin.call('keys.list', {}))));
    const r = await cli.run(['verify', file, '--jwks', jwks, '--json']);
    expect(r.code, r.stdout).toBe(1);
    const report = JSON.parse(r.stdout) as { problems: Array<{ kind: string; streamId: string | null; problem: string }> };
    expect(report.problems).toEqual([
      expect.objectContaining({
        kind: 'RECEIPT',
        streamId: chat.streamB,
        problem: expect.stringMatching(/before position 6.*ends at 5.*not in the export/) as unknown,
      }),
    ]);
  });
});
