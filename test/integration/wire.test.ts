// docs/protocol.md §3 over the real socket: framing, JSON-RPC errors, line limits, batches, and the
// rule that nothing but session.hello works before a hello.

import { beforeAll, describe, expect, it } from 'vitest';
import { type Wire, seenErrors, uniq, type WireResponse } from '../helpers/wire-fixtures.js';
import { expectWellFormedErrors } from '../helpers/error-shapes.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { CONTRACT_METHODS } from '../helpers/contract-methods.js';

/** Every RPC method named in §6 but session.hello. */
const METHODS = CONTRACT_METHODS.filter((m) => m !== 'session.hello');

const MiB = 1024 * 1024;

// vitest types its asymmetric matchers `any`; held as `unknown` they fit any expected shape.
const anyString: unknown = expect.any(String);

const { daemon } = useDaemon();

describe('session.hello', () => {
  it('answers the admin token with role admin, protocol, limits and signing key', async () => {
    const c = await daemon().connect();
    const r = await c.hello(daemon().adminToken);
    expect(r.error).toBeUndefined();
    expect(r.jsonrpc).toBe('2.0');
    expect(r.result).toMatchObject({
      role: 'admin',
      protocol: 'yello.chat.v1',
      daemon: { version: anyString },
      limits: { maxAppendRequestBytes: 262_144, maxLineBytes: MiB },
      signing: { kid: anyString, alg: 'ES256' },
    });
  });

  it('answers an agent token with role agent and the agent id', async () => {
    const admin = await daemon().connectAs();
    const created = (await admin.call('agents.create', { username: uniq('hello'), name: 'Hello' })).result!;
    const c = await daemon().connect();
    const r = await c.hello(created.token);
    expect(r.error).toBeUndefined();
    expect(r.result).toMatchObject({ role: 'agent', agentId: created.agent.id, protocol: 'yello.chat.v1' });
  });

  it('rejects a bad token with UNAUTHENTICATED 4001 and keeps the connection unauthenticated', async () => {
    const c = await daemon().connect();
    const r = await c.hello('not-a-real-token');
    expect(r.error?.code).toBe(4001);
    expect(r.error?.data?.type).toBe('UNAUTHENTICATED');
    const after = await c.call('daemon.status', {});
    expect(after.error?.code).toBe(4001);
    // A later good hello on the same connection still works.
    const good = await c.hello(daemon().adminToken);
    expect(good.result?.role).toBe('admin');
  });

  it('slows down repeated failed hellos with RATE_LIMITED 4290 and retryAfterMs', async () => {
    const c = await daemon().connect();
    let limited: WireResponse | undefined;
    for (let i = 0; i < 12 && !limited; i++) {
      const r = await c.hello(`guess-${i}`);
      if (r.error?.code === 4290) limited = r;
      else expect(r.error?.code).toBe(4001);
    }
    expect(limited?.error?.data?.type).toBe('RATE_LIMITED');
    expect(typeof limited?.error?.data?.retryAfterMs).toBe('number');
    expect(limited?.error?.data?.retryAfterMs).toBeGreaterThan(0);
    // Other connections are unaffected.
    const other = await daemon().connect();
    expect((await other.hello(daemon().adminToken)).result?.role).toBe('admin');
  });

  it('rejects a hello without a token as INVALID_PARAMS or UNAUTHENTICATED', async () => {
    const c = await daemon().connect();
    const r = await c.call('session.hello', {});
    expect([-32602, 4001]).toContain(r.error?.code);
  });
});

describe('every method before session.hello', () => {
  let c: Wire;
  beforeAll(async () => {
    c = await daemon().connect();
  });

  for (const method of METHODS) {
    it(`${method} is UNAUTHENTICATED`, async () => {
      const r = await c.call(method, {});
      expect(r.result).toBeUndefined();
      expect(r.error?.code).toBe(4001);
      expect(r.error?.data?.type).toBe('UNAUTHENTICATED');
    });
  }
});

