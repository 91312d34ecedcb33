// streams.get / claim / release / append / read and operations.get / list (§4–§6) over the
// real socket. Every chat.message read back in this file is verified independently (§5).

import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MethodResults } from '../../src/shared/methods.js';
import type { StoredRecord } from '../../src/shared/types.js';
import {
  type Wire,
  claim,
  clientMessageIdFor,
  connectAs,
  createAgent,
  createPair,
  fetchKeys,
  listIn,
  messageProblems,
  ok,
  sha256b64url,
  uniq,
  type WireResponse,
  type TestPair,
  messageOf,
  receiptOf,
  fenceOf,
} from '../helpers/wire-fixtures.js';
import { sleep } from '../helpers/wait.js';
import { expectWellFormedErrors } from '../helpers/error-shapes.js';
import { useDaemon } from '../helpers/use-daemon.js';

const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DECIMAL = /^(0|[1-9][0-9]*)$/;
const MAX_APPEND = 262_144;
// vitest types its asymmetric matchers `any`; held as `unknown` they fit any expected shape.
const decimalString: unknown = expect.stringMatching(DECIMAL);
const rfc3339Ms: unknown = expect.stringMatching(RFC3339_MS);
const anyString: unknown = expect.any(String);

const { daemon, admin, restart } = useDaemon();

/** Every stored record read back in this file, with the messageId we sent when known. */
const readBack: { record: StoredRecord; messageId?: string }[] = [];
/** messageId by clientMessageId, for the final verification pass. */
const sentMessageIds = new Map<string, string>();

type Claim = MethodResults['streams.claim'];

type RecordIn =
  | { type: 'chat.message'; messageId: string; content: string }
  | { type: 'chat.receipt'; peerStreamId: string; peerGeneration: string; nextPosition: string; batchId: string };

function msg(messageId: string, content: string): RecordIn {
  return { type: 'chat.message', messageId, content };
}

function appendParams(c: Claim, expectedPosition: string, records: RecordIn[], operationId = uniq('op')): Record<string, unknown> {
  return {
    streamId: c.streamId,
    coordinatorToken: c.coordinatorToken,
    generation: c.generation,
    expectedPosition,
    operationId,
    records,
  };
}

function remember(chatId: string, fromAgentId: string, records: RecordIn[]): void {
  for (const r of records)
    if (r.type === 'chat.message') sentMessageIds.set(clientMessageIdFor(chatId, fromAgentId, r.messageId), r.messageId);
}

async function append(
  client: Wire,
  c: Claim,
  expectedPosition: string,
  records: RecordIn[],
  operationId?: string,
): Promise<WireResponse<MethodResults['streams.append']>> {
  const [chatId, author] = splitStreamId(c.streamId);
  remember(chatId, author, records);
  return client.call('streams.append', appendParams(c, expectedPosition, records, operationId));
}

function splitStreamId(streamId: string): [string, string] {
  const i = streamId.indexOf(':');
  return [streamId.slice(0, i), streamId.slice(i + 1)];
}

async function read(
  client: Wire,
  streamId: string,
  fromPosition = '0',
  extra: Record<string, unknown> = {},
): Promise<MethodResults['streams.read']> {
  const r = ok(await client.call('streams.read', { streamId, generation: '1', fromPosition, ...extra }), 'streams.read');
  for (const record of r.records) readBack.push({ record });
  return r;
}

async function state(streamId: string): Promise<{
  nextPosition: string;
  firstPosition: string;
  generation: string;
  writer: { epoch: string; active: boolean; claimedAt: string | null };
  acknowledged: unknown;
}> {
  return ok(await admin().call('streams.get', { streamId }), 'streams.get');
}

function expectError(r: WireResponse, code: number, type: string): void {
  expect(r.result, JSON.stringify(r)).toBeUndefined();
  expect(r.error?.code, JSON.stringify(r.error)).toBe(code);
  expect(r.error?.data?.type).toBe(type);
}

/**
 * The request digest of an append (§6.6: streamId, generation, expectedPosition and the records
 * as sent; not the token, not the operationId), computed here from what the test sent:
 * base64url(SHA-256) of the JSON array [streamId, generation, expectedPosition, records], each
 * message as ["m", messageId, content] and each receipt as ["r", peerStreamId, peerGeneration,
 * nextPosition, batchId]. Digests are stored with the operations, so this form cannot change
 * without making stored ones incomparable.
 */
function requestDigestOf(streamId: string, generation: string, expectedPosition: string, records: RecordIn[]): string {
  const tuples = records.map((r) =>
    r.type === 'chat.message' ? ['m', r.messageId, r.content] : ['r', r.peerStreamId, r.peerGeneration, r.nextPosition, r.batchId],
  );
  return sha256b64url(JSON.stringify([streamId, generation, expectedPosition, tuples]));
}

function inc(pos: string, by = 1): string {
  return (BigInt(pos) + BigInt(by)).toString();
}

describe('streams.get', () => {
  it('returns the StreamState shape to participants and admin', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    for (const c of [pair.a.client, pair.b.client, admin()]) {
      const s = ok(await c.call('streams.get', { streamId: pair.streamA }));
      expect(s).toMatchObject({
        streamId: pair.streamA,
        chatId: pair.chatId,
        authorAgentId: pair.a.id,
        generation: '1',
        firstPosition: '0',
        nextPosition: '0',
        acknowledged: null,
        writer: { active: false },
      });
      expect(s.writer.epoch).toMatch(DECIMAL);
    }
  });

  it('answers a missing stream with NOT_FOUND kind stream, and an outsider with PERMISSION_DENIED', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const outsider = await createAgent(admin(), daemon().socketPath);
    const missing = `${pair.chatId}:agt_MMMMMMMMMMMMMMMMMMMMMMMMMM`;
    const r = await admin().call('streams.get', { streamId: missing });
    expectError(r, 4004, 'NOT_FOUND');
    expect(r.error?.data).toMatchObject({ kind: 'stream', id: missing });
    expectError(await outsider.client.call('streams.get', { streamId: pair.streamA }), 4003, 'PERMISSION_DENIED');
  });
});

