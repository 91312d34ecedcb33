// `yello chats export` | `yello verify` against tampering that keeps every message signature
// valid (docs/protocol.md §5.9): positions, stream ids, operation ids, receipts and generations
// are covered by no message signature, so only the daemon's checkpoints can expose a deleted,
// swapped, replayed, renumbered or relabelled record. A real chat (messages both ways, a
// multi-record operation, a receipt, claim fences, a sealed generation) is exported once; each
// case changes the export the way an editor would and must be reported with its line, stream,
// generation and, where any check can localize it, its position. A changed digest-only field
// (clientMessageId, a one-record operation's id, a receipt's batchId or nextPosition) cannot
// be localized by a single range digest: those cases name the stream generation and its range.

import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { Checkpoint, StoredRecord } from '../../src/shared/types.js';
import { expectExit, parseJson } from '../helpers/cli-runner.js';
import { messages, receipt, setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { ok, sha256b64url, messageOf, receiptOf, type Result, type ExportLine } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useCli } from '../helpers/use-daemon.js';
import { objectContaining } from '../helpers/matchers.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

type Json = ExportLine;
/** What `yello verify --json` reports. */
type Report = { problems: Array<{ kind: string; streamId?: string; generation?: string; position?: string; line?: number }> } & Record<
  string,
  unknown
>;

const { daemon, admin, cli } = useCli();
let chat: ReadingChat;
let A: string;
let B: string;
let exportLines: Json[];
let jwksFile: string;

/** Waits until the clock has passed `createdAt`, so the next message gets a later timestamp. */
async function after(result: Result<'streams.append'>): Promise<void> {
  const w = result.records.at(-1)?.wrapper;
  const last = Date.parse((w?.type === 'chat.message' ? w.message.signature.createdAt : undefined) ?? new Date().toISOString());
  await waitFor(() => Date.now() > last, 'the clock to move past the last message', 2_000);
}

beforeAll(async () => {
  chat = await setupChat(daemon(), admin()); // each stream: a claim fence at position 0
  A = chat.streamA;
  B = chat.streamB;
  await after(await chat.wa.send('a1')); //                       A/1 #1
  await after(await chat.wb.send('b1')); //                       B/1 #1
  await after(await chat.wa.append(messages('a2', 2))); //       A/1 #2, #3: one operation
  const seen = ok(await chat.bob.client.call('streams.read', { streamId: A, generation: '1', fromPosition: '0' }));
  // B/1 #2 (message) and #3 (receipt of A/1 up to 4): one operation.
  await after(await chat.wb.append([...messages('b2', 1), receipt(A, '1', seen.nextPosition, seen.batchId)]));
  await after(await chat.wa.send('a3')); //                       A/1 #4
  ok(await admin().call('streams.reset', { streamId: A, reason: 'test: seal generation 1' }));
  await chat.wa.reclaim(); //                                     A/2 #0: fence
  await after(await chat.wa.send('a4')); //                       A/2 #1
  await after(await chat.wa.send('a5')); //                       A/2 #2
  await chat.wb.send('b3'); //                                    B/1 #4

  const exportFile = path.join(daemon().dir, 'chat.jsonl');
  jwksFile = path.join(daemon().dir, 'jwks.json');
  const [exp, keys] = await Promise.all([
    cli().run(['chats', 'export', chat.chatId, '--out', exportFile]),
    cli().run(['keys', 'list', '--json']),
  ]);
  expectExit(exp, 0);
  fs.writeFileSync(jwksFile, expectExit(keys, 0).stdout);
  exportLines = fs
    .readFileSync(exportFile, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Json);
});

// ---- locating and editing lines of a parsed export -----------------------------------------

const isRecord = (l: Json, streamId: string, generation: string) =>
  l.wrapper !== undefined && l.streamId === streamId && l.generation === generation;
const at = (ls: Json[], streamId: string, generation: string, position: string) =>
  ls.findIndex((l) => isRecord(l, streamId, generation) && l.position === position);
const cpAt = (ls: Json[], streamId: string, generation: string) =>
  ls.findIndex((l) => l.checkpoint?.streamId === streamId && l.checkpoint.generation === generation);
