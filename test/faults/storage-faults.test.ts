// Storage faults: a failed synced write, a record whose bytes changed on disk, and LevelDB
// corruption at open. Each must be loud and precise — never a skip, never a crash loop.
import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DaemonProcess, repoRoot } from '../helpers/daemon-process.js';
import { ok } from '../helpers/wire-fixtures.js';
import { setupChat, reconnectChat, messages, batchesOf, notificationsOf } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { damageStoredRecord, renameStoredKey } from '../helpers/store-tamper.js';
import { hashToken } from '../../src/daemon/crypto/tokens.js';

const daemons: DaemonProcess[] = [];
afterAll(async () => {
  for (const d of daemons) await d.cleanup();
});

describe('a failed synced write', () => {
  it('fails the affected append with STORAGE_FAILURE, makes the daemon read-only, and the outcome shows after restart', async () => {
    const d = await DaemonProcess.start({ extraArgs: ['--fault-fail-sync-file', '__FAULT__'] });
    daemons.push(d);
    const trigger = path.join(d.dir, 'fail-sync');
    // The flag names a path; restart the daemon with the real path in this temp dir.
    d.extraArgs.splice(0, d.extraArgs.length, '--fault-fail-sync-file', trigger);
    await d.restart();
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    const good = await chat.wa.append(messages('before', 1));
    writeFileSync(trigger, '');
    const failed = await chat.wa.tryAppend(messages('lost', 1), 'op-during-failure');
    expect(failed.error?.code).toBe(5030);
    expect(failed.error?.data?.type).toBe('STORAGE_FAILURE');
    expect(failed.error?.data?.operationId).toBe('op-during-failure');
    const status = ok(await admin.call('daemon.status', {}));
    expect(status.storage).toBe('read-only');
    // Every later write is refused as well; reads still work.
    const later = await chat.wb.tryAppend(messages('later', 1));
    expect(later.error?.data?.type).toBe('STORAGE_FAILURE');
    const read = ok(await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '0' }));
    expect(read.nextPosition).toBe(good.nextPosition);

    spawnSync('rm', ['-f', trigger]);
    await d.restart();
    await reconnectChat(d, chat);
    const op = ok(await chat.alice.client.call('operations.get', { streamId: chat.streamA, operationId: 'op-during-failure' }));
    expect(op.state).toBe('unknown');
    const state = ok(await chat.alice.client.call('streams.get', { streamId: chat.streamA }));
    expect(state.nextPosition).toBe(good.nextPosition);
    const status2 = ok(await (await d.connectAs()).call('daemon.status', {}));
    expect(status2.storage).toBe('ok');
    expect(d.logs().some((l) => l.level === 60 && String(l.msg).includes('read-only'))).toBe(true);
  });
});

describe('a grant whose key was damaged', () => {
  it('answers STORAGE_FAILURE/CORRUPT naming the damaged key, never a silent PERMISSION_DENIED NO_GRANT', async () => {
    const d = await DaemonProcess.start();
    daemons.push(d);
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    await chat.wa.append(messages('before', 1));
    await d.stop();
    const renamed = await renameStoredKey(d.dataDir, `g/${chat.alice.id}/${chat.bob.id}`);
    await d.restart();
    await reconnectChat(d, chat);
    const r = await chat.wa.tryAppend(messages('after', 1));
    expect(r.error?.data, JSON.stringify(r.error)).toMatchObject({
      type: 'STORAGE_FAILURE',
      reason: 'CORRUPT',
      key: renamed,
      streamId: null,
    });
    // The grant the other way is intact: bob still sends.
    await chat.wb.append(messages('bob-still-sends', 1));
    // And the daemon says so at startup.
    expect(d.stdoutLines.some((l) => l.includes('grant keys fail their checksum') && l.includes(renamed))).toBe(true);
  });
});

describe('a token-index entry whose key was damaged', () => {
  it('answers the valid token STORAGE_FAILURE/CORRUPT naming the damaged key, not UNAUTHENTICATED; other agents still say hello', async () => {
    const d = await DaemonProcess.start();
    daemons.push(d);
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    await d.stop();
    const renamed = await renameStoredKey(d.dataDir, `t/${hashToken(chat.alice.token)}`);
    await d.restart();
    const c = await d.connect();
    const r = await c.hello(chat.alice.token);
    expect(r.error?.data, JSON.stringify(r.error)).toMatchObject({
      type: 'STORAGE_FAILURE',
      reason: 'CORRUPT',
      key: renamed,
      streamId: null,
    });
    ok(await (await d.connect()).hello(chat.bob.token));
    expect(d.stdoutLines.some((l) => l.includes('token index keys fail their checksum') && l.includes(renamed))).toBe(true);
  });
});

