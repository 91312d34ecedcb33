// The `yello` CLI as the admin tool (docs/protocol.md §9, §2): help and completion, usage errors
// (exit 2), `daemon`, `status`, `agents …`, `grants …`, `keys list`, one-line errors (exit 1),
// each in human and `--json` form, against a real daemon.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { expectExit, oneLineErrorProblems, parseJson, runCli, writeTokenFile, type CliResult } from '../helpers/cli-runner.js';
import { type Result } from '../helpers/wire-fixtures.js';
import { useCli } from '../helpers/use-daemon.js';
import { anyOf, stringMatching } from '../helpers/matchers.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const { daemon, cli } = useCli();

const mode = (p: string) => fs.statSync(p).mode & 0o777;
const nonEmptyLines = (s: string) => s.split('\n').filter((l) => l.trim() !== '');

function expectOneLineError(r: CliResult, code: number, pattern?: RegExp): void {
  expectExit(r, code);
  expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
  if (pattern) expect(r.stderr).toMatch(pattern);
}

describe('help and completion', () => {
  it('--help lists every §9 command; each group and command has --help (exit 0)', async () => {
    const groups: Record<string, string[]> = {
      agents: ['add', 'list', 'show', 'rotate-token', 'disable', 'policy'],
      grants: ['add', 'rm', 'list'],
      chats: ['open', 'list', 'show', 'permissions', 'history', 'follow', 'export'],
      streams: ['show', 'claim', 'release', 'trim', 'reset'],
      ops: ['show', 'list'],
      keys: ['list', 'rotate'],
    };
    const runs = await Promise.all([
      runCli(['--help']),
      ...Object.keys(groups).map((g) => runCli([g, '--help'])),
      runCli(['daemon', '--help']),
      runCli(['send', '--help']),
    ]);
    const [top, ...rest] = runs;
    expectExit(top, 0);
    for (const cmd of [
      'daemon',
      'status',
      'agents',
      'grants',
      'chats',
      'send',
      'ack',
      'streams',
      'ops',
      'keys',
      'verify',
      'demo',
      'completion',
    ]) {
      expect(top.stdout).toMatch(new RegExp(`yello ${cmd}\\b`));
    }
    expect(top.stdout).toContain('--json');
    expect(top.stdout).toContain('--socket');
    expect(top.stdout).toContain('--token-file');
    // Exit codes are documented.
    expect(top.stdout).toMatch(/3 continuity/);
    Object.entries(groups).forEach(([g, subs], i) => {
      const r = expectExit(rest[i]!, 0);
      for (const s of subs) expect(r.stdout, `${g} --help lists ${s}`).toMatch(new RegExp(`yello ${g} ${s}\\b`));
    });
    const [daemonHelp, sendHelp] = rest.slice(Object.keys(groups).length);
    expectExit(daemonHelp!, 0);
    for (const flag of ['--socket', '--data-dir', '--log-level', '--policy']) expect(daemonHelp!.stdout).toContain(flag);
    expectExit(sendHelp!, 0);
    expect(sendHelp!.stdout).toContain('--coordinator-token-file');
    expect(sendHelp!.stdout).toContain('stdin');
  });

  it('completion prints a shell completion script', async () => {
    const r = expectExit(await runCli(['completion']), 0);
    expect(r.stdout).toMatch(/complete|compdef/);
    expect(r.stdout).toContain('yello');
    expect(r.stdout.split('\n').length).toBeGreaterThan(5);
  });

  it('usage errors exit 2: unknown command, missing argument, missing subcommand, bad choice, agent command without a token', async () => {
    const [unknown, missing, noSub, badChoice, noToken, claimNoToken] = await Promise.all([
      cli().run(['frobnicate']),
      cli().run(['chats', 'show']),
      cli().run(['agents']),
      cli().run(['agents', 'policy', 'someone', 'bogus']),
      cli().run(['send', 'chat_x', 'hello']),
      cli().run(['streams', 'claim', 'chat_x:agt_y']),
    ]);
    for (const r of [unknown, missing, noSub, badChoice, noToken, claimNoToken]) {
      expectExit(r, 2);
      expect(r.stdout).toBe('');
      expect(r.stderr).not.toMatch(/\n\s{4}at /);
    }
    expect(missing.stderr).toMatch(/argument/i);
    expect(badChoice.stderr).toMatch(/bogus/);
    for (const r of [noToken, claimNoToken]) expect(r.stderr).toMatch(/--token-file|YELLO_TOKEN/);
  });
});