describe('streams.claim', () => {
  let pair: TestPair;
  beforeAll(async () => {
    pair = await createPair(admin(), daemon().socketPath);
  });

  it('claims a fresh stream and appends a writer-fence record that never holds the token', async () => {
    const c = await claim(pair.a.client, pair.streamA);
    expect(c).toMatchObject({
      streamId: pair.streamA,
      generation: '1',
      epoch: decimalString,
      nextPosition: decimalString,
    });
    expect(typeof c.coordinatorToken).toBe('string');
    expect(c.coordinatorToken.length).toBeGreaterThan(0);
    const s = await state(pair.streamA);
    expect(s.nextPosition).toBe(c.nextPosition);
    expect(s.writer).toMatchObject({ epoch: c.epoch, active: true, claimedAt: rfc3339Ms });
    expect(BigInt(c.nextPosition)).toBeGreaterThanOrEqual(1n);
    const r = await read(pair.b.client, pair.streamA, '0');
    const fence = r.records.at(-1)!;
    expect(fence.position).toBe(inc(c.nextPosition, -1));
    expect(fence.streamId).toBe(pair.streamA);
    expect(fence.generation).toBe('1');
    expect(fence.wrapper).toMatchObject({
      version: 2,
      chatId: pair.chatId,
      authorAgentId: pair.a.id,
      type: 'chat.writer-fence',
      recordIndex: 0,
    });
    expect(fenceOf(fence)).toMatchObject({ epoch: c.epoch, claimedAt: rfc3339Ms, replaced: false });
    expect(JSON.stringify(r)).not.toContain(c.coordinatorToken);
  });

  it('rejects a second claim without replace with WRITER_ACTIVE 4092, epoch and claimedAt', async () => {
    const s = await state(pair.streamA);
    const r = await pair.a.client.call('streams.claim', { streamId: pair.streamA });
    expectError(r, 4092, 'WRITER_ACTIVE');
    expect(r.error?.data).toMatchObject({ epoch: s.writer.epoch, claimedAt: s.writer.claimedAt });
    expect((await state(pair.streamA)).nextPosition).toBe(s.nextPosition);
  });

  it('replace:true takes over with a higher epoch; the old token is then FENCED 4090 with streamId and the current epoch', async () => {
    const before = await state(pair.streamA);
    const oldToken = await claim(pair.a.client, pair.streamA, true); // take over whatever is there
    const newer = await claim(pair.a.client, pair.streamA, true);
    expect(BigInt(newer.epoch)).toBeGreaterThan(BigInt(oldToken.epoch));
    expect(BigInt(oldToken.epoch)).toBeGreaterThan(BigInt(before.writer.epoch));
    const r = await append(pair.a.client, oldToken, newer.nextPosition, [msg(uniq('m'), 'from the stale writer')]);
    expectError(r, 4090, 'FENCED');
    expect(r.error?.data).toMatchObject({ streamId: pair.streamA, epoch: newer.epoch });
    expect((await state(pair.streamA)).nextPosition).toBe(newer.nextPosition);
    // The replacing claim wrote a fence with replaced:true and its reason.
    const last = (await read(admin(), pair.streamA, inc(newer.nextPosition, -1))).records[0]!;
    expect(last.wrapper.type).toBe('chat.writer-fence');
    expect(fenceOf(last)).toMatchObject({ epoch: newer.epoch, replaced: true });
    // The new token works.
    ok(await append(pair.a.client, newer, newer.nextPosition, [msg(uniq('m'), 'from the new writer')]));
  });

  it('records replaced:true only when a live coordinator was displaced, not whenever replace was asked', async () => {
    // Guards: the fence's `replaced` says "whether a live coordinator was replaced" (§5 writer
    // fence), i.e. it tells a reader of the stream that a takeover happened. `replace: true` on
    // a stream nobody holds (never claimed, or released) displaces nobody.
    const fresh = await createPair(admin(), daemon().socketPath);
    const fenceAt = async (nextPosition: string) => {
      const r = await read(admin(), fresh.streamA, inc(nextPosition, -1));
      return fenceOf(r.records[0]);
    };
    const first = await claim(fresh.a.client, fresh.streamA, true);
    expect(await fenceAt(first.nextPosition)).toMatchObject({ epoch: first.epoch, replaced: false, reason: 'test' });
    ok(await fresh.a.client.call('streams.release', { streamId: fresh.streamA, coordinatorToken: first.coordinatorToken }));
    const afterRelease = await claim(fresh.a.client, fresh.streamA, true);
    expect(await fenceAt(afterRelease.nextPosition)).toMatchObject({ epoch: afterRelease.epoch, replaced: false });
    // A real takeover: afterRelease's coordinator is live.
    const takeover = await claim(fresh.a.client, fresh.streamA, true);
    expect(await fenceAt(takeover.nextPosition)).toMatchObject({ epoch: takeover.epoch, replaced: true });
    // After the admin released it, nobody is displaced again.
    ok(await admin().call('streams.release', { streamId: fresh.streamA }));
    const afterAdminRelease = await claim(fresh.a.client, fresh.streamA, true);
    expect(await fenceAt(afterAdminRelease.nextPosition)).toMatchObject({ epoch: afterAdminRelease.epoch, replaced: false });
  });

  it('is author only: the peer gets PERMISSION_DENIED', async () => {
    expectError(await pair.b.client.call('streams.claim', { streamId: pair.streamA, replace: true }), 4003, 'PERMISSION_DENIED');
  });

  it('answers a missing stream with NOT_FOUND', async () => {
    const r = await pair.a.client.call('streams.claim', { streamId: `chat_NNNNNNNNNNNNNNNNNNNNNNNNNN:${pair.a.id}` });
    expect(r.error?.code).toBe(4004);
    expect(['stream', 'chat']).toContain(r.error?.data?.kind);
  });

  it('keeps tokens, fences, operations, messageIds and presented batches across a daemon restart', async () => {
    const fresh = await createPair(admin(), daemon().socketPath);
    const fenced = await claim(fresh.a.client, fresh.streamA);
    const c = await claim(fresh.a.client, fresh.streamA, true);
    const messageId = uniq('before-restart');
    const params = appendParams(c, c.nextPosition, [msg(messageId, 'before restart')]);
    remember(fresh.chatId, fresh.a.id, [msg(messageId, '')]);
    const committed = ok(await fresh.a.client.call('streams.append', params));
    const bClaim = await claim(fresh.b.client, fresh.streamB);
    const batch = await read(fresh.b.client, fresh.streamA, '0');

    await restart();
    const a = await connectAs(daemon().socketPath, fresh.a.token);
    const b = await connectAs(daemon().socketPath, fresh.b.token);
    try {
      // The current token still works; the fenced one is still fenced.
      expectError(await append(a, fenced, committed.nextPosition, [msg(uniq('m'), 'stale')]), 4090, 'FENCED');
      const r = await append(a, c, committed.nextPosition, [msg(uniq('m'), 'after restart')]);
      expect(r.error).toBeUndefined();
      expect(r.result!.firstPosition).toBe(committed.nextPosition);
      expectError(await a.call('streams.claim', { streamId: fresh.streamA }), 4092, 'WRITER_ACTIVE');
      // The committed operation replays as a duplicate; its messageId is still taken.
      const replay = ok(await a.call('streams.append', params));
      expect(replay.duplicate).toBe(true);
      expect(replay.records).toEqual(committed.records);
      const dup = await append(a, c, r.result!.nextPosition, [msg(messageId, 'again')]);
      expectError(dup, 4094, 'DUPLICATE_MESSAGE');
      expect(dup.error?.data?.position).toBe(committed.firstPosition);
      // A batch presented before the restart can still be acknowledged after it.
      const receipt = await append(b, bClaim, bClaim.nextPosition, [
        {
          type: 'chat.receipt',
          peerStreamId: fresh.streamA,
          peerGeneration: '1',
          nextPosition: batch.nextPosition,
          batchId: batch.batchId,
        },
      ]);
      expect(receipt.error, JSON.stringify(receipt.error)).toBeUndefined();
    } finally {
      a.close();
      b.close();
      // Clients of the earlier run are gone; reconnect the shared pair for later tests.
      pair.a.client = await connectAs(daemon().socketPath, pair.a.token);
      pair.b.client = await connectAs(daemon().socketPath, pair.b.token);
    }
  });

  it('two concurrent replacing claims: both get distinct epochs and only the later one stays current', async () => {
    const fresh = await createPair(admin(), daemon().socketPath);
    const second = await connectAs(daemon().socketPath, fresh.a.token);
    try {
      const [x, y] = await Promise.all([claim(fresh.a.client, fresh.streamA, true), claim(second, fresh.streamA, true)]);
      expect(x.epoch).not.toBe(y.epoch);
      const [older, newer] = BigInt(x.epoch) < BigInt(y.epoch) ? [x, y] : [y, x];
      const s = await state(fresh.streamA);
      expect(s.writer.epoch).toBe(newer.epoch);
      expectError(await append(fresh.a.client, older, s.nextPosition, [msg(uniq('m'), 'old')]), 4090, 'FENCED');
      ok(await append(fresh.a.client, newer, s.nextPosition, [msg(uniq('m'), 'new')]));
    } finally {
      second.close();
    }
  });
});

describe('streams.release', () => {
  it('frees the stream: the released token is FENCED and a claim without replace succeeds', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    ok(await pair.a.client.call('streams.release', { streamId: pair.streamA, coordinatorToken: c.coordinatorToken }));
    const s = await state(pair.streamA);
    expect(s.writer.active).toBe(false);
    const stale = await append(pair.a.client, c, s.nextPosition, [msg(uniq('m'), 'after release')]);
    expectError(stale, 4090, 'FENCED');
    expect(stale.error?.data?.streamId).toBe(pair.streamA);
    const next = await claim(pair.a.client, pair.streamA);
    expect(BigInt(next.epoch)).toBeGreaterThan(BigInt(c.epoch));
  });

  it('admin form {streamId} releases whoever holds the stream', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    ok(await admin().call('streams.release', { streamId: pair.streamA }));
    expect((await state(pair.streamA)).writer.active).toBe(false);
    expectError(await append(pair.a.client, c, (await state(pair.streamA)).nextPosition, [msg(uniq('m'), 'x')]), 4090, 'FENCED');
    await claim(pair.a.client, pair.streamA);
  });

  it('is author or admin only', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    const r = await pair.b.client.call('streams.release', { streamId: pair.streamA, coordinatorToken: c.coordinatorToken });
    expectError(r, 4003, 'PERMISSION_DENIED');
    expect((await state(pair.streamA)).writer.active).toBe(true);
  });
});

