// Metrics (issue 23, finding 5: "No metrics. Only daemon.status counters; nothing a monitoring
// system scrapes"). `daemon.metrics` (admin) answers one Prometheus scrape through the socket,
// `yello metrics` prints it, and `yello daemon --metrics-listen HOST:PORT` serves the same text
// at GET /metrics (loopback only unless --metrics-allow-remote). On the old code the method is
// METHOD_NOT_FOUND and the daemon refuses the option (exit 2).

import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-runner.js';
import { DaemonProcess, makeTempDir, repoRoot } from '../helpers/daemon-process.js';
import { damageStoredRecord } from '../helpers/store-tamper.js';
import { useCli, useDaemon } from '../helpers/use-daemon.js';
import { waitFor } from '../helpers/wait.js';
import { claim, connectWire, createAgent, createPair, ok, uniq, type TestPair, type Wire } from '../helpers/wire-fixtures.js';

/** One sample of the text exposition format: `name{labels} value`. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the sample lines of a scrape (comments skipped); fails on a line it cannot read. */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not an exposition sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[k!] = v!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The value of `name` with exactly these labels (0 when the series does not exist yet). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const want = JSON.stringify(Object.entries(labels).sort());
  const s = samples.find((x) => x.name === name && JSON.stringify(Object.entries(x.labels).sort()) === want);
  return s?.value ?? 0;
}

async function scrape(admin: Wire): Promise<Sample[]> {
  return parseExposition(ok(await admin.call('daemon.metrics', {}), 'daemon.metrics').text);
}

/** The metric names docs/metrics.md lists (its table's first column). */
function documentedNames(): string[] {
  const doc = readFileSync(path.join(repoRoot, 'docs/metrics.md'), 'utf8');
  return [...doc.matchAll(/^\| `(yello_[a-z_]+)`/gm)].map((m) => m[1]!);
}

const records = (tag: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ type: 'chat.message' as const, messageId: `${tag}.${i}`, content: `hello ${tag} ${i}` }));

function appendParams(
  pair: TestPair,
  coordinatorToken: string,
  expectedPosition: string,
  operationId: string,
  recs: ReturnType<typeof records>,
) {
  return { streamId: pair.streamA, coordinatorToken, generation: '1', expectedPosition, operationId, records: recs };
}

async function append(
  pair: TestPair,
  coordinatorToken: string,
  expectedPosition: string,
  operationId: string,
  recs: ReturnType<typeof records>,
) {
  return pair.a.client.call('streams.append', appendParams(pair, coordinatorToken, expectedPosition, operationId, recs));
}

