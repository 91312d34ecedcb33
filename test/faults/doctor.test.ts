// `yello doctor`: the full check of a store, offline (daemon stopped) or through a running
// daemon, and the recovery path docs/reliability.md describes for a corrupt stream.

import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterAll, describe, expect, it } from 'vitest';
import { DaemonProcess, repoRoot } from '../helpers/daemon-process.js';
import { spawnAsync, type SpawnResult } from '../helpers/spawn-async.js';
import { expectError, messages, reconnectChat, setupChat } from '../helpers/reading-fixtures.js';
import { ok, type ExportLine } from '../helpers/wire-fixtures.js';
import type { DoctorReport } from '../../src/shared/types.js';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';

const daemons: DaemonProcess[] = [];
afterAll(async () => {
  for (const d of daemons) await d.cleanup();
});

function doctor(d: DaemonProcess, ...extra: string[]): Promise<SpawnResult> {
  return spawnAsync(
    process.execPath,
    [path.join(repoRoot, 'bin/yello'), 'doctor', '--data-dir', d.dataDir, '--socket', d.socketPath, ...extra],
    { timeout: 60_000 },
  );
}

async function loaded() {
  const d = await DaemonProcess.start();
  daemons.push(d);
  const admin = await d.connectAs();
  const chat = await setupChat(d, admin);
  for (let i = 0; i < 4; i++) {
    await chat.wa.append(messages(`a${i}`, 2));
    await chat.wb.append(messages(`b${i}`, 1));
  }
  return { d, chat };
}

async function withDb(d: DaemonProcess, edit: (db: ClassicLevel) => Promise<void>): Promise<void> {
  const db = new ClassicLevel(path.join(d.dataDir, 'db'));
  await db.open();
  await edit(db);
  await db.close();
}

