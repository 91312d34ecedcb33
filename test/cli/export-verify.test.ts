// `yello chats export` | `yello verify` (docs/protocol.md §9, §5, §5.9): an export of a real chat
// (messages, a receipt, claim fences, each stream generation closed by a checkpoint) verifies
// offline against `keys list --json`; one changed byte of content, one changed character of a
// signature, or one deleted line is reported with its line and position (exit 1); after
// `keys rotate` an export spanning both keys verifies with the new JWKS. Tampering that keeps
// every signature valid is test/cli/export-tamper.test.ts.

import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { expectExit, parseJson, writeTokenFile, type AgentCli, type CliResult } from '../helpers/cli-runner.js';
import { messageProblems, ok, type PublicJwk, messageOf, type Result, type ExportLine } from '../helpers/wire-fixtures.js';
import { useCli } from '../helpers/use-daemon.js';
import { stringMatching } from '../helpers/matchers.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const { daemon, cli } = useCli();
let alice: AgentCli;
let bob: AgentCli;
let aliceId: string;
let bobId: string;
let chatId: string;
let exportFile: string;
let jwksFile: string;
let exportText: string;

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

beforeAll(async () => {
  const admin = await daemon().connectAs();
  const a = ok(await admin.call('agents.create', { username: 'alice', name: 'Alice' }));
  const b = ok(await admin.call('agents.create', { username: 'bob', name: 'Bob' }));
  aliceId = a.agent.id;
  bobId = b.agent.id;
  ok(await admin.call('grants.add', { agentId: aliceId, peerAgentId: bobId }));
  ok(await admin.call('grants.add', { agentId: bobId, peerAgentId: aliceId }));
  chatId = ok(await admin.call('chats.open', { agentAId: aliceId, agentBId: bobId })).chat.id;
  alice = cli().as(writeTokenFile(daemon().dir, 'alice', a.token));
  bob = cli().as(writeTokenFile(daemon().dir, 'bob', b.token));
  exportFile = path.join(daemon().dir, 'chat.jsonl');
  jwksFile = path.join(daemon().dir, 'jwks.json');
});

type Rec = ExportLine;

const lines = (text: string) => text.split('\n').filter((l) => l !== '');
/** One line of an export, as the CLI wrote it. */
const parseLine = (l: string) => JSON.parse(l) as Rec;

/** Writes `text` next to the export and returns the path. */
function variant(name: string, text: string): string {
  const p = path.join(daemon().dir, name);
  fs.writeFileSync(p, text);
  return p;
}

/** Replaces the character at `index` of `line` with a different one from `alphabet`. */
function changeChar(line: string, index: number, alphabet: string, pick: (i: number) => number = (i) => (i + 1) % alphabet.length): string {
  const old = line[index]!;
  const i = alphabet.indexOf(old);
  const repl = alphabet[pick(i < 0 ? 0 : i)]!;
  expect(repl).not.toBe(old);
  return line.slice(0, index) + repl + line.slice(index + 1);
}

function expectReported(r: CliResult, lineNo: number, position: string, problem: RegExp): void {
  expectExit(r, 1);
  const report = r.stdout.split('\n').find((l) => l.startsWith(`line ${lineNo}:`));
  expect(report, r.stdout).toBeDefined();
  expect(report).toMatch(new RegExp(`position ${position}\\b`));
  expect(report).toMatch(problem);
  expect(r.stdout).toMatch(/[1-9]\d* problems?\b/);
}

