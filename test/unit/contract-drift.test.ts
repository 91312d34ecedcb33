import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/shared/errors.js';
import { paramSchemas } from '../../src/shared/schemas.js';
import { methods } from '../../src/shared/methods.js';
import { buildOpenRpc } from '../../src/shared/openrpc.js';

const protocol = readFileSync(resolve(import.meta.dirname, '../../../shared/PROTOCOL.md'), 'utf8');

describe('contract drift', () => {
  it('the error registry and PROTOCOL.md §3 list exactly the same types and codes', () => {
    const table = Object.fromEntries([...protocol.matchAll(/^\| (-?\d+) \| ([A-Z_]+) \|/gm)].map((m) => [m[2], Number(m[1])]));
    expect(Object.keys(table).length).toBeGreaterThan(10);
    expect(ERROR_CODES).toEqual(table);
  });

  it('every method PROTOCOL.md §6 names has a schema and a descriptor, and nothing else exists', () => {
    const named = new Set([...protocol.matchAll(/^- `((?:session|daemon|keys|agents|grants|chats|streams|operations)\.[a-zA-Z]+) \{/gm)].map((m) => m[1]!));
    // `grants.remove {…}` and the `agents.*` shorthand lines are covered by the pattern above.
    const ours = new Set(Object.keys(paramSchemas).filter((m) => m !== 'rpc.discover'));
    expect([...named].filter((m) => !ours.has(m))).toEqual([]);
    expect(Object.keys(methods).sort()).toEqual(Object.keys(paramSchemas).sort());
  });

  it('the OpenRPC document describes every method with its params', () => {
    const doc = buildOpenRpc('test') as { methods: Array<{ name: string; summary: string; params: Array<{ name: string }> }> };
    expect(doc.methods.map((m) => m.name).sort()).toEqual(Object.keys(paramSchemas).sort());
    const append = doc.methods.find((m) => m.name === 'streams.append')!;
    expect(append.params.map((p) => p.name).sort()).toEqual(['coordinatorToken', 'expectedPosition', 'generation', 'operationId', 'records', 'streamId']);
    for (const m of doc.methods) expect(m.summary.length).toBeGreaterThan(5);
  });
});

describe('docs/api.md', () => {
  it('is exactly what the schemas generate (run npm run docs:api after changing a schema)', async () => {
    const { renderApiDoc } = await import('../../src/shared/api-doc.js');
    expect(readFileSync(resolve(import.meta.dirname, '../../docs/api.md'), 'utf8')).toBe(renderApiDoc());
  });

  it('documents every method with a summary and its access', async () => {
    const { renderApiDoc } = await import('../../src/shared/api-doc.js');
    const doc = renderApiDoc();
    for (const name of Object.keys(paramSchemas)) {
      expect(doc).toContain(`## \`${name}\``);
      expect(methods[name as keyof typeof methods].summary.length).toBeGreaterThan(5);
    }
  });
});