describe('yello doctor', () => {
  it('finds nothing wrong with a healthy store, offline and through a running daemon', async () => {
    const { d } = await loaded();
    const live = await doctor(d);
    expect(live.status, live.stderr).toBe(0);
    expect(live.stderr).toMatch(/asking it to run the check/);
    expect(live.stdout).toMatch(/no problems found/);
    await d.stop();
    const off = await doctor(d, '--json');
    expect(off.status, off.stderr).toBe(0);
    const report = JSON.parse(off.stdout) as DoctorReport;
    expect(report.problems).toEqual([]);
    expect(report.counts).toMatchObject({ agents: 2, chats: 1, streams: 2, records: 2 + 8 + 4, messages: 12 });
  });

  it('reports a changed value, a missing record, a stale head and a lost token index, marks the streams, and the daemon then refuses to write there', async () => {
    const { d, chat } = await loaded();
    await d.stop();
    await withDb(d, async (db) => {
      // alice's stream: a message changed on disk (position 3).
      const k3 = `r/${chat.streamA}/${'1'.padStart(16, '0')}/${'3'.padStart(16, '0')}`;
      const v = (await db.get(k3))!;
      await db.put(k3, v.replace('message a1', 'massage a1'));
      // bob's stream: record 2 gone, and its head rewritten stale (valid checksum, nextPosition 4 of 5).
      await db.del(`r/${chat.streamB}/${'1'.padStart(16, '0')}/${'2'.padStart(16, '0')}`);
      const hk = `h/${chat.streamB}`;
      const tail = JSON.parse((await db.get(hk))!.slice(8)) as unknown[];
      tail[1] = 4;
      await db.put(hk, encodeValue(hk, JSON.stringify(tail)));
      // bob's token index entry lost.
      for await (const key of db.keys({ gte: 't/', lt: 't0' })) {
        if ((await db.get(key))!.includes(chat.bob.id)) await db.del(key);
      }
    });
    const r = await doctor(d, '--json');
    expect(r.status, r.stderr).toBe(1);
    const report = JSON.parse(r.stdout) as DoctorReport;
    const kinds = report.problems.map(
      (p) => `${p.kind}:${p.streamId === chat.streamA ? 'A' : p.streamId === chat.streamB ? 'B' : '-'}:${p.position ?? '-'}`,
    );
    expect(kinds).toEqual(expect.arrayContaining(['checksum:A:3', 'record:B:2', 'record:B:4', 'directory:-:-']));
    expect(report.problems.find((p) => p.kind === 'directory')?.detail).toMatch(/token index/);
    const marked = Object.fromEntries(report.corruptStreams.map((m) => [m.streamId, m.fromPosition]));
    expect(marked).toEqual({ [chat.streamA]: '3', [chat.streamB]: '2' });

    // The human report says the same in a table.
    expect((await doctor(d, '--no-mark')).stdout).toMatch(/problems:[\s\S]*checksum[\s\S]*marked corrupt/);

    await d.restart();
    await reconnectChat(d, chat).catch(() => undefined);
    const admin = await d.connectAs();
    const status = ok(await admin.call('daemon.status', {}));
    expect(status.integrity.corruptStreams.map((m: { streamId: string }) => m.streamId).sort()).toEqual(
      [chat.streamA, chat.streamB].sort(),
    );
    chat.alice.client = await d.connectAs(chat.alice.token);
    chat.wa.client = chat.alice.client;
    const refused = await chat.wa.tryAppend(messages('after', 1));
    expect(refused.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: chat.streamA, fromPosition: '3' });
    // `yello status` lists them for people.
    const st = await spawnAsync(process.execPath, [
      path.join(repoRoot, 'bin/yello'),
      'status',
      '--socket',
      d.socketPath,
      '--data-dir',
      d.dataDir,
    ]);
    expect(st.stdout).toMatch(/corrupt streams \(2;/);
  });

  it('follows the recovery path: export what verifies, reset, and readers get GENERATION_CHANGED while writers start clean', async () => {
    const { d, chat } = await loaded();
    await d.connectAs(); // an idle admin connection, left open across the stop
    const followed = ok(await chat.bob.client.call('chats.follow', { chatId: chat.chatId }));
    await d.stop();
    await withDb(d, async (db) => db.del(`r/${chat.streamA}/${'1'.padStart(16, '0')}/${'5'.padStart(16, '0')}`));
    expect((await doctor(d)).status).toBe(1);
    await d.restart();
    const admin = await d.connectAs();
    const yello = (...args: string[]) =>
      spawnAsync(process.execPath, [path.join(repoRoot, 'bin/yello'), ...args, '--socket', d.socketPath, '--data-dir', d.dataDir]);
    // Export: records below the damage come out; the damage is named; exit 1.
    const exported = await yello('chats', 'export', chat.chatId);
    expect(exported.status).not.toBe(0);
    expect(exported.stderr).toMatch(/generation 1 is exported only below position 5/);
    const lines = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as ExportLine);
    expect(lines.filter((l) => l.streamId === chat.streamA).map((l) => l.position)).toEqual(['0', '1', '2', '3', '4']);
    expect(lines.some((l) => l.checkpoint?.streamId === chat.streamA && l.checkpoint.nextPosition === '5')).toBe(true);
    // Reset the damaged stream: a new generation, past the mark.
    const reset = ok(await admin.call('streams.reset', { streamId: chat.streamA, reason: 'lost record 5 (yello doctor)' }));
    expect(reset.generation).toBe('2');
    expect(ok(await admin.call('daemon.status', {})).integrity.corruptStreams).toEqual([
      expect.objectContaining({ streamId: chat.streamA, generation: '1', fromPosition: '5' }),
    ]);
    const bob = await d.connectAs(chat.bob.token);
    expectError(await bob.call('chats.follow', { chatId: chat.chatId, cursor: followed.cursor }), 'CONTINUITY_BREAK');
    const alice = await d.connectAs(chat.alice.token);
    const claim = ok(await alice.call('streams.claim', { streamId: chat.streamA, replace: true }));
    const appended = ok(
      await alice.call('streams.append', {
        streamId: chat.streamA,
        coordinatorToken: claim.coordinatorToken,
        generation: '2',
        expectedPosition: claim.nextPosition,
        operationId: 'op-after-reset',
        records: messages('fresh', 1),
      }),
    );
    expect(appended.generation).toBe('2');
  });

  it('acts on a log loss it finds offline and stores it, so the daemon does not lose the report', async () => {
    const { d } = await loaded();
    await d.stop();
    const dbDir = path.join(d.dataDir, 'db');
    const log = readdirSync(dbDir)
      .filter((n) => n.endsWith('.log'))
      .map((n) => path.join(dbDir, n))
      .find((f) => statSync(f).size > 4096)!;
    const bytes = readFileSync(log);
    bytes[bytes.length - 200] = bytes[bytes.length - 200]! ^ 0x10;
    writeFileSync(log, bytes);
    const r = await doctor(d, '--json');
    const report = JSON.parse(r.stdout) as DoctorReport;
    expect(report.corruptStreams.length).toBeGreaterThan(0);
    await d.restart();
    const status = ok(await (await d.connectAs()).call('daemon.status', {}));
    expect(status.integrity.walIncidents).toHaveLength(1);
    expect(status.integrity.corruptStreams.map((m: { streamId: string }) => m.streamId)).toEqual(
      expect.arrayContaining(report.corruptStreams.map((m) => m.streamId)),
    );
  });
});