describe('streams.append', () => {
  // Each test gets its own chat, claim and position, so one failure cannot cascade into the
  // next test's expectedPosition and every test runs alone (`-t`).
  let pair: TestPair;
  let c: Claim;
  let next: string;

  beforeEach(async () => {
    pair = await createPair(admin(), daemon().socketPath);
    c = await claim(pair.a.client, pair.streamA);
    next = c.nextPosition;
  });

  it('commits several records atomically at consecutive positions and returns them', async () => {
    const opId = uniq('op');
    const records = [msg('multi-1', 'first of three'), msg('multi-2', 'ünïcødé ✓ 🚀\nline two\t"quoted" \\ backslash'), msg('multi-3', '')];
    const r = ok(await append(pair.a.client, c, next, records, opId));
    expect(r).toMatchObject({
      streamId: pair.streamA,
      generation: '1',
      operationId: opId,
      firstPosition: next,
      nextPosition: inc(next, 3),
      duplicate: false,
      redactions: [],
    });
    expect(r.records).toHaveLength(3);
    const keys = await fetchKeys(admin());
    r.records.forEach((rec, i) => {
      expect(rec.position).toBe(inc(next, i));
      expect(rec.wrapper.recordIndex).toBe(i);
      expect(rec.wrapper.operationId).toBe(opId);
      expect(messageProblems(messageOf(rec), keys, records[i]!.type === 'chat.message' ? records[i]!.messageId : undefined)).toEqual([]);
    });

    const back = await read(pair.b.client, pair.streamA, next);
    expect(back.records).toHaveLength(3);
    expect(back.records).toEqual(r.records);
    back.records.forEach((rec, i) => {
      const sent = records[i] as { messageId: string; content: string };
      expect(messageOf(rec)).toMatchObject({
        chatId: pair.chatId,
        fromAgentId: pair.a.id,
        toAgentId: pair.b.id,
        content: sent.content,
        contentSha256: sha256b64url(sent.content),
        clientMessageId: clientMessageIdFor(pair.chatId, pair.a.id, sent.messageId),
      });
    });
    next = r.nextPosition;
    expect((await state(pair.streamA)).nextPosition).toBe(next);
  });

  it('keeps signature timestamps non-decreasing within the stream', async () => {
    for (let i = 0; i < 3; i++) next = ok(await append(pair.a.client, c, next, [msg(uniq('t'), `tick ${i}`)])).nextPosition;
    const all = await read(admin(), pair.streamA, '0');
    const times = all.records.filter((r) => r.wrapper.type === 'chat.message').map((r) => messageOf(r).signature.createdAt);
    expect([...times].sort()).toEqual(times);
  });

  describe('size', () => {
    /** Builds a serialized append line of exactly `bytes` bytes (without the newline). */
    function lineOfSize(id: string, bytes: number, expectedPosition: string, operationId: string): string {
      const messageId = uniq('big');
      remember(pair.chatId, pair.a.id, [msg(messageId, '')]);
      const build = (content: string): string =>
        JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'streams.append',
          params: appendParams(c, expectedPosition, [msg(messageId, content)], operationId),
        });
      const base = Buffer.byteLength(build(''));
      const line = build('a'.repeat(bytes - base));
      expect(Buffer.byteLength(line)).toBe(bytes);
      return line;
    }

    it('rejects a request line over 262,144 bytes with REQUEST_TOO_LARGE 4013, limit and size, writing nothing', async () => {
      const opId = uniq('op-big');
      const before = await state(pair.streamA);
      const line = lineOfSize('big-1', MAX_APPEND + 1, next, opId);
      const r = await pair.a.client.callRaw('big-1', line + '\n');
      expectError(r, 4013, 'REQUEST_TOO_LARGE');
      expect(r.error?.data?.limit).toBe(MAX_APPEND);
      expect([MAX_APPEND + 1, MAX_APPEND + 2]).toContain(r.error?.data?.size);
      // No record, no operation, no change to the writer.
      expect(await state(pair.streamA)).toEqual(before);
      const op = ok(await pair.a.client.call('operations.get', { streamId: pair.streamA, operationId: opId }));
      expect(op.state).toBe('unknown');
      // The same coordinator token works for the next, smaller request at the same position.
      const small = ok(await append(pair.a.client, c, next, [msg(uniq('small'), 'after the oversize one')]));
      expect(small.firstPosition).toBe(next);
      next = small.nextPosition;
    });

    it('counts JSON escaping: content under the limit in characters but over it in escaped bytes is rejected', async () => {
      // Each U+0001 serializes as the 6-byte escape \u0001.
      const content = '\u0001'.repeat(50_000);
      const r = await append(pair.a.client, c, next, [msg(uniq('esc'), content)]);
      expectError(r, 4013, 'REQUEST_TOO_LARGE');
      expect(r.error?.data?.size).toBeGreaterThan(MAX_APPEND);
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });

    it('checks size before params: an oversize request with bad params is still REQUEST_TOO_LARGE', async () => {
      const line = lineOfSize('big-2', MAX_APPEND + 100, '01', uniq('op'));
      const r = await pair.a.client.callRaw('big-2', line + '\n');
      expectError(r, 4013, 'REQUEST_TOO_LARGE');
    });

    it('accepts a request line of exactly 262,144 bytes', async () => {
      const line = lineOfSize('big-3', MAX_APPEND, next, uniq('op-edge'));
      const r = await pair.a.client.callRaw<MethodResults['streams.append']>('big-3', line + '\n');
      expect(r.error, JSON.stringify(r.error)).toBeUndefined();
      expect(r.result!.firstPosition).toBe(next);
      next = r.result!.nextPosition;
    });
  });

  describe('params', () => {
    it('rejects a lone surrogate in content (sent as the JSON escape) with INVALID_PARAMS and a path', async () => {
      const id = 'surrogate';
      const params = appendParams(c, next, [msg(uniq('s'), 'PLACEHOLDER')]);
      const line = JSON.stringify({ jsonrpc: '2.0', id, method: 'streams.append', params }).replace('PLACEHOLDER', 'bad \\ud800 here');
      expect(line).toContain('\\ud800');
      const r = await pair.a.client.callRaw(id, line + '\n');
      expectError(r, -32602, 'INVALID_PARAMS');
      expect(JSON.stringify(r.error?.data?.path)).toContain('content');
      // A lone low surrogate too.
      const line2 = line.replace('\\ud800', '\\udc00').replace('"surrogate"', '"surrogate2"');
      const r2 = await pair.a.client.callRaw('surrogate2', line2 + '\n');
      expectError(r2, -32602, 'INVALID_PARAMS');
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });

    it('rejects raw invalid UTF-8 in content instead of silently replacing it', async () => {
      const id = 'bad-utf8';
      const params = appendParams(c, next, [msg(uniq('u'), 'PLACEHOLDER')]);
      const [head, tail] = JSON.stringify({ jsonrpc: '2.0', id, method: 'streams.append', params }).split('PLACEHOLDER') as [
        string,
        string,
      ];
      const line = Buffer.concat([Buffer.from(head + 'bad '), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from(' bytes' + tail + '\n')]);
      // Not registered as pending: whatever comes back (id null for a parse error, or the id)
      // lands among the orphans.
      pair.a.client.sendRaw(line);
      const r = await pair.a.client.nextOrphan();
      expect(r.result).toBeUndefined();
      expect([-32700, -32602]).toContain(r.error?.code);
      expect((await state(pair.streamA)).nextPosition).toBe(next);
      expect((await pair.a.client.call('daemon.status', {})).result).toBeDefined();
    });

    it('accepts a well-formed surrogate pair sent as JSON escapes', async () => {
      const id = 'pair-ok';
      const messageId = uniq('emoji');
      const params = appendParams(c, next, [msg(messageId, 'PLACEHOLDER')]);
      remember(pair.chatId, pair.a.id, [msg(messageId, '')]);
      const line = JSON.stringify({ jsonrpc: '2.0', id, method: 'streams.append', params }).replace('PLACEHOLDER', 'rocket \\ud83d\\ude80');
      const r = await pair.a.client.callRaw<MethodResults['streams.append']>(id, line + '\n');
      expect(r.error).toBeUndefined();
      const back = await read(pair.b.client, pair.streamA, next);
      expect(messageOf(back.records[0]).content).toBe('rocket 🚀');
      next = r.result!.nextPosition;
    });

    for (const [label, value] of [
      ['"01"', '01'],
      ['"-1"', '-1'],
      ['"1e3"', '1e3'],
      ['" 1"', ' 1'],
      ['""', ''],
      ['the number 0', 0],
      ['the number 1', 1],
      ['null', null],
    ] as const) {
      it(`rejects expectedPosition ${label} with INVALID_PARAMS path expectedPosition`, async () => {
        const r = await pair.a.client.call('streams.append', { ...appendParams(c, next, [msg(uniq('p'), 'x')]), expectedPosition: value });
        expectError(r, -32602, 'INVALID_PARAMS');
        expect(JSON.stringify(r.error?.data?.path)).toContain('expectedPosition');
      });
    }

    it('rejects a numeric or padded generation with INVALID_PARAMS', async () => {
      for (const generation of [1, '01']) {
        const r = await pair.a.client.call('streams.append', { ...appendParams(c, next, [msg(uniq('p'), 'x')]), generation });
        expectError(r, -32602, 'INVALID_PARAMS');
        expect(JSON.stringify(r.error?.data?.path)).toContain('generation');
      }
    });

    it('rejects empty, oversized and malformed record lists with INVALID_PARAMS', async () => {
      const cases: unknown[] = [
        [],
        Array.from({ length: 65 }, (_, i) => msg(`many-${i}`, 'x')),
        [{ type: 'chat.shout', messageId: 'x', content: 'x' }],
        [{ type: 'chat.message', content: 'no message id' }],
        [{ type: 'chat.message', messageId: 'x', content: 42 }],
        [{ type: 'chat.message', messageId: 'bad\nid', content: 'x' }],
        [{ type: 'chat.message', messageId: 'x'.repeat(257), content: 'x' }],
        [{ type: 'chat.writer-fence', fence: {} }],
      ];
      for (const records of cases) {
        const r = await pair.a.client.call('streams.append', { ...appendParams(c, next, []), records });
        expectError(r, -32602, 'INVALID_PARAMS');
        expect(r.error?.data?.path).toBeDefined();
      }
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });

    it('accepts 64 records in one operation', async () => {
      const records = Array.from({ length: 64 }, (_, i) => msg(uniq(`sixty-four-${i}`), `n${i}`));
      const r = ok(await append(pair.a.client, c, next, records));
      expect(r.nextPosition).toBe(inc(next, 64));
      next = r.nextPosition;
    });

    it('accepts message ids with .:@/ up to 256 characters', async () => {
      const ids = ['native:42', 'user@host/thread.7', 'm'.repeat(256)];
      const r = ok(
        await append(
          pair.a.client,
          c,
          next,
          ids.map((id) => msg(id, `id ${id.length}`)),
        ),
      );
      next = r.nextPosition;
    });

    it('rejects an operationId outside ^[A-Za-z0-9_-]{1,128}$', async () => {
      for (const operationId of ['op id', '', 'o'.repeat(129), 'op:1']) {
        const r = await pair.a.client.call('streams.append', appendParams(c, next, [msg(uniq('m'), 'x')], operationId));
        expectError(r, -32602, 'INVALID_PARAMS');
        expect(JSON.stringify(r.error?.data?.path)).toContain('operationId');
      }
    });
  });

  describe('operationId', () => {
    it('replays a committed operation: the same result with duplicate:true', async () => {
      const opId = uniq('op-replay');
      const params = appendParams(c, next, [msg(uniq('replay'), 'once only')], opId);
      const first = ok(await pair.a.client.call('streams.append', params));
      const second = ok(await pair.a.client.call('streams.append', params));
      expect(first.duplicate).toBe(false);
      expect(second.duplicate).toBe(true);
      expect({ ...second, duplicate: false }).toEqual(first);
      next = first.nextPosition;
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });

    it('replays committed operations sent at once, each as its own duplicate', async () => {
      // On PostgreSQL the lookups of the appends read in one turn are answered by one query;
      // each retry must find its own operation, not only the last one answered.
      const sent: Array<{ params: ReturnType<typeof appendParams>; first: MethodResults['streams.append'] }> = [];
      for (let i = 0; i < 4; i++) {
        const params = appendParams(c, next, [msg(uniq('burst'), `burst ${i}`)], uniq('op-burst'));
        const first = ok(await pair.a.client.call('streams.append', params));
        next = first.nextPosition;
        sent.push({ params, first });
      }
      const replays = await Promise.all(sent.map((s) => pair.a.client.call('streams.append', s.params)));
      replays.forEach((r, i) => {
        expect({ ...ok(r), i }).toEqual({ ...sent[i]!.first, duplicate: true, i });
      });
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });

    it('same operationId and messageId with different content is OPERATION_CONFLICT, not a duplicate of the first', async () => {
      // Guards: "the request digest covers the records as sent" (§6.6 step 7). A digest without
      // the content would replay the first result as duplicate:true, telling the sender its new
      // text was stored when it was not.
      const opId = uniq('op-content');
      const messageId = uniq('same-id');
      const at = next;
      const first = ok(await append(pair.a.client, c, at, [msg(messageId, 'the original text')], opId));
      expect(first.duplicate).toBe(false);
      const changed = await append(pair.a.client, c, at, [msg(messageId, 'a different text')], opId);
      expectError(changed, 4093, 'OPERATION_CONFLICT');
      expect(changed.error?.data?.operation).toBe(opId);
      // The same request as the first still replays.
      const replay = ok(await append(pair.a.client, c, at, [msg(messageId, 'the original text')], opId));
      expect(replay).toEqual({ ...first, duplicate: true });
      next = first.nextPosition;
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });

    it('lets an operationId whose append failed be used again', async () => {
      const opId = uniq('op-retry');
      const failed = await append(pair.a.client, c, inc(next, 1), [msg(uniq('m'), 'wrong place')], opId);
      expectError(failed, 4091, 'POSITION_MISMATCH');
      const retried = ok(await append(pair.a.client, c, next, [msg(uniq('m'), 'right place')], opId));
      expect(retried.duplicate).toBe(false);
      expect(retried.firstPosition).toBe(next);
      next = retried.nextPosition;
    });

    it('rejects the same operationId with a different request with OPERATION_CONFLICT 4093', async () => {
      const opId = uniq('op-conflict');
      const first = ok(await append(pair.a.client, c, next, [msg(uniq('c'), 'original')], opId));
      next = first.nextPosition;
      const r = await append(pair.a.client, c, next, [msg(uniq('c'), 'something else')], opId);
      expectError(r, 4093, 'OPERATION_CONFLICT');
      expect(r.error?.data?.operation).toBeDefined();
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });
  });

  describe('messageId', () => {
    it('rejects the same messageId in a new operation with DUPLICATE_MESSAGE 4094 and the original position', async () => {
      const messageId = uniq('dup');
      const first = ok(await append(pair.a.client, c, next, [msg(messageId, 'original')]));
      next = first.nextPosition;
      const r = await append(pair.a.client, c, next, [msg(messageId, 'original')]);
      expectError(r, 4094, 'DUPLICATE_MESSAGE');
      expect(r.error?.data?.position).toBe(first.firstPosition);
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });

    it('is atomic: a duplicate later in the request writes nothing and consumes no messageId', async () => {
      const taken = uniq('taken');
      const first = ok(await append(pair.a.client, c, next, [msg(taken, 'first')]));
      next = first.nextPosition;
      const fresh = uniq('fresh');
      const r = await append(pair.a.client, c, next, [msg(fresh, 'new one'), msg(taken, 'repeat')]);
      expectError(r, 4094, 'DUPLICATE_MESSAGE');
      expect(r.error?.data?.position).toBe(first.firstPosition);
      expect((await state(pair.streamA)).nextPosition).toBe(next);
      const later = ok(await append(pair.a.client, c, next, [msg(fresh, 'new one')]));
      next = later.nextPosition;
    });

    it('rejects the same messageId twice in one request with DUPLICATE_MESSAGE 4094 at the first one, writing nothing', async () => {
      // §6.6 step 12: unique in the request, answered DUPLICATE_MESSAGE with the position of the
      // earlier message (where it would have been written), whatever the contents.
      const twice = uniq('twice');
      const r = await append(pair.a.client, c, next, [msg(twice, 'one'), msg(twice, 'two')]);
      expectError(r, 4094, 'DUPLICATE_MESSAGE');
      expect(r.error?.data?.position).toBe(next);
      const apart = await append(pair.a.client, c, next, [
        msg(uniq('other'), 'x'),
        msg(twice, 'same'),
        msg(uniq('other'), 'y'),
        msg(twice, 'same'),
      ]);
      expectError(apart, 4094, 'DUPLICATE_MESSAGE');
      expect(apart.error?.data?.position).toBe(inc(next, 1));
      expect((await state(pair.streamA)).nextPosition).toBe(next);
      // Nothing was consumed: the messageId is still free.
      ok(await append(pair.a.client, c, next, [msg(twice, 'once')]));
    });

    it('scopes messageIds to the sender: the peer may use the same messageId', async () => {
      const messageId = uniq('shared-id');
      const first = ok(await append(pair.a.client, c, next, [msg(messageId, 'from a')]));
      next = first.nextPosition;
      const bClaim = await claim(pair.b.client, pair.streamB, true);
      const fromB = ok(await append(pair.b.client, bClaim, bClaim.nextPosition, [msg(messageId, 'from b')]));
      expect(messageOf(fromB.records[0]).clientMessageId).toBe(clientMessageIdFor(pair.chatId, pair.b.id, messageId));
      expect(messageOf(fromB.records[0]).clientMessageId).not.toBe(messageOf(first.records[0]).clientMessageId);
    });
  });

  describe('concurrency', () => {
    it('two concurrent appends at one expectedPosition: exactly one wins, the other POSITION_MISMATCH', async () => {
      const second = await connectAs(daemon().socketPath, pair.a.token);
      try {
        const [r1, r2] = await Promise.all([
          append(pair.a.client, c, next, [msg(uniq('race'), 'racer one')]),
          append(second, c, next, [msg(uniq('race'), 'racer two')]),
        ]);
        const wins = [r1, r2].filter((r) => r.result);
        const losses = [r1, r2].filter((r) => r.error);
        expect(wins).toHaveLength(1);
        expect(losses).toHaveLength(1);
        expectError(losses[0]!, 4091, 'POSITION_MISMATCH');
        expect(losses[0]!.error?.data).toMatchObject({ nextPosition: wins[0]!.result!.nextPosition, generation: '1' });
        next = wins[0]!.result!.nextPosition;
        expect((await state(pair.streamA)).nextPosition).toBe(next);
      } finally {
        second.close();
      }
    });

    it('eight concurrent appends at one expectedPosition on eight connections: exactly one wins', async () => {
      const clients = await Promise.all(Array.from({ length: 8 }, () => connectAs(daemon().socketPath, pair.a.token)));
      try {
        const results = await Promise.all(clients.map((cl, i) => append(cl, c, next, [msg(uniq(`race8-${i}`), `racer ${i}`)])));
        const wins = results.filter((r) => r.result);
        expect(wins).toHaveLength(1);
        for (const r of results.filter((x) => x.error)) {
          expectError(r, 4091, 'POSITION_MISMATCH');
          expect(r.error?.data?.nextPosition).toBe(wins[0]!.result!.nextPosition);
        }
        next = wins[0]!.result!.nextPosition;
        expect((await state(pair.streamA)).nextPosition).toBe(next);
      } finally {
        for (const cl of clients) cl.close();
      }
    });

    it('answers a stale expectedPosition with POSITION_MISMATCH naming nextPosition and generation', async () => {
      const r = await append(pair.a.client, c, inc(next, -1), [msg(uniq('m'), 'late')]);
      expectError(r, 4091, 'POSITION_MISMATCH');
      expect(r.error?.data).toMatchObject({ nextPosition: next, generation: '1' });
      const ahead = await append(pair.a.client, c, inc(next, 5), [msg(uniq('m'), 'early')]);
      expectError(ahead, 4091, 'POSITION_MISMATCH');
      const wrongGen = await pair.a.client.call('streams.append', { ...appendParams(c, next, [msg(uniq('m'), 'x')]), generation: '2' });
      expectError(wrongGen, 4091, 'POSITION_MISMATCH');
      expect(wrongGen.error?.data).toMatchObject({ nextPosition: next, generation: '1' });
    });
  });

  describe('receipts', () => {
    beforeEach(async () => {
      // Something for bob to read and acknowledge: alice's fence and five messages.
      next = ok(
        await append(
          pair.a.client,
          c,
          next,
          [1, 2, 3, 4, 5].map((i) => msg(uniq('to-ack'), `to acknowledge ${i}`)),
        ),
      ).nextPosition;
    });

    it('accepts a receipt for a batch presented to the peer and records it as acknowledged', async () => {
      const bClaim = await claim(pair.b.client, pair.streamB, true);
      const batch = await read(pair.b.client, pair.streamA, '0', { limit: 3 });
      expect(batch.records).toHaveLength(3);
      const receipt: RecordIn = {
        type: 'chat.receipt',
        peerStreamId: pair.streamA,
        peerGeneration: '1',
        nextPosition: batch.nextPosition,
        batchId: batch.batchId,
      };
      const messageId = uniq('reply');
      const r = ok(await append(pair.b.client, bClaim, bClaim.nextPosition, [msg(messageId, 'got it'), receipt]));
      expect(r.records).toHaveLength(2);
      expect(r.records[1]!.wrapper.type).toBe('chat.receipt');
      expect(receiptOf(r.records[1])).toEqual({
        peerStreamId: pair.streamA,
        peerGeneration: '1',
        nextPosition: batch.nextPosition,
        batchId: batch.batchId,
      });
      const s = await state(pair.streamA);
      expect(s.acknowledged).toEqual({ generation: '1', nextPosition: batch.nextPosition });

      // The same receipt again does not go forward.
      const again = await append(pair.b.client, bClaim, r.nextPosition, [receipt]);
      expectError(again, 4095, 'INVALID_RECEIPT');
      expect(again.error?.data?.reason).toBe('NOT_FORWARD');

      // A later batch moves the acknowledgement forward.
      const later = await read(pair.b.client, pair.streamA, batch.nextPosition, { limit: 2 });
      ok(await append(pair.b.client, bClaim, r.nextPosition, [{ ...receipt, nextPosition: later.nextPosition, batchId: later.batchId }]));
      expect((await state(pair.streamA)).acknowledged).toEqual({ generation: '1', nextPosition: later.nextPosition });
    });

    it('rejects a garbage batchId with INVALID_RECEIPT 4095 and a reason, writing nothing', async () => {
      const bState = await state(pair.streamB);
      const bClaim = await claim(pair.b.client, pair.streamB, true);
      const r = await append(pair.b.client, bClaim, bClaim.nextPosition, [
        msg(uniq('m'), 'with a forged receipt'),
        { type: 'chat.receipt', peerStreamId: pair.streamA, peerGeneration: '1', nextPosition: next, batchId: 'garbage-batch-id' },
      ]);
      expectError(r, 4095, 'INVALID_RECEIPT');
      expect(r.error?.data?.reason).toBe('UNKNOWN_BATCH');
      expect((await state(pair.streamB)).nextPosition).toBe(bClaim.nextPosition);
      expect(BigInt(bClaim.nextPosition)).toBeGreaterThan(BigInt(bState.nextPosition));
    });

    it('rejects a receipt whose nextPosition is not the end of the presented batch', async () => {
      const bClaim = await claim(pair.b.client, pair.streamB, true);
      const batch = await read(pair.b.client, pair.streamA, '2', { limit: 2 });
      const r = await append(pair.b.client, bClaim, bClaim.nextPosition, [
        {
          type: 'chat.receipt',
          peerStreamId: pair.streamA,
          peerGeneration: '1',
          nextPosition: inc(batch.nextPosition, -1),
          batchId: batch.batchId,
        },
      ]);
      expectError(r, 4095, 'INVALID_RECEIPT');
      expect(r.error?.data?.reason).toBe('BATCH_MISMATCH');
      expect((await state(pair.streamA)).acknowledged).toBeNull();
    });

    it('rejects a batch that was presented to someone else', async () => {
      const bClaim = await claim(pair.b.client, pair.streamB, true);
      const adminBatch = await read(admin(), pair.streamA, '1', { limit: 1 });
      const r = await append(pair.b.client, bClaim, bClaim.nextPosition, [
        {
          type: 'chat.receipt',
          peerStreamId: pair.streamA,
          peerGeneration: '1',
          nextPosition: adminBatch.nextPosition,
          batchId: adminBatch.batchId,
        },
      ]);
      expectError(r, 4095, 'INVALID_RECEIPT');
      expect(r.error?.data?.reason).toBe('NOT_PRESENTED');
      expect((await state(pair.streamA)).acknowledged).toBeNull();
    });
  });

  describe('permissions', () => {
    it("rejects a non-author with PERMISSION_DENIED, even with the author's token", async () => {
      const r = await pair.b.client.call('streams.append', appendParams(c, next, [msg(uniq('m'), 'not mine')]));
      expectError(r, 4003, 'PERMISSION_DENIED');
      expect(r.error?.data?.reason).toBeDefined();
      expect((await state(pair.streamA)).nextPosition).toBe(next);
    });

    it('rejects an append without a grant with PERMISSION_DENIED', async () => {
      const p = await createPair(admin(), daemon().socketPath, { grants: 'a-to-b' });
      const bc = await claim(p.b.client, p.streamB);
      const r = await append(p.b.client, bc, bc.nextPosition, [msg(uniq('m'), 'no grant')]);
      expectError(r, 4003, 'PERMISSION_DENIED');
    });

    it('rejects admin, who is not the author, with PERMISSION_DENIED', async () => {
      const r = await admin().call('streams.append', appendParams(c, next, [msg(uniq('m'), 'admin')]));
      expectError(r, 4003, 'PERMISSION_DENIED');
    });
  });

  describe('PII policy', () => {
    it('redacts by default: redactions in the result and [REDACTED: in the signed content', async () => {
      const records = [msg(uniq('clean'), 'nothing to see'), msg(uniq('pii'), 'write to alice.smith@example.com please')];
      const r = ok(await append(pair.a.client, c, next, records));
      expect(r.redactions).toEqual([{ recordIndex: 1, kind: anyString, count: 1 }]);
      const back = await read(pair.b.client, pair.streamA, next);
      const content = messageOf(back.records[1]).content;
      expect(content).toContain('[REDACTED:');
      expect(content).not.toContain('alice.smith@example.com');
      expect(content.startsWith('write to ')).toBe(true);
      expect(messageOf(back.records[0]).content).toBe('nothing to see');
      expect(
        messageProblems(
          messageOf(back.records[1]),
          await fetchKeys(admin()),
          records[1]!.type === 'chat.message' ? records[1]!.messageId : '',
        ),
      ).toEqual([]);
      next = r.nextPosition;
    });

    it('counts every match of a kind in one record', async () => {
      const r = ok(await append(pair.a.client, c, next, [msg(uniq('pii2'), 'cc erin@example.com and frank@example.com')]));
      expect(r.redactions).toEqual([{ recordIndex: 0, kind: anyString, count: 2 }]);
      const content = messageOf(r.records[0]).content;
      expect(content.match(/\[REDACTED:[A-Z_]+\]/g)).toHaveLength(2);
      expect(content).not.toContain('@example.com');
      next = r.nextPosition;
    });

    it('rejects with POLICY_REJECTED 4220 and kinds when the policy is reject, writing nothing', async () => {
      ok(await admin().call('agents.setPolicy', { agentId: pair.a.id, pii: 'reject' }));
      try {
        const r = await append(pair.a.client, c, next, [msg(uniq('m'), 'fine'), msg(uniq('m'), 'mail bob@example.org')]);
        expectError(r, 4220, 'POLICY_REJECTED');
        expect(Array.isArray(r.error?.data?.kinds)).toBe(true);
        expect((r.error?.data?.kinds as unknown[]).length).toBeGreaterThan(0);
        expect((await state(pair.streamA)).nextPosition).toBe(next);
        expect(JSON.stringify(r.error)).not.toContain('bob@example.org');
      } finally {
        ok(await admin().call('agents.setPolicy', { agentId: pair.a.id, pii: 'redact' }));
      }
    });

    it('stores content untouched when the policy is off', async () => {
      ok(await admin().call('agents.setPolicy', { agentId: pair.a.id, pii: 'off' }));
      try {
        const r = ok(await append(pair.a.client, c, next, [msg(uniq('m'), 'carol@example.net')]));
        expect(r.redactions).toEqual([]);
        const back = await read(pair.b.client, pair.streamA, next);
        expect(messageOf(back.records[0]).content).toBe('carol@example.net');
        next = r.nextPosition;
      } finally {
        ok(await admin().call('agents.setPolicy', { agentId: pair.a.id, pii: 'redact' }));
      }
    });
  });

  describe('check order (§6: size; params; author; stream; operationId; token; position; grant; receipts; duplicate; PII)', () => {
    let p: TestPair;
    let pc: Claim;
    let pnext: string;
    beforeEach(async () => {
      p = await createPair(admin(), daemon().socketPath);
      pc = await claim(p.a.client, p.streamA);
      pnext = pc.nextPosition;
    });

    it('params before author: the peer with a bad position gets INVALID_PARAMS', async () => {
      const r = await p.b.client.call('streams.append', appendParams(pc, '01', [msg(uniq('m'), 'x')]));
      expectError(r, -32602, 'INVALID_PARAMS');
    });

    it('author before stream: a non-author naming a missing stream gets PERMISSION_DENIED', async () => {
      const missing = `chat_XXXXXXXXXXXXXXXXXXXXXXXXXX:${p.a.id}`;
      const r = await p.b.client.call('streams.append', { ...appendParams(pc, pnext, [msg(uniq('m'), 'x')]), streamId: missing });
      expectError(r, 4003, 'PERMISSION_DENIED');
    });

    it('stream: the author naming a missing stream gets NOT_FOUND kind stream', async () => {
      const missing = `chat_XXXXXXXXXXXXXXXXXXXXXXXXXX:${p.a.id}`;
      const r = await p.a.client.call('streams.append', { ...appendParams(pc, pnext, [msg(uniq('m'), 'x')]), streamId: missing });
      expectError(r, 4004, 'NOT_FOUND');
      expect(r.error?.data).toMatchObject({ kind: 'stream', id: missing });
    });

    it('operationId before token: replaying a committed operation with a since-fenced token still answers duplicate:true', async () => {
      const opId = uniq('op-before-fence');
      const params = appendParams(pc, pnext, [msg(uniq('m'), 'committed before the takeover')], opId);
      const first = ok(await p.a.client.call('streams.append', params));
      const taken = await claim(p.a.client, p.streamA, true);
      const replay = ok(await p.a.client.call('streams.append', params));
      expect(replay.duplicate).toBe(true);
      expect(replay.firstPosition).toBe(first.firstPosition);
      expect(replay.records).toEqual(first.records);
      // And a conflicting request with that operationId is OPERATION_CONFLICT, not FENCED.
      const conflict = await p.a.client.call('streams.append', { ...params, records: [msg(uniq('m'), 'different')] });
      expectError(conflict, 4093, 'OPERATION_CONFLICT');
      pc = taken;
      pnext = taken.nextPosition;
    });

    it('token before position: a stale token at a wrong position is FENCED', async () => {
      const stale = { ...pc, coordinatorToken: 'stale-token-that-never-was' };
      const r = await append(p.a.client, stale, inc(pnext, 7), [msg(uniq('m'), 'x')]);
      expectError(r, 4090, 'FENCED');
      expect(r.error?.data).toMatchObject({ streamId: p.streamA, epoch: pc.epoch });
    });

    it('position before grant, grant before receipts', async () => {
      ok(await admin().call('grants.remove', { agentId: p.a.id, peerAgentId: p.b.id }));
      try {
        const wrongPos = await append(p.a.client, pc, inc(pnext, 3), [msg(uniq('m'), 'x')]);
        expectError(wrongPos, 4091, 'POSITION_MISMATCH');
        const badReceipt = await append(p.a.client, pc, pnext, [
          { type: 'chat.receipt', peerStreamId: p.streamB, peerGeneration: '1', nextPosition: '1', batchId: 'nonsense' },
        ]);
        expectError(badReceipt, 4003, 'PERMISSION_DENIED');
      } finally {
        ok(await admin().call('grants.add', { agentId: p.a.id, peerAgentId: p.b.id }));
      }
    });

    it('receipts before duplicate messageId, duplicate messageId before PII policy', async () => {
      const messageId = uniq('dup-order');
      const first = ok(await append(p.a.client, pc, pnext, [msg(messageId, 'plain')]));
      pnext = first.nextPosition;
      const r = await append(p.a.client, pc, pnext, [
        msg(messageId, 'plain'),
        { type: 'chat.receipt', peerStreamId: p.streamB, peerGeneration: '1', nextPosition: '1', batchId: 'nonsense' },
      ]);
      expectError(r, 4095, 'INVALID_RECEIPT');
      expect(r.error?.data?.reason).toBe('UNKNOWN_BATCH');
      ok(await admin().call('agents.setPolicy', { agentId: p.a.id, pii: 'reject' }));
      try {
        const dup = await append(p.a.client, pc, pnext, [msg(messageId, 'now with dave@example.com')]);
        expectError(dup, 4094, 'DUPLICATE_MESSAGE');
        expect(dup.error?.data?.position).toBe(first.firstPosition);
      } finally {
        ok(await admin().call('agents.setPolicy', { agentId: p.a.id, pii: 'redact' }));
      }
      expect((await state(p.streamA)).nextPosition).toBe(pnext);
    });
  });
});

