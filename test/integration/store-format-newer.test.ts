// Rolling back (README "Upgrade"): a store whose format is newer than this daemon knows is
// refused at start with one line and exit 78 (configuration, not restarted by systemd), and
// nothing in it is changed, so the newer version (or a restored copy) still opens it.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { CURRENT_FORMAT, FORMAT_KEY } from '../../src/daemon/store/leveldb/store-format.js';
import { encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { expectExit, oneLineErrorProblems, runCli } from '../helpers/cli-runner.js';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { ok } from '../helpers/wire-fixtures.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const started: DaemonProcess[] = [];
afterAll(async () => {
  for (const d of started.splice(0)) await d.cleanup();
});

async function snapshot(dbDir: string): Promise<Array<[string, string]>> {
  const db = new ClassicLevel<string, string>(dbDir);
  await db.open();
  try {
    return await db.iterator().all();
  } finally {
    await db.close();
  }
}

async function setFormat(dbDir: string, format: number): Promise<void> {
  const db = new ClassicLevel<string, string>(dbDir);
  await db.open();
  try {
    await db.put(FORMAT_KEY, encodeValue(FORMAT_KEY, JSON.stringify(format)), { sync: true });
  } finally {
    await db.close();
  }
}

describe('a store of a newer format', () => {
  it('is refused with exit 78 and one line saying what to do, and left exactly as it was', async () => {
    const d = await DaemonProcess.start();
    started.push(d);
    const admin = await d.connectAs();
    const made = ok(await admin.call('agents.create', { username: 'kept', name: 'Kept' }));
    admin.close();
    await d.stop();

    const dbDir = path.join(d.dataDir, 'db');
    await setFormat(dbDir, CURRENT_FORMAT + 1);
    const before = await snapshot(dbDir);

    const r = await runCli(['daemon', '--socket', d.socketPath, '--data-dir', d.dataDir, '--log-level', 'warn'], {
      timeoutMs: 30_000,
      process: true,
    });
    expectExit(r, 78);
    expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
    expect(r.stderr).toMatch(
      new RegExp(
        `the store has format ${CURRENT_FORMAT + 1}, which this yello \\(format ${CURRENT_FORMAT}\\) does not know: a newer version wrote it, and nothing was changed; run that version, or roll back by restoring the copy of the data dir taken before the upgrade`,
      ),
    );
    expect(await snapshot(dbDir)).toEqual(before);

    // The version that knows the format (here: the format key put back) opens it as it was.
    await setFormat(dbDir, CURRENT_FORMAT);
    await d.restart();
    const again = await d.connectAs();
    expect(ok(await again.call('agents.get', { agentId: made.agent.id })).agent.username).toBe('kept');
    again.close();
  });
});
