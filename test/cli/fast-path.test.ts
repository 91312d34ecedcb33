// The fast path of `send`, `inbox` and `status` (src/cli/fast-args.ts, run.ts): their plain
// forms run the program's own handlers without loading yargs. What it must never do is answer
// otherwise than the yargs program: each form below runs both ways, in-process, against a real
// daemon (runCli, which takes the fast path, and runProgram, the yargs program alone), and the
// exit code, stdout and stderr must match; the forms the fast parser leaves to the program must
// be the ones it cannot read exactly as yargs does. The binary loads no package for them (no yargs, no zod).

import path from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { parseFastCommand } from '../../src/cli/fast-args.js';
import { Io, type CliIo } from '../../src/cli/io.js';
import { runCli, runProgram } from '../../src/cli/program.js';
import { cliEnv, describeRun, runCli as runBinaryOrInProcess, yelloBin } from '../helpers/cli-runner.js';
import { spawnAsync } from '../helpers/spawn-async.js';
import { ok, uniq } from '../helpers/wire-fixtures.js';
import { useCli, type CliPair } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const { daemon, cli, pair, admin } = useCli();

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** One in-process run, through runCli (fast path when it applies) or the yargs program alone. */
async function runWay(way: 'fast' | 'program', args: string[], input = ''): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  const sink = (add: (s: string) => void) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        add(chunk.toString());
        done();
      },
    });
  const stdin = new PassThrough();
  stdin.end(input);
  const cliIo: CliIo = {
    stdout: sink((s) => (stdout += s)),
    stderr: sink((s) => (stderr += s)),
    stdin,
    env: cliEnv(cli().env()),
  };
  let code: number;
  if (way === 'fast') code = await runCli(args, cliIo);
  else {
    const io = new Io(cliIo);
    try {
      code = await runProgram(args, io, cliIo);
    } finally {
      io.close();
    }
  }
  return { code, stdout, stderr };
}

/** What differs between two sends of the same text: positions, ids, signatures, times. */
function sameSend(text: string): string {
  return text
    .replace(/"(operationId|clientMessageId|value|createdAt|messageId|batchId)":"[^"]*"/g, '"$1":"…"')
    .replace(/"(firstPosition|nextPosition|position)":"\d+"/g, '"$1":"N"')
    .replace(/position \d+/g, 'position N');
}

/** What differs between two reads of messages sent alike: what sameSend evens out, and times and positions shown. */
function sameRead(text: string): string {
  return sameSend(text)
    .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'T')
    .replace(/#\d+/g, '#N')
    .replace(/"(streamId|generation)":"[^"]*"/g, '"$1":"…"')
    .replace(/"fromPosition":"\d+"/g, '"fromPosition":"N"');
}

interface BothOptions {
  input?: string;
  /** Evens out what a repeated append changes. */
  normalize?: (s: string) => string;
  /** Run before each way (the peer writes again, so that each way has something to acknowledge). */
  before?: () => Promise<unknown>;
}

/** Both ways, in turn; `args` is asked once per way. */
async function bothWays(args: string[] | (() => string[]), opts: BothOptions = {}) {
  const norm = opts.normalize ?? ((s: string) => s);
  const argv = typeof args === 'function' ? args : () => args;
  await opts.before?.();
  const fast = await runWay('fast', argv(), opts.input);
  await opts.before?.();
  const program = await runWay('program', argv(), opts.input);
  const seen = (r: Ran) => ({ code: r.code, stdout: norm(r.stdout), stderr: norm(r.stderr) });
  return { fast: seen(fast), program: seen(program), raw: fast };
}

const withToken = (p: CliPair, ...args: string[]) => ['--token-file', p.bob.tokenFile, ...args];