describe('streams.read', () => {
  let pair: TestPair;
  let c: Claim;
  let end: string;
  beforeAll(async () => {
    pair = await createPair(admin(), daemon().socketPath);
    c = await claim(pair.a.client, pair.streamA);
    const r = ok(await append(pair.a.client, c, c.nextPosition, [msg('r1', 'one'), msg('r2', 'two'), msg('r3', 'three')]));
    end = r.nextPosition;
  });

  it('returns records, a batchId and sealed:false to the author, the peer and admin', async () => {
    for (const client of [pair.a.client, pair.b.client, admin()]) {
      const r = await read(client, pair.streamA, '0');
      expect(r).toMatchObject({ streamId: pair.streamA, generation: '1', fromPosition: '0', nextPosition: end, sealed: false });
      expect(typeof r.batchId).toBe('string');
      expect(r.records.map((x: { position: string }) => x.position)).toEqual(Array.from({ length: Number(end) }, (_, i) => String(i)));
    }
  });

  it('honours limit and returns at least one record past maxBytes', async () => {
    const one = await read(pair.b.client, pair.streamA, '0', { limit: 1 });
    expect(one.records).toHaveLength(1);
    expect(one.nextPosition).toBe('1');
    // "stopping after the record that reaches maxBytes" (§6): with 1 byte that is the first one.
    const tiny = await read(pair.b.client, pair.streamA, '1', { maxBytes: 1 });
    expect(tiny.records).toHaveLength(1);
    expect(tiny.nextPosition).toBe(inc('1', 1));
    const all = await read(pair.b.client, pair.streamA, '1', {});
    expect(all.records.length).toBeGreaterThan(1); // so the 1-byte page did stop early
  });

  it('returns at most 1000 records by default', async () => {
    const p = await createPair(admin(), daemon().socketPath);
    const pc = await claim(p.a.client, p.streamA);
    let pos = pc.nextPosition;
    for (let i = 0; i < 17; i++) {
      pos = ok(
        await append(
          p.a.client,
          pc,
          pos,
          Array.from({ length: 64 }, (_, j) => msg(`bulk-${i}-${j}`, `b${i}.${j}`)),
        ),
      ).nextPosition;
    }
    const r = await read(p.b.client, p.streamA, '0');
    expect(r.records).toHaveLength(1000);
    expect(r.nextPosition).toBe('1000');
    const rest = await read(p.b.client, p.streamA, r.nextPosition);
    expect(rest.nextPosition).toBe(pos);
  });

  it('returns no records at nextPosition, and INVALID_PARAMS above it', async () => {
    const at = await read(pair.b.client, pair.streamA, end);
    expect(at.records).toEqual([]);
    expect(at.nextPosition).toBe(end);
    const above = await pair.b.client.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: inc(end) });
    expectError(above, -32602, 'INVALID_PARAMS');
  });

  it('rejects bad numbers with INVALID_PARAMS', async () => {
    for (const extra of [
      { fromPosition: '01' },
      { fromPosition: 0 },
      { generation: 1 },
      { limit: 1001 },
      { waitMs: 30_001 },
      { maxBytes: 1024 * 1024 + 1 },
    ]) {
      const r = await pair.b.client.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: '0', ...extra });
      expectError(r, -32602, 'INVALID_PARAMS');
    }
  });

  it('answers a wrong generation with CONTINUITY_BREAK 4100 GENERATION_CHANGED', async () => {
    const r = await pair.b.client.call('streams.read', { streamId: pair.streamA, generation: '2', fromPosition: '0' });
    expectError(r, 4100, 'CONTINUITY_BREAK');
    expect(r.error?.data).toMatchObject({ reason: 'GENERATION_CHANGED', streamId: pair.streamA });
    expect(r.error?.data?.expected).toBeDefined();
    expect(r.error?.data?.actual).toBeDefined();
  });

  it('answers a missing stream with CONTINUITY_BREAK STREAM_MISSING', async () => {
    const missing = `${pair.chatId}:agt_WWWWWWWWWWWWWWWWWWWWWWWWWW`;
    const r = await admin().call('streams.read', { streamId: missing, generation: '1', fromPosition: '0' });
    expectError(r, 4100, 'CONTINUITY_BREAK');
    expect(r.error?.data).toMatchObject({ reason: 'STREAM_MISSING', streamId: missing });
  });

  it('answers fromPosition below firstPosition (after a trim) with CONTINUITY_BREAK PREFIX_UNAVAILABLE', async () => {
    const p = await createPair(admin(), daemon().socketPath);
    const pc = await claim(p.a.client, p.streamA);
    const r = ok(await append(p.a.client, pc, pc.nextPosition, [msg('t1', 'one'), msg('t2', 'two')]));
    const trimmed = ok(await admin().call('streams.trim', { streamId: p.streamA, beforePosition: inc(r.nextPosition, -1), force: true }));
    expect(trimmed.firstPosition).toBe(inc(r.nextPosition, -1));
    const below = await p.b.client.call('streams.read', { streamId: p.streamA, generation: '1', fromPosition: '0' });
    expectError(below, 4100, 'CONTINUITY_BREAK');
    expect(below.error?.data).toMatchObject({ reason: 'PREFIX_UNAVAILABLE', streamId: p.streamA });
    const rest = await read(p.b.client, p.streamA, trimmed.firstPosition);
    expect(rest.records).toHaveLength(1);
  });

  it('is for participants and admin only', async () => {
    const outsider = await createAgent(admin(), daemon().socketPath);
    const r = await outsider.client.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: '0' });
    expectError(r, 4003, 'PERMISSION_DENIED');
  });

  it('long-polls with waitMs until a record arrives', async () => {
    const started = Date.now();
    const pending = pair.b.client.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: end, waitMs: 10_000 });
    await sleep(300); // the long poll is held open 300 ms before the append wakes it
    const r = ok(await append(pair.a.client, c, end, [msg('r4', 'four')]));
    const got = ok(await pending);
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(got.records).toHaveLength(1);
    expect(got.records[0]!.position).toBe(end);
    expect(messageOf(got.records[0]).content).toBe('four');
    readBack.push({ record: got.records[0]! });
    end = r.nextPosition;
  });

  it('returns empty after waitMs when nothing arrives', async () => {
    const started = Date.now();
    const r = await read(pair.b.client, pair.streamA, end, { waitMs: 300 });
    expect(r.records).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });
});

