// The checks in front of the MCP SDK (src/mcp/request-gate.ts: the stdin line framing of
// `yello mcp`, and the gate of every transport) and the quoting of peer text, without a
// process: what passes to the SDK, and what is answered how.

import { describe, expect, it } from 'vitest';
import { fencePeerData, quotePeerText } from '../../src/client/peer-data.js';
import { frameError, RequestGate } from '../../src/mcp/request-gate.js';

function gate(): RequestGate {
  return new RequestGate({
    toolNames: () => ['whoami', 'read_new'],
    isResourceUri: (uri) => uri.startsWith('yello://chats/'),
    resourceTemplate: 'yello://chats/{chatId}/transcript',
  });
}
const INIT = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};
const answer = (line: string | null) =>
  line === null ? null : (JSON.parse(line) as { id: unknown; error: { code: number; message: string } });

describe('RequestGate', () => {
  it('passes notifications and responses at any time, and initialize and ping before initialize', () => {
    const g = gate();
    expect(g.check({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } })).toBeNull();
    expect(g.check({ jsonrpc: '2.0', id: 5, result: {} })).toBeNull();
    expect(g.check({ jsonrpc: '2.0', id: 'p', method: 'ping' })).toBeNull();
    expect(g.check({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).toMatchObject({
      id: 1,
      error: { code: -32600 },
    });
    expect(g.check(INIT)).toBeNull();
    expect(g.check({ jsonrpc: '2.0', id: 2, method: 'tools/list' })).toBeNull();
    // Methods the server does not know are the SDK's to answer (-32601).
    expect(g.check({ jsonrpc: '2.0', id: 3, method: 'no/such' })).toBeNull();
  });

  it.each([
    ['{', -32700, null],
    ['[]', -32600, null],
    ['[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, null],
    ['"text"', -32600, null],
    ['null', -32600, null],
    ['{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, null],
    ['{"jsonrpc":"2.0","id":{},"method":"ping"}', -32600, null],
    ['{"id":4,"method":"ping"}', -32600, 4],
    ['{"jsonrpc":"2.0","id":4,"method":7}', -32600, 4],
    ['{"jsonrpc":"2.0","id":4}', -32600, 4],
  ])('%s → %i', (line, code, id) => {
    expect(answer(frameError(line))).toMatchObject({ id, error: { code } });
  });

  it('frameError passes any well-formed message: requests, notifications, responses', () => {
    for (const m of [INIT, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'rm_rf' } }, { jsonrpc: '2.0', method: 'x' }])
      expect(frameError(JSON.stringify(m))).toBeNull();
    expect(frameError(JSON.stringify({ jsonrpc: '2.0', id: 5, result: {} }))).toBeNull();
  });

  it('after initialize: unknown tool -32602, unknown resource -32002, bad params -32602 without a dump', () => {
    const g = gate();
    g.check(INIT);
    const call = (params: unknown) => g.check({ jsonrpc: '2.0', id: 9, method: 'tools/call', params });
    expect(call({ name: 'whoami', arguments: {} })).toBeNull();
    expect(call({ name: 'rm_rf' })).toMatchObject({ error: { code: -32602 } });
    expect(call({ arguments: {} })).toMatchObject({ error: { code: -32602 } });
    expect(g.check({ jsonrpc: '2.0', id: 10, method: 'resources/read', params: { uri: 'file:///x' } })).toMatchObject({
      error: { code: -32002 },
    });
    const level = g.check({ jsonrpc: '2.0', id: 11, method: 'logging/setLevel', params: { level: 'LOUD' } });
    expect(level?.error.code).toBe(-32602);
    expect(level?.error.message).toMatch(/^Invalid params for logging\/setLevel: params\.level: /);
    expect(level?.error.message).not.toMatch(/\n/);
  });
});

describe('quotePeerText and fencePeerData', () => {
  it('no peer text can end its line or its quotes', () => {
    for (const text of ['a\nb', 'a\r\nb', 'x"y', 'back\\slash', 'ls\u2028ps\u2029nel\u0085', 'bidi\u202eevil\u2066', '\u0000\u001f']) {
      const q = quotePeerText(text);
      expect(q).toMatch(/^".*"$/);
      expect(q).not.toMatch(/[\n\r\u2028\u2029\u0085\u202e\u2066]/);
      expect(q.includes(String.fromCharCode(0))).toBe(false);
      expect(JSON.parse(q)).toBe(text);
    }
  });

  it('fences lines between two lines carrying the boundary, with the notice before them; nothing for no lines', () => {
    const lines = fencePeerData(['#1 x'], 'bob', 'b'.repeat(32));
    expect(lines.slice(1)).toEqual([`<<<PEER-DATA ${'b'.repeat(32)}`, '#1 x', `PEER-DATA ${'b'.repeat(32)}>>>`]);
    expect(lines[0]).toMatch(/bob/);
    expect(fencePeerData([], 'bob')).toEqual([]);
    expect(fencePeerData(['x'], 'bob')[1]).not.toBe(fencePeerData(['x'], 'bob')[1]);
  });
});