describe('parseFastCommand', () => {
  it('reads the plain forms, with the values yargs gives their handlers', () => {
    expect(parseFastCommand(['status'])).toEqual({ command: 'status', args: { json: false } });
    expect(parseFastCommand(['--json', 'status', '--socket=/s', '--wait', '5'])).toEqual({
      command: 'status',
      args: { json: true, socket: '/s', wait: '5' },
    });
    expect(parseFastCommand(['inbox', '--token-file', 't', '--wait', '2.5', '--json'])).toEqual({
      command: 'inbox',
      args: { json: true, 'token-file': 't', wait: 2.5 },
    });
    expect(parseFastCommand(['send', 'chat_1', 'hello', 'there', '--ack', '--message-id', 'm1', '--state-dir', 'd'])).toEqual({
      command: 'send',
      args: {
        json: false,
        'state-dir': 'd',
        chatId: 'chat_1',
        text: ['hello', 'there'],
        'message-id': 'm1',
        replace: false,
        release: false,
        lossy: false,
        ack: true,
      },
    });
    expect(parseFastCommand(['chats', 'read', 'chat_1', '--wait', '60', '--ack', '--token-file', 't'])).toEqual({
      command: 'chats read',
      args: { json: false, 'token-file': 't', chatId: 'chat_1', ack: true, replace: false, wait: 60, from: 'acknowledged' },
    });
    expect(parseFastCommand(['--json', 'chats', 'read', '--from=generation-start', 'chat_1', '--replace'])).toEqual({
      command: 'chats read',
      args: { json: true, chatId: 'chat_1', ack: false, replace: true, from: 'generation-start' },
    });
    expect(parseFastCommand(['ack', 'chat_1', '--replace', '--json'])).toEqual({
      command: 'ack',
      args: { json: true, chatId: 'chat_1', replace: true },
    });
    // A lone "-" is stdin, as for yargs (which hands the handler [] for it).
    expect(parseFastCommand(['send', 'chat_1', '-'])).toMatchObject({ command: 'send', args: { text: ['-'] } });
    // Words that look like numbers stay words, as yargs keeps them (the positional is a string).
    expect(parseFastCommand(['send', 'chat_1', '42', '1e3'])).toMatchObject({ args: { text: ['42', '1e3'] } });
  });

  it('leaves to the program every form it cannot read exactly as yargs does', () => {
    const left = [
      [],
      ['--version'],
      ['status', '--help'],
      ['status', '-h'],
      ['help', 'status'],
      ['status', 'extra'],
      ['status', '--wait'],
      ['status', '--wait='],
      ['status', '--wait', '-1'],
      ['status', '--json=false'],
      ['status', '--no-json'],
      ['status', '--json', 'true'],
      ['status', '--socket', '/a', '--socket', '/b'],
      ['status', '--dataDir', 'd'],
      ['status', '--wat'],
      ['--wait', '5', 'status'],
      ['inbox', '--wait'],
      ['inbox', '--wait', 'soon'],
      ['inbox', '--wait', '1e3'],
      ['inbox', '--wait', '05'],
      ['send', 'chat_1'],
      ['send', '-', 'hi'],
      ['send', 'chat_1', 'a', '-'],
      ['send', 'chat_1', 'hi', '--', '--ack'],
      ['send', 'chat_1', '--ack', 'true', 'hi'],
      ['send', 'chat_1', 'hi', '--coordinator-token', 'x'],
      ['send', 'chat_1', 'hi', '--coordinator-token-file', '-'],
      ['send', 'chat_1', ''],
      ['send', 'chat_1', '-5'],
      ['send', 'chat_1', 'hi', '--message-id'],
      ['chats', 'list'],
      ['chats'],
      ['chats', 'read'],
      ['chats', 'read', 'chat_1', 'chat_2'],
      ['chats', 'read', '-'],
      ['chats', 'read', 'chat_1', '--from', 'start'],
      ['chats', 'read', 'chat_1', '--wait', 'soon'],
      ['chats', 'read', 'chat_1', '--cursor-in', 'c'],
      ['chats', '--ack', 'read', 'chat_1'],
      ['chats', 'follow', 'chat_1'],
      ['read', 'chat_1'],
      ['ack'],
      ['ack', 'chat_1', 'chat_2'],
      ['ack', '-'],
      ['ack', 'chat_1', '--replace', 'true'],
      ['ack', 'chat_1', '--ack'],
      ['agents', 'add', 'status'],
    ];
    for (const argv of left) expect(parseFastCommand(argv), JSON.stringify(argv)).toBeNull();
  });
});