describe('daemon.metrics over the socket', () => {
  const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open'] });

  it('answers the Prometheus text format with every documented metric and the process metrics of prom-client', async () => {
    const r = ok(await admin().call('daemon.metrics', {}));
    expect(r.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const samples = parseExposition(r.text);
    const names = new Set(samples.map((s) => s.name.replace(/_(bucket|sum|count)$/, '')));
    const documented = documentedNames();
    expect(documented.length).toBeGreaterThan(15);
    // Labelled counters have no series before their first event; their HELP line is there.
    for (const name of documented) expect(names.has(name) || r.text.includes(`# HELP ${name} `), name).toBe(true);
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
    ])
      expect(names.has(name), name).toBe(true);
    expect(samples.find((s) => s.name === 'yello_build_info')?.labels.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('appends move the append counters, the latency histograms, the group-commit counters and the record gauge', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    const before = await scrape(admin());
    const recs = records(uniq('m'), 3);
    // Sent as a line of our own, with an extra space, so its bytes are known exactly.
    const id = pair.a.client.newId();
    const line = `${JSON.stringify({ jsonrpc: '2.0', id, method: 'streams.append', params: appendParams(pair, c.coordinatorToken, c.nextPosition, 'op-1', recs) })} \n`;
    const first = ok<{ duplicate: boolean; nextPosition: string }>(await pair.a.client.callRaw(id, line));
    const after = await scrape(admin());
    expect(value(after, 'yello_appends_total') - value(before, 'yello_appends_total')).toBe(1);
    expect(value(after, 'yello_appended_records_total') - value(before, 'yello_appended_records_total')).toBe(3);
    // The bytes the quotas count: the request as the wire measured it (the line, no newline).
    expect(value(after, 'yello_appended_bytes_total') - value(before, 'yello_appended_bytes_total')).toBe(Buffer.byteLength(line) - 1);
    expect(value(after, 'yello_append_duration_seconds_count') - value(before, 'yello_append_duration_seconds_count')).toBe(1);
    expect(value(after, 'yello_append_duration_seconds_sum')).toBeGreaterThan(value(before, 'yello_append_duration_seconds_sum'));
    expect(value(after, 'yello_commit_duration_seconds_count')).toBeGreaterThan(value(before, 'yello_commit_duration_seconds_count'));
    expect(value(after, 'yello_commit_batch_writes_count')).toBeGreaterThan(value(before, 'yello_commit_batch_writes_count'));
    expect(value(after, 'yello_commit_batches_total')).toBeGreaterThan(value(before, 'yello_commit_batches_total'));
    expect(value(after, 'yello_commit_writes_total')).toBeGreaterThan(value(before, 'yello_commit_writes_total'));
    expect(value(after, 'yello_records') - value(before, 'yello_records')).toBe(3);
    // The gauges are daemon.status' counts.
    const status = ok(await admin().call('daemon.status', {}));
    expect(value(after, 'yello_records')).toBe(status.counts.records);
    expect(value(after, 'yello_agents')).toBe(status.counts.agents);
    expect(value(after, 'yello_chats')).toBe(status.counts.chats);
    expect(value(after, 'yello_streams')).toBe(status.counts.streams);

    // The same operation again is a duplicate: counted as one, with no new records or bytes.
    const dup = ok(await append(pair, c.coordinatorToken, c.nextPosition, 'op-1', recs));
    expect(dup.duplicate).toBe(true);
    expect(first.duplicate).toBe(false);
    const again = await scrape(admin());
    expect(value(again, 'yello_append_duplicates_total') - value(after, 'yello_append_duplicates_total')).toBe(1);
    expect(value(again, 'yello_appended_records_total')).toBe(value(after, 'yello_appended_records_total'));
    expect(value(again, 'yello_appended_bytes_total')).toBe(value(after, 'yello_appended_bytes_total'));

    // In a batch, an append's bytes are its element's, serialized.
    const element = {
      jsonrpc: '2.0',
      id: pair.a.client.newId(),
      method: 'streams.append',
      params: appendParams(
        pair,
        c.coordinatorToken,
        first.nextPosition,
        'op-2',
        recs.map((r) => ({ ...r, messageId: `${r.messageId}b` })),
      ),
    };
    const [answer] = (await pair.a.client.batchRaw([element])) as Array<{ result?: unknown }>;
    expect(answer?.result).toBeDefined();
    const batched = await scrape(admin());
    expect(value(batched, 'yello_appended_bytes_total') - value(again, 'yello_appended_bytes_total')).toBe(
      Buffer.byteLength(JSON.stringify(element)),
    );
  });

  it('reads count pages and records per method', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    ok(await append(pair, c.coordinatorToken, c.nextPosition, 'op-r', records(uniq('r'), 2)));
    const before = await scrape(admin());
    const page = ok(await pair.b.client.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: '0' }));
    const history = ok(await pair.b.client.call('chats.history', { chatId: pair.chatId }));
    const after = await scrape(admin());
    const d = (name: string, method: string) => value(after, name, { method }) - value(before, name, { method });
    expect(d('yello_reads_total', 'streams.read')).toBe(1);
    expect(d('yello_read_records_total', 'streams.read')).toBe(page.records.length);
    expect(d('yello_reads_total', 'chats.history')).toBe(1);
    expect(d('yello_read_records_total', 'chats.history')).toBe(history.entries.length);
    expect(page.records.length).toBeGreaterThanOrEqual(3);
  });

  it('refusals are counted by type and fixed reason; an agent gets PERMISSION_DENIED/ADMIN_ONLY, a caller without a session UNAUTHENTICATED, params INVALID_PARAMS', async () => {
    const agent = await createAgent(admin(), daemon().socketPath);
    const before = await scrape(admin());
    const denied = await agent.client.call('daemon.metrics', {});
    expect(denied.error?.data?.type).toBe('PERMISSION_DENIED');
    expect(denied.error?.data?.reason).toBe('ADMIN_ONLY');
    expect(denied.result).toBeUndefined();
    const anon = await connectWire(daemon().socketPath);
    try {
      const r = await anon.call('daemon.metrics', {});
      expect(r.error?.data?.type).toBe('UNAUTHENTICATED');
    } finally {
      anon.close();
    }
    const bad = await admin().call('daemon.metrics', { verbose: true });
    expect(bad.error?.data?.type).toBe('INVALID_PARAMS');
    const after = await scrape(admin());
    const d = (labels: Record<string, string>) =>
      value(after, 'yello_refusals_total', labels) - value(before, 'yello_refusals_total', labels);
    expect(d({ type: 'PERMISSION_DENIED', reason: 'ADMIN_ONLY' })).toBe(1);
    expect(d({ type: 'UNAUTHENTICATED', reason: '' })).toBe(1);
    // INVALID_PARAMS' reason is prose (it may quote what was sent): never a label.
    expect(d({ type: 'INVALID_PARAMS', reason: '' })).toBe(1);
  });

  it('carries no ids, usernames, message content or tokens, and no reason prose that quotes them', async () => {
    const username = uniq('secretive');
    const created = ok(await admin().call('agents.create', { username, name: 'Quiet Agent' }));
    // A taken username is INVALID_PARAMS whose reason names the username.
    const taken = await admin().call('agents.create', { username, name: 'again' });
    expect(taken.error?.data?.reason).toContain(username);
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    const marker = uniq('content-marker');
    ok(await append(pair, c.coordinatorToken, c.nextPosition, 'op-s', [{ type: 'chat.message', messageId: 'm.1', content: marker }]));
    const { text } = ok(await admin().call('daemon.metrics', {}));
    const adminToken = readFileSync(path.join(daemon().dataDir, 'admin.token'), 'utf8').trim();
    for (const secret of [
      username,
      created.agent.id,
      created.token,
      pair.a.id,
      pair.b.id,
      pair.chatId,
      pair.streamA,
      marker,
      c.coordinatorToken,
      adminToken,
    ])
      expect(text.includes(secret), secret).toBe(false);
    // Label values are from bounded sets: no label value looks like an id.
    for (const s of parseExposition(text)) for (const v of Object.values(s.labels)) expect(v, `${s.name} ${v}`).not.toMatch(/^(agt|chat)_/);
  });

  it('connections by role and followers are gauges that go up and back down', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const base = await scrape(admin());
    const anon = await connectWire(daemon().socketPath);
    const more = await createAgent(admin(), daemon().socketPath);
    const followed = ok(await pair.b.client.call('chats.follow', { chatId: pair.chatId }));
    const up = await waitFor(async () => {
      const s = await scrape(admin());
      return value(s, 'yello_connections', { role: 'unauthenticated' }) > value(base, 'yello_connections', { role: 'unauthenticated' })
        ? s
        : null;
    }, 'the unauthenticated connection in the gauge');
    expect(value(up, 'yello_connections', { role: 'agent' }) - value(base, 'yello_connections', { role: 'agent' })).toBe(1);
    expect(value(up, 'yello_connections', { role: 'admin' })).toBeGreaterThanOrEqual(1);
    expect(value(up, 'yello_followers') - value(base, 'yello_followers')).toBe(1);
    ok(await pair.b.client.call('chats.unfollow', { subscriptionId: followed.subscriptionId }));
    anon.close();
    more.client.close();
    await waitFor(async () => {
      const s = await scrape(admin());
      return (
        value(s, 'yello_connections', { role: 'unauthenticated' }) === value(base, 'yello_connections', { role: 'unauthenticated' }) &&
        value(s, 'yello_connections', { role: 'agent' }) === value(base, 'yello_connections', { role: 'agent' }) &&
        value(s, 'yello_followers') === value(base, 'yello_followers')
      );
    }, 'the gauges back where they were');
  });
});

