// The audit log (docs/security.md "Audit log"): one pino line per admin action and per security
// event, with a stable `audit` field, who did it (`role`, `agentId`), the connection (`conn`,
// `socketInode`) and the ids it touched — and never a token or message content anywhere in the
// log. Also the file-descriptor headroom: near RLIMIT_NOFILE the daemon refuses connections
// visibly instead of letting libuv close them silently.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { ok, uniq, type Result, type WireResponse } from '../helpers/wire-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';

const MiB = 1_048_576;
const MAX_CONNECTIONS = 12;
const MAX_UNSENT = 2 * MiB;

const { daemon, admin } = useDaemon({
  extraArgs: ['--policy', 'open', '--max-connections', String(MAX_CONNECTIONS), '--max-unsent-bytes', String(MAX_UNSENT)],
});
/** Every secret the log must never hold: tokens of all kinds and message contents. */
const secrets: string[] = [];

/** A parsed log line of the daemon (pino JSON). */
type LogLine = Record<string, unknown>;

const auditLines = (event: string): LogLine[] =>
  daemon()
    .logs()
    .filter((l) => l.audit === event);

/** Lines of `event`, once at least `n` of them have reached the daemon's stdout. */
async function awaitAudit(event: string, n = 1, from = () => daemon()): Promise<LogLine[]> {
  await waitFor(
    () =>
      from()
        .logs()
        .filter((l) => l.audit === event).length >= n,
    `${n} audit line(s) ${event}`,
    5_000,
  ).catch(() => undefined);
  return from()
    .logs()
    .filter((l) => l.audit === event);
}

/** The one audit line of `event` whose fields include `match`. */
async function expectAudit(event: string, match: Record<string, unknown>): Promise<LogLine> {
  const matching = () => auditLines(event).filter((l) => Object.entries(match).every(([k, v]) => l[k] === v));
  await waitFor(() => matching().length > 0, `audit ${event}`, 5_000).catch(() => undefined);
  const lines = matching();
  expect(lines, `audit ${event} ${JSON.stringify(match)} in ${JSON.stringify(auditLines(event))}`).toHaveLength(1);
  const line = lines[0]!;
  expect(typeof line.conn, 'the connection id').toBe('number');
  return line;
}

async function createAgent(username: string): Promise<{ id: string; token: string }> {
  const r = ok(await admin().call('agents.create', { username, name: username }), 'agents.create');
  secrets.push(r.token);
  return { id: r.agent.id, token: r.token };
}

beforeAll(() => {
  secrets.push(daemon().adminToken);
}, 30_000);