describe('the fast path answers as the yargs program does', () => {
  it('status: admin and agent, human and --json, and its failures', async () => {
    const p = await pair();
    const forms = [
      ['status'],
      ['status', '--wait', '5'],
      ['--json', 'status', '--wait=5'],
      withToken(p, 'status'),
      ['status', '--wait', 'soon'],
      ['status', '--wait', '0'],
      ['status', '--data-dir', path.join(daemon().dir, 'nowhere')],
      ['status', '--socket', path.join(daemon().dir, 'nowhere.sock')],
      ['status', '--token-file', path.join(daemon().dir, 'no-such.token')],
    ];
    for (const args of forms) {
      // uptime is in seconds: both runs fall in the same second but for a rare boundary.
      const r = await bothWays(args, {
        normalize: (s) => s.replace(/uptime +\d+ s/, 'uptime N s').replace(/"uptimeMs":\d+/, '"uptimeMs":N'),
      });
      expect(parseFastCommand(args), JSON.stringify(args)).not.toBeNull();
      expect(r.fast, JSON.stringify(args)).toEqual(r.program);
    }
    expect((await runWay('fast', ['status'])).stdout).toMatch(/^version +\S+\n/);
  });

  it('inbox: with and without --wait and --json, and its failures', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'one for bob']);
    const forms = [
      withToken(p, 'inbox'),
      withToken(p, 'inbox', '--json'),
      withToken(p, '--json', 'inbox', '--wait', '0'),
      withToken(p, 'inbox', '--wait', '0.2'),
      ['inbox'],
      ['inbox', '--token-file', path.join(daemon().dir, 'no-such.token')],
    ];
    for (const args of forms) {
      const r = await bothWays(args);
      expect(parseFastCommand(args), JSON.stringify(args)).not.toBeNull();
      expect(r.fast, JSON.stringify(args)).toEqual(r.program);
    }
    const listed = await runWay('fast', withToken(p, 'inbox'));
    expect(listed.stdout).toContain('one for bob');
  });

  it('chats read: unread once, --json, --ack, --wait, --from, and its failures', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'one for bob']);
    const read = (...more: string[]) => withToken(p, 'chats', 'read', p.chatId, ...more);
    // Nothing acknowledged between the two ways: each reads the same unread message.
    const forms: Array<{ args: string[]; fast?: boolean }> = [
      { args: read() },
      { args: withToken(p, '--json', 'chats', 'read', p.chatId) },
      { args: read('--from', 'generation-start') },
      { args: read('--from=end', '--wait', '0.2') },
      { args: withToken(p, 'chats', 'read', 'chat_nope') },
      { args: ['chats', 'read', p.chatId] },
      // Left to the program; the same answers all the same.
      { args: read('--from', 'start'), fast: false },
      { args: read('--wait', '-1'), fast: false },
    ];
    for (const form of forms) {
      const r = await bothWays(form.args, { normalize: sameRead });
      expect(parseFastCommand(form.args) !== null, JSON.stringify(form.args)).toBe(form.fast ?? true);
      expect(r.fast, JSON.stringify(form.args)).toEqual(r.program);
    }
    expect((await runWay('fast', read())).stdout).toContain('one for bob');
    // Acknowledged: each way reads and acknowledges the one message the peer sent just before it.
    expect((await runWay('fast', read('--ack'))).code).toBe(0);
    const ping = () => p.alice.ok(['send', p.chatId, 'ping']);
    for (const args of [read('--ack'), withToken(p, '--json', 'chats', 'read', p.chatId, '--ack', '--wait', '5')]) {
      const r = await bothWays(args, { normalize: sameRead, before: ping });
      expect(r.fast.code, r.fast.stderr).toBe(0);
      expect(r.fast.stdout, JSON.stringify(args)).toContain('ping');
      expect(r.fast, JSON.stringify(args)).toEqual(r.program);
    }
    // Nothing left: both ways wait out --wait and say so.
    const idle = await bothWays(read('--wait', '0.2'), { normalize: sameRead });
    expect(idle.fast.stderr).toContain('no new message within 0.2 s');
    expect(idle.fast).toEqual(idle.program);
  });

  it('ack: what the peer sent, --json, nothing new, and its failures', async () => {
    const p = await pair();
    const ping = () => p.alice.ok(['send', p.chatId, 'ping']);
    // Each way acknowledges the one message the peer sent just before it.
    for (const args of [withToken(p, 'ack', p.chatId), withToken(p, '--json', 'ack', p.chatId)]) {
      const r = await bothWays(args, { normalize: sameRead, before: ping });
      expect(r.fast.code, r.fast.stderr).toBe(0);
      expect(parseFastCommand(args), JSON.stringify(args)).not.toBeNull();
      expect(r.fast, JSON.stringify(args)).toEqual(r.program);
    }
    const forms: Array<{ args: string[]; fast?: boolean }> = [
      { args: withToken(p, 'ack', p.chatId) },
      { args: withToken(p, '--json', 'ack', p.chatId, '--replace') },
      { args: withToken(p, 'ack', 'chat_nope') },
      { args: ['ack', p.chatId] },
      // Left to the program; the same answers all the same.
      { args: withToken(p, 'ack'), fast: false },
      { args: withToken(p, 'ack', p.chatId, 'more'), fast: false },
    ];
    for (const form of forms) {
      const r = await bothWays(form.args, { normalize: sameRead });
      expect(parseFastCommand(form.args) !== null, JSON.stringify(form.args)).toBe(form.fast ?? true);
      expect(r.fast, JSON.stringify(form.args)).toEqual(r.program);
    }
    expect((await runWay('fast', withToken(p, 'ack', p.chatId))).stdout).toBe('nothing new to acknowledge\n');
  });

  it('send: text, stdin, --ack, --json, --message-id, and its failures', async () => {
    const p = await pair();
    const ping = () => p.alice.ok(['send', p.chatId, 'ping']);
    let n = 0;
    const forms: Array<{ args: () => string[]; input?: string; fast?: boolean }> = [
      { args: () => withToken(p, 'send', p.chatId, 'hello', 'there') },
      { args: () => withToken(p, 'send', p.chatId, 'answered', '--ack') },
      { args: () => withToken(p, '--json', 'send', p.chatId, 'as json', '--ack') },
      { args: () => withToken(p, 'send', p.chatId, '-'), input: 'from stdin\n' },
      { args: () => withToken(p, 'send', p.chatId, '--release', '--message-id', `m-${++n}`, 'released') },
      { args: () => withToken(p, 'send', p.chatId, '--lossy', '-'), input: 'lossy allowed' },
      { args: () => withToken(p, 'send', 'chat_nope', 'hi') },
      { args: () => ['send', p.chatId, 'no token'] },
      // Left to the program; the same answers all the same.
      { args: () => withToken(p, 'send', p.chatId, 'hi', '--coordinator-token', 'x'), fast: false },
      { args: () => withToken(p, 'send', p.chatId), fast: false },
      { args: () => withToken(p, 'send', p.chatId, '--ack', 'true', 'acked'), fast: false },
    ];
    for (const form of forms) {
      const args = form.args();
      const r = await bothWays(form.args, { input: form.input, normalize: sameSend, before: ping });
      expect(parseFastCommand(args) !== null, JSON.stringify(args)).toBe(form.fast ?? true);
      expect(r.fast, JSON.stringify(args)).toEqual(r.program);
    }
    // A message id repeated: the second way finds it stored, both ways alike.
    const once = await runWay('fast', withToken(p, 'send', p.chatId, '--message-id', 'dup', 'x'));
    expect(once.code, once.stderr).toBe(0);
    const again = await bothWays(withToken(p, 'send', p.chatId, '--message-id', 'dup', 'x'), { normalize: sameSend });
    expect(again.fast.code).toBe(1);
    expect(again.fast).toEqual(again.program);
  });

  it('the binary prints what the in-process run prints, and loads no package (neither yargs, zod nor the MCP SDK) and no collation', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'for the binary']);
    for (const args of [withToken(p, 'inbox', '--json'), withToken(p, 'send', 'chat_nope', 'hi'), ['inbox']]) {
      const [bin, here] = await Promise.all([
        runBinaryOrInProcess(args, { process: true, env: cli().env() }),
        runBinaryOrInProcess(args, { env: cli().env() }),
      ]);
      expect({ code: bin.code, stdout: bin.stdout, stderr: bin.stderr }, describeRun(bin)).toEqual({
        code: here.code,
        stdout: here.stdout,
        stderr: here.stderr,
      });
    }
    // A second chat of bob's, so that the inbox sorts its list.
    const carol = ok(await admin().call('agents.create', { username: uniq('carol'), name: 'Carol' }));
    ok(await admin().call('chats.open', { agentAId: carol.agent.id, agentBId: p.b.id }));
    const refuse = `export async function resolve(s, c, next) { const r = await next(s, c); if (/\\/node_modules\\//.test(r.url)) throw new Error('loaded ' + r.url + ' from ' + c.parentURL); return r; }`;
    for (const args of [
      ['status'],
      withToken(p, 'inbox'),
      withToken(p, 'send', p.chatId, 'without yargs'),
      withToken(p, 'chats', 'read', p.chatId),
    ]) {
      const script = [
        "import { register } from 'node:module';",
        `register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(refuse)}));`,
        // The first localeCompare of a process loads ICU's collation: ~10 ms of the start (issue 54).
        "String.prototype.localeCompare = () => { throw new Error('localeCompare on a fast path'); };",
        `process.argv = [process.execPath, ${JSON.stringify(yelloBin)}, ...${JSON.stringify(args)}];`,
        `await import(${JSON.stringify(pathToFileURL(yelloBin).href)});`,
      ].join('\n');
      // Not spawnSync: the daemon runs in this worker and must answer meanwhile.
      const r = await spawnAsync(process.execPath, ['--input-type=module', '-e', script], {
        env: cliEnv(cli().env()),
        timeout: 30_000,
      });
      expect(r.stderr, JSON.stringify(args)).toBe('');
      expect(r.status, JSON.stringify(args)).toBe(0);
    }
  });
});