describe('operations.get', () => {
  let pair: TestPair;
  let c: Claim;
  beforeAll(async () => {
    pair = await createPair(admin(), daemon().socketPath);
    c = await claim(pair.a.client, pair.streamA);
  });

  it('reports a committed operation with its positions, time and the digest of what was sent', async () => {
    const opId = uniq('op-get');
    const records = [msg(uniq('m'), 'a'), msg(uniq('m'), 'b ünïcødé')];
    const r = ok(await append(pair.a.client, c, c.nextPosition, records, opId));
    const digest = requestDigestOf(pair.streamA, '1', c.nextPosition, records);
    for (const client of [pair.a.client, admin()]) {
      const op = ok(await client.call('operations.get', { streamId: pair.streamA, operationId: opId }));
      expect(op).toEqual({
        operationId: opId,
        state: 'committed',
        generation: '1',
        firstPosition: r.firstPosition,
        nextPosition: r.nextPosition,
        committedAt: rfc3339Ms,
        requestDigest: digest,
      });
    }
    // operations.list reports the same digest, and another request another one.
    const listed = listIn(ok(await admin().call('operations.list', { streamId: pair.streamA })), 'operations') as {
      operationId: string;
      requestDigest: string;
    }[];
    expect(listed.find((o) => o.operationId === opId)?.requestDigest).toBe(digest);
    const other = uniq('op-get-other');
    const otherRecords = [msg(uniq('m'), 'a')];
    ok(await append(pair.a.client, c, r.nextPosition, otherRecords, other));
    const otherOp = ok(await admin().call('operations.get', { streamId: pair.streamA, operationId: other }));
    expect(otherOp.requestDigest).toBe(requestDigestOf(pair.streamA, '1', r.nextPosition, otherRecords));
    expect(otherOp.requestDigest).not.toBe(digest);
  });

  it("digests a receipt's fields too", async () => {
    const p = await createPair(admin(), daemon().socketPath);
    const ac = await claim(p.a.client, p.streamA);
    ok(await append(p.a.client, ac, ac.nextPosition, [msg(uniq('m'), 'to be acknowledged')]));
    const bc = await claim(p.b.client, p.streamB);
    const batch = await read(p.b.client, p.streamA, '0');
    const opId = uniq('op-receipt');
    const records: RecordIn[] = [
      msg(uniq('m'), 'thanks'),
      { type: 'chat.receipt', peerStreamId: p.streamA, peerGeneration: '1', nextPosition: batch.nextPosition, batchId: batch.batchId },
    ];
    ok(await append(p.b.client, bc, bc.nextPosition, records, opId));
    const op = ok(await p.a.client.call('operations.get', { streamId: p.streamB, operationId: opId }));
    expect(op.requestDigest).toBe(requestDigestOf(p.streamB, '1', bc.nextPosition, records));
  });

  it('reports unknown for an operationId that never committed', async () => {
    const op = ok(await pair.a.client.call('operations.get', { streamId: pair.streamA, operationId: uniq('never') }));
    expect(op.state).toBe('unknown');
    // A failed append does not make it known.
    const failedId = uniq('op-failed');
    const s = await state(pair.streamA);
    expectError(await append(pair.a.client, c, inc(s.nextPosition, 9), [msg(uniq('m'), 'x')], failedId), 4091, 'POSITION_MISMATCH');
    expect(ok(await pair.a.client.call('operations.get', { streamId: pair.streamA, operationId: failedId })).state).toBe('unknown');
  });

  it('never answers unknown for an append it has read and not yet settled (both sent at once)', async () => {
    // "unknown" means "never committed": a client acts on it (sends again, moves on). An append
    // still being decided when operations.get arrives is pending, on either backend (on
    // PostgreSQL the append first fetches what it needs to decide, and operations.get answered
    // "unknown" in that wait, then the append committed; coordinator-recovery.test.ts saw it).
    for (let i = 0; i < 5; i++) {
      const s = await state(pair.streamA);
      const opId = uniq('op-inflight');
      const appending = append(pair.a.client, c, s.nextPosition, [msg(uniq('m'), `in flight ${i}`)], opId);
      const asked = pair.a.client.call('operations.get', { streamId: pair.streamA, operationId: opId });
      const [r, op] = await Promise.all([appending, asked]);
      ok(r);
      expect(['pending', 'committed']).toContain(ok(op).state);
      expect(ok(await pair.a.client.call('operations.get', { streamId: pair.streamA, operationId: opId })).state).toBe('committed');
    }
  });

  it('answers NOT_FOUND only for a missing stream', async () => {
    const missing = `${pair.chatId}:agt_VVVVVVVVVVVVVVVVVVVVVVVVVV`;
    const r = await admin().call('operations.get', { streamId: missing, operationId: 'whatever' });
    expectError(r, 4004, 'NOT_FOUND');
    expect(r.error?.data).toMatchObject({ kind: 'stream', id: missing });
  });

  it('rejects a malformed operationId with INVALID_PARAMS', async () => {
    expectError(await admin().call('operations.get', { streamId: pair.streamA, operationId: 'not ok' }), -32602, 'INVALID_PARAMS');
  });
});

