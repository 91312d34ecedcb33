// fsync returning EIO, through an LD_PRELOAD shim compiled here (gcc): the daemon's synced
// write fails after LevelDB wrote its log record, so the data may well be on disk. The answer
// must say the outcome is unknown (never "not written"), the daemon goes read-only, and after a
// restart operations.get tells the truth. The Coordinator treats it like any uncertain outcome.

import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Coordinator,
  MemoryCursorStore,
  StorageFailureError,
  CoordinatorPausedError,
  type UncertainOutcome,
} from '../../src/client/index.js';
import { DaemonProcess, makeTempDir } from '../helpers/daemon-process.js';
import { buildFsyncEioShim, hasCc } from '../helpers/fsync-eio-shim.js';
import { AckLog, checkAcked } from '../helpers/integrity-checker.js';
import { messages, reconnectChat, setupChat } from '../helpers/reading-fixtures.js';
import { ok, readAll, uniq, messageOf } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';

let dir = '';
let shim = '';
const daemons: DaemonProcess[] = [];

beforeAll(async () => {
  if (!hasCc) return;
  dir = await makeTempDir('yl-eio-');
  shim = buildFsyncEioShim(dir);
});

afterAll(async () => {
  for (const d of daemons) await d.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function eioDaemon(): Promise<{ d: DaemonProcess; trigger: string }> {
  const trigger = path.join(dir, `eio-${uniq('t')}`);
  const d = await DaemonProcess.start({ env: { LD_PRELOAD: shim, YELLO_FAULT_EIO_FILE: trigger }, process: true });
  daemons.push(d);
  return { d, trigger };
}

describe.skipIf(!hasCc)('fsync fails with EIO (LD_PRELOAD shim)', () => {
  it('answers STORAGE_FAILURE with outcome unknown, says pending until a restart, then operations.get tells the truth', async () => {
    const { d, trigger } = await eioDaemon();
    const admin = await d.connectAs();
    const chats = [await setupChat(d, admin), await setupChat(d, admin)];
    const writers = chats.flatMap((c) => [c.wa, c.wb]);
    const log = new AckLog();
    for (const w of writers) log.record(await w.tryAppend(messages(uniq('before'), 2)));
    expect(log.acked).toHaveLength(4);

    writeFileSync(trigger, '');
    const opIds = writers.map(() => uniq('op-eio'));
    const answers = await Promise.all(writers.map((w, i) => w.tryAppend(messages(uniq('eio'), 1), opIds[i])));
    // An append queued with the failed write: outcome unknown. One admitted after the daemon
    // turned read-only (possible on a loaded machine): refused, nothing written.
    const queued = new Set<number>();
    for (const [i, a] of answers.entries()) {
      expect(a.error?.code, JSON.stringify(a)).toBe(5030);
      if (a.error?.data?.reason === 'WRITE_FAILED') {
        queued.add(i);
        expect(a.error.data).toMatchObject({ type: 'STORAGE_FAILURE', outcome: 'unknown', operationId: opIds[i] });
        expect(a.error.message).toMatch(/outcome unknown/);
      } else {
        expect(a.error?.data).toMatchObject({
          type: 'STORAGE_FAILURE',
          reason: 'READ_ONLY',
          outcome: 'not-written',
          operationId: opIds[i],
        });
      }
    }
    expect(queued.size).toBeGreaterThan(0);
    expect(ok(await admin.call('daemon.status', {})).storage).toBe('read-only');
    // While the daemon runs, nobody can know: pending, never "unknown" (= never committed).
    for (const [i, w] of writers.entries()) {
      const op = ok(await w.client.call('operations.get', { streamId: w.streamId, operationId: opIds[i] }));
      expect(op.state).toBe(queued.has(i) ? 'pending' : 'unknown');
    }
    // A write refused before anything was queued says so.
    const refused = await writers[0]!.tryAppend(messages(uniq('late'), 1));
    expect(refused.error?.data).toMatchObject({ reason: 'READ_ONLY', outcome: 'not-written' });

    rmSync(trigger);
    await d.restart();
    for (const c of chats) await reconnectChat(d, c);
    const admin2 = await d.connectAs();
    let committed = 0;
    for (const [i, w] of writers.entries()) {
      const op = ok(await w.client.call('operations.get', { streamId: w.streamId, operationId: opIds[i] }));
      const records = await readAll(admin2, w.streamId);
      const before = log.acked.find((a) => a.streamId === w.streamId)!.nextPosition;
      if (op.state === 'committed') {
        expect(queued.has(i), 'an append answered "not written" was written').toBe(true);
        committed++;
        expect(op.firstPosition).toBe(before);
        expect(records.at(-1)!.wrapper.operationId).toBe(opIds[i]);
      } else {
        expect(op).toMatchObject({ state: 'unknown', firstPosition: null, nextPosition: null, generation: null });
        expect(records.at(-1)!.position).toBe(String(Number(before) - 1));
      }
    }
    console.log(`[fsync-eio] ${committed} of ${writers.length} appends answered STORAGE_FAILURE were on disk after the restart`);
    const report = await checkAcked(admin2, log.acked);
    expect(report.violations).toEqual([]);
    expect(report.intact).toBe(log.acked.length);
    expect(report.corruptStreams).toEqual([]);
  });

  it('pauses a Coordinator, tells its adapter the operationId, never resends, and resumes once operations.get settles it', async () => {
    const { d, trigger } = await eioDaemon();
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin, { claim: false });
    const uncertain: Array<{ operationId: string; error: Error }> = [];
    const resolved: UncertainOutcome[] = [];
    const coordinator = new Coordinator({
      token: chat.alice.token,
      chatId: chat.chatId,
      socketPath: d.socketPath,
      cursorStore: new MemoryCursorStore(),
      reconnect: { minDelayMs: 20, maxDelayMs: 100 },
      adapter: { present: () => {}, uncertain: (info) => void uncertain.push(info), resolved: (o) => void resolved.push(o) },
    });
    await coordinator.start();
    await coordinator.send('before the fault');
    writeFileSync(trigger, '');
    const err = await coordinator.send('during the fault').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageFailureError);
    expect(coordinator.state).toBe('paused');
    expect(uncertain).toHaveLength(1);
    expect(uncertain[0]!.operationId).toBe(coordinator.uncertainOperationId);
    await expect(coordinator.send('not while paused')).rejects.toBeInstanceOf(CoordinatorPausedError);

    rmSync(trigger);
    await d.restart();
    const outcome = await coordinator.resolveUncertain();
    expect(resolved).toEqual([outcome]);
    const admin2 = await d.connectAs();
    const op = ok(await admin2.call('operations.get', { streamId: chat.streamA, operationId: outcome.operationId }));
    expect(outcome.committed).toBe(op.state === 'committed');
    await waitFor(() => coordinator.state === 'running', 'coordinator running again', 5_000);
    const after = await coordinator.send('after the fault');
    // Nothing was resent: the stream holds the fault's message at most once.
    const texts = (await readAll(admin2, chat.streamA)).filter((r) => r.wrapper.type === 'chat.message').map((r) => messageOf(r).content);
    expect(texts.filter((t) => t === 'during the fault')).toHaveLength(outcome.committed ? 1 : 0);
    expect(texts.at(-1)).toBe('after the fault');
    expect(after.duplicate).toBe(false);
    await coordinator.stop();
  });
});
