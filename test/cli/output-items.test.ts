// The small output items of issue 23 (finding 7), tried as a user would against a real daemon:
// `grants list` names agents by username, `chats history --all-generations` shows a chat's whole
// conversation across resets, an error says its reason once, and a socket refused for its group
// says which group to join.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { cliEnv, expectExit, oneLineErrorProblems, yelloBin } from '../helpers/cli-runner.js';
import { DaemonProcess, makeTempDir } from '../helpers/daemon-process.js';
import { spawnAsync } from '../helpers/spawn-async.js';
import type { StoredRecord } from '../../src/shared/types.js';
import { useCli } from '../helpers/use-daemon.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const { cli, namedAgents, pair } = useCli();
const named = namedAgents;

describe('grants list', () => {
  it('names both agents by username; the ids stay in --json', async () => {
    const { alice, aliceId, bobId } = await named();
    const admin = expectExit(await cli().run(['grants', 'list']), 0);
    expect(admin.stdout).toMatch(/^AGENT\s+PEER\s+GRANTED\s*$/m);
    expect(admin.stdout).toMatch(/^alice\s+bob\s+\d{4}-\d\d-\d\dT/m);
    expect(admin.stdout).toMatch(/^bob\s+alice\s+\d{4}-\d\d-\d\dT/m);
    expect(admin.stdout).not.toMatch(/agt_/);

    // An agent sees its own grants the same way.
    const own = expectExit(await alice.run(['grants', 'list']), 0);
    expect(own.stdout.trim().split('\n').slice(1)).toEqual([expect.stringMatching(/^alice\s+bob\s+\d{4}-/)]);

    const json = await cli().json<{ grants: Array<Record<string, unknown>> }>(['grants', 'list', 'alice']);
    expect(json.grants.map((g) => [g.agentId, g.peerAgentId, typeof g.grantedAt])).toEqual([[aliceId, bobId, 'string']]);
  });
});