const copy = (ls: Json[]): Json[] => structuredClone(ls);

/** The record at a position, which must exist. */
function rec(ls: Json[], streamId: string, generation: string, position: string): StoredRecord {
  const i = at(ls, streamId, generation, position);
  expect(i, `${streamId}/${generation}#${position} in the export`).toBeGreaterThanOrEqual(0);
  return ls[i] as StoredRecord;
}

/** The checkpoint of a stream generation, which must exist. */
function cp(ls: Json[], streamId: string, generation: string): Checkpoint {
  const c = ls[cpAt(ls, streamId, generation)]?.checkpoint;
  expect(c, `checkpoint of ${streamId}/${generation} in the export`).toBeDefined();
  return c!;
}

/** Gives a stream generation's records consecutive positions from its checkpoint's firstPosition, in line order. */
function renumber(ls: Json[], streamId: string, generation: string): Json[] {
  let p = BigInt(cp(ls, streamId, generation).firstPosition);
  for (const l of ls) if (isRecord(l, streamId, generation)) l.position = String(p++);
  return ls;
}

function without(ls: Json[], index: number): Json[] {
  expect(index).toBeGreaterThanOrEqual(0);
  return ls.filter((_, i) => i !== index);
}

interface Expected {
  kind: string;
  streamId: string;
  generation: string;
  position: string | null;
  /** 0-based index of the line in the tampered export. */
  index: number;
}

interface Case {
  name: string;
  tamper: (ls: Json[]) => Json[];
  /** Problems that must all be reported, each at exactly this line, stream, generation and position. */
  expect: (ls: Json[]) => Expected[];
}