describe('quota hits', () => {
  // One claim a minute: the second claim in a row is over the quota.
  const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open', '--quota-claims-per-minute', '1'] });

  it('a call refused by a quota counts as a quota hit and a RATE_LIMITED refusal', async () => {
    const pair = await createPair(admin(), daemon().socketPath);
    const before = await scrape(admin());
    await claim(pair.a.client, pair.streamA);
    const refused = await pair.a.client.call('streams.claim', { streamId: pair.streamA, replace: true, reason: 'again' });
    expect(refused.error?.data?.type).toBe('RATE_LIMITED');
    const after = await scrape(admin());
    expect(
      value(after, 'yello_quota_hits_total', { quota: 'claimRate' }) - value(before, 'yello_quota_hits_total', { quota: 'claimRate' }),
    ).toBe(1);
    expect(value(after, 'yello_quota_hits_total', { quota: 'appendRate' })).toBe(
      value(before, 'yello_quota_hits_total', { quota: 'appendRate' }),
    );
    expect(
      value(after, 'yello_refusals_total', { type: 'RATE_LIMITED', reason: '' }) -
        value(before, 'yello_refusals_total', { type: 'RATE_LIMITED', reason: '' }),
    ).toBe(1);
  });
});

describe('connections refused at accept', () => {
  // Two connections in all, both with an admin session (so neither gives way to a newcomer).
  const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open', '--max-connections', '2'] });

  it('a connection over --max-connections counts in yello_connections_refused_total{reason="MAX_CONNECTIONS"}', async () => {
    const before = await scrape(admin());
    const second = await daemon().connectAs();
    const extra = await connectWire(daemon().socketPath);
    try {
      const after = await waitFor(async () => {
        const s = await scrape(admin());
        return value(s, 'yello_connections_refused_total', { reason: 'MAX_CONNECTIONS' }) > 0 ? s : null;
      }, 'the refusal in the counter');
      expect(value(before, 'yello_connections_refused_total', { reason: 'MAX_CONNECTIONS' })).toBe(0);
      expect(value(after, 'yello_connections_refused_total', { reason: 'MAX_CONNECTIONS' })).toBe(1);
      expect(value(after, 'yello_connections', { role: 'admin' })).toBe(2);
    } finally {
      extra.close();
      second.close();
    }
  });
});