describe('chats history --all-generations', () => {
  it('shows the whole conversation across a reset, in order, each generation marked; plain history shows the current generations only', async () => {
    const p = await pair();
    await p.alice.ok(['send', p.chatId, 'zero (trimmed)']); // #1 after alice's fence
    await p.alice.ok(['send', p.chatId, 'one']); // #2
    await p.bob.ok(['send', p.chatId, 'two']);
    await cli().ok(['streams', 'trim', p.streamA, '2', '--force']);
    await cli().ok(['streams', 'reset', p.streamA, '--reason', 'test']);
    await p.alice.ok(['send', p.chatId, 'three']);

    const plain = await p.bob.json<{ entries: StoredRecord[] }>(['chats', 'history', p.chatId]);
    expect(plain.entries.map(content)).toEqual(['two', 'three']);
    // The human transcript says that a reset sealed earlier messages, and how to see them.
    const plainHuman = expectExit(await p.bob.run(['chats', 'history', p.chatId]), 0);
    expect(plainHuman.stderr).toBe(
      `earlier generations (sealed by a reset) are not shown: yello chats history ${p.chatId} --all-generations\n`,
    );

    for (const reader of [p.bob, cli()]) {
      const whole = await reader.json<{ entries: StoredRecord[]; generations: Array<Record<string, unknown>> }>([
        'chats',
        'history',
        p.chatId,
        '--all-generations',
      ]);
      expect(whole.entries.map((e) => [content(e), e.streamId, e.generation])).toEqual([
        ['one', p.streamA, '1'],
        ['two', p.streamB, '1'],
        ['three', p.streamA, '2'],
      ]);
      expect(whole.generations).toEqual([
        ...(p.a.id < p.b.id ? [] : [span(p.streamB, p.b.id, '1', false, '0', '2')]),
        span(p.streamA, p.a.id, '1', true, '2', '3'),
        span(p.streamA, p.a.id, '2', false, '0', '2'),
        ...(p.a.id < p.b.id ? [span(p.streamB, p.b.id, '1', false, '0', '2')] : []),
      ]);
    }

    const human = expectExit(await p.bob.run(['chats', 'history', p.chatId, '--all-generations']), 0);
    const lines = human.stdout.trim().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(/^-- \S+ → \S+: generation 1 \(sealed by a reset, trimmed below #2\) --$/),
      expect.stringMatching(/\s#2\s+one$/),
      expect.stringMatching(/\s#1\s+two$/),
      expect.stringMatching(/^-- \S+ → \S+: generation 2 \(current\) --$/),
      expect.stringMatching(/\s#1\s+three$/),
      expect.stringMatching(/^generations: .*1 \(sealed by a reset, trimmed below #2\), 2 \(current\)/),
    ]);

    const mixed = await p.bob.run(['chats', 'history', p.chatId, '--all-generations', '--direction', 'forward']);
    expect(mixed.code, mixed.stderr).toBe(2);
    expect(mixed.stderr).toMatch(/leave out --cursor and --direction/);
  });
});

const content = (r: StoredRecord): string => (r.wrapper.type === 'chat.message' ? r.wrapper.message.content : `(${r.wrapper.type})`);
const span = (
  streamId: string,
  authorAgentId: string,
  generation: string,
  sealed: boolean,
  firstPosition: string,
  nextPosition: string,
) => ({
  streamId,
  authorAgentId,
  generation,
  sealed,
  firstPosition,
  nextPosition,
});

describe('an error a person sees', () => {
  it('says its reason once, and what to do: a taken username', async () => {
    expectExit(await cli().run(['agents', 'add', 'taken-name']), 0);
    const r = await cli().run(['agents', 'add', 'taken-name']);
    expectExit(r, 1);
    expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
    expect(r.stderr.trim()).toBe('yello: username "taken-name" is already taken: choose another (INVALID_PARAMS at username)');
  });

  it('an INVALID_PARAMS from the schema names the parameter once', async () => {
    const r = await cli().run(['chats', 'list', '--limit', '9999']);
    expectExit(r, 1);
    expect(oneLineErrorProblems(r), r.stderr).toEqual([]);
    expect(r.stderr).toMatch(/^yello: .+ \(INVALID_PARAMS at limit\)$/m);
    expect(r.stderr.match(/invalid.params/gi)).toHaveLength(1);
  });
});

describe('a socket refused by its permissions (EACCES)', () => {
  // Root is never refused a socket, so the CLI runs as nobody (setpriv) against a real daemon
  // whose socket directory is 0750; the modes and groups are then changed between runs.
  const canDrop = process.getuid?.() === 0 && spawnSync('setpriv', ['--help']).status === 0;
  it.skipIf(!canDrop)(
    'names the directory or socket, its group, and the step: join the group, log in again, or ask for --socket-mode',
    async () => {
      const base = await makeTempDir('yl-acc-');
      fs.chmodSync(base, 0o755);
      const d = await DaemonProcess.start({ dir: base, socketPath: path.join(base, 'run', 'y.sock') });
      try {
        const run = path.join(base, 'run');
        expect(fs.statSync(run).mode & 0o777).toBe(0o750);
        const asNobody = async (ids: string[]) => {
          const r = await spawnAsync('setpriv', ['--reuid=65534', ...ids, process.execPath, yelloBin, '--socket', d.socketPath, 'status'], {
            env: cliEnv({ YELLO_TOKEN: 'not-a-token' }),
            timeout: 30_000,
          });
          expect(r.status, r.stderr).toBe(1);
          expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
          expect(r.stderr).not.toMatch(/is the daemon running/);
          return r.stderr;
        };
        const nogroup = groupOf(65534);

        // Not in the directory's group: join it, then log in again.
        expect(await asNobody(['--regid=65534', '--clear-groups'])).toContain(
          `permission denied by the directory ${run} (mode 0750, owner root, group ${groupOf(0)}): nobody is not in group ${groupOf(0)}; add yourself (sudo usermod -aG ${groupOf(0)} nobody), then log in again`,
        );
        // The account is in the group (its primary group), this session is not: log in again.
        fs.chownSync(run, 0, 65534);
        expect(await asNobody(['--regid=4242', '--clear-groups'])).toContain(
          `your account nobody is in group ${nogroup}, but this login session is not yet; log in again (or run \`newgrp ${nogroup}\`)`,
        );
        // A socket not even its group may write: ask for --socket-mode 0660.
        fs.chmodSync(run, 0o755);
        fs.chmodSync(d.socketPath, 0o600);
        expect(await asNobody(['--regid=65534', '--clear-groups'])).toMatch(
          new RegExp(
            `permission denied by the socket ${d.socketPath} \\(mode 0600, owner root, group ${groupOf(0)}\\): not even its group may connect;.*--socket-mode 0660`,
          ),
        );
      } finally {
        await d.stop();
        await fs.promises.rm(base, { recursive: true, force: true });
      }
    },
  );
});

/** The name of group `gid` as the system knows it. */
function groupOf(gid: number): string {
  return spawnSync('getent', ['group', String(gid)], { encoding: 'utf8' }).stdout.split(':')[0] ?? String(gid);
}
