// `streams.checkpoint` (docs/protocol.md §5.9, §6.6) on a real daemon, checked with this file's
// own canonical JSON, digest and payload code against the JWKS: the retained range by default,
// sub-ranges and empty ranges, sealed generations, trims, access; and a corrupt stream, which is
// never vouched for past its damage: `yello chats export` writes what lies below it with a
// checkpoint of that part, reports the rest on stderr and exits 1, and what it wrote verifies.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { Checkpoint, StoredRecord } from '../../src/shared/types.js';
import { Cli, expectExit, parseJson } from '../helpers/cli-runner.js';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { expectError, messages, reconnectChat, setupChat } from '../helpers/reading-fixtures.js';
import {
  createAgent,
  isJsonObject,
  jsonPreview,
  ok,
  readAll,
  verifyEs256,
  type PublicJwk,
  type Wire,
  type ExportLine,
  type WireResponse,
  type WireErrorData,
  type Unchecked,
} from '../helpers/wire-fixtures.js';
import { objectContaining } from '../helpers/matchers.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const daemons: DaemonProcess[] = [];
afterAll(async () => {
  for (const d of daemons) await d.cleanup();
});

async function start(): Promise<DaemonProcess> {
  const d = await DaemonProcess.start();
  daemons.push(d);
  return d;
}

/** §5.9 canonical JSON, written here independently of src/shared: sorted keys, no whitespace. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

function digestOf(records: StoredRecord[]): string {
  const h = createHash('sha256');
  for (const r of records) h.update(canonical(r) + '\n', 'utf8');
  return h.digest('base64url');
}

type PayloadFields = Pick<
  Checkpoint,
  'streamId' | 'generation' | 'firstPosition' | 'nextPosition' | 'recordCount' | 'chainDigest' | 'createdAt'
>;

const payloadOf = (c: PayloadFields) =>
  ['yello.checkpoint.v1', c.streamId, c.generation, c.firstPosition, c.nextPosition, c.recordCount, c.chainDigest, c.createdAt].join('\n');

/**
 * Every way `c` disagrees with `records` and the JWKS; empty when it is a correct checkpoint of
 * them. `c` is taken as the daemon answered it: no field is trusted to have the contract's type.
 */
function checkpointProblems(c: Unchecked<Checkpoint>, records: StoredRecord[], keys: PublicJwk[]): string[] {
  const problems: string[] = [];
  if (c.type !== 'yello.checkpoint.v1') problems.push(`type ${String(c.type)}`);
  const { streamId, chatId, authorAgentId, generation, firstPosition, nextPosition, recordCount, chainDigest, createdAt } = c;
  const fields = { streamId, chatId, authorAgentId, generation, firstPosition, nextPosition, recordCount, chainDigest, createdAt };
  const notStrings = Object.entries(fields).filter(([, v]) => typeof v !== 'string');
  if (
    typeof streamId !== 'string' ||
    typeof chatId !== 'string' ||
    typeof authorAgentId !== 'string' ||
    typeof generation !== 'string' ||
    typeof firstPosition !== 'string' ||
    typeof nextPosition !== 'string' ||
    typeof recordCount !== 'string' ||
    typeof chainDigest !== 'string' ||
    typeof createdAt !== 'string'
  ) {
    return [...problems, `not strings: ${notStrings.map(([k]) => k).join(', ')}`];
  }
  if (`${chatId}:${authorAgentId}` !== streamId) problems.push('chatId:authorAgentId is not streamId');
  if (recordCount !== String(records.length)) problems.push(`recordCount ${recordCount}, records ${records.length}`);
  if (records.length > 0 && (records[0]!.position !== firstPosition || String(BigInt(records.at(-1)!.position) + 1n) !== nextPosition)) {
    problems.push(`range ${firstPosition}..${nextPosition}, records ${records[0]!.position}..${records.at(-1)!.position}`);
  }
  if (chainDigest !== digestOf(records)) problems.push('chainDigest differs');
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(createdAt)) problems.push(`createdAt ${createdAt}`);
  const sig = c.signature;
  const key = isJsonObject(sig) ? keys.find((k) => k.kid === sig.kid) : undefined;
  const payload = payloadOf({ streamId, generation, firstPosition, nextPosition, recordCount, chainDigest, createdAt });
  if (!isJsonObject(sig) || sig.alg !== 'ES256' || typeof sig.value !== 'string' || !key || !verifyEs256(payload, sig.value, key))
    problems.push('signature does not verify');
  return problems;
}