describe('operations.list', () => {
  it("lists the stream's committed operations, paging with a cursor", async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    let pos = c.nextPosition;
    const opIds: string[] = [];
    for (let i = 0; i < 4; i++) {
      const opId = uniq(`op-list-${i}`);
      pos = ok(await append(pair.a.client, c, pos, [msg(uniq('m'), `n${i}`)], opId)).nextPosition;
      opIds.push(opId);
    }
    const all = ok(await admin().call('operations.list', { streamId: pair.streamA }));
    const listed = listIn(all, 'operations') as { operationId: string }[];
    for (const id of opIds) expect(listed.map((o) => o.operationId)).toContain(id);

    const paged: string[] = [];
    let cursor: string | null | undefined;
    for (let i = 0; i < 20; i++) {
      const page = ok(
        await pair.a.client.call(
          'operations.list',
          cursor ? { streamId: pair.streamA, cursor, limit: 1 } : { streamId: pair.streamA, limit: 1 },
        ),
      );
      const ops = listIn(page, 'operations') as { operationId: string }[];
      expect(ops.length).toBeLessThanOrEqual(1);
      paged.push(...ops.map((o) => o.operationId));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    for (const id of opIds) expect(paged).toContain(id);
    expect(new Set(paged).size).toBe(paged.length);
  });

  it('answers a missing stream with NOT_FOUND and an outsider with PERMISSION_DENIED', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const outsider = await createAgent(admin(), daemon().socketPath);
    expectError(await admin().call('operations.list', { streamId: `${pair.chatId}:agt_UUUUUUUUUUUUUUUUUUUUUUUUUU` }), 4004, 'NOT_FOUND');
    expectError(await outsider.client.call('operations.list', { streamId: pair.streamA }), 4003, 'PERMISSION_DENIED');
  });
});

