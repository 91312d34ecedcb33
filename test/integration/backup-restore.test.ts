// Backup and restore (issue 23, finding 3; docs/operations.md "Backup and restore"): a backup
// taken while appends keep coming holds every append acknowledged before it was asked for,
// contiguous and verifiable, and a daemon started on its restore serves them with a clean
// doctor; `daemon.backup`'s refusals (§6.3) and `yello restore`'s refusals change nothing.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Cli, describeRun, expectExit, parseJson } from '../helpers/cli-runner.js';
import { DaemonProcess, makeTempDir } from '../helpers/daemon-process.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { waitFor } from '../helpers/wait.js';
import {
  claim,
  connectAs,
  createPair,
  fetchKeys,
  messageOf,
  messageProblems,
  ok,
  readAll,
  type TestPair,
  type Wire,
} from '../helpers/wire-fixtures.js';
import type { BackupManifest } from '../../src/shared/results.js';

const { daemon, admin } = useDaemon();
const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) fs.rmSync(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await makeTempDir('ylb-');
  scratch.push(dir);
  return dir;
}

/** Appends one message at a time until `stop()`, recording each acknowledged position. */
function appendLoop(client: Wire, streamId: string, token: string, from: number) {
  const acked: number[] = [];
  const state = { running: true };
  let failure: unknown = null;
  const done = (async () => {
    let next = from;
    while (state.running) {
      const r = await client.call('streams.append', {
        streamId,
        coordinatorToken: token,
        generation: '1',
        expectedPosition: String(next),
        operationId: `op-${next}`,
        records: [{ type: 'chat.message', messageId: `m-${next}`, content: `message ${next}` }],
      });
      if (r.error) {
        failure = r.error;
        return;
      }
      acked.push(next);
      next = Number(ok(r).nextPosition);
    }
  })();
  return {
    acked,
    /** Resolves once `n` appends were acknowledged; throws if the loop ended first. */
    async until(n: number) {
      while (acked.length < n) {
        if (failure) throw new Error(`append failed: ${JSON.stringify(failure)}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    async stop() {
      state.running = false;
      await done;
      if (failure) throw new Error(`append failed: ${JSON.stringify(failure)}`);
    },
  };
}

describe('daemon.backup / yello backup and yello restore', () => {
  let pair: TestPair;

  it(
    'a backup under load holds every acknowledged append; a daemon on its restore serves them, verified, with a clean doctor',
    { timeout: 120_000 },
    async () => {
      pair = await createPair(admin(), daemon().socketPath);
      const claimed = await claim(pair.a.client, pair.streamA);
      const load = appendLoop(pair.a.client, pair.streamA, claimed.coordinatorToken, Number(claimed.nextPosition));
      // Let the load run a while, so the backup's cut falls in the middle of it.
      await load.until(40);
      const ackedBefore = [...load.acked];
      const target = path.join(await tempDir(), 'backup-1');
      const cli = new Cli(daemon().socketPath, daemon().dataDir);
      const backup = await cli.run(['backup', target, '--json']);
      const ackedDuring = load.acked.length;
      await load.stop();
      expectExit(backup, 0);
      const { manifest } = parseJson(backup) as { manifest: BackupManifest };
      expect(load.acked.length, 'appends went on after the backup was asked for').toBeGreaterThan(ackedBefore.length);
      expect(ackedDuring, 'appends were acknowledged while the backup ran').toBeGreaterThanOrEqual(ackedBefore.length);

      // Private modes: the backup holds the signing keys and both secrets.
      expect(fs.statSync(target).mode & 0o777).toBe(0o700);
      for (const name of ['admin.token', 'secret.key', 'manifest.json'])
        expect(fs.statSync(path.join(target, name)).mode & 0o777).toBe(0o600);
      expect(manifest.files).toEqual(['keys', 'admin.token', 'secret.key']);
      const cut = manifest.streams.find((s) => s.streamId === pair.streamA);
      expect(Number(cut?.nextPosition)).toBeGreaterThanOrEqual(ackedBefore.length);

      // Restore into a fresh data dir, with no daemon on it, and start one there.
      const dir = await tempDir();
      const dataDir = path.join(dir, 'data');
      const restored = await new Cli(path.join(dir, 'y.sock'), dataDir).run(['restore', target]);
      expect(restored.code, describeRun(restored)).toBe(0);
      const d2 = await DaemonProcess.start({ dir, dataDir });
      try {
        expect(d2.adminToken, 'the admin token came back with the store').toBe(daemon().adminToken);
        const a2 = await connectAs(d2.socketPath, pair.a.token);
        const state = ok(await a2.call('streams.get', { streamId: pair.streamA }));
        expect(state.nextPosition).toBe(cut?.nextPosition);
        const records = await readAll(a2, pair.streamA);
        const positions = records.map((r) => Number(r.position));
        expect(positions, 'contiguous from 0 to the cut').toEqual(Array.from({ length: Number(cut?.nextPosition) }, (_, i) => i));
        for (const p of ackedBefore) expect(positions).toContain(p);
        const keys = await fetchKeys(a2);
        const messages = records.filter((r) => r.wrapper.type === 'chat.message');
        expect(messages.length).toBeGreaterThanOrEqual(ackedBefore.length);
        for (const r of messages) expect(messageProblems(messageOf(r), keys, `m-${r.position}`), `record ${r.position}`).toEqual([]);
        // A replayed append of an operation in the backup is answered from it, not written again.
        const replay = await a2.call('operations.get', { streamId: pair.streamA, operationId: `op-${ackedBefore[0]}` });
        expect(ok(replay).state).toBe('committed');
        a2.close();
        const doctor = await new Cli(d2.socketPath, dataDir).run(['doctor', '--json']);
        expect(doctor.code, describeRun(doctor)).toBe(0);
        expect((parseJson(doctor) as { problems: unknown[] }).problems).toEqual([]);
      } finally {
        await d2.cleanup();
      }
    },
  );

  it('refuses a relative path, an existing path, a missing parent and an unwritable directory with INVALID_PARAMS at path, writing nothing', async () => {
    const dir = await tempDir();
    const cases = ['relative/backup', dir, path.join(dir, 'no-such-parent', 'backup')];
    for (const p of cases) {
      const r = await admin().call('daemon.backup', { path: p });
      expect(r.error?.data, p).toMatchObject({ type: 'INVALID_PARAMS', path: 'path' });
    }
    expect(fs.readdirSync(dir)).toEqual([]);
    // A directory the filesystem refuses to write in (here /proc, even for root).
    const refused = await admin().call('daemon.backup', { path: '/proc/yello-backup' });
    expect(refused.error?.data).toMatchObject({ type: 'INVALID_PARAMS', path: 'path' });
    expect(refused.error?.message).toContain('cannot write a backup at /proc/yello-backup');
  });

  it('is admin only: an agent gets PERMISSION_DENIED', async () => {
    const dir = await tempDir();
    const r = await pair.a.client.call('daemon.backup', { path: path.join(dir, 'b') });
    expect(r.error?.data).toMatchObject({ type: 'PERMISSION_DENIED' });
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('yello restore refuses while a daemon holds the store, naming it, and changes nothing', async () => {
    const target = path.join(await tempDir(), 'backup-2');
    ok(await admin().call('daemon.backup', { path: target }));
    const before = fs.readdirSync(daemon().dataDir).sort();
    const r = await new Cli(daemon().socketPath, daemon().dataDir).run(['restore', target]);
    expect(r.code, describeRun(r)).toBe(1);
    expect(r.stderr).toContain(`pid ${daemon().holderPid}`);
    expect(r.stderr).toContain('stop it first');
    expect(fs.readdirSync(daemon().dataDir).sort()).toEqual(before);
  });

  it(
    'yello restore refuses what is not a backup, or a backup that does not match its manifest; a good one over an old store keeps the old aside',
    { timeout: 120_000 },
    async () => {
      const target = path.join(await tempDir(), 'backup-3');
      ok(await admin().call('daemon.backup', { path: target }));
      const dir = await tempDir();
      const dataDir = path.join(dir, 'data');
      const cli = new Cli(path.join(dir, 'y.sock'), dataDir);

      const notBackup = await cli.run(['restore', dir]);
      expect(notBackup.code, describeRun(notBackup)).toBe(1);
      expect(notBackup.stderr).toContain('is not a yello backup');

      const manifestPath = path.join(target, 'manifest.json');
      const good = fs.readFileSync(manifestPath, 'utf8');
      const m = JSON.parse(good) as BackupManifest;
      fs.writeFileSync(manifestPath, JSON.stringify({ ...m, records: m.records + 1 }));
      const mismatch = await cli.run(['restore', target]);
      expect(mismatch.code, describeRun(mismatch)).toBe(1);
      expect(mismatch.stderr).toContain('does not match its manifest');
      expect(fs.existsSync(path.join(dataDir, 'db')), 'nothing restored').toBe(false);
      fs.writeFileSync(manifestPath, good);

      // An older store in the data dir: restored over, and kept aside.
      const old = await DaemonProcess.start({ dir, dataDir });
      const oldToken = old.adminToken;
      await old.stop();
      const over = await cli.run(['restore', target]);
      expect(over.code, describeRun(over)).toBe(0);
      const aside = fs.readdirSync(dataDir).filter((n) => n.startsWith('before-restore-'));
      expect(aside).toHaveLength(1);
      expect(fs.readFileSync(path.join(dataDir, aside[0]!, 'admin.token'), 'utf8').trim()).toBe(oldToken);
      expect(fs.readFileSync(path.join(dataDir, 'admin.token'), 'utf8').trim()).toBe(daemon().adminToken);
      expect(fs.readdirSync(dataDir).filter((n) => n.startsWith('.restore-'))).toEqual([]);
      await old.cleanup();
    },
  );
});

describe('a SIGKILL while a backup is written', () => {
  const { daemon, admin, restart } = useDaemon({ extraArgs: ['--quota-append-records', '0', '--quota-append-bytes', '0'], process: true });

  it(
    'leaves no backup under the name asked for (or a complete one), and a store the doctor finds clean',
    { timeout: 120_000 },
    async () => {
      const pair = await createPair(admin(), daemon().socketPath);
      const claimed = await claim(pair.a.client, pair.streamA);
      const load = appendLoop(pair.a.client, pair.streamA, claimed.coordinatorToken, Number(claimed.nextPosition));
      await load.until(200);
      await load.stop();
      const parent = await tempDir();
      const target = path.join(parent, 'backup-killed');
      // Answered or not (the connection dies with the daemon): what is on disk is the subject.
      const asked = admin()
        .call('daemon.backup', { path: target })
        .catch(() => undefined);
      // As soon as the daemon has begun writing (the partial directory is there), kill it.
      await waitFor(() => fs.readdirSync(parent).length > 0, 'the backup to begin', 30_000, 1);
      await daemon().kill();
      await asked;
      const names = fs.readdirSync(parent);
      if (names.includes('backup-killed')) {
        // The rename came first: then it is complete (the rename is its last step).
        expect(JSON.parse(fs.readFileSync(path.join(target, 'manifest.json'), 'utf8'))).toMatchObject({ format: 'yello.backup.v1' });
      } else {
        expect(
          names.every((n) => n.startsWith('.backup-killed.partial-')),
          names.join(', '),
        ).toBe(true);
      }
      await restart();
      const check = ok(await admin().call('daemon.check', { mark: false }));
      expect(check.problems).toEqual([]);
      expect(ok(await admin().call('streams.get', { streamId: pair.streamA })).nextPosition).toBe(
        String(Number(claimed.nextPosition) + load.acked.length),
      );
      // And a backup to the same name now works (a leftover partial directory is not in the way).
      if (!names.includes('backup-killed')) ok(await admin().call('daemon.backup', { path: target }));
    },
  );
});