const cases: Case[] = [
  {
    name: 'delete a record (a one-record operation) and renumber the rest',
    tamper: (ls) => renumber(without(ls, at(ls, A, '1', '1')), A, '1'),
    // Which one went is not knowable from a range digest; that one is missing, and where the range ends, is.
    expect: (ls) => [
      { kind: 'POSITION', streamId: A, generation: '1', position: '4', index: cpAt(ls, A, '1') },
      { kind: 'CHAIN_DIGEST', streamId: A, generation: '1', position: null, index: cpAt(ls, A, '1') },
    ],
  },
  {
    name: 'delete a record inside an operation and renumber the rest',
    tamper: (ls) => renumber(without(ls, at(ls, A, '1', '2')), A, '1'),
    // The operation's second record now sits where its first was.
    expect: (ls) => [
      { kind: 'OPERATION', streamId: A, generation: '1', position: '2', index: at(ls, A, '1', '2') },
      { kind: 'POSITION', streamId: A, generation: '1', position: '4', index: cpAt(ls, A, '1') },
    ],
  },
  {
    name: 'swap two messages, keeping the positions',
    tamper: (ls) => {
      const x = rec(ls, A, '1', '1');
      const y = rec(ls, A, '1', '4');
      [x.wrapper, y.wrapper] = [y.wrapper, x.wrapper];
      return ls;
    },
    expect: (ls) => [
      { kind: 'CREATED_AT_ORDER', streamId: A, generation: '1', position: '4', index: at(ls, A, '1', '4') },
      { kind: 'CHAIN_DIGEST', streamId: A, generation: '1', position: null, index: cpAt(ls, A, '1') },
    ],
  },
  {
    name: 'replay a signed message at another position',
    tamper: (ls) => {
      rec(ls, A, '1', '4').wrapper = structuredClone(rec(ls, A, '1', '1').wrapper);
      return ls;
    },
    expect: (ls) => [{ kind: 'REPLAY', streamId: A, generation: '1', position: '4', index: at(ls, A, '1', '4') }],
  },
  {
    name: 'replay a signed message into the other stream',
    tamper: (ls) => {
      ls[at(ls, B, '1', '4')] = { ...structuredClone(rec(ls, A, '1', '1')), streamId: B, generation: '1', position: '4' };
      return ls;
    },
    expect: (ls) => [
      { kind: 'WRONG_STREAM', streamId: B, generation: '1', position: '4', index: at(ls, B, '1', '4') },
      { kind: 'REPLAY', streamId: B, generation: '1', position: '4', index: at(ls, B, '1', '4') },
    ],
  },
  {
    name: 'change a clientMessageId',
    tamper: (ls) => {
      messageOf(rec(ls, B, '1', '1')).clientMessageId = sha256b64url('another message id');
      return ls;
    },
    expect: (ls) => [{ kind: 'CHAIN_DIGEST', streamId: B, generation: '1', position: null, index: cpAt(ls, B, '1') }],
  },
  {
    name: 'change an operationId inside an operation',
    tamper: (ls) => {
      rec(ls, A, '1', '3').wrapper.operationId = 'op-forged';
      return ls;
    },
    expect: (ls) => [
      { kind: 'OPERATION', streamId: A, generation: '1', position: '3', index: at(ls, A, '1', '3') },
      { kind: 'CHAIN_DIGEST', streamId: A, generation: '1', position: null, index: cpAt(ls, A, '1') },
    ],
  },
  {
    name: "change a one-record operation's operationId",
    tamper: (ls) => {
      rec(ls, A, '2', '1').wrapper.operationId = 'op-forged';
      return ls;
    },
    expect: (ls) => [{ kind: 'CHAIN_DIGEST', streamId: A, generation: '2', position: null, index: cpAt(ls, A, '2') }],
  },
  {
    name: "change a receipt's nextPosition",
    tamper: (ls) => {
      const r = receiptOf(rec(ls, B, '1', '3'));
      r.nextPosition = String(BigInt(r.nextPosition) + 1n);
      return ls;
    },
    expect: (ls) => [{ kind: 'CHAIN_DIGEST', streamId: B, generation: '1', position: null, index: cpAt(ls, B, '1') }],
  },
  {
    name: "change a receipt's batchId",
    tamper: (ls) => {
      receiptOf(rec(ls, B, '1', '3')).batchId += 'x';
      return ls;
    },
    expect: (ls) => [{ kind: 'CHAIN_DIGEST', streamId: B, generation: '1', position: null, index: cpAt(ls, B, '1') }],
  },
  {
    name: "change a record's generation",
    tamper: (ls) => {
      rec(ls, B, '1', '4').generation = '2';
      return ls;
    },
    expect: (ls) => [
      { kind: 'POSITION', streamId: B, generation: '1', position: '4', index: cpAt(ls, B, '1') },
      { kind: 'NO_CHECKPOINT', streamId: B, generation: '2', position: '4', index: at(ls, B, '2', '4') },
    ],
  },
  {
    name: 'drop the first record of a generation',
    tamper: (ls) => without(ls, at(ls, A, '2', '0')),
    expect: (ls) => [{ kind: 'POSITION', streamId: A, generation: '2', position: '0', index: at(ls, A, '2', '1') }],
  },
  {
    name: 'drop the last record of a generation',
    tamper: (ls) => without(ls, at(ls, A, '1', '4')),
    expect: (ls) => [{ kind: 'POSITION', streamId: A, generation: '1', position: '4', index: cpAt(ls, A, '1') }],
  },
  {
    name: 'drop a checkpoint',
    tamper: (ls) => without(ls, cpAt(ls, B, '1')),
    expect: (ls) => [{ kind: 'NO_CHECKPOINT', streamId: B, generation: '1', position: '0', index: at(ls, B, '1', '0') }],
  },
  {
    name: "alter a checkpoint's range (nextPosition and recordCount, consistently)",
    tamper: (ls) => {
      const c = cp(ls, A, '1');
      c.nextPosition = '4';
      c.recordCount = '4';
      return ls;
    },
    expect: (ls) => [
      { kind: 'CHECKPOINT_SIGNATURE', streamId: A, generation: '1', position: null, index: cpAt(ls, A, '1') },
      { kind: 'POSITION', streamId: A, generation: '1', position: '4', index: cpAt(ls, A, '1') },
    ],
  },
  {
    name: "alter a checkpoint's createdAt",
    tamper: (ls) => {
      cp(ls, B, '1').createdAt = '2030-01-01T00:00:00.000Z';
      return ls;
    },
    expect: (ls) => [{ kind: 'CHECKPOINT_SIGNATURE', streamId: B, generation: '1', position: null, index: cpAt(ls, B, '1') }],
  },
  {
    name: 'reorder messages against their createdAt (move one later, renumber)',
    tamper: (ls) => {
      const i = at(ls, A, '1', '1');
      const moved = ls[i];
      const rest = without(ls, i);
      rest.splice(at(rest, A, '1', '4') + 1, 0, moved!);
      return renumber(rest, A, '1');
    },
    expect: (ls) => [{ kind: 'CREATED_AT_ORDER', streamId: A, generation: '1', position: '4', index: at(ls, A, '1', '4') }],
  },
];