describe('chats export | verify', () => {
  it('exports every record (messages, a receipt, fences) and verifies with 0 problems', async () => {
    await Promise.all([alice.ok(['send', chatId, 'one: the report is attached']), bob.ok(['send', chatId, 'got it'])]);
    await alice.ok(['send', chatId, 'two: tell me what you think']);
    const acked = await bob.ok(['ack', chatId]);
    expect(acked.stdout).toMatch(/acknowledged/);

    const [toFile, toStdout, keys] = await Promise.all([
      cli().run(['chats', 'export', chatId, '--out', exportFile]),
      alice.run(['chats', 'export', chatId]),
      cli().run(['keys', 'list', '--json']),
    ]);
    expectExit(toFile, 0);
    expectExit(toStdout, 0);
    fs.writeFileSync(jwksFile, expectExit(keys, 0).stdout);
    exportText = fs.readFileSync(exportFile, 'utf8');
    // Checkpoints are signed when taken, so two exports differ only in their createdAt and signature.
    const recordLines = (text: string) => lines(text).filter((l) => !l.startsWith('{"checkpoint":'));
    expect(recordLines(toStdout.stdout)).toEqual(recordLines(exportText));
    const records = recordLines(exportText).map(parseLine);
    const checkpoints = lines(exportText)
      .filter((l) => l.startsWith('{"checkpoint":'))
      .map((l) => parseLine(l).checkpoint);
    expect(checkpoints).toHaveLength(2);
    expect(toFile.stderr).toContain(`${records.length} records and 2 checkpoints`);
    const types = records.map((r) => r.wrapper?.type);
    expect(types.filter((t) => t === 'chat.message')).toHaveLength(3);
    expect(types.filter((t) => t === 'chat.receipt')).toHaveLength(1);
    // One fence per stream: the CLI keeps its claim between sends (and bob's ack reuses his).
    expect(types.filter((t) => t === 'chat.writer-fence')).toHaveLength(2);
    // Independent check of every exported message against the JWKS file.
    const jwks = JSON.parse(fs.readFileSync(jwksFile, 'utf8')) as { keys: PublicJwk[] };
    for (const r of records.filter((x) => x.wrapper?.type === 'chat.message')) expect(messageProblems(messageOf(r), jwks.keys)).toEqual([]);

    const [human, json] = await Promise.all([
      cli().run(['verify', exportFile, '--jwks', jwksFile]),
      cli().run(['verify', exportFile, '--jwks', jwksFile, '--json']),
    ]);
    expect(expectExit(human, 0).stdout).toMatch(/\b0 problems\b/);
    expect(human.stdout).toContain(`${records.length} records`);
    expect(parseJson(expectExit(json, 0))).toMatchObject({ records: records.length, messages: 3, checkpoints: 2, problems: [] });
  });

  it('verify - reads the export from stdin (as its help says)', async () => {
    const r = await cli().run(['verify', '-', '--jwks', jwksFile], { input: exportText });
    expect(expectExit(r, 0).stdout).toMatch(/\b0 problems\b/);
  });

  it('one changed byte of content, one changed signature character, one deleted line: exit 1 naming line and position', async () => {
    const ls = lines(exportText);
    const records = ls.map(parseLine);
    const msgIdx = records.findIndex((r) => r.wrapper?.type === 'chat.message');
    const sigIdx = records.findLastIndex((r) => r.wrapper?.type === 'chat.message');
    expect(sigIdx).not.toBe(msgIdx);

    // One byte of the content (an ASCII letter, so the file stays UTF-8 and JSON).
    const contentAt = ls[msgIdx]!.indexOf('"content":"') + '"content":"'.length;
    const t1 = [...ls];
    t1[msgIdx] = changeChar(ls[msgIdx]!, contentAt, 'abcdefghijklmnopqrstuvwxyz');
    // One character in the middle of the signature value.
    const valueAt = ls[sigIdx]!.indexOf('"value":"') + '"value":"'.length;
    const t2 = [...ls];
    t2[sigIdx] = changeChar(ls[sigIdx]!, valueAt + 20, B64URL);
    // One deleted line with records of the same stream before and after it.
    const delIdx = records.findIndex(
      (r, i) =>
        i > 0 &&
        i < records.length - 1 &&
        r.wrapper &&
        records[i - 1]!.streamId! === r.streamId &&
        records[i + 1]!.streamId! === r.streamId,
    );
    expect(delIdx).toBeGreaterThan(0);
    const t3 = ls.filter((_, i) => i !== delIdx);

    const [r1, r1json, r2, r3] = await Promise.all([
      cli().run(['verify', variant('t1.jsonl', t1.join('\n') + '\n'), '--jwks', jwksFile]),
      cli().run(['verify', variant('t1.jsonl', t1.join('\n') + '\n'), '--jwks', jwksFile, '--json']),
      cli().run(['verify', variant('t2.jsonl', t2.join('\n') + '\n'), '--jwks', jwksFile]),
      cli().run(['verify', variant('t3.jsonl', t3.join('\n') + '\n'), '--jwks', jwksFile]),
    ]);
    expectReported(r1, msgIdx + 1, records[msgIdx]!.position!, /content/i);
    const j = parseJson(expectExit(r1json, 1)) as { problems: unknown[] };
    // The changed content, and the checkpoint's chain digest of that stream generation.
    expect(j.problems).toHaveLength(2);
    expect(j.problems[0]).toMatchObject({
      line: msgIdx + 1,
      streamId: records[msgIdx]!.streamId!,
      generation: '1',
      position: records[msgIdx]!.position!,
      kind: 'CONTENT_HASH',
    });
    expect(j.problems[1]).toMatchObject({ streamId: records[msgIdx]!.streamId!, generation: '1', kind: 'CHAIN_DIGEST' });
    expectReported(r2, sigIdx + 1, records[sigIdx]!.position!, /signature/i);
    // The gap is reported at the line after the deleted one (now line delIdx + 1), naming the missing position.
    const missing = records[delIdx]!.position!;
    expectExit(r3, 1);
    expect(r3.stdout).toMatch(new RegExp(`gap: positions ${missing}\\.\\.${missing} missing`));
    expect(r3.stdout).toMatch(new RegExp(`line ${delIdx + 1}: .*position ${records[delIdx + 1]!.position!}\\b`));
  });

  it('a signature value whose last character was changed does not verify', async () => {
    // base64url of 64 bytes is 86 characters; the last one carries 2 data bits and 4 spare
    // bits. Changing only spare bits leaves the decoded bytes equal, so a lax decoder accepts
    // text that is not what the daemon signed and exported.
    const ls = lines(exportText);
    const records = ls.map(parseLine);
    const idx = records.findIndex((r) => r.wrapper?.type === 'chat.message');
    const value: string = messageOf(records[idx]).signature.value;
    expect(value).toHaveLength(86);
    const valueEnd = ls[idx]!.indexOf(value) + value.length - 1;
    const t = [...ls];
    t[idx] = changeChar(ls[idx]!, valueEnd, B64URL, (i) => i ^ 1);
    const r = await cli().run(['verify', variant('t4.jsonl', t.join('\n') + '\n'), '--jwks', jwksFile]);
    expectReported(r, idx + 1, records[idx]!.position!, /signature/i);
  });

  it('verify usage errors exit 2 (no --jwks, a file that is not a JWKS)', async () => {
    const notJwks = variant('not-jwks.json', '{"hello": 1}');
    const [noJwks, bad] = await Promise.all([cli().run(['verify', exportFile]), cli().run(['verify', exportFile, '--jwks', notJwks])]);
    expectExit(noJwks, 2);
    expectExit(bad, 2);
    expect(bad.stderr).toMatch(/JWKS/);
  });

  it('after keys rotate, an export spanning both keys verifies with the new JWKS (not with the old one)', async () => {
    const oldJwks = JSON.parse(fs.readFileSync(jwksFile, 'utf8')) as Result<'keys.list'>;
    const oldKid = oldJwks.keys[0]!.kid;
    const rotated = await cli().ok(['keys', 'rotate']);
    const newKid = /active kid (\S+)/.exec(rotated.stdout)?.[1];
    expect(newKid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(newKid).not.toBe(oldKid);
    const after = await bob.json<Result<'streams.append'>>(['send', chatId, 'signed with the new key']);
    expect(messageOf(after.records[0]).signature.kid).toBe(newKid);
    const third = await cli().json<Result<'keys.rotate'>>(['keys', 'rotate']);
    expect(third).toEqual({ kid: stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(third.kid).not.toBe(newKid);

    const spanFile = path.join(daemon().dir, 'span.jsonl');
    const newJwksFile = path.join(daemon().dir, 'jwks2.json');
    const [exp, keysJson, keysHuman] = await Promise.all([
      cli().run(['chats', 'export', chatId, '--out', spanFile]),
      cli().run(['keys', 'list', '--json']),
      cli().run(['keys', 'list']),
    ]);
    expectExit(exp, 0);
    fs.writeFileSync(newJwksFile, expectExit(keysJson, 0).stdout);
    const jwks = JSON.parse(keysJson.stdout) as Result<'keys.list'>;
    expect(jwks.keys).toHaveLength(3);
    const status = Object.fromEntries(jwks.keys.map((k) => [k.kid, k.status]));
    expect(status).toEqual({ [oldKid]: 'retired', [newKid!]: 'retired', [third.kid]: 'active' });
    expectExit(keysHuman, 0);
    for (const kid of [oldKid, newKid!, third.kid]) expect(keysHuman.stdout).toContain(kid);
    expect(keysHuman.stdout).toMatch(/retired/);

    const records = lines(fs.readFileSync(spanFile, 'utf8')).map(parseLine);
    const kids = new Set(records.filter((r) => r.wrapper?.type === 'chat.message').map((r) => messageOf(r).signature.kid));
    // Checkpoints are signed with the key active when the export ran.
    expect(new Set(records.filter((r) => r.checkpoint).map((r) => r.checkpoint!.signature.kid))).toEqual(new Set([third.kid]));
    expect(kids).toEqual(new Set([oldKid, newKid]));

    const [good, stale] = await Promise.all([
      cli().run(['verify', spanFile, '--jwks', newJwksFile]),
      cli().run(['verify', spanFile, '--jwks', jwksFile]),
    ]);
    expect(expectExit(good, 0).stdout).toMatch(/\b0 problems\b/);
    // The pre-rotation JWKS does not know the new kid: that message is named.
    const newIdx = records.findIndex((r) => r.wrapper?.type === 'chat.message' && messageOf(r).signature.kid === newKid);
    expectReported(stale, newIdx + 1, records[newIdx]!.position!, /kid/);
  });
});