describe('admin actions', () => {
  it('each leaves one info line naming the action, the admin and the ids it touched', async () => {
    const alice = await createAgent(uniq('alice'));
    const bob = await createAgent(uniq('bob'));
    ok(await admin().call('agents.setPolicy', { agentId: alice.id, pii: 'off' }));
    ok(await admin().call('grants.add', { agentId: alice.id, peerAgentId: bob.id }));
    ok(await admin().call('grants.remove', { agentId: alice.id, peerAgentId: bob.id }));
    const opened = ok(await admin().call('chats.open', { agentAId: alice.id, agentBId: bob.id }));
    const rotated = ok(await admin().call('agents.rotateToken', { agentId: bob.id }));
    secrets.push(rotated.token);
    const { kid } = ok(await admin().call('keys.rotate', {}));
    const streamId = `${opened.chat.id}:${alice.id}`;
    const writer = await daemon().connectAs(alice.token);
    const claim = ok(await writer.call('streams.claim', { streamId }));
    secrets.push(claim.coordinatorToken);
    const content = `the eagle lands at dawn ${uniq('secret')}`;
    secrets.push(content);
    ok(
      await writer.call('streams.append', {
        streamId,
        coordinatorToken: claim.coordinatorToken,
        generation: '1',
        expectedPosition: claim.nextPosition,
        operationId: uniq('op'),
        records: [{ type: 'chat.message', messageId: 'm1', content }],
      }),
    );
    ok(await admin().call('streams.release', { streamId }));
    ok(await admin().call('streams.trim', { streamId, beforePosition: '1', force: true }));
    ok(await admin().call('streams.reset', { streamId, reason: 'audit test' }));
    ok(await admin().call('agents.disable', { agentId: bob.id }));

    const by = { role: 'admin', agentId: null };
    const lines = await Promise.all([
      expectAudit('agents.create', { ...by, target: alice.id }),
      expectAudit('agents.create', { ...by, target: bob.id }),
      expectAudit('agents.setPolicy', { ...by, target: alice.id, pii: 'off' }),
      expectAudit('grants.add', { ...by, target: alice.id, peer: bob.id }),
      expectAudit('grants.remove', { ...by, target: alice.id, peer: bob.id, removed: true }),
      expectAudit('chats.open', { ...by, chatId: opened.chat.id, created: true }),
      expectAudit('agents.rotateToken', { ...by, target: bob.id }),
      expectAudit('keys.rotate', { ...by, kid }),
      expectAudit('streams.release', { ...by, streamId }),
      expectAudit('streams.trim', { ...by, streamId, beforePosition: '1', force: true, firstPosition: '1' }),
      expectAudit('streams.reset', { ...by, streamId, generation: '2' }),
      expectAudit('agents.disable', { ...by, target: bob.id }),
    ]);
    for (const l of lines) expect(l.level, `${String(l.audit)} is logged at info`).toBe(30);
    // The agent's own claim and append are not admin actions.
    expect(
      daemon()
        .logs()
        .filter((l) => l.audit === 'streams.release' || l.audit === 'streams.claim'),
    ).toHaveLength(1);
  });
});