/** The `data` of a STORAGE_FAILURE answer (code 5030). */
function storageFailure(resp: WireResponse): WireErrorData {
  expect(resp.result, jsonPreview(resp.result)).toBeUndefined();
  expect({ code: resp.error?.code, type: resp.error?.data?.type }).toEqual({ code: 5030, type: 'STORAGE_FAILURE' });
  return resp.error!.data!;
}

async function jwksOf(client: Wire): Promise<PublicJwk[]> {
  return ok(await client.call('keys.list', {})).keys;
}

describe('streams.checkpoint', () => {
  it('signs the retained range of a generation, a sub-range or an empty range, for a participant or the admin', async () => {
    const d = await start();
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    await chat.wa.send('one', 3);
    // Escapes and non-ASCII text: the digest is over the parsed values, re-encoded canonically.
    await chat.wa.append([{ type: 'chat.message', messageId: 'u-1', content: 'ünïcödé 🐙 "quoted"\n\\ and a line break' }]);
    const keys = await jwksOf(admin);
    const records = await readAll(chat.bob.client, chat.streamA);
    expect(records).toHaveLength(5);

    for (const client of [chat.alice.client, chat.bob.client, admin]) {
      const c = ok(await client.call('streams.checkpoint', { streamId: chat.streamA, generation: '1' }));
      expect(checkpointProblems(c, records, keys)).toEqual([]);
      expect(c).toMatchObject({
        streamId: chat.streamA,
        chatId: chat.chatId,
        authorAgentId: chat.alice.id,
        generation: '1',
        firstPosition: '0',
        nextPosition: '5',
        recordCount: '5',
      });
      expect(c.signature.kid).toBe(ok(await admin.call('daemon.status', {})).kid);
    }
    const sub = ok(
      await chat.bob.client.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', fromPosition: '1', nextPosition: '4' }),
    );
    expect(checkpointProblems(sub, records.slice(1, 4), keys)).toEqual([]);
    const empty = ok(await chat.bob.client.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', fromPosition: '5' }));
    expect(empty).toMatchObject({
      firstPosition: '5',
      nextPosition: '5',
      recordCount: '0',
      chainDigest: createHash('sha256').digest('base64url'),
    });
    expect(checkpointProblems(empty, [], keys)).toEqual([]);

    // The payload is what is signed: the same signature over another range does not verify.
    expect(checkpointProblems({ ...sub, nextPosition: '5', recordCount: '4' }, records.slice(1, 5), keys)).toContain(
      'signature does not verify',
    );
  });

  it('refuses what it cannot vouch for exactly: other readers, unknown streams and generations, ranges beyond the end or below a trim', async () => {
    const d = await start();
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    await chat.wa.send('m', 4); // positions 0 (fence) .. 4
    const stranger = await createAgent(admin, d.socketPath);
    expect(
      expectError(await stranger.client.call('streams.checkpoint', { streamId: chat.streamA, generation: '1' }), 'PERMISSION_DENIED')
        .reason,
    ).toBe('NOT_PARTICIPANT');
    const c = chat.bob.client;
    expect(
      expectError(await c.call('streams.checkpoint', { streamId: `${chat.chatId}:agt_nobody`, generation: '1' }), 'CONTINUITY_BREAK')
        .reason,
    ).toBe('STREAM_MISSING');
    expect(expectError(await c.call('streams.checkpoint', { streamId: chat.streamA, generation: '2' }), 'CONTINUITY_BREAK')).toMatchObject({
      reason: 'GENERATION_CHANGED',
      expected: '2',
      actual: '1',
    });
    expect(
      expectError(await c.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', nextPosition: '6' }), 'INVALID_PARAMS')
        .path,
    ).toBe('nextPosition');
    expect(
      expectError(
        await c.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', fromPosition: '3', nextPosition: '2' }),
        'INVALID_PARAMS',
      ).path,
    ).toBe('fromPosition');
    expect(expectError(await c.call('streams.checkpoint', { streamId: chat.streamA, generation: '01' }), 'INVALID_PARAMS').path).toBe(
      'generation',
    );
    expect(
      expectError(await c.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', chainDigest: 'x' }), 'INVALID_PARAMS').path,
    ).toBe('chainDigest');

    ok(await admin.call('streams.trim', { streamId: chat.streamA, beforePosition: '2', force: true }));
    expect(
      expectError(await c.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', fromPosition: '1' }), 'CONTINUITY_BREAK'),
    ).toMatchObject({ reason: 'PREFIX_UNAVAILABLE', expected: '1', actual: '2' });
    const keys = await jwksOf(admin);
    const retained = ok(await c.call('streams.checkpoint', { streamId: chat.streamA, generation: '1' }));
    expect(retained).toMatchObject({ firstPosition: '2', nextPosition: '5', recordCount: '3' });
    expect(checkpointProblems(retained, await readAll(c, chat.streamA), keys)).toEqual([]);
  });

  it('a sealed generation keeps its bounds after a reset; the new one starts empty', async () => {
    const d = await start();
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    await chat.wa.send('before', 2);
    const sealedRecords = await readAll(chat.bob.client, chat.streamA);
    ok(await admin.call('streams.reset', { streamId: chat.streamA, reason: 'test' }));
    const keys = await jwksOf(admin);
    const sealed = ok(await chat.bob.client.call('streams.checkpoint', { streamId: chat.streamA, generation: '1' }));
    expect(sealed).toMatchObject({ generation: '1', firstPosition: '0', nextPosition: '3' });
    expect(checkpointProblems(sealed, sealedRecords, keys)).toEqual([]);
    expect(ok(await chat.bob.client.call('streams.checkpoint', { streamId: chat.streamA, generation: '2' }))).toMatchObject({
      generation: '2',
      firstPosition: '0',
      nextPosition: '0',
      recordCount: '0',
    });
  });
});

describe('a corrupt stream', () => {
  it('is checkpointed only below its damage; chats export writes that part, reports the rest and exits 1; what it wrote verifies', async () => {
    const d = await start();
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    await chat.wa.append(messages('m', 5)); // A: 0 fence, 1..5 messages
    await chat.wb.send('reply'); //              B: 0 fence, 1 message
    await d.stop();
    await damageStoredRecord(d.dataDir, chat.streamA, 3); // position 3
    await d.restart();
    await reconnectChat(d, chat);

    const whole = await chat.bob.client.call('streams.checkpoint', { streamId: chat.streamA, generation: '1' });
    expect(storageFailure(whole)).toMatchObject({ reason: 'CORRUPT', streamId: chat.streamA, generation: '1', fromPosition: '3' });
    const below = ok(await chat.bob.client.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', nextPosition: '3' }));
    expect(below).toMatchObject({ firstPosition: '0', nextPosition: '3', recordCount: '3' });
    // The mark now stands: a range reaching it is refused before anything is read.
    expect(
      storageFailure(await chat.bob.client.call('streams.checkpoint', { streamId: chat.streamA, generation: '1', fromPosition: '4' }))
        .reason,
    ).toBe('CORRUPT');

    const cli = new Cli(d.socketPath, d.dataDir);
    const jwksFile = path.join(d.dir, 'jwks.json');
    const exportFile = path.join(d.dir, 'partial.jsonl');
    fs.writeFileSync(jwksFile, (await cli.ok(['keys', 'list', '--json'])).stdout);
    const exp = await cli.run(['chats', 'export', chat.chatId, '--out', exportFile]);
    expectExit(exp, 1);
    expect(exp.stderr).toContain(`${chat.streamA} generation 1 is exported only below position 3`);
    expect(exp.stderr).toMatch(/export is incomplete: 1 stream generation is damaged/);
    const lines: ExportLine[] = fs
      .readFileSync(exportFile, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as ExportLine);
    const ofA = lines.filter((l) => (l.checkpoint?.streamId ?? l.streamId) === chat.streamA);
    expect(ofA.filter((l) => l.wrapper).map((l) => l.position)).toEqual(['0', '1', '2']);
    expect(ofA.at(-1)!.checkpoint).toMatchObject({ firstPosition: '0', nextPosition: '3', recordCount: '3' });
    expect(lines.filter((l) => l.checkpoint?.streamId === chat.streamB)).toEqual([
      objectContaining({ checkpoint: objectContaining({ nextPosition: '2' }) }),
    ]);

    const v = await cli.run(['verify', exportFile, '--jwks', jwksFile, '--json']);
    expect(parseJson(expectExit(v, 0))).toMatchObject({ records: 5, checkpoints: 2, problems: [] });
  });
});