describe('wire framing and JSON-RPC errors', () => {
  let c: Wire;
  beforeAll(async () => {
    c = await daemon().connectAs();
  });

  it('answers unparseable JSON with -32700 and id null, and the connection survives', async () => {
    c.sendRaw('{"jsonrpc":"2.0","id":1,"method":\n');
    const r = await c.nextOrphan();
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(-32700);
    expect((await c.call('daemon.status', {})).result).toBeDefined();
  });

  it('answers plain garbage with -32700', async () => {
    c.sendRaw('\u0000\u0001garbage]]]\n');
    const r = await c.nextOrphan();
    expect(r.error?.code).toBe(-32700);
    expect((await c.call('daemon.status', {})).result).toBeDefined();
  });

  it('answers a JSON value that is not a request with -32600', async () => {
    for (const bad of ['{"foo":1}', '42', '"text"', '{"jsonrpc":"2.0","id":7}', '{"jsonrpc":"1.0","id":8,"method":"daemon.status"}']) {
      c.sendRaw(bad + '\n');
      // Some of these carry an id the daemon may echo; unmatched ids land in orphans too.
      const resp = await c.nextOrphan();
      expect(resp.error?.code, bad).toBe(-32600);
    }
    expect(c.isClosed).toBe(false);
    expect((await c.call('daemon.status', {})).result).toBeDefined();
  });

  it('answers an unknown method with -32601 and keeps the connection', async () => {
    const r = await c.call('streams.explode', {});
    expect(r.error?.code).toBe(-32601);
    expect((await c.call('daemon.status', {})).result).toBeDefined();
  });

  it('answers bad params with -32602, type INVALID_PARAMS and a path', async () => {
    const r = await c.call('agents.get', { agentId: 'not valid!' });
    expect(r.error?.code).toBe(-32602);
    expect(r.error?.data?.type).toBe('INVALID_PARAMS');
    expect(r.error?.data?.path).toBeDefined();
    expect(r.error?.data?.reason).toBeDefined();
  });

  it('answers a line over 1 MiB with REQUEST_TOO_LARGE, id null, and keeps the connection usable', async () => {
    const filler = 'x'.repeat(MiB + 1000);
    const line = JSON.stringify({ jsonrpc: '2.0', id: 'huge', method: 'daemon.status', params: { filler } }) + '\n';
    c.sendRaw(line);
    const r = await c.nextOrphan(20_000);
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(4013);
    expect(r.error?.data?.type).toBe('REQUEST_TOO_LARGE');
    expect(r.error?.data?.limit).toBe(MiB);
    expect(r.error?.data?.size).toBeGreaterThan(MiB);
    // The rest of that line is discarded; the next request on the same connection works.
    const next = await c.call('daemon.status', {});
    expect(next.result).toBeDefined();
    expect(c.orphans).toEqual([]);
  });

  it('discards an oversize line that arrives in many chunks, then serves the next request', async () => {
    const chunk = 'y'.repeat(64 * 1024);
    c.sendRaw('{"jsonrpc":"2.0","id":"chunked","method":"daemon.status","params":{"filler":"');
    for (let i = 0; i < 20; i++) c.sendRaw(chunk);
    c.sendRaw('"}}\n');
    const r = await c.nextOrphan(20_000);
    expect(r.error?.code).toBe(4013);
    expect(r.id).toBeNull();
    const next = await c.call('keys.list', {});
    expect(next.result?.keys).toBeDefined();
  });

  it('answers an oversize line before hello with REQUEST_TOO_LARGE, and hello still works after it', async () => {
    const fresh = await daemon().connect();
    fresh.sendRaw(JSON.stringify({ jsonrpc: '2.0', id: 'pre', method: 'session.hello', params: { token: 'x'.repeat(MiB + 10) } }) + '\n');
    const r = await fresh.nextOrphan(20_000);
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(4013);
    expect((await fresh.hello(daemon().adminToken)).result?.role).toBe('admin');
  });

  it('answers 200 pipelined requests on one connection, each matched by id', async () => {
    const results = await Promise.all(
      Array.from(
        { length: 200 },
        (_, i) =>
          (i % 2 ? c.call('daemon.status', {}) : c.call('keys.list', {})) as Promise<WireResponse<{ keys?: unknown; version?: unknown }>>,
      ),
    );
    results.forEach((r, i) => {
      expect(r.error).toBeUndefined();
      if (i % 2 === 0) expect(r.result!.keys).toBeDefined();
      else expect(r.result!.version).toBeDefined();
    });
  });

  it('answers a batch array with an array of responses matched by id', async () => {
    const responses = await c.batch([
      { method: 'daemon.status', params: {} },
      { method: 'keys.list', params: {} },
      { method: 'no.such.method', params: {} },
    ]);
    expect(Array.isArray(responses)).toBe(true);
    expect(responses).toHaveLength(3);
    const byId = new Map(responses.map((r) => [r.id, r]));
    const ids = [...byId.keys()].sort();
    expect(ids).toHaveLength(3);
    const [first, second, third] = ids.map((id) => byId.get(id)!);
    expect(first!.result).toBeDefined();
    expect((second!.result as { keys?: unknown } | undefined)?.keys).toBeDefined();
    expect(third!.error?.code).toBe(-32601);
  });

  it('answers each invalid member of a batch individually', async () => {
    const responses = await c.batchRaw([{ jsonrpc: '2.0', id: 'b1', method: 'daemon.status', params: {} }, { foo: 1 }]);
    expect(responses).toHaveLength(2);
    expect(responses.find((r) => r.id === 'b1')?.result).toBeDefined();
    expect(responses.find((r) => r.id !== 'b1')?.error?.code).toBe(-32600);
  });

  it('handles several requests in one write and one request split across writes', async () => {
    const p1 = c.callRaw(
      'w1',
      '{"jsonrpc":"2.0","id":"w1","method":"daemon.status","params":{}}\n{"jsonrpc":"2.0","id":"w2","method":"keys.list","params":{}}\n',
    );
    const p2 = c.callRaw('w2', '');
    expect((await p1).result).toBeDefined();
    expect(((await p2).result as { keys?: unknown } | undefined)?.keys).toBeDefined();
    const p3 = c.callRaw('w3', '{"jsonrpc":"2.0","id":"w3",');
    c.sendRaw('"method":"daemon.status","params":{}}\n');
    expect((await p3).result).toBeDefined();
  });

  it('ignores a notification (no id) and sends nothing back for it', async () => {
    c.notify('daemon.status', {});
    const r = await c.call('daemon.status', {});
    expect(r.result).toBeDefined();
    expect(c.orphans).toEqual([]);
  });
});