describe('security events', () => {
  it('failed session.hello: one warn line per failure with the connection; then rate limiting, logged once per burst', async () => {
    const c = await daemon().connect();
    const guesses = Array.from({ length: 5 }, (_, i) => `yello_agt_${uniq(`guess${i}`)}`);
    secrets.push(...guesses);
    const answers = [];
    for (const token of guesses) answers.push((await c.call('session.hello', { token })).error?.data?.type);
    expect(answers).toEqual(['UNAUTHENTICATED', 'UNAUTHENTICATED', 'UNAUTHENTICATED', 'RATE_LIMITED', 'RATE_LIMITED']);
    const failed = await awaitAudit('session.hello.failed', 3);
    expect(failed).toHaveLength(3);
    expect(new Set(failed.map((l) => l.conn)).size, 'all on one connection').toBe(1);
    for (const l of failed) {
      expect(l.level).toBe(40);
      expect(l.socketInode, 'the inode of the daemon end of the socket, for ss -xp').toEqual(expect.any(Number));
    }
    const limited = await awaitAudit('rate-limited');
    expect(limited, 'the second RATE_LIMITED of the burst is counted, not logged').toHaveLength(1);
    expect(limited[0]).toMatchObject({ level: 40, method: 'session.hello', conn: failed[0]!.conn, count: 1, role: null, agentId: null });
    expect(limited[0]!.retryAfterMs).toEqual(expect.any(Number));
    c.close();
  });

  it('a connection refused at the cap is logged', async () => {
    const held: net.Socket[] = [];
    let refusedLine: WireResponse | null = null;
    try {
      for (let i = 0; i < MAX_CONNECTIONS + 2 && !refusedLine; i++) {
        const s = net.connect(daemon().socketPath);
        s.on('error', () => undefined);
        held.push(s);
        await new Promise<void>((resolve) => {
          s.once('connect', () => {
            resolve();
          });
          s.once('close', () => {
            resolve();
          });
        });
        s.setEncoding('utf8');
        // A connection without a session gives way to a newcomer (admission.ts): the held ones
        // say hello, so that the cap is reached by sessions and the newcomer is refused.
        if (!s.destroyed)
          s.write(JSON.stringify({ jsonrpc: '2.0', id: 'h', method: 'session.hello', params: { token: daemon().adminToken } }) + '\n');
        const line = await new Promise<string | null>((resolve) => {
          const t = setTimeout(() => {
            resolve(null);
          }, 200);
          s.once('data', (d: string) => {
            clearTimeout(t);
            resolve(d);
          });
        });
        const first = line === null ? null : (JSON.parse(line.split('\n')[0]!) as WireResponse);
        if (first?.error) refusedLine = first;
      }
    } finally {
      for (const s of held) s.destroy();
    }
    expect(refusedLine?.error?.data?.type).toBe('RATE_LIMITED');
    const l = await awaitAudit('connection.refused');
    expect(l).toHaveLength(1);
    expect(l[0]).toMatchObject({ level: 40, reason: 'MAX_CONNECTIONS', max: MAX_CONNECTIONS, count: 1 });
  });

  it('a connection that leaves more than --max-unsent-bytes unread is closed, and the close is logged', async () => {
    const carol = await createAgent(uniq('carol'));
    const dave = await createAgent(uniq('dave'));
    ok(await admin().call('agents.setPolicy', { agentId: carol.id, pii: 'off' }));
    const chatId = ok(await admin().call('chats.open', { agentAId: carol.id, agentBId: dave.id })).chat.id;
    const streamId = `${chatId}:${carol.id}`;
    // The slots the previous test held are freed as the daemon sees those sockets close.
    const writer = await waitFor(
      () =>
        daemon()
          .connectAs(carol.token)
          .catch(() => null),
      'a connection slot',
      5_000,
    );
    const claim = ok(await writer.call('streams.claim', { streamId }));
    secrets.push(claim.coordinatorToken);
    let next = claim.nextPosition;
    const big = `carol's long letter ${'w'.repeat(250_000)}`;
    secrets.push(big.slice(0, 40));
    for (let i = 0; i < 12; i++) {
      next = ok(
        await writer.call('streams.append', {
          streamId,
          coordinatorToken: claim.coordinatorToken,
          generation: '1',
          expectedPosition: next,
          operationId: uniq('op'),
          records: [{ type: 'chat.message', messageId: `big.${i}`, content: `${i} ${big}` }],
        }),
      ).nextPosition;
    }
    writer.close();
    const greedy = net.connect(daemon().socketPath);
    greedy.on('error', () => undefined);
    await new Promise((r) => greedy.once('connect', r));
    greedy.pause();
    const closed = new Promise<void>((r) => {
      greedy.once('close', () => {
        r();
      });
    });
    greedy.write(
      [
        { jsonrpc: '2.0', id: 0, method: 'session.hello', params: { token: dave.token } },
        ...Array.from({ length: 16 }, (_, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'chats.history', params: { chatId, limit: 500 } })),
      ]
        .map((m) => JSON.stringify(m) + '\n')
        .join(''),
    );
    const l = await awaitAudit('connection.closed');
    // A paused socket sees no end: read what was sent before the close, then the close itself.
    greedy.resume();
    await closed;
    expect(l).toHaveLength(1);
    expect(l[0]).toMatchObject({ level: 40, reason: 'UNSENT_OUTPUT', limit: MAX_UNSENT, role: 'agent', agentId: dave.id });
    expect(l[0]!.unsentBytes).toBeGreaterThan(MAX_UNSENT);
    expect(l[0]!.socketInode).toEqual(expect.any(Number));
    // Nobody else noticed.
    ok(await admin().call('daemon.status', {}));
  });
});