describe('corruption marks', () => {
  let d: DaemonProcess | undefined;
  afterAll(async () => {
    await d?.cleanup();
  });

  it('a damaged record, once marked, shows in yello_corrupt_marks, and a read of it counts as STORAGE_FAILURE/CORRUPT', async () => {
    d = await DaemonProcess.start({ extraArgs: ['--policy', 'open'] });
    let admin = await d.connectAs();
    const pair = await createPair(admin, d.socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    ok(await append(pair, c.coordinatorToken, c.nextPosition, 'op-c', records(uniq('c'), 3)));
    expect(value(await scrape(admin), 'yello_corrupt_marks')).toBe(0);
    await d.stop();
    await damageStoredRecord(d.dataDir, pair.streamA, 2);
    await d.restart();
    admin = await d.connectAs();
    ok(await admin.call('daemon.check', {}));
    const marked = await scrape(admin);
    expect(value(marked, 'yello_corrupt_marks')).toBeGreaterThanOrEqual(1);
    const marks = ok(await admin.call('daemon.status', {})).integrity.corruptStreams;
    expect(value(marked, 'yello_corrupt_marks')).toBe(marks.length);
    const from = marks.find((m) => m.streamId === pair.streamA)?.fromPosition ?? '0';
    const read = await admin.call('streams.read', { streamId: pair.streamA, generation: '1', fromPosition: from });
    expect(read.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'CORRUPT' });
    expect(value(await scrape(admin), 'yello_refusals_total', { type: 'STORAGE_FAILURE', reason: 'CORRUPT' })).toBeGreaterThanOrEqual(1);
    admin.close();
  }, 60_000);
});

