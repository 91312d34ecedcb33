// Pins behaviour of src/client/verify-export.ts and src/client/verify.ts that the rest of the suite
// leaves unchecked: test/cli/export-tamper.test.ts runs `yello verify` in a child process and
// checks that a problem of the right kind is reported somewhere; here verifyExport runs in the
// test's own process, and each tampering is checked for the complete list of problems: line, kind,
// stream/generation#position, and what the person is told (ids replaced by names so that it reads
// as text).
//
// The export is a real one, recorded once (so that every mutant runs in milliseconds, without a
// daemon): test/fixtures/export-chat/ holds what `yello chats export` and `yello keys list --json`
// wrote for the chat that test/cli/export-tamper.test.ts builds (messages both ways, a
// two-record operation, a receipt, claim fences, a generation sealed by streams.reset):
//   line 1-5  A/1 #0 fence, #1 message, #2 #3 one operation, #4 message;  6 checkpoint A/1 0..5
//   line 7-9  A/2 #0 fence, #1 #2 messages;                              10 checkpoint A/2 0..3
//   line 11-15 B/1 #0 fence, #1 message, #2 message + #3 receipt of A/1 up to 4 (one operation),
//              #4 message;                                               16 checkpoint B/1 0..5

import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ExportVerifier, verifyCheckpoint, verifyExport, VerificationError, type Jwks } from '../../src/client/index.js';
import type { Checkpoint, StoredRecord } from '../../src/shared/types.js';
import { messageOf, receiptOf, fenceOf, type ExportLine } from '../helpers/wire-fixtures.js';

type Json = ExportLine;
const fixture = (name: string) => fs.readFileSync(new URL(`../fixtures/export-chat/${name}`, import.meta.url), 'utf8');
const lines = fixture('export.jsonl')
  .split('\n')
  .filter((l) => l !== '')
  .map((l) => JSON.parse(l) as Json);
const jwks = JSON.parse(fixture('jwks.json')) as Jwks;
const ids = JSON.parse(fixture('ids.json')) as { A: string; B: string; chatId: string; alice: string; bob: string };
const { A, B } = ids;

// ---- locating and editing lines --------------------------------------------------------------

const isRecord = (l: Json, s: string, g: string) => l.wrapper !== undefined && l.streamId === s && l.generation === g;
const at = (ls: Json[], s: string, g: string, p: string) => ls.findIndex((l) => isRecord(l, s, g) && l.position === p);
const cpAt = (ls: Json[], s: string, g: string) => ls.findIndex((l) => l.checkpoint?.streamId === s && l.checkpoint.generation === g);
const rec = (ls: Json[], s: string, g: string, p: string) => ls[at(ls, s, g, p)] as StoredRecord;
const cp = (ls: Json[], s: string, g: string): Checkpoint => ls[cpAt(ls, s, g)]!.checkpoint!;
const without = (ls: Json[], ...drop: number[]) => ls.filter((_, j) => !drop.includes(j));
/** A copy of the export with `change` applied. */
function edit(change: (ls: Json[]) => unknown): Json[] {
  const ls = structuredClone(lines);
  const out = change(ls);
  return Array.isArray(out) ? (out as Json[]) : ls;
}

/** The ids of the fixture replaced by names, so that expected problems read as text. */
function named(text: string): string {
  return text
    .replaceAll(A, 'A')
    .replaceAll(B, 'B')
    .replaceAll(ids.chatId, 'CHAT')
    .replaceAll(ids.alice, 'alice')
    .replaceAll(ids.bob, 'bob')
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/g, 'T');
}

/** Every problem verifyExport finds, one string each: `line kind stream/generation#position: problem`. */
function problems(ls: unknown[]): string[] {
  const text = ls.map((l) => (typeof l === 'string' ? l : JSON.stringify(l)));
  return verifyExport(text, jwks).problems.map((p) =>
    named(`${p.line} ${p.kind} ${p.streamId}/${p.generation}#${p.position}: ${p.problem}`),
  );
}

describe('verifyExport on the untouched export', () => {
  it('finds no problem, and counts and describes each stream generation', () => {
    const r = verifyExport(
      lines.map((l) => JSON.stringify(l)),
      jwks,
    );
    expect(r.problems).toEqual([]);
    expect({
      ...r,
      generations: r.generations.map((g) => ({
        ...g,
        streamId: named(g.streamId),
        checkpoint: g.checkpoint && { ...g.checkpoint, createdAt: named(g.checkpoint.createdAt) },
      })),
    }).toEqual({
      records: 13,
      messages: 9,
      checkpoints: 3,
      problems: [],
      generations: [
        {
          streamId: 'A',
          generation: '1',
          firstPosition: '0',
          nextPosition: '5',
          records: 5,
          checkpoint: { line: 6, firstPosition: '0', nextPosition: '5', createdAt: 'T', kid: cp(lines, A, '1').signature.kid },
        },
        {
          streamId: 'A',
          generation: '2',
          firstPosition: '0',
          nextPosition: '3',
          records: 3,
          checkpoint: { line: 10, firstPosition: '0', nextPosition: '3', createdAt: 'T', kid: cp(lines, A, '2').signature.kid },
        },
        {
          streamId: 'B',
          generation: '1',
          firstPosition: '0',
          nextPosition: '5',
          records: 5,
          checkpoint: { line: 16, firstPosition: '0', nextPosition: '5', createdAt: 'T', kid: cp(lines, B, '1').signature.kid },
        },
      ],
    });
  });

  it('skips blank lines but counts them; takes the text whole too', () => {
    const text = lines.map((l) => JSON.stringify(l));
    const spaced = verifyExport(['', ...text, '  '], jwks);
    expect(spaced.problems).toEqual([]);
    expect(spaced.generations.map((g) => g.checkpoint!.line)).toEqual([7, 11, 17]);
    expect(verifyExport(text.join('\n') + '\n', jwks)).toEqual(verifyExport(text, jwks));
  });

  it('a generation without records but with a checkpoint has null positions; records without one, a null checkpoint', () => {
    const r = verifyExport(
      without(lines, 6, 7, 8).map((l) => JSON.stringify(l)),
      jwks,
    );
    const a2 = r.generations.find((g) => g.streamId === A && g.generation === '2')!;
    expect(a2).toMatchObject({ firstPosition: null, nextPosition: null, records: 0, checkpoint: { line: 7 } });
    const r2 = verifyExport(
      without(lines, 9).map((l) => JSON.stringify(l)),
      jwks,
    );
    expect(r2.generations.find((g) => g.streamId === A && g.generation === '2')).toMatchObject({
      firstPosition: '0',
      nextPosition: '3',
      records: 3,
      checkpoint: null,
    });
  });
});