describe('the log as a whole', () => {
  it('holds no token, no coordinator token and no message content anywhere', () => {
    const text = daemon().stdoutLines.join('\n') + '\n' + daemon().stderr;
    expect(secrets.length).toBeGreaterThan(10);
    for (const secret of secrets) expect(text.includes(secret), `the log holds ${secret.slice(0, 24)}…`).toBe(false);
    // And every audit line is JSON with the stable fields.
    for (const l of daemon()
      .logs()
      .filter((x) => 'audit' in x)) {
      expect(typeof l.audit).toBe('string');
      expect(l.msg).toBe(`audit: ${String(l.audit)}`);
    }
  });
});

describe('file descriptors near RLIMIT_NOFILE', () => {
  let small: DaemonProcess;

  beforeAll(async () => {
    // A process of its own: prlimit lowers its descriptor limit.
    small = await DaemonProcess.start({ process: true });
    // vitest runs a cleanup returned from beforeAll after the suite, and only if the start succeeded.
    return () => small.cleanup();
  }, 30_000);

  it('connections that would use the last descriptors are refused with RATE_LIMITED and logged, never closed silently', async () => {
    const keeper = await small.connectAs();
    const pid = small.pid!;
    const inUse = fs.readdirSync(`/proc/${pid}/fd`).length;
    // A limit a few descriptors above what the daemon holds now (as `ulimit -n` would set it).
    const limit = inUse + 12;
    execFileSync('prlimit', ['--pid', String(pid), `--nofile=${limit}:${limit}`]);
    const outcomes = await Promise.all(
      Array.from({ length: 40 }, async () => {
        const s = net.connect(small.socketPath);
        s.on('error', () => undefined);
        s.setEncoding('utf8');
        let data = '';
        s.on('data', (d: string) => (data += d));
        const closed = new Promise<void>((r) => {
          s.once('close', () => {
            r();
          });
        });
        // A refusal comes unasked; an accepted connection says nothing until asked.
        await Promise.race([closed, new Promise((r) => s.once('connect', r))]);
        await Promise.race([closed, waitFor(() => data.includes('\n'), 'a refusal', 300).catch(() => undefined)]);
        if (!data && !s.destroyed)
          s.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'session.hello', params: { token: small.adminToken } }) + '\n');
        await Promise.race([closed, waitFor(() => data.includes('\n'), 'a line', 5_000).catch(() => undefined)]);
        await new Promise((r) => setTimeout(r, 50));
        const line = data.split('\n')[0] ?? '';
        const parsed = line ? (JSON.parse(line) as WireResponse<Result<'session.hello'>>) : null;
        const outcome =
          parsed?.result?.role === 'admin'
            ? 'accepted'
            : parsed?.error?.data?.type === 'RATE_LIMITED'
              ? 'refused'
              : s.destroyed || s.closed
                ? 'closed silently'
                : 'no answer';
        return { outcome, s };
      }),
    );
    const counts: Record<string, number> = {};
    for (const o of outcomes) counts[o.outcome] = (counts[o.outcome] ?? 0) + 1;
    for (const o of outcomes) o.s.destroy();
    console.log(`[audit] 40 connections at RLIMIT_NOFILE ${limit} (daemon held ${inUse}): ${JSON.stringify(counts)}`);
    expect(counts['closed silently'] ?? 0, JSON.stringify(counts)).toBe(0);
    expect(counts['no answer'] ?? 0, JSON.stringify(counts)).toBe(0);
    expect(counts.refused ?? 0).toBeGreaterThan(0);
    const l = await awaitAudit('connection.refused', 1, () => small);
    expect(l[0]).toMatchObject({ level: 40, reason: 'FILE_DESCRIPTORS', fdLimit: limit, count: 1 });
    expect(l[0]!.fd).toEqual(expect.any(Number));
    // The daemon itself carries on, and once the clients left, connections are accepted again.
    ok(await keeper.call('daemon.status', {}));
    await waitFor(
      async () => {
        const c = await small.connectAs().catch(() => null);
        return c !== null;
      },
      'a new connection after the flood',
      5_000,
    );
  });
});
