import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { paramSchemas, type MethodName } from '../../src/shared/schemas.js';
import { RpcServer, type CallContext, type Handlers } from '../../src/daemon/rpc/rpc-server.js';
import { errors } from '../../src/shared/errors.js';

/** Every handler answers `ok`; `daemon.status` throws what the test plants. */
function server(thrown: unknown, lines: string[]): RpcServer {
  const handlers = Object.fromEntries((Object.keys(paramSchemas) as MethodName[]).map((m) => [m, () => 'ok'])) as unknown as Handlers;
  (handlers as Record<string, unknown>)['daemon.status'] = () => {
    throw thrown;
  };
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
  return new RpcServer(handlers, log, () => true);
}

const ctx = (): CallContext => ({
  caller: { role: 'admin' },
  connection: { id: 1, setCaller() {}, notify() {}, onClose() {}, onHangUp() {}, congested: false, onDrain() {} },
});

describe('RpcServer error mapping', () => {
  it('maps an unexpected exception to INTERNAL with a correlation id, logs it, and leaks nothing', async () => {
    const lines: string[] = [];
    const r = (await server(new Error('secret detail /etc/passwd'), lines).receive(
      { jsonrpc: '2.0', id: 7, method: 'daemon.status', params: {} },
      ctx(),
    )) as { error: { code: number; message: string; data: { type: string; correlationId: string } } };
    expect(r.error.code).toBe(-32603);
    expect(r.error.data.type).toBe('INTERNAL');
    expect(r.error.data.correlationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.stringify(r)).not.toContain('secret detail');
    expect(lines.some((l) => l.includes(r.error.data.correlationId))).toBe(true);
  });

  it('maps a YelloError to its code and data.type, without logging it as internal', async () => {
    const lines: string[] = [];
    const r = (await server(errors.fenced('c:a', '3'), lines).receive(
      { jsonrpc: '2.0', id: 'x', method: 'daemon.status', params: {} },
      ctx(),
    )) as { error: { code: number; data: Record<string, unknown> } };
    expect(r.error).toMatchObject({ code: 4090, data: { type: 'FENCED', streamId: 'c:a', epoch: '3' } });
    expect(lines).toEqual([]);
  });

  it('rejects by-position params and unknown keys with INVALID_PARAMS and a path', async () => {
    const s = server(null, []);
    const a = (await s.receive({ jsonrpc: '2.0', id: 1, method: 'keys.list', params: [] as never }, ctx())) as {
      error: { data: { type: string; path: string } };
    };
    expect(a.error.data.type).toBe('INVALID_PARAMS');
    const b = (await s.receive({ jsonrpc: '2.0', id: 2, method: 'streams.get', params: { streamId: 'c:a', extra: 1 } }, ctx())) as {
      error: { data: { path: string; reason: string } };
    };
    expect(b.error.data).toMatchObject({ path: 'extra', reason: 'unknown parameter' });
  });
});