const toText = (ls: Json[]) => ls.map((l) => JSON.stringify(l)).join('\n') + '\n';

async function verify(name: string, ls: Json[]): Promise<{ code: number | null; report: Report }> {
  const file = path.join(daemon().dir, `${name.replace(/\W+/g, '-')}.jsonl`);
  fs.writeFileSync(file, toText(ls));
  const r = await cli().run(['verify', file, '--jwks', jwksFile, '--json']);
  return { code: r.code, report: parseJson(r) as Report };
}

describe('verify against a tampered export', () => {
  it('the untouched export: both streams, the sealed generation, a receipt and fences, 0 problems', async () => {
    const kinds = exportLines.filter((l) => l.wrapper).map((l) => l.wrapper!.type);
    expect(kinds.filter((k) => k === 'chat.message')).toHaveLength(9);
    expect(kinds.filter((k) => k === 'chat.receipt')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'chat.writer-fence')).toHaveLength(3);
    // One checkpoint after each stream generation's records.
    expect(
      exportLines
        .filter((l) => l.checkpoint)
        .map((l) => `${l.checkpoint!.streamId}/${l.checkpoint!.generation}`)
        .sort(),
    ).toEqual([`${A}/1`, `${A}/2`, `${B}/1`].sort());
    for (const [s, g, next] of [
      [A, '1', '5'],
      [A, '2', '3'],
      [B, '1', '5'],
    ] as const) {
      const c = cp(exportLines, s, g);
      expect(c).toMatchObject({ firstPosition: '0', nextPosition: next, recordCount: next });
      expect(exportLines.slice(cpAt(exportLines, s, g) - Number(next), cpAt(exportLines, s, g)).every((l) => isRecord(l, s, g))).toBe(true);
    }
    const { code, report } = await verify('untouched', exportLines);
    expect(report.problems).toEqual([]);
    expect(code).toBe(0);
    expect(report).toMatchObject({ records: 13, messages: 9, checkpoints: 3 });
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s: reported where it is (exit 1)', async (_name, c) => {
    const tampered = c.tamper(copy(exportLines));
    const { code, report } = await verify(c.name, tampered);
    expect(code, JSON.stringify(report.problems)).toBe(1);
    for (const e of c.expect(tampered)) {
      expect(e.index, `${e.kind} expected at a line of the tampered export`).toBeGreaterThanOrEqual(0);
      expect(report.problems, JSON.stringify(report.problems, null, 1)).toContainEqual(
        objectContaining({ kind: e.kind, line: e.index + 1, streamId: e.streamId, generation: e.generation, position: e.position }),
      );
    }
  });

  it('an export without checkpoints (made before them) is reported: completeness and order not provable', async () => {
    const legacy = exportLines.filter((l) => !l.checkpoint);
    const { code, report } = await verify('legacy', legacy);
    expect(code).toBe(1);
    const noCheckpoint = report.problems.filter((p) => p.kind === 'NO_CHECKPOINT');
    expect(noCheckpoint.map((p) => `${p.streamId}/${p.generation}#${p.position}`).sort()).toEqual(
      [`${A}/1#0`, `${A}/2#0`, `${B}/1#0`].sort(),
    );
    expect(report.problems).toHaveLength(3);
  });

  it('an export of one stream only is reported: the other stream is missing', async () => {
    const oneSided = exportLines.filter((l) => (l.checkpoint?.streamId ?? l.streamId) !== B);
    const { code, report } = await verify('one-sided', oneSided);
    expect(code).toBe(1);
    expect(report.problems).toContainEqual(objectContaining({ kind: 'MISSING_STREAM', streamId: A }));
  });
});