describe('signatures', () => {
  it('every chat.message read back in this file verifies against keys.list', async () => {
    // Messages of its own first, so the check runs on something when this test runs alone.
    const own = await createPair(admin(), daemon().socketPath);
    const oc = await claim(own.a.client, own.streamA);
    ok(await append(own.a.client, oc, oc.nextPosition, [msg(uniq('sig'), 'one'), msg(uniq('sig'), 'two ✓'), msg(uniq('sig'), '')]));
    await read(own.b.client, own.streamA, '0');
    const keys = await fetchKeys(admin());
    const messages = readBack.filter((x) => x.record.wrapper.type === 'chat.message');
    expect(messages.filter((x) => x.record.streamId === own.streamA)).toHaveLength(3);
    for (const { record } of messages) {
      const m = messageOf(record);
      const messageId = sentMessageIds.get(m.clientMessageId);
      expect(messageId, `unknown clientMessageId ${m.clientMessageId}`).toBeDefined();
      expect(messageProblems(m, keys, messageId), `${record.streamId}@${record.position}`).toEqual([]);
      expect(record.streamId).toBe(`${m.chatId}:${m.fromAgentId}`);
      expect(record.wrapper.chatId).toBe(m.chatId);
      expect(record.wrapper.authorAgentId).toBe(m.fromAgentId);
      expect(record.wrapper.version).toBe(2);
      expect(record.position).toMatch(DECIMAL);
      expect(record.generation).toBe('1');
    }
  });
});

describe('error responses', () => {
  it('never use code 0 and never carry a stack (errors provoked here, and every one seen in this file)', async () => {
    await expectWellFormedErrors(async () => {
      const p = await createPair(admin(), daemon().socketPath);
      const pc = await claim(p.a.client, p.streamA);
      await append(p.a.client, pc, inc(pc.nextPosition, 5), [msg(uniq('m'), 'misplaced')]);
      await p.b.client.call('streams.claim', { streamId: p.streamA });
      await p.b.client.call('streams.read', { streamId: p.streamA, generation: '2', fromPosition: '0' });
    });
  });
});