describe('ExportVerifier', () => {
  it('result() is final: the same outcome again, and no line after it', () => {
    const v = new ExportVerifier(jwks);
    v.line('not json');
    const first = v.result();
    expect(v.result()).toBe(first);
    expect(() => {
      v.line(JSON.stringify(lines[0]));
    }).toThrow('ExportVerifier: line() after result()');
    expect(first.problems).toEqual([{ line: 1, streamId: null, generation: null, position: null, kind: 'NOT_JSON', problem: 'not JSON' }]);
  });

  it('problems are listed in line order, whatever order they were found in', () => {
    // NO_CHECKPOINT of line 11 is found at the end, after the NOT_JSON of line 17.
    expect(problems([...without(lines, 15), 'x'])).toMatchInlineSnapshot(`
      [
        "11 NO_CHECKPOINT B/1#0: no checkpoint for this stream generation: completeness and order not provable (an export from before checkpoints? export it again)",
        "16 NOT_JSON null/null#null: not JSON",
      ]
    `);
  });
});

describe('lines that are not records or checkpoints', () => {
  it('an empty export is EMPTY; one holding only bad lines is not', () => {
    expect(verifyExport('', jwks).problems).toEqual([
      {
        line: 0,
        streamId: null,
        generation: null,
        position: null,
        kind: 'EMPTY',
        problem: 'the export holds no records and no checkpoints',
      },
    ]);
    expect(problems(['{"nothing":1}', '[1]', 'null', '"text"'])).toMatchInlineSnapshot(`
      [
        "1 NOT_A_RECORD null/null#null: not a stored record",
        "2 NOT_A_RECORD null/null#null: not a stored record",
        "3 NOT_A_RECORD null/null#null: not a stored record",
        "4 NOT_A_RECORD null/null#null: not a stored record",
      ]
    `);
  });

  it('a record missing any member it needs, or with one of the wrong type, is NOT_A_RECORD, located by what it still has', () => {
    const paths: Array<[string, string, string, string]> = [
      // [stream, generation, position, path]
      [A, '1', '1', 'streamId'],
      [A, '1', '1', 'generation'],
      [A, '1', '1', 'position'],
      [A, '1', '1', 'wrapper'],
      [A, '1', '1', 'wrapper.chatId'],
      [A, '1', '1', 'wrapper.authorAgentId'],
      [A, '1', '1', 'wrapper.operationId'],
      [A, '1', '1', 'wrapper.recordIndex'],
      [A, '1', '1', 'wrapper.type'],
      [A, '1', '1', 'wrapper.message'],
      [A, '1', '1', 'wrapper.message.chatId'],
      [A, '1', '1', 'wrapper.message.fromAgentId'],
      [A, '1', '1', 'wrapper.message.toAgentId'],
      [A, '1', '1', 'wrapper.message.clientMessageId'],
      [A, '1', '1', 'wrapper.message.content'],
      [A, '1', '1', 'wrapper.message.contentSha256'],
      [A, '1', '1', 'wrapper.message.signature'],
      [A, '1', '1', 'wrapper.message.signature.kid'],
      [A, '1', '1', 'wrapper.message.signature.alg'],
      [A, '1', '1', 'wrapper.message.signature.value'],
      [A, '1', '1', 'wrapper.message.signature.createdAt'],
      [B, '1', '3', 'wrapper.receipt'],
      [B, '1', '3', 'wrapper.receipt.peerStreamId'],
      [B, '1', '3', 'wrapper.receipt.peerGeneration'],
      [B, '1', '3', 'wrapper.receipt.nextPosition'],
      [B, '1', '3', 'wrapper.receipt.batchId'],
      [A, '1', '0', 'wrapper.fence'],
      [A, '1', '0', 'wrapper.fence.epoch'],
    ];
    const found: string[] = [];
    for (const [s, g, p, member] of paths) {
      const ls = edit((x) => {
        const keys = member.split('.');
        let o = rec(x, s, g, p) as unknown as Record<string, unknown>;
        for (const k of keys.slice(0, -1)) o = o[k] as Record<string, unknown>;
        o[keys.at(-1)!] = member === 'wrapper.recordIndex' ? '0' : 7;
      });
      const i = at(lines, s, g, p);
      found.push(`${member}: ${problems([ls[i]]).join(' | ')}`);
    }
    expect(found).toMatchInlineSnapshot(`
      [
        "streamId: 1 NOT_A_RECORD null/1#1: not a stored record",
        "generation: 1 NOT_A_RECORD A/null#1: not a stored record",
        "position: 1 NOT_A_RECORD A/1#null: not a stored record",
        "wrapper: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.chatId: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.authorAgentId: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.operationId: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.recordIndex: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.type: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.chatId: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.fromAgentId: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.toAgentId: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.clientMessageId: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.content: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.contentSha256: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.signature: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.signature.kid: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.signature.alg: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.signature.value: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.message.signature.createdAt: 1 NOT_A_RECORD A/1#1: not a stored record",
        "wrapper.receipt: 1 NOT_A_RECORD B/1#3: not a stored record",
        "wrapper.receipt.peerStreamId: 1 NOT_A_RECORD B/1#3: not a stored record",
        "wrapper.receipt.peerGeneration: 1 NOT_A_RECORD B/1#3: not a stored record",
        "wrapper.receipt.nextPosition: 1 NOT_A_RECORD B/1#3: not a stored record",
        "wrapper.receipt.batchId: 1 NOT_A_RECORD B/1#3: not a stored record",
        "wrapper.fence: 1 NOT_A_RECORD A/1#0: not a stored record",
        "wrapper.fence.epoch: 1 NOT_A_RECORD A/1#0: not a stored record",
      ]
    `);
  });

  it('positions and generations must be canonical decimals; recordIndex a safe integer; an unknown record type is not a record', () => {
    const one = (change: (r: StoredRecord) => void) =>
      problems([
        edit((x) => {
          change(rec(x, A, '1', '1'));
        })[1],
      ]);
    expect([
      one((r) => (r.position = '01')),
      one((r) => (r.generation = '1.0')),
      one((r) => ((r.wrapper as { recordIndex: number }).recordIndex = 0.5)),
      one((r) => ((r.wrapper as { recordIndex: number }).recordIndex = 2 ** 53)),
      one((r) => ((r.wrapper as { type: string }).type = 'chat.note')),
      one((r) => ((r as unknown as { wrapper: unknown }).wrapper = [])),
      one((r) => ((r.wrapper as unknown as { message: unknown }).message = [])),
      one((r) => ((messageOf(r) as unknown as { signature: unknown }).signature = null)),
    ]).toMatchInlineSnapshot(`
      [
        [
          "1 NOT_A_RECORD A/1#01: not a stored record",
        ],
        [
          "1 NOT_A_RECORD A/1.0#1: not a stored record",
        ],
        [
          "1 NOT_A_RECORD A/1#1: not a stored record",
        ],
        [
          "1 NOT_A_RECORD A/1#1: not a stored record",
        ],
        [
          "1 NOT_A_RECORD A/1#1: not a stored record",
        ],
        [
          "1 NOT_A_RECORD A/1#1: not a stored record",
        ],
        [
          "1 NOT_A_RECORD A/1#1: not a stored record",
        ],
        [
          "1 NOT_A_RECORD A/1#1: not a stored record",
        ],
      ]
    `);
  });

  it('a checkpoint line with another member, or a checkpoint missing any member, is CHECKPOINT_INVALID', () => {
    const line = lines[5]!;
    const members = [
      'type',
      'streamId',
      'chatId',
      'authorAgentId',
      'generation',
      'firstPosition',
      'nextPosition',
      'recordCount',
      'chainDigest',
      'createdAt',
      'signature',
      'signature.kid',
      'signature.alg',
      'signature.value',
    ];
    const found = members.map((member) => {
      const c = structuredClone(line.checkpoint!) as unknown as Record<string, Record<string, unknown>>;
      const [k, sub] = member.split('.') as [string, string | undefined];
      if (sub) c[k]![sub] = 7;
      else (c as Record<string, unknown>)[k] = 7;
      return `${member}: ${problems([{ checkpoint: c }]).join(' | ')}`;
    });
    found.push(`extra member: ${problems([{ ...line, extra: 1 }]).join(' | ')}`);
    found.push(`not an object: ${problems([{ checkpoint: [line.checkpoint] }]).join(' | ')}`);
    found.push(`generation not decimal: ${problems([{ checkpoint: { ...line.checkpoint, generation: '01' } }]).join(' | ')}`);
    found.push(`firstPosition not decimal: ${problems([{ checkpoint: { ...line.checkpoint, firstPosition: '-1' } }]).join(' | ')}`);
    found.push(`nextPosition not decimal: ${problems([{ checkpoint: { ...line.checkpoint, nextPosition: '5.0' } }]).join(' | ')}`);
    found.push(`recordCount not decimal: ${problems([{ checkpoint: { ...line.checkpoint, recordCount: 'five' } }]).join(' | ')}`);
    expect(found).toMatchInlineSnapshot(`
      [
        "type: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "streamId: 1 CHECKPOINT_INVALID null/1#null: not a yello.checkpoint.v1 checkpoint line",
        "chatId: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "authorAgentId: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "generation: 1 CHECKPOINT_INVALID A/null#null: not a yello.checkpoint.v1 checkpoint line",
        "firstPosition: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "nextPosition: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "recordCount: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "chainDigest: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "createdAt: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "signature: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "signature.kid: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "signature.alg: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "signature.value: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "extra member: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "not an object: 1 CHECKPOINT_INVALID null/null#null: not a yello.checkpoint.v1 checkpoint line",
        "generation not decimal: 1 CHECKPOINT_INVALID A/01#null: not a yello.checkpoint.v1 checkpoint line",
        "firstPosition not decimal: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "nextPosition not decimal: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
        "recordCount not decimal: 1 CHECKPOINT_INVALID A/1#null: not a yello.checkpoint.v1 checkpoint line",
      ]
    `);
  });
});