describe('daemon', () => {
  it('a second daemon on the same data dir (and socket) exits 73 and leaves the first one serving', async () => {
    const second = await runCli(['daemon', '--socket', daemon().socketPath, '--data-dir', daemon().dataDir, '--log-level', 'warn'], {
      timeoutMs: 15_000,
      process: true,
    });
    expectExit(second, 73);
    expect(second.stderr).toMatch(/lock/i);
    // The socket was not touched: the first daemon still answers.
    const st = await cli().json<Result<'daemon.status'>>(['status']);
    expect(st.storage).toBe('ok');
  });

  it('bad option values exit 2 with one usage line, on both the fast start path and the yargs path', async () => {
    const dir = path.join(daemon().dir, 'never');
    const base = ['daemon', '--socket', path.join(dir, 's.sock'), '--data-dir', dir];
    const daemonRun = (args: string[]) => runCli([...base, ...args], { process: true });
    const runs = await Promise.all([
      daemonRun(['--max-line-bytes', 'abc']), // not a number: the fast path hands over to yargs
      daemonRun(['--max-connections', '0']), // a number, but not a usable one
      daemonRun(['--socket-mode', '999']),
      daemonRun(['--policy', 'nope']), // a choice yargs rejects
      daemonRun(['--bogus-flag']),
      daemonRun(['--sign-workers', '-1']),
    ]);
    for (const r of runs) {
      expectExit(r, 2);
      expect(r.stderr).toMatch(/max-line-bytes|max-connections|socket-mode|policy|bogus-flag|sign-workers/);
    }
    // Nothing started: no socket, no data dir.
    expect(fs.existsSync(dir)).toBe(false);
  });
});

