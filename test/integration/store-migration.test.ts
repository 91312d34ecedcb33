// A data dir written by yello 0.1.0 (store format 1: checksums on records only; fixture made
// with that release's daemon and CLI: two agents, grants, messages with PII, receipts, a trim,
// a reset into a sealed generation, a key rotation) opens with this daemon: every value is
// re-encoded once, everything reads back exactly, and writing goes on where it stopped.

import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { migrateFormat, CURRENT_FORMAT, FORMAT_KEY } from '../../src/daemon/store/leveldb/store-format.js';
import { decodeValue, encodeValue } from '../../src/daemon/store/leveldb/value-codec.js';
import { DaemonProcess, makeTempDir, repoRoot } from '../helpers/daemon-process.js';
import { spawnAsync } from '../helpers/spawn-async.js';
import { ok, readAll, type ExportLine, type Result } from '../helpers/wire-fixtures.js';

const FIXTURE = path.join(repoRoot, 'test/fixtures/store-format1.tar.gz');
let dir = '';
let started: DaemonProcess | undefined;
/** The daemon the first test starts on the 0.1.0 data dir; the later tests go on with it. */
function daemon(): DaemonProcess {
  if (!started) throw new Error('the daemon is started by the first test');
  return started;
}
const fixture = () =>
  JSON.parse(readFileSync(path.join(dir, 'fixture.json'), 'utf8')) as { chatId: string; tokens: { alice: string; bob: string } };
const v1Export = () =>
  readFileSync(path.join(dir, 'export.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as ExportLine);

beforeAll(async () => {
  dir = await makeTempDir('yl-mig-');
  execFileSync('tar', ['xzf', FIXTURE, '-C', dir]);
});
afterAll(async () => {
  await started?.cleanup();
  spawnSync('rm', ['-rf', dir]);
});

describe('a store written by yello 0.1.0', () => {
  it('is migrated at open: every value checksummed with its key, the format key written last', async () => {
    const d = await DaemonProcess.start({ dir, dataDir: path.join(dir, 'data') });
    started = d;
    expect(d.logs().some((l) => l.msg === 'store format migrated')).toBe(true);
    await d.stop();
    const db = new ClassicLevel<string, string>(path.join(dir, 'data/db'));
    await db.open();
    let n = 0;
    for await (const [key, value] of db.iterator()) {
      expect(decodeValue(key, value), key).not.toBeNull();
      n++;
    }
    expect(JSON.parse(decodeValue(FORMAT_KEY, (await db.get(FORMAT_KEY))!)!)).toBe(CURRENT_FORMAT);
    await db.close();
    expect(n).toBeGreaterThan(30);
  });

  it('reads back exactly what 0.1.0 exported, verifies, keeps tokens and positions, and goes on writing at the head', async () => {
    const d = daemon();
    await d.restart();
    expect(d.logs().filter((l) => l.msg === 'store format migrated')).toHaveLength(1); // once
    const { chatId, tokens } = fixture();
    const alice = await d.connectAs(tokens.alice);
    const admin = await d.connectAs();
    const { chat, streams } = ok(await alice.call('chats.get', { chatId }));
    const before = v1Export();
    const now: unknown[] = [];
    for (const s of streams) {
      for (let g = 1; g <= Number(s.generation); g++) {
        const first = g === Number(s.generation) ? s.firstPosition : '0';
        now.push(...(await readAll(admin, s.streamId, String(g), first)));
      }
    }
    expect(now.map((r) => JSON.stringify(r))).toEqual(before.map((r) => JSON.stringify(r)));
    // The 0.1.0 JWKS verifies everything this daemon serves (same keys, kid of the rotation).
    const verify = spawnSync(
      process.execPath,
      [path.join(repoRoot, 'bin/yello'), 'verify', path.join(dir, 'export.jsonl'), '--jwks', path.join(dir, 'jwks.json')],
      { encoding: 'utf8' },
    );
    expect(verify.stdout).toMatch(/0 problems|no checkpoint/);
    const status = ok(await admin.call('daemon.status', {}));
    expect(status.integrity).toEqual({ corruptStreams: [], walIncidents: [] });
    expect(status.counts).toMatchObject({ agents: 2, chats: 1, streams: 2 });
    // Writing continues at the head, under a new claim.
    const own = streams.find((s: { authorAgentId: string }) => s.authorAgentId === chat.agentAId)!;
    const author = own.authorAgentId === chat.agentA.id ? chat.agentA.username : chat.agentB.username;
    const client = await d.connectAs(author === 'alice' ? tokens.alice : tokens.bob);
    const claim = ok(await client.call('streams.claim', { streamId: own.streamId, replace: true }));
    const appended = ok(
      await client.call('streams.append', {
        streamId: own.streamId,
        coordinatorToken: claim.coordinatorToken,
        generation: claim.generation,
        expectedPosition: claim.nextPosition,
        operationId: 'op-after-migration',
        records: [{ type: 'chat.message', messageId: 'after-migration', content: 'still here' }],
      }),
    );
    expect(appended.firstPosition).toBe(claim.nextPosition);
    // And the doctor agrees.
    const doctor = await spawnAsync(process.execPath, [
      path.join(repoRoot, 'bin/yello'),
      'doctor',
      '--socket',
      d.socketPath,
      '--data-dir',
      d.dataDir,
      '--json',
    ]);
    expect((JSON.parse(doctor.stdout) as Result<'daemon.check'>).problems).toEqual([]);
  });

  it('resumes a migration cut short (values already re-encoded are recognised)', async () => {
    const mdir = await makeTempDir('yl-mig2-');
    execFileSync('tar', ['xzf', FIXTURE, '-C', mdir]);
    const db = new ClassicLevel<string, string>(path.join(mdir, 'data/db'));
    await db.open();
    // Re-encode every other value by hand, as a crash in the middle would leave it.
    let i = 0;
    const batch = db.batch();
    for await (const [key, value] of db.iterator()) {
      if (i++ % 2 === 0) continue;
      const json = key.startsWith('r/')
        ? value.slice(8)
        : ['u', 't', 'p', 'm', 'x', 'ol'].includes(key.slice(0, key.indexOf('/')))
          ? JSON.stringify(value)
          : value;
      batch.put(key, encodeValue(key, json));
    }
    await batch.write();
    const result = await migrateFormat(db, pino({ level: 'silent' }));
    expect(result.migrated).toBeGreaterThan(0);
    for await (const [key, value] of db.iterator()) expect(decodeValue(key, value), key).not.toBeNull();
    await db.close();
    spawnSync('rm', ['-rf', mdir]);
  });
});
