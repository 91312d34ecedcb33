// keys.rotate on a daemon that turned read-only after a failed write (docs/protocol.md §6.3):
// refused with STORAGE_FAILURE/READ_ONLY, and the active key stays as it was. The failed write
// is a real fsync EIO, injected with an LD_PRELOAD shim (as in fsync-eio.test.ts).

import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess, makeTempDir } from '../helpers/daemon-process.js';
import { buildFsyncEioShim, hasCc } from '../helpers/fsync-eio-shim.js';
import { messages, setupChat } from '../helpers/reading-fixtures.js';
import { ok, uniq } from '../helpers/wire-fixtures.js';

let dir = '';
let shim = '';
let d: DaemonProcess | undefined;

beforeAll(async () => {
  if (!hasCc) return;
  dir = await makeTempDir('yl-rok-');
  shim = buildFsyncEioShim(dir);
});

afterAll(async () => {
  await d?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!hasCc)('keys.rotate while read-only', () => {
  it('is refused with STORAGE_FAILURE/READ_ONLY and the active key does not change', async () => {
    const trigger = path.join(dir, `eio-${uniq('t')}`);
    d = await DaemonProcess.start({ env: { LD_PRELOAD: shim, YELLO_FAULT_EIO_FILE: trigger }, process: true });
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    const before = ok(await admin.call('keys.list', {})).keys;
    writeFileSync(trigger, '');
    const failed = await chat.wa.tryAppend(messages('eio', 1));
    expect(failed.error?.code).toBe(5030);
    // fsync works again; the daemon stays read-only until restarted.
    rmSync(trigger);
    expect(ok(await admin.call('daemon.status', {})).storage).toBe('read-only');
    const r = await admin.call('keys.rotate', {});
    expect(r.result).toBeUndefined();
    expect(r.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'READ_ONLY', outcome: 'not-written' });
    expect(ok(await admin.call('keys.list', {})).keys).toEqual(before);
  }, 60_000);
});