describe('a corrupted record value', () => {
  it('fails reads with STORAGE_FAILURE naming the position, and the daemon keeps serving', async () => {
    const d = await DaemonProcess.start();
    daemons.push(d);
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    await chat.wa.append(messages('m', 5));
    await d.stop();
    await damageStoredRecord(d.dataDir, chat.streamA, 3); // position 3: a message
    await d.restart();
    await reconnectChat(d, chat);
    // A read serves the intact records before the damage; the next one starts there and fails.
    const intact = ok(await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '0' }));
    expect(intact.nextPosition).toBe('3');
    const r = await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '3' });
    expect(r.error?.data?.type).toBe('STORAGE_FAILURE');
    expect(r.error?.data?.reason).toBe('CORRUPT');
    expect(r.error?.data?.fromPosition).toBe('3');
    expect(r.error?.data?.streamId).toBe(chat.streamA);
    const h = await chat.bob.client.call('chats.history', { chatId: chat.chatId });
    expect(h.error?.data?.reason).toBe('CORRUPT');
    // Positions before the damage are still readable exactly; nothing after it is skipped to.
    const before = ok(await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '0', limit: 3 }));
    expect(before.nextPosition).toBe('3');
    const after = await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '3' });
    expect(after.error?.data?.fromPosition).toBe('3');
    const status = ok(await (await d.connectAs()).call('daemon.status', {}));
    expect(status.storage).toBe('ok');
    // The damaged stream is listed, and its writer is stopped until someone resets it.
    expect(status.integrity.corruptStreams).toEqual([
      expect.objectContaining({ streamId: chat.streamA, generation: '1', fromPosition: '3' }),
    ]);
    const append = await chat.wa.tryAppend(messages('after-damage', 1));
    expect(append.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT', outcome: 'not-written' });
  });
});

describe('a corrupted record met by a follower catching up', () => {
  it('ends the subscription with chats.error (STORAGE_FAILURE/CORRUPT), never chats.break with a fourth reason, and the daemon lives on', async () => {
    const d = await DaemonProcess.start();
    daemons.push(d);
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    // A cursor from before the messages: following from it later catches up from storage.
    const early = ok(await chat.bob.client.call('chats.follow', { chatId: chat.chatId }));
    await chat.wa.append(messages('m', 5));
    await d.stop();
    await damageStoredRecord(d.dataDir, chat.streamA, 3); // position 3
    await d.restart();
    await reconnectChat(d, chat);
    const bob = chat.bob.client;
    const sub = ok(await bob.call('chats.follow', { chatId: chat.chatId, cursor: early.cursor }));
    const mine = () => notificationsOf(bob, sub.subscriptionId);
    await waitFor(() => mine().some((n) => n.method !== 'chats.batch'), 'the subscription to end', 5_000);
    const ending = mine().filter((n) => n.method !== 'chats.batch');
    expect(ending).toHaveLength(1);
    expect(ending[0]).toMatchObject({
      method: 'chats.error',
      params: { error: { code: 5030, data: { type: 'STORAGE_FAILURE', reason: 'CORRUPT', streamId: chat.streamA, fromPosition: '3' } } },
    });
    // Everything before the damage was delivered, in order; nothing after it.
    const delivered = batchesOf(bob, sub.subscriptionId)
      .filter((b) => b.streamId === chat.streamA)
      .flatMap((b) => b.records.map((r) => r.position));
    expect(delivered).toEqual(['1', '2']);
    expect(d.running).toBe(true);
    expect(ok(await (await d.connectAs()).call('daemon.status', {})).storage).toBe('ok');
  });
});

describe('LevelDB corruption at open', () => {
  it('exits with code 76 and one clear line, without touching the socket', async () => {
    const d = await DaemonProcess.start();
    daemons.push(d);
    await d.stop();
    const dbDir = path.join(d.dataDir, 'db');
    for (const f of readdirSync(dbDir).filter((n) => n.startsWith('MANIFEST-')))
      writeFileSync(path.join(dbDir, f), Buffer.alloc(4096, 0xab));
    const r = spawnSync(process.execPath, [path.join(repoRoot, 'bin/yello'), 'daemon', '--socket', d.socketPath, '--data-dir', d.dataDir], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.status).toBe(76);
    expect(r.stderr).toMatch(/corrupt/i);
    expect(r.stderr.split('\n').filter(Boolean)).toHaveLength(1);
  });
});