/** GET/POST/… `url`; the status, headers and body. */
function http(
  url: string,
  method = 'GET',
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('yello daemon --metrics-listen', () => {
  const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open', '--metrics-listen', '127.0.0.1:0'] });
  const url = () => {
    const line = daemon()
      .logs()
      .find((l) => l.msg === 'metrics endpoint listening');
    if (typeof line?.url !== 'string') throw new Error('no "metrics endpoint listening" log line');
    return line.url;
  };

  it('logs its URL on loopback and serves GET /metrics: the same metrics as daemon.metrics, moving with appends', async () => {
    expect(url()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const first = await http(url());
    expect(first.status).toBe(200);
    expect(first.headers['content-type']).toBe(ok(await admin().call('daemon.metrics', {})).contentType);
    const before = parseExposition(first.body);
    const pair = await createPair(admin(), daemon().socketPath);
    const c = await claim(pair.a.client, pair.streamA);
    ok(await append(pair, c.coordinatorToken, c.nextPosition, 'op-h', records(uniq('h'), 4)));
    const after = parseExposition((await http(url())).body);
    expect(value(after, 'yello_appended_records_total') - value(before, 'yello_appended_records_total')).toBe(4);
    expect(value(after, 'process_cpu_seconds_total')).toBeGreaterThan(0);
  });

  it('refuses other paths (404) and other methods (405, Allow: GET)', async () => {
    const base = url().replace(/\/metrics$/, '');
    for (const p of ['/', '/metric', '/metrics/', '/debug']) expect((await http(base + p)).status, p).toBe(404);
    for (const m of ['POST', 'PUT', 'DELETE', 'HEAD']) {
      const r = await http(url(), m);
      expect(r.status, m).toBe(405);
      expect(r.headers.allow).toBe('GET');
    }
  });
});

describe('--metrics-listen refusals at start', () => {
  const dirs: string[] = [];
  const servers: Server[] = [];
  afterAll(() => {
    for (const s of servers) s.close();
  });
  const start = async (args: string[]) => {
    const dir = await makeTempDir();
    dirs.push(dir);
    return runCli(['daemon', '--socket', path.join(dir, 'y.sock'), '--data-dir', path.join(dir, 'data'), ...args], {
      timeoutMs: 20_000,
      process: true,
    });
  };

  it('a non-loopback address without --metrics-allow-remote is a usage error (exit 2) that names the way out', async () => {
    for (const addr of ['0.0.0.0:9464', '[::]:9464', '192.168.1.10:9464']) {
      const r = await start(['--metrics-listen', addr]);
      expect(r.code, addr).toBe(2);
      expect(r.stderr).toContain('not a loopback address');
      expect(r.stderr).toContain('--metrics-allow-remote');
    }
  });

  it('malformed addresses, host names and --metrics-allow-remote alone are usage errors (exit 2)', async () => {
    for (const args of [
      ['--metrics-listen', '9464'],
      ['--metrics-listen', '127.0.0.1:99999'],
      ['--metrics-listen', 'example.com:9464'],
      ['--metrics-allow-remote'],
    ]) {
      const r = await start(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.trim().split('\n')[0]).toMatch(/^yello: .*metrics/);
      // The daemon knows the options (on the old code this was yargs' "Unknown argument").
      expect(r.stderr).not.toMatch(/Unknown argument/i);
    }
  });

  it('a port already in use exits 74 with one line naming the address', async () => {
    const taken = createServer();
    servers.push(taken);
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    const r = await start(['--metrics-listen', `127.0.0.1:${port}`]);
    expect(r.code).toBe(74);
    expect(r.stderr).toContain(`cannot listen for metrics on 127.0.0.1:${port}`);
    expect(r.stderr).toContain('EADDRINUSE');
  });

  it('yello daemon --help says the endpoint is loopback-only unless allowed', async () => {
    const r = await runCli(['daemon', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('--metrics-listen');
    expect(r.stdout).toContain('--metrics-allow-remote');
    expect(r.stdout).toMatch(/loopback/);
  });
});

describe('yello metrics', () => {
  const { cli, pair } = useCli({ extraArgs: ['--policy', 'open'] });

  it('prints the scrape (admin); --json gives {contentType, text}; an agent is refused', async () => {
    const r = await cli().ok(['metrics']);
    const samples = parseExposition(r.stdout);
    expect(samples.some((s) => s.name === 'yello_appends_total')).toBe(true);
    expect(r.stdout).toContain('# TYPE yello_commit_duration_seconds histogram');
    const j = await cli().json<{ contentType: string; text: string }>(['metrics']);
    expect(j.contentType).toMatch(/^text\/plain/);
    expect(j.text).toContain('yello_connections{role="admin"}');
    // With only an agent token to hand (no admin token file), the admin command is refused.
    const p = await pair();
    const asAgent = await cli().run(['metrics', '--admin-token-file', p.alice.tokenFile]);
    expect(asAgent.code).toBe(1);
    expect(asAgent.stderr).toMatch(/admin-only|ADMIN_ONLY/);
  });
});
