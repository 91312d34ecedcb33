// Issue 21 #2 as an operator meets it: one operation of 3 records (positions 1–3 after the
// fence at 0), `streams.trim beforePosition 3 force`, then `yello doctor` through the running
// daemon and offline: exit 0, no problem, no mark, and the stream stays writable and readable.

import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DaemonProcess, repoRoot } from '../helpers/daemon-process.js';
import { spawnAsync } from '../helpers/spawn-async.js';
import { messages, setupChat } from '../helpers/reading-fixtures.js';
import { ok } from '../helpers/wire-fixtures.js';

let d: DaemonProcess | undefined;
afterAll(async () => {
  await d?.cleanup();
});

const doctor = (daemon: DaemonProcess) =>
  spawnAsync(process.execPath, [path.join(repoRoot, 'bin/yello'), 'doctor', '--data-dir', daemon.dataDir, '--socket', daemon.socketPath], {
    timeout: 60_000,
  });

describe('yello doctor after a trim inside an operation', () => {
  it('finds nothing wrong, marks nothing, and the stream stays usable', async () => {
    d = await DaemonProcess.start();
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    const op = await chat.wa.append(messages('three', 3), 'op-three');
    expect([op.firstPosition, op.nextPosition]).toEqual(['1', '4']);
    expect(ok(await admin.call('streams.trim', { streamId: chat.streamA, beforePosition: '3', force: true }))).toEqual({
      firstPosition: '3',
    });

    const live = await doctor(d);
    expect(live.status, live.stdout + live.stderr).toBe(0);
    expect(live.stdout).toMatch(/no problems found/);
    expect(ok(await admin.call('daemon.status', {})).integrity.corruptStreams).toEqual([]);
    await chat.wa.append(messages('after', 1));
    const read = ok(await chat.bob.client.call('streams.read', { streamId: chat.streamA, generation: '1', fromPosition: '3' }));
    expect(read.records.map((r) => r.position)).toEqual(['3', '4']);

    await d.stop();
    const offline = await doctor(d);
    expect(offline.status, offline.stdout + offline.stderr).toBe(0);
  }, 60_000);
});