/** Errors of every kind this file is about, so the checks below see some even when run alone. */
async function provokeWireErrors(): Promise<void> {
  const c = await daemon().connect();
  try {
    await c.call('daemon.status', {}); // before hello: UNAUTHENTICATED
    await c.call('no.such.method', {});
    await c.hello('yello_not_a_token');
  } finally {
    c.close();
  }
}

describe('error responses', () => {
  it('never use code 0 and never carry a stack (errors provoked here, and every one seen in this file)', async () => {
    await expectWellFormedErrors(provokeWireErrors);
  });

  it('carry a data.type from the contract table for every application error', async () => {
    await provokeWireErrors();
    let checked = 0;
    const known = new Map<number, string>([
      [-32602, 'INVALID_PARAMS'],
      [4001, 'UNAUTHENTICATED'],
      [4003, 'PERMISSION_DENIED'],
      [4004, 'NOT_FOUND'],
      [4013, 'REQUEST_TOO_LARGE'],
      [4090, 'FENCED'],
      [4091, 'POSITION_MISMATCH'],
      [4092, 'WRITER_ACTIVE'],
      [4093, 'OPERATION_CONFLICT'],
      [4094, 'DUPLICATE_MESSAGE'],
      [4095, 'INVALID_RECEIPT'],
      [4100, 'CONTINUITY_BREAK'],
      [4220, 'POLICY_REJECTED'],
      [4290, 'RATE_LIMITED'],
      [5030, 'STORAGE_FAILURE'],
      [-32603, 'INTERNAL'],
    ]);
    for (const { method, error } of seenErrors) {
      if (error.code === -32700 || error.code === -32600 || error.code === -32601) continue;
      expect(known.get(error.code), `${method}: ${JSON.stringify(error)}`).toBe(error.data?.type);
      checked++;
    }
    expect(checked, 'no application error was seen').toBeGreaterThan(0);
  });
});