describe('stream membership', () => {
  const third = `${ids.chatId}:agt_third`;
  it('a streamId that is not chatId:authorAgentId, one of another chat, and a third stream are WRONG_STREAM', () => {
    expect(
      problems(
        edit((ls) => {
          rec(ls, A, '2', '1').streamId = 'no-colon';
          rec(ls, A, '2', '2').streamId = 'chat_other:agt_x';
          rec(ls, B, '1', '4').streamId = third;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "8 WRONG_STREAM no-colon/2#1: streamId no-colon is not chatId:authorAgentId",
        "8 NO_CHECKPOINT no-colon/2#1: no checkpoint for this stream generation: completeness and order not provable (an export from before checkpoints? export it again)",
        "9 WRONG_STREAM chat_other:agt_x/2#2: belongs to chat chat_other, but the export is of chat CHAT (line 1)",
        "9 NO_CHECKPOINT chat_other:agt_x/2#2: no checkpoint for this stream generation: completeness and order not provable (an export from before checkpoints? export it again)",
        "10 POSITION A/2#1: positions 1..2 missing at the end: the checkpoint covers positions 0..2",
        "10 CHAIN_DIGEST A/2#null: the 1 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "15 WRONG_STREAM CHAT:agt_third/1#4: a third stream (CHAT:agt_third): a chat has two",
        "15 NO_CHECKPOINT CHAT:agt_third/1#4: no checkpoint for this stream generation: completeness and order not provable (an export from before checkpoints? export it again)",
        "16 POSITION B/1#4: positions 4 missing at the end: the checkpoint covers positions 0..4",
        "16 CHAIN_DIGEST B/1#null: the 4 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it('the first line fixes the chat: a checkpoint of another chat first makes every record WRONG_STREAM', () => {
    const other = { checkpoint: { ...cp(lines, A, '2'), streamId: 'chat_other:agt_x', chatId: 'chat_other', authorAgentId: 'agt_x' } };
    expect(problems([other, ...lines.slice(0, 2)])).toMatchInlineSnapshot(`
      [
        "1 CHECKPOINT_SIGNATURE chat_other:agt_x/2#null: checkpoint: signature does not verify",
        "1 POSITION chat_other:agt_x/2#0: positions 0..2 missing: the checkpoint covers 3 records, the export has none",
        "1 CHAIN_DIGEST chat_other:agt_x/2#null: the 0 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "2 WRONG_STREAM A/1#0: belongs to chat CHAT, but the export is of chat chat_other (line 1)",
        "2 NO_CHECKPOINT A/1#0: no checkpoint for this stream generation: completeness and order not provable (an export from before checkpoints? export it again)",
        "3 WRONG_STREAM A/1#1: belongs to chat CHAT, but the export is of chat chat_other (line 1)",
      ]
    `);
  });

  it("a wrapper or message that names another stream than the record's is WRONG_STREAM", () => {
    expect(
      problems(
        edit((ls) => {
          rec(ls, A, '1', '1').wrapper.chatId = 'chat_other';
          rec(ls, A, '1', '2').wrapper.authorAgentId = ids.bob;
          messageOf(rec(ls, A, '1', '4')).chatId = 'chat_other';
          messageOf(rec(ls, A, '2', '1')).fromAgentId = ids.bob;
          messageOf(rec(ls, A, '2', '2')).toAgentId = ids.alice;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "2 WRONG_STREAM A/1#1: the wrapper names chat_other:alice, not its stream A",
        "3 WRONG_STREAM A/1#2: the wrapper names B, not its stream A",
        "5 WRONG_STREAM A/1#4: the message is from alice to bob in chat_other, which is not a message of stream A",
        "5 SIGNATURE A/1#4: signature does not verify",
        "6 CHAIN_DIGEST A/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        "8 WRONG_STREAM A/2#1: the message is from bob to bob in CHAT, which is not a message of stream A",
        "8 SIGNATURE A/2#1: signature does not verify",
        "9 WRONG_STREAM A/2#2: the message is from alice to alice in CHAT, which is not a message of stream A",
        "9 SIGNATURE A/2#2: signature does not verify",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it('a receipt for its own stream, another chat or no stream at all is RECEIPT', () => {
    const peerStreamIds = [B, 'chat_other:agt_x', 'not a stream id'];
    expect(
      peerStreamIds.map((id) =>
        problems(
          edit((ls) => {
            receiptOf(rec(ls, B, '1', '3')).peerStreamId = id;
          }),
        ),
      ),
    ).toMatchInlineSnapshot(`
      [
        [
          "14 RECEIPT B/1#3: the receipt acknowledges B, which is not the other stream of chat CHAT",
          "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        ],
        [
          "14 RECEIPT B/1#3: the receipt acknowledges chat_other:agt_x, which is not the other stream of chat CHAT",
          "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        ],
        [
          "14 RECEIPT B/1#3: the receipt acknowledges not a stream id, which is not the other stream of chat CHAT",
          "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        ],
      ]
    `);
  });

  it('a message or receipt naming a third agent as the peer is WRONG_STREAM; with one stream only, MISSING_STREAM', () => {
    expect(
      problems(
        edit((ls) => {
          messageOf(rec(ls, A, '2', '1')).toAgentId = 'agt_third';
          receiptOf(rec(ls, B, '1', '3')).peerStreamId = third;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "8 SIGNATURE A/2#1: signature does not verify",
        "8 WRONG_STREAM A/2#1: names agt_third as the other participant, but the chat's other stream is of bob",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "14 WRONG_STREAM B/1#3: names agt_third as the other participant, but the chat's other stream is of alice",
        "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(problems(lines.filter((l) => (l.checkpoint?.streamId ?? l.streamId) !== B))).toMatchInlineSnapshot(`
      [
        "2 MISSING_STREAM A/1#1: the export has nothing of stream B, which this record names",
      ]
    `);
    // Only B's records, which name alice twice: alice's stream is missing, named where first.
    expect(problems(lines.filter((l) => (l.checkpoint?.streamId ?? l.streamId) === B))).toMatchInlineSnapshot(`
      [
        "2 MISSING_STREAM B/1#1: the export has nothing of stream A, which this record names",
      ]
    `);
  });
});

describe("a message's own checks (kinds from verify.ts)", () => {
  const one = (change: (m: ReturnType<typeof messageOf>) => void) =>
    problems(
      edit((ls) => {
        change(messageOf(rec(ls, A, '2', '2')));
      }),
    );

  it('content, alg, kid, form, canonical form, signature: each its kind and problem', () => {
    expect([
      one((m) => (m.content += '!')),
      one((m) => ((m.signature as { alg: string }).alg = 'ES384')),
      one((m) => (m.signature.kid = 'no-such-kid')),
      one((m) => (m.signature.value += 'A')),
      one((m) => (m.signature.value = m.signature.value.slice(0, -1) + (m.signature.value.endsWith('A') ? 'B' : 'A'))),
      one((m) => (m.signature.value = (m.signature.value.startsWith('A') ? 'B' : 'A') + m.signature.value.slice(1))),
    ]).toMatchInlineSnapshot(`
      [
        [
          "9 CONTENT_HASH A/2#2: contentSha256 does not match the content",
          "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        ],
        [
          "9 SIGNATURE A/2#2: unsupported alg ES384",
          "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        ],
        [
          "9 UNKNOWN_KID A/2#2: unknown kid no-such-kid",
          "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        ],
        [
          "9 SIGNATURE A/2#2: signature is not 64 bytes of unpadded base64url",
          "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        ],
        [
          "9 SIGNATURE A/2#2: signature is not canonical base64url",
          "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        ],
        [
          "9 SIGNATURE A/2#2: signature does not verify",
          "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        ],
      ]
    `);
  });

  it('a replayed signature names both places once, and each later copy', () => {
    expect(
      problems(
        edit((ls) => {
          rec(ls, A, '1', '4').wrapper = structuredClone(rec(ls, A, '1', '1').wrapper);
          rec(ls, A, '2', '2').wrapper = structuredClone(rec(ls, A, '1', '1').wrapper);
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "2 REPLAY A/1#1: the same signature appears again at line 5 (position 4 of A): a message may appear once",
        "5 REPLAY A/1#4: the same signature as line 2 (position 1 of A): a message may appear once",
        "5 CREATED_AT_ORDER A/1#4: createdAt T is earlier than T of the message before it",
        "5 CLIENT_MESSAGE_ID A/1#4: clientMessageId already used at position 1 of this generation",
        "5 OPERATION A/1#4: operation op-8971-mx5daq7j-3 already appeared earlier in this stream",
        "6 CHAIN_DIGEST A/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        "9 REPLAY A/2#2: the same signature as line 2 (position 1 of A): a message may appear once",
        "9 CREATED_AT_ORDER A/2#2: createdAt T is earlier than T of the message before it",
        "9 OPERATION A/2#2: operation op-8971-mx5daq7j-3 already appeared earlier in this stream",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it('createdAt going back is CREATED_AT_ORDER; a createdAt that is not a timestamp is not compared', () => {
    expect(
      problems(
        edit((ls) => {
          messageOf(rec(ls, A, '2', '2')).signature.createdAt = '2000-01-01T00:00:00.000Z';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "9 SIGNATURE A/2#2: signature does not verify",
        "9 CREATED_AT_ORDER A/2#2: createdAt T is earlier than T of the message before it",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // 'Z…' sorts after every timestamp: compared, the next message would be "earlier".
    expect(
      problems(
        edit((ls) => {
          messageOf(rec(ls, A, '2', '1')).signature.createdAt = 'Z';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "8 SIGNATURE A/2#1: signature does not verify",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // Equal timestamps (one operation) are in order.
    expect(
      problems(
        edit((ls) => {
          messageOf(rec(ls, A, '2', '2')).signature.createdAt = messageOf(rec(ls, A, '2', '1')).signature.createdAt;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "9 SIGNATURE A/2#2: signature does not verify",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it('clientMessageId: malformed, or used twice in one generation; the same one in another generation is fine', () => {
    const cmid = messageOf(rec(lines, A, '1', '1')).clientMessageId;
    expect(
      problems(
        edit((ls) => {
          messageOf(rec(ls, A, '1', '2')).clientMessageId = `${cmid.slice(0, 42)}=`;
          messageOf(rec(ls, A, '1', '3')).clientMessageId = `${cmid}A`;
          messageOf(rec(ls, A, '1', '4')).clientMessageId = cmid;
          messageOf(rec(ls, A, '2', '1')).clientMessageId = cmid;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "3 CLIENT_MESSAGE_ID A/1#2: clientMessageId is not 43 characters of base64url",
        "4 CLIENT_MESSAGE_ID A/1#3: clientMessageId is not 43 characters of base64url",
        "5 CLIENT_MESSAGE_ID A/1#4: clientMessageId already used at position 1 of this generation",
        "6 CHAIN_DIGEST A/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });
});

describe('positions against the checkpoint', () => {
  it('a gap, a repeat and a step back are POSITION at the record', () => {
    expect(
      problems(
        edit((ls) => {
          rec(ls, A, '1', '3').position = '5';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "4 POSITION A/1#5: gap: positions 3..4 missing",
        "4 OPERATION A/1#5: operation op-8971-mx5daq83-5 already appeared earlier in this stream",
        "5 POSITION A/1#4: position repeats or goes back (after 5)",
        "6 CHAIN_DIGEST A/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(
      problems(
        edit((ls) => {
          rec(ls, B, '1', '2').position = '1';
          rec(ls, B, '1', '3').position = '0';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "13 POSITION B/1#1: position repeats or goes back (after 1)",
        "14 POSITION B/1#0: position repeats or goes back (after 1)",
        "14 OPERATION B/1#0: operation op-8971-mx5daq8s-6 starts here with record 1, not 0",
        "14 OPERATION B/1#0: operation op-8971-mx5daq8s-6 already appeared earlier in this stream",
        "15 POSITION B/1#4: gap: positions 1..3 missing",
        "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it('a message again after its checkpoint line is a replay after the checkpoint, not also out of order or a repeated clientMessageId', () => {
    // The records after a group's checkpoint are reported as such; the per-generation checks of
    // order and clientMessageId stop at the checkpoint (verify-export.ts 437:9).
    const again = [...lines.slice(0, 6), lines[1]!, ...lines.slice(6)];
    expect(problems(again)).toMatchInlineSnapshot(`
      [
        "2 REPLAY A/1#1: the same signature appears again at line 7 (position 1 of A): a message may appear once",
        "7 REPLAY A/1#1: the same signature as line 2 (position 1 of A): a message may appear once",
        "7 AFTER_CHECKPOINT A/1#1: a record after the checkpoint of this stream generation (line 6)",
      ]
    `);
  });

  it('a receipt repeated later with the same nextPosition does not hide what the first one acknowledged beyond the checkpoint', () => {
    // The first receipt of a peer generation's highest position is the one that provably existed
    // (bob signed a message after it); an equal one later must not replace it (verify-export.ts 507:18).
    const repeated = edit((ls) => {
      const i = ls.findIndex((l) => l.wrapper?.type === 'chat.receipt');
      (ls[i]!.wrapper as { receipt: { nextPosition: string } }).receipt.nextPosition = '6';
      const copy = { ...structuredClone(ls[i]!), position: '5' };
      ls.splice(cpAt(ls, B, '1'), 0, copy);
    });
    expect(problems(repeated).filter((p) => p.includes('RECEIPT'))).toEqual([
      "14 RECEIPT B/1#3: the receipt acknowledges A generation 1 before position 6, but the export's checkpoint of it ends at 5: positions 5 were acknowledged and are not in the export",
      '16 RECEIPT B/1#5: the receipt (generation 1, nextPosition 6) does not move forward from the one before it (generation 1, nextPosition 6)',
    ]);
  });

  /** The export with bob's receipt acknowledging A/1 up to 6, past A/1's checkpoint (nextPosition 5). */
  const beyond = (ls: Json[]): Json[] => {
    const i = ls.findIndex((l) => l.wrapper?.type === 'chat.receipt');
    (ls[i]!.wrapper as { receipt: { nextPosition: string } }).receipt.nextPosition = '6';
    return ls;
  };

  it('a receipt past the peer checkpoint in a stream generation with no checkpoint of its own is still judged (by the message bob signed after it)', () => {
    // verify-export.ts 524:19: the receipt's own group may have no checkpoint at all.
    const found = problems(edit((ls) => without(beyond(ls), cpAt(ls, B, '1'))));
    expect(found.map((p) => p.split(':')[0])).toEqual(['11 NO_CHECKPOINT B/1#0', '14 RECEIPT B/1#3']);
  });

  it("what proves a receipt existed is a later message of its author's stream, never one of the other stream after it in the file", () => {
    // B's lines first, without bob's message after the receipt, then A's: alice's messages come
    // after the receipt in the file but say nothing of when bob's receipt existed, and B's own
    // checkpoint is later than A's, so the receipt past A/1's checkpoint is not a problem
    // (verify-export.ts 417:54).
    const reordered = edit((ls) => {
      beyond(ls);
      const bLines = ls.slice(10).filter((_, j) => j + 10 !== at(ls, B, '1', '4'));
      return [...bLines, ...ls.slice(0, 10)];
    });
    expect(problems(reordered).filter((p) => p.includes('RECEIPT'))).toEqual([]);
  });

  it('a gap and a missing start or end are reported once each, not also as a wrong record count', () => {
    // Each position problem already explains the count: verify-export.ts counts them, and only
    // an export with none of them is told "the export has N records where the checkpoint covers M".
    for (const drop of [
      [0, 2],
      [2, 4],
    ]) {
      const found = problems(without(lines, ...drop));
      expect(found.filter((p) => p.includes(' POSITION A/1'))).toHaveLength(2);
      expect(found.some((p) => p.includes('gap'))).toBe(true);
      expect(found.some((p) => p.includes(drop[0] === 0 ? 'missing at the start' : 'missing at the end'))).toBe(true);
      expect(found.filter((p) => p.includes('the export has'))).toEqual([]);
    }
  });

  it('records missing at the start or the end, before or past the range, or all of them', () => {
    expect(problems(without(lines, 0, 1))).toMatchInlineSnapshot(`
      [
        "1 POSITION A/1#0: positions 0..1 missing at the start: the checkpoint (line 4) covers positions 0..4",
        "4 CHAIN_DIGEST A/1#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(problems(without(lines, 3, 4))).toMatchInlineSnapshot(`
      [
        "4 POSITION A/1#3: positions 3..4 missing at the end: the checkpoint covers positions 0..4",
        "4 CHAIN_DIGEST A/1#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(problems(without(lines, 4))).toMatchInlineSnapshot(`
      [
        "5 POSITION A/1#4: positions 4 missing at the end: the checkpoint covers positions 0..4",
        "5 CHAIN_DIGEST A/1#null: the 4 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(problems(without(lines, 6, 7, 8))).toMatchInlineSnapshot(`
      [
        "7 POSITION A/2#0: positions 0..2 missing: the checkpoint covers 3 records, the export has none",
        "7 CHAIN_DIGEST A/2#null: the 0 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // A checkpoint of an empty range, with nothing before it: no position is missing.
    expect(
      problems(
        edit((ls) => {
          const c = cp(ls, A, '2');
          c.firstPosition = '3';
          c.recordCount = '0';
          return without(ls, 6, 7, 8);
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "7 CHECKPOINT_SIGNATURE A/2#null: checkpoint: signature does not verify",
        "7 CHAIN_DIGEST A/2#null: the 0 records of this stream generation do not hash to the checkpoint's chainDigest (no positions): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // The checkpoint claims a range starting later / ending earlier than the records.
    expect(
      problems(
        edit((ls) => {
          const c = cp(ls, A, '1');
          c.firstPosition = '1';
          c.nextPosition = '4';
          c.recordCount = '3';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "1 POSITION A/1#0: records from position 0 lie before the checkpoint's range (line 6: positions 1..3)",
        "6 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "6 POSITION A/1#4: records continue past the checkpoint's nextPosition 4 (to 4)",
      ]
    `);
    expect(
      problems(
        edit((ls) => {
          const c = cp(ls, A, '1');
          c.firstPosition = '0';
          c.nextPosition = '7';
          c.recordCount = '7';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "6 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "6 POSITION A/1#5: positions 5..6 missing at the end: the checkpoint covers positions 0..6",
      ]
    `);
  });

  it('a record after its checkpoint line is AFTER_CHECKPOINT (and still checked as a message)', () => {
    const ls = structuredClone(lines);
    const moved = ls.splice(4, 1)[0]!;
    ls.splice(5, 0, moved);
    expect(problems(ls)).toMatchInlineSnapshot(`
      [
        "5 POSITION A/1#4: positions 4 missing at the end: the checkpoint covers positions 0..4",
        "5 CHAIN_DIGEST A/1#null: the 4 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        "6 AFTER_CHECKPOINT A/1#4: a record after the checkpoint of this stream generation (line 5)",
      ]
    `);
  });

  it('records without a checkpoint are NO_CHECKPOINT at their first record', () => {
    expect(problems(without(lines, 5, 9))).toMatchInlineSnapshot(`
      [
        "1 NO_CHECKPOINT A/1#0: no checkpoint for this stream generation: completeness and order not provable (an export from before checkpoints? export it again)",
        "6 NO_CHECKPOINT A/2#0: no checkpoint for this stream generation: completeness and order not provable (an export from before checkpoints? export it again)",
      ]
    `);
  });
});

describe('checkpoints', () => {
  it('ids that do not make the streamId, a recordCount that is not the range, a range going back, a second checkpoint', () => {
    expect(
      problems(
        edit((ls) => {
          cp(ls, A, '1').authorAgentId = ids.bob;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "6 CHECKPOINT_INVALID A/1#null: chatId CHAT and authorAgentId bob do not make its streamId",
      ]
    `);
    expect(
      problems(
        edit((ls) => {
          cp(ls, A, '2').recordCount = '4';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "10 CHECKPOINT_INVALID A/2#null: recordCount 4 is not nextPosition 3 - firstPosition 0",
        "10 CHECKPOINT_SIGNATURE A/2#null: checkpoint: signature does not verify",
      ]
    `);
    expect(
      problems(
        edit((ls) => {
          const c = cp(ls, A, '2');
          c.firstPosition = '3';
          c.nextPosition = '0';
          c.recordCount = '0';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "7 POSITION A/2#0: records from position 0 lie before the checkpoint's range (line 10: no positions)",
        "10 CHECKPOINT_INVALID A/2#null: recordCount 0 is not nextPosition 0 - firstPosition 3",
        "10 CHECKPOINT_SIGNATURE A/2#null: checkpoint: signature does not verify",
        "10 POSITION A/2#0: records continue past the checkpoint's nextPosition 0 (to 2)",
      ]
    `);
    expect(problems([...lines.slice(0, 6), lines[5], ...lines.slice(6)])).toMatchInlineSnapshot(`
      [
        "7 CHECKPOINT_INVALID A/1#null: a second checkpoint for this stream generation (the first is at line 6)",
      ]
    `);
  });

  it('an unknown kid is UNKNOWN_KID, any other signature failure CHECKPOINT_SIGNATURE; a changed chainDigest CHAIN_DIGEST', () => {
    expect(
      problems(
        edit((ls) => {
          cp(ls, A, '2').signature.kid = 'no-such-kid';
          (cp(ls, B, '1').signature as { alg: string }).alg = 'none';
          const c = cp(ls, A, '1');
          c.chainDigest = (c.chainDigest.startsWith('A') ? 'B' : 'A') + c.chainDigest.slice(1);
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "6 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "6 CHAIN_DIGEST A/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        "10 UNKNOWN_KID A/2#null: checkpoint: unknown kid no-such-kid",
        "16 CHECKPOINT_SIGNATURE B/1#null: checkpoint: unsupported alg none",
      ]
    `);
  });
});

describe('operations', () => {
  it('a fence must be record 0 of fence.<epoch>', () => {
    expect(
      problems(
        edit((ls) => {
          rec(ls, A, '1', '0').wrapper.operationId = 'fence.9';
          rec(ls, B, '1', '0').wrapper.recordIndex = 1;
          fenceOf(rec(ls, A, '2', '0')).epoch = '4';
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "1 OPERATION A/1#0: a fence of epoch 1 must be record 0 of operation fence.1, not record 0 of fence.9",
        "6 CHAIN_DIGEST A/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        "7 OPERATION A/2#0: a fence of epoch 4 must be record 0 of operation fence.4, not record 0 of fence.3",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "11 OPERATION B/1#0: a fence of epoch 1 must be record 0 of operation fence.1, not record 1 of fence.1",
        "11 OPERATION B/1#0: operation fence.1 starts here with record 1, not 0",
        "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it("an operation's records count 0, 1, … at consecutive positions; an operationId is used once per stream, across generations", () => {
    expect(
      problems(
        edit((ls) => {
          rec(ls, A, '1', '3').wrapper.recordIndex = 2;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "4 OPERATION A/1#3: record 2 of operation op-8971-mx5daq83-5 follows its record 0",
        "6 CHAIN_DIGEST A/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(
      problems(
        edit((ls) => {
          rec(ls, A, '1', '1').wrapper.recordIndex = 1;
          rec(ls, A, '1', '2').wrapper.recordIndex = 1;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "2 OPERATION A/1#1: operation op-8971-mx5daq7j-3 starts here with record 1, not 0",
        "3 OPERATION A/1#2: operation op-8971-mx5daq83-5 starts here with record 1, not 0",
        "4 OPERATION A/1#3: record 1 of operation op-8971-mx5daq83-5 follows its record 1",
        "6 CHAIN_DIGEST A/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(
      problems(
        edit((ls) => {
          rec(ls, A, '2', '1').wrapper.operationId = rec(ls, A, '1', '1').wrapper.operationId;
          rec(ls, B, '1', '4').wrapper.operationId = rec(ls, B, '1', '1').wrapper.operationId;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "8 OPERATION A/2#1: operation op-8971-mx5daq7j-3 already appeared earlier in this stream",
        "10 CHAIN_DIGEST A/2#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "15 OPERATION B/1#4: operation op-8971-mx5daq7v-4 already appeared earlier in this stream",
        "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // The same operationId in the other stream is another operation.
    expect(
      problems(
        edit((ls) => {
          rec(ls, B, '1', '1').wrapper.operationId = rec(ls, A, '1', '1').wrapper.operationId;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it('after a gap or at the first record kept of a trimmed stream, an operation may start at any record index', () => {
    // Drop records 0..2 of A/1: #3 is record 1 of its operation, first in the export.
    expect(
      problems(
        edit((ls) => {
          const c = cp(ls, A, '1');
          c.firstPosition = '3';
          c.recordCount = '2';
          return without(ls, 0, 1, 2);
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "3 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "3 CHAIN_DIGEST A/1#null: the 2 records of this stream generation do not hash to the checkpoint's chainDigest (positions 3..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // A gap before #3: not contiguous, no OPERATION.
    expect(problems(without(lines, 2))).toMatchInlineSnapshot(`
      [
        "3 POSITION A/1#3: gap: positions 2..2 missing",
        "5 CHAIN_DIGEST A/1#null: the 4 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });
});

describe('receipts', () => {
  const receiptLine = () => structuredClone(rec(lines, B, '1', '3'));
  it('peerGeneration and nextPosition must be canonical decimals', () => {
    expect(
      [(r: ReturnType<typeof receiptOf>) => (r.peerGeneration = '01'), (r: ReturnType<typeof receiptOf>) => (r.nextPosition = '4.0')].map(
        (change) =>
          problems(
            edit((ls) => {
              change(receiptOf(rec(ls, B, '1', '3')));
            }),
          ),
      ),
    ).toMatchInlineSnapshot(`
      [
        [
          "14 RECEIPT B/1#3: the receipt's peerGeneration and nextPosition must be canonical decimals",
          "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        ],
        [
          "14 RECEIPT B/1#3: the receipt's peerGeneration and nextPosition must be canonical decimals",
          "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
        ],
      ]
    `);
  });

  it('a receipt that does not move forward in its stream generation is RECEIPT; a later peer generation does', () => {
    const second = (peerGeneration: string, nextPosition: string) =>
      edit((ls) => {
        const r = receiptLine();
        r.position = '5';
        r.wrapper.operationId = 'op-second';
        r.wrapper.recordIndex = 0;
        Object.assign(receiptOf(r), { peerGeneration, nextPosition });
        ls.splice(15, 0, r);
        cp(ls, B, '1').nextPosition = '6';
        cp(ls, B, '1').recordCount = '6';
      });
    expect(problems(second('1', '4'))).toMatchInlineSnapshot(`
      [
        "16 RECEIPT B/1#5: the receipt (generation 1, nextPosition 4) does not move forward from the one before it (generation 1, nextPosition 4)",
        "17 CHECKPOINT_SIGNATURE B/1#null: checkpoint: signature does not verify",
        "17 CHAIN_DIGEST B/1#null: the 6 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..5): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(problems(second('1', '3'))).toMatchInlineSnapshot(`
      [
        "16 RECEIPT B/1#5: the receipt (generation 1, nextPosition 3) does not move forward from the one before it (generation 1, nextPosition 4)",
        "17 CHECKPOINT_SIGNATURE B/1#null: checkpoint: signature does not verify",
        "17 CHAIN_DIGEST B/1#null: the 6 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..5): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(problems(second('0', '5'))).toMatchInlineSnapshot(`
      [
        "16 RECEIPT B/1#5: the receipt (generation 0, nextPosition 5) does not move forward from the one before it (generation 1, nextPosition 4)",
        "17 CHECKPOINT_SIGNATURE B/1#null: checkpoint: signature does not verify",
        "17 CHAIN_DIGEST B/1#null: the 6 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..5): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(problems(second('1', '5'))).toMatchInlineSnapshot(`
      [
        "17 CHECKPOINT_SIGNATURE B/1#null: checkpoint: signature does not verify",
        "17 CHAIN_DIGEST B/1#null: the 6 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..5): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    expect(problems(second('2', '1'))).toMatchInlineSnapshot(`
      [
        "17 CHECKPOINT_SIGNATURE B/1#null: checkpoint: signature does not verify",
        "17 CHAIN_DIGEST B/1#null: the 6 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..5): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it("a receipt beyond the peer's checkpoint is RECEIPT only if it provably existed when that checkpoint was taken", () => {
    // The receipt (B/1 #3) acknowledges A/1 up to 4. Shrink A/1's checkpoint to 0..3 (records 3, 4 dropped).
    const shrunk = (changeB: (ls: Json[]) => void) =>
      problems(
        edit((ls) => {
          const c = cp(ls, A, '1');
          c.nextPosition = '3';
          c.recordCount = '3';
          changeB(ls);
          return without(ls, 3, 4);
        }),
      );
    const late = '2030-01-01T00:00:00.000Z';
    // As exported: B signed its next message (#4) before A/1's checkpoint, so the receipt existed.
    expect(shrunk(() => undefined)).toMatchInlineSnapshot(`
      [
        "4 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "4 CHAIN_DIGEST A/1#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "12 RECEIPT B/1#3: the receipt acknowledges A generation 1 before position 4, but the export's checkpoint of it ends at 3: positions 3 were acknowledged and are not in the export",
      ]
    `);
    // B's next message and B's checkpoint are both later than A/1's checkpoint: not provable.
    expect(
      shrunk((ls) => {
        messageOf(rec(ls, B, '1', '4')).signature.createdAt = late;
      }),
    ).toMatchInlineSnapshot(`
      [
        "4 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "4 CHAIN_DIGEST A/1#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "13 SIGNATURE B/1#4: signature does not verify",
        "14 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // B's checkpoint at the same moment as A/1's: the receipt existed.
    expect(
      shrunk((ls) => {
        messageOf(rec(ls, B, '1', '4')).signature.createdAt = late;
        cp(ls, B, '1').createdAt = cp(ls, A, '1').createdAt;
      }),
    ).toMatchInlineSnapshot(`
      [
        "4 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "4 CHAIN_DIGEST A/1#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "12 RECEIPT B/1#3: the receipt acknowledges A generation 1 before position 4, but the export's checkpoint of it ends at 3: positions 3 were acknowledged and are not in the export",
        "13 SIGNATURE B/1#4: signature does not verify",
        "14 CHECKPOINT_SIGNATURE B/1#null: checkpoint: signature does not verify",
        "14 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // B signed a message after the receipt at the same moment as A/1's checkpoint: it existed.
    expect(
      shrunk((ls) => {
        messageOf(rec(ls, B, '1', '4')).signature.createdAt = cp(ls, A, '1').createdAt;
      }),
    ).toMatchInlineSnapshot(`
      [
        "4 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "4 CHAIN_DIGEST A/1#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "12 RECEIPT B/1#3: the receipt acknowledges A generation 1 before position 4, but the export's checkpoint of it ends at 3: positions 3 were acknowledged and are not in the export",
        "13 SIGNATURE B/1#4: signature does not verify",
        "14 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
    // Acknowledging exactly the checkpoint's end is fine.
    expect(
      problems(
        edit((ls) => {
          receiptOf(rec(ls, B, '1', '3')).nextPosition = '5';
          cp(ls, B, '1').createdAt = cp(ls, A, '1').createdAt;
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "16 CHECKPOINT_SIGNATURE B/1#null: checkpoint: signature does not verify",
        "16 CHAIN_DIGEST B/1#null: the 5 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..4): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });

  it('the highest receipt of a peer generation is the one compared; a single acknowledged position reads as one', () => {
    expect(
      problems(
        edit((ls) => {
          const c = cp(ls, A, '1');
          c.nextPosition = '3';
          c.recordCount = '3';
          const r = receiptLine();
          r.position = '5';
          r.wrapper.operationId = 'op-second';
          r.wrapper.recordIndex = 0;
          receiptOf(r).nextPosition = '3';
          ls.splice(15, 0, r);
          cp(ls, B, '1').nextPosition = '6';
          cp(ls, B, '1').recordCount = '6';
          cp(ls, B, '1').createdAt = c.createdAt;
          receiptOf(rec(ls, B, '1', '3')).nextPosition = '4';
          return without(ls, 3, 4);
        }),
      ),
    ).toMatchInlineSnapshot(`
      [
        "4 CHECKPOINT_SIGNATURE A/1#null: checkpoint: signature does not verify",
        "4 CHAIN_DIGEST A/1#null: the 3 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..2): a record was changed, swapped, replaced or renumbered",
        "12 RECEIPT B/1#3: the receipt acknowledges A generation 1 before position 4, but the export's checkpoint of it ends at 3: positions 3 were acknowledged and are not in the export",
        "14 RECEIPT B/1#5: the receipt (generation 1, nextPosition 3) does not move forward from the one before it (generation 1, nextPosition 4)",
        "15 CHECKPOINT_SIGNATURE B/1#null: checkpoint: signature does not verify",
        "15 CHAIN_DIGEST B/1#null: the 6 records of this stream generation do not hash to the checkpoint's chainDigest (positions 0..5): a record was changed, swapped, replaced or renumbered",
      ]
    `);
  });
});

describe('records, receipts and checkpoint ids at the edges', () => {
  it('a record of an unknown type is not a record, even carrying a fence', () => {
    const r = structuredClone(rec(lines, A, '1', '0'));
    (r.wrapper as { type: string }).type = 'chat.note';
    expect(problems([r])).toEqual(['1 NOT_A_RECORD A/1#0: not a stored record']);
  });

  it('a later, higher receipt of the same peer generation is the one compared with the checkpoint', () => {
    const found = problems(
      edit((ls) => {
        const c = cp(ls, A, '1');
        c.nextPosition = '3';
        c.recordCount = '3';
        receiptOf(rec(ls, B, '1', '3')).nextPosition = '3';
        const r = structuredClone(rec(ls, B, '1', '3'));
        r.position = '5';
        r.wrapper.operationId = 'op-second';
        r.wrapper.recordIndex = 0;
        receiptOf(r).nextPosition = '4';
        ls.splice(15, 0, r);
        cp(ls, B, '1').nextPosition = '6';
        cp(ls, B, '1').recordCount = '6';
        cp(ls, B, '1').createdAt = c.createdAt;
        return without(ls, 3, 4);
      }),
    );
    expect(found.filter((p) => p.includes('RECEIPT'))).toEqual([
      "14 RECEIPT B/1#5: the receipt acknowledges A generation 1 before position 4, but the export's checkpoint of it ends at 3: positions 3 were acknowledged and are not in the export",
    ]);
  });
});

describe('verifyCheckpoint (verify.ts) says what failed', () => {
  const problemOf = (c: Checkpoint): string => {
    try {
      verifyCheckpoint(c, jwks);
    } catch (e) {
      expect(e).toBeInstanceOf(VerificationError);
      expect((e as VerificationError).position).toBeNull();
      return named((e as Error).message);
    }
    throw new Error('verifyCheckpoint accepted it');
  };
  it('ids that do not make the streamId, and a signature that does not verify', () => {
    expect(() => {
      verifyCheckpoint(cp(lines, A, '2'), jwks);
    }).not.toThrow();
    expect(problemOf({ ...cp(lines, A, '2'), authorAgentId: ids.bob })).toBe(
      'checkpoint of A: chatId and authorAgentId do not make its streamId',
    );
    expect(problemOf({ ...cp(lines, A, '2'), recordCount: '2' })).toBe('checkpoint of A generation 2: signature does not verify');
    expect(problemOf({ ...cp(lines, A, '2'), signature: { ...cp(lines, A, '2').signature, kid: 'k0' } })).toBe(
      'checkpoint of A generation 2: unknown kid k0',
    );
  });
});