describe('status', () => {
  it('human and --json', async () => {
    const [human, json] = await Promise.all([cli().ok(['status']), cli().run(['status', '--json'])]);
    expect(human.stdout).toMatch(/version\s+\d+\.\d+\.\d+/);
    expect(human.stdout).toMatch(/storage\s+ok/);
    expect(human.stdout).toMatch(/kid\s+[A-Za-z0-9_-]{43}/);
    const s = parseJson(expectExit(json, 0)) as Result<'daemon.status'>;
    expect(s).toMatchObject({
      version: anyOf(String),
      uptimeMs: anyOf(Number),
      storage: 'ok',
      kid: stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    for (const k of ['agents', 'chats', 'streams', 'records']) expect(typeof s.counts[k as keyof typeof s.counts]).toBe('number');
  });

  it('exits 1 with one line when no daemon answers on the socket', async () => {
    const r = await runCli(['status'], { env: { YELLO_SOCKET: path.join(daemon().dir, 'nobody.sock'), YELLO_DATA_DIR: daemon().dataDir } });
    expectOneLineError(r, 1);
  });

  it('flags work instead of the environment (--socket, --data-dir, --admin-token-file)', async () => {
    const r = await runCli([
      '--socket',
      daemon().socketPath,
      '--admin-token-file',
      path.join(daemon().dataDir, 'admin.token'),
      'status',
      '--json',
    ]);
    expect((parseJson(expectExit(r, 0)) as Result<'daemon.status'>).storage).toBe('ok');
    const r2 = await runCli(['--socket', daemon().socketPath, '--data-dir', path.join(daemon().dir, 'empty'), 'status']);
    // No admin token there: a usage problem, one line.
    expectOneLineError(r2, 2, /admin/);
  });
});

describe('agents', () => {
  let alice: { id: string; tokenFile: string };
  let bobId: string;

  it('add prints the token once (human), or writes it to a 0600 file with --token-out', async () => {
    const human = await cli().ok(['agents', 'add', 'alice', '--name', 'Alice']);
    const tokens = human.stdout.match(/yello_agt_[A-Za-z0-9_-]+/g) ?? [];
    expect(tokens).toHaveLength(1);
    expect(human.stdout).toMatch(/once/);
    expect(human.stdout).toMatch(/username\s+alice/);
    expect(human.stdout).toMatch(/name\s+Alice/);
    const id = /\b(agt_[a-z0-9]{26})\b/.exec(human.stdout)?.[1];
    expect(id).toBeDefined();
    alice = { id: id!, tokenFile: writeTokenFile(daemon().dir, 'alice', tokens[0]!) };

    const bobFile = path.join(daemon().dir, 'bob.token');
    const [bobOut, carolJson] = await Promise.all([
      cli().ok(['agents', 'add', 'bob', '--token-out', bobFile]),
      cli().json<Result<'agents.create'>>(['agents', 'add', 'carol', '--name', 'Carol']),
    ]);
    expect(mode(bobFile)).toBe(0o600);
    const bobToken = fs.readFileSync(bobFile, 'utf8').trim();
    expect(bobToken).toMatch(/^yello_agt_[A-Za-z0-9_-]+$/);
    expect(bobOut.stdout).not.toContain(bobToken);
    expect(bobOut.stdout).toContain(bobFile);
    expect(bobOut.stdout).toMatch(/0600/);
    bobId = /\b(agt_[a-z0-9]{26})\b/.exec(bobOut.stdout)![1]!;

    expect(carolJson).toMatchObject({
      agent: { username: 'carol', name: 'Carol', id: stringMatching(/^agt_/), image: null },
      token: stringMatching(/^yello_agt_/),
    });

    // --json with --token-out never puts the token on stdout.
    const daveFile = path.join(daemon().dir, 'dave.token');
    const daveRun = await cli().ok(['agents', 'add', 'dave', '--token-out', daveFile, '--json']);
    const dave = parseJson(daveRun) as Result<'agents.create'>;
    expect(dave.agent.username).toBe('dave');
    expect(daveRun.stdout).not.toContain(fs.readFileSync(daveFile, 'utf8').trim());
    expect(mode(daveFile)).toBe(0o600);

    // The printed token works as an agent token; a taken username fails with one line.
    const [who, dup] = await Promise.all([
      cli().as(alice.tokenFile).json<Result<'agents.get'>>(['agents', 'show', 'alice']),
      cli().run(['agents', 'add', 'alice']),
    ]);
    expect(who.agent.id).toBe(alice.id);
    expectOneLineError(dup, 1, /username/);
  });

  it('list: human table and {agents: […]}', async () => {
    const [human, json] = await Promise.all([cli().ok(['agents', 'list']), cli().json<Result<'agents.list'>>(['agents', 'list'])]);
    for (const u of ['alice', 'bob', 'carol', 'dave']) expect(human.stdout).toMatch(new RegExp(`\\b${u}\\b`));
    expect(human.stdout).toContain(alice.id);
    expect(Array.isArray(json.agents)).toBe(true);
    expect(json.agents.map((a: { username: string }) => a.username).sort()).toEqual(['alice', 'bob', 'carol', 'dave']);
    for (const a of json.agents) expect(a).toMatchObject({ id: stringMatching(/^agt_/), username: anyOf(String), name: anyOf(String) });
  });

  it('show by username and by id', async () => {
    const [byName, byId, human] = await Promise.all([
      cli().json<Result<'agents.get'>>(['agents', 'show', 'alice']),
      cli().json<Result<'agents.get'>>(['agents', 'show', alice.id]),
      cli().ok(['agents', 'show', bobId]),
    ]);
    expect(byName.agent).toMatchObject({ id: alice.id, username: 'alice', name: 'Alice', disabled: false, pii: 'redact' });
    expect(byId).toEqual(byName);
    expect(human.stdout).toMatch(/username\s+bob/);
    expect(human.stdout).toContain(bobId);
    const missing = await cli().run(['agents', 'show', 'nobody']);
    expectOneLineError(missing, 1, /NOT_FOUND/);
  });

  it('rotate-token: the new token works, the old one fails at once', async () => {
    const oldFile = path.join(daemon().dir, 'alice-old.token');
    fs.copyFileSync(alice.tokenFile, oldFile);
    const r = await cli().json<Result<'agents.rotateToken'>>(['agents', 'rotate-token', 'alice']);
    expect(r.token).toMatch(/^yello_agt_/);
    const newFile = writeTokenFile(daemon().dir, 'alice-new', r.token);
    const [oldTry, newTry] = await Promise.all([cli().as(oldFile).run(['status']), cli().as(newFile).run(['status', '--json'])]);
    expectOneLineError(oldTry, 1, /UNAUTHENTICATED/);
    expect((parseJson(expectExit(newTry, 0)) as Result<'daemon.status'>).storage).toBe('ok');
    alice.tokenFile = newFile;

    // Human form prints the token once.
    const human = await cli().ok(['agents', 'rotate-token', 'carol']);
    expect(human.stdout.match(/yello_agt_[A-Za-z0-9_-]+/g)).toHaveLength(1);
    expect(human.stdout).toMatch(/once/);
  });

  it('rotate-token --token-out writes the new token to a 0600 file; an existing file only with --force', async () => {
    const existing = path.join(daemon().dir, 'bob-rotated.token');
    fs.writeFileSync(existing, 'placeholder\n', { mode: 0o644 });
    fs.chmodSync(existing, 0o644);
    const refused = await cli().run(['agents', 'rotate-token', 'bob', '--token-out', existing]);
    expectOneLineError(refused, 2, /already exists.*--force/);
    expect(fs.readFileSync(existing, 'utf8')).toBe('placeholder\n');
    const out = await cli().ok(['agents', 'rotate-token', 'bob', '--token-out', existing, '--force']);
    const token = fs.readFileSync(existing, 'utf8').trim();
    expect(token).toMatch(/^yello_agt_/);
    expect(out.stdout).not.toContain(token);
    expect(out.stdout).toContain(existing);
    expect((await cli().as(existing).run(['status'])).code).toBe(0);
    expect(mode(existing), 'a token file must be 0600 (agents add --token-out chmods; rotate-token does not)').toBe(0o600);
  });

  it('policy: human and --json', async () => {
    const [human, json] = await Promise.all([
      cli().ok(['agents', 'policy', 'bob', 'reject']),
      cli().json<Result<'agents.setPolicy'>>(['agents', 'policy', 'carol', 'off']),
    ]);
    expect(human.stdout).toMatch(/pii\s+reject/);
    expect(json.agent).toMatchObject({ username: 'carol', pii: 'off' });
  });

  it('disable: the agent is marked disabled and its token stops working', async () => {
    const daveFile = path.join(daemon().dir, 'dave.token');
    expect((await cli().as(daveFile).run(['status'])).code).toBe(0);
    const [json, human] = await Promise.all([
      cli().json<Result<'agents.disable'>>(['agents', 'disable', 'dave']),
      cli().ok(['agents', 'disable', 'carol']),
    ]);
    expect(json.agent).toMatchObject({ username: 'dave', disabled: true });
    expect(human.stdout).toMatch(/disabled\s+true/);
    expectOneLineError(await cli().as(daveFile).run(['status']), 1, /UNAUTHENTICATED/);
  });

  it('an admin command with only an agent token (no admin.token reachable) fails with one line', async () => {
    const r = await cli()
      .as(alice.tokenFile)
      .run(['agents', 'add', 'mallory'], { env: { YELLO_DATA_DIR: path.join(daemon().dir, 'no-such-dir') } });
    expect(r.code).not.toBe(0);
    expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
    expect(r.stderr).toMatch(/admin/);
  });

  describe('grants', () => {
    it('add, list (admin, per agent, as the agent), rm', async () => {
      const [human, json] = await Promise.all([
        cli().ok(['grants', 'add', 'alice', 'bob']),
        cli().json<Result<'grants.add'>>(['grants', 'add', bobId, alice.id]),
      ]);
      expect(human.stdout).toContain(alice.id);
      expect(human.stdout).toContain(bobId);
      expect(json.grant).toMatchObject({
        agentId: bobId,
        peerAgentId: alice.id,
        grantedAt: stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      });

      const [all, forBob, asAlice] = await Promise.all([
        cli().json<Result<'grants.list'>>(['grants', 'list']),
        cli().json<Result<'grants.list'>>(['grants', 'list', 'bob']),
        cli().as(alice.tokenFile).ok(['grants', 'list']),
      ]);
      const pairs = (g: { grants: { agentId: string; peerAgentId: string }[] }) =>
        g.grants.map((x) => `${x.agentId}>${x.peerAgentId}`).sort();
      expect(pairs(all)).toEqual([`${alice.id}>${bobId}`, `${bobId}>${alice.id}`].sort());
      expect(pairs(forBob)).toEqual([`${bobId}>${alice.id}`]);
      // The agent sees only its own grants (human table, by username).
      expect(asAlice.stdout).toMatch(/^alice\s+bob\s/m);
      expect(asAlice.stdout).not.toMatch(/^bob\s+alice\s/m);

      const [rm, rmJson] = await Promise.all([
        cli().ok(['grants', 'rm', 'alice', 'bob']),
        cli().json<Result<'grants.remove'>>(['grants', 'rm', 'carol', 'bob']),
      ]);
      expect(rm.stdout).toMatch(/removed/);
      expect(rmJson).toEqual({ removed: false });
      const after = await cli().json<Result<'grants.list'>>(['grants', 'list']);
      expect(pairs(after)).toEqual([`${bobId}>${alice.id}`]);
    });
  });
});

describe('keys list', () => {
  it('human table and a JWKS with --json', async () => {
    const [human, jwks] = await Promise.all([cli().ok(['keys', 'list']), cli().json<Result<'keys.list'>>(['keys', 'list'])]);
    expect(jwks.keys).toHaveLength(1);
    const k = jwks.keys[0]!;
    expect(k).toMatchObject({
      kty: 'EC',
      crv: 'P-256',
      alg: 'ES256',
      use: 'sig',
      status: 'active',
      kid: stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    expect(k).not.toHaveProperty('d');
    expect(human.stdout).toContain(k.kid);
    expect(human.stdout).toMatch(/active/);
  });
});

describe('errors', () => {
  it('chats show of a missing chat: exit 1, exactly one line on stderr, no stack trace', async () => {
    const [admin, agent] = await Promise.all([
      cli().run(['chats', 'show', 'chat_doesnotexist']),
      cli().run(['chats', 'show', 'chat_doesnotexist', '--json'], {
        env: { YELLO_TOKEN: fs.readFileSync(path.join(daemon().dir, 'bob-rotated.token'), 'utf8').trim() },
      }),
    ]);
    for (const r of [admin, agent]) {
      expectOneLineError(r, 1);
      expect(nonEmptyLines(r.stderr)[0]).toMatch(/NOT_FOUND|not found|no such/i);
      expect(r.stdout).toBe('');
    }
  });
});
