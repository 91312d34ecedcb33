// docs/protocol.md is the project's specification of the wire contract. Its machine-checkable
// tables must list exactly what the code has, in both directions: a row the code lacks, or a
// code value the docs lack, fails here. So does a link in the docs that leaves the repository.

import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONTINUITY_REASONS, ERROR_CODES, type ContinuityReason } from '../../src/shared/errors.js';
import { paramSchemas, type MethodName } from '../../src/shared/schemas.js';
import { methods } from '../../src/shared/methods.js';
import { METHOD_NAMES } from '../../src/shared/method-names.js';
import { buildOpenRpc } from '../../src/shared/openrpc.js';
import type { ChatBreakNotification } from '../../src/shared/types.js';
import { EXIT } from '../../src/cli/output.js';
import { loadSigningVectors } from '../helpers/signing-vectors.js';

const repoRoot = resolve(import.meta.dirname, '../..');
const protocol = readFileSync(resolve(repoRoot, 'docs/protocol.md'), 'utf8');

/** Cells of a markdown table row; `\|` inside a cell is a literal pipe. */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim().replaceAll('\\|', '|'));
}

/** Body rows of the one table in docs/protocol.md whose header starts with these columns. */
function table(...columns: string[]): string[][] {
  const lines = protocol.split('\n');
  const starts = lines.flatMap((l, i) => (l.startsWith('|') && columns.every((c, j) => cells(l)[j] === c) ? [i] : []));
  expect(starts, `exactly one table with columns ${columns.join(', ')}`).toHaveLength(1);
  const rows: string[][] = [];
  for (let i = starts[0]! + 2; i < lines.length && lines[i]!.startsWith('|'); i++) rows.push(cells(lines[i]!));
  expect(rows.length, `rows of the ${columns.join(', ')} table`).toBeGreaterThan(0);
  return rows;
}

/** A cell's text without the backticks of a code span. */
const unquote = (cell: string) => cell.replace(/^`(.*)`$/, '$1');

/** Names in `{a, b?}`, as written. */
const paramList = (cell: string) =>
  unquote(cell)
    .replace(/^\{|\}$/g, '')
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

describe('docs/protocol.md agrees with the code', () => {
  it('§3.4: the error table and the registry list exactly the same data.type strings and codes', () => {
    const rows = table('code', 'data.type');
    const types = rows.map((r) => unquote(r[1]!));
    expect(new Set(types).size, 'no data.type listed twice').toBe(types.length);
    expect(Object.fromEntries(rows.map((r) => [unquote(r[1]!), Number(r[0])]))).toEqual(ERROR_CODES);
  });

  it('§3.5: the continuity reasons are exactly CONTINUITY_REASONS, which chats.break uses too', () => {
    const reasons = table('reason', 'when', 'expected', 'actual').map((r) => unquote(r[0]!));
    expect([...reasons].sort()).toEqual([...CONTINUITY_REASONS].sort());
    // Compile-time: the notification's reason type is the same union (npm test type-checks tests).
    const breakUsesTheSameReasons: Same<ChatBreakNotification['reason'], ContinuityReason> = true;
    expect(breakUsesTheSameReasons).toBe(true);
  });

  it('§6.2: the method list names every method, with its access and params, and nothing else', () => {
    const rows = table('method', 'access', 'params', 'result');
    const documented = rows.map((r) => unquote(r[0]!));
    expect(new Set(documented).size, 'no method listed twice').toBe(documented.length);
    expect([...documented].sort()).toEqual(Object.keys(paramSchemas).sort());
    expect(Object.keys(methods).sort()).toEqual(Object.keys(paramSchemas).sort());
    const doc = buildOpenRpc('test') as { methods: Array<{ name: string; params: Array<{ name: string; required: boolean }> }> };
    for (const row of rows) {
      const name = unquote(row[0]!) as MethodName;
      expect(row[1], `access of ${name}`).toBe(methods[name].access);
      const schema = doc.methods.find((m) => m.name === name)!.params.map((p) => (p.required ? p.name : `${p.name}?`));
      expect(paramList(row[2]!).sort(), `params of ${name}`).toEqual(schema.sort());
    }
  });

  it('§9: the CLI exit codes are exactly those the CLI uses', () => {
    const codes = table('exit', 'meaning').map((r) => Number(r[0]));
    expect([...codes].sort((a, b) => a - b)).toEqual(Object.values(EXIT).sort((a, b) => a - b));
  });

  it('§5.4: the worked signing example is the fixture vector it names', () => {
    const v = loadSigningVectors().vectors.find((x) => x.name === 'ascii')!;
    expect(protocol).toContain('```text\n' + v.payload + '\n```');
    for (const value of [v.content, v.messageId, v.contentSha256, v.clientMessageId, v.signature.value, v.signature.kid]) {
      expect(protocol).toContain(value);
    }
  });
});

describe('the method table', () => {
  it('METHOD_NAMES (the zod-free list the client loads) is exactly the table, in its order', () => {
    expect([...METHOD_NAMES]).toEqual(Object.keys(methods));
    // Compile-time too: a method the list lacks fails npm run typecheck.
    const listNamesEveryMethod: Same<(typeof METHOD_NAMES)[number], MethodName> = true;
    expect(listNamesEveryMethod).toBe(true);
  });

  it('every descriptor is filed under its own name', () => {
    for (const [key, d] of Object.entries(methods)) expect(d.name).toBe(key);
  });
});

describe('rpc.discover', () => {
  it('the OpenRPC document describes every method with its params', () => {
    const doc = buildOpenRpc('test') as { methods: Array<{ name: string; summary: string; params: Array<{ name: string }> }> };
    expect(doc.methods.map((m) => m.name).sort()).toEqual(Object.keys(paramSchemas).sort());
    const append = doc.methods.find((m) => m.name === 'streams.append')!;
    expect(append.params.map((p) => p.name).sort()).toEqual([
      'coordinatorToken',
      'expectedPosition',
      'generation',
      'operationId',
      'records',
      'streamId',
    ]);
    for (const m of doc.methods) expect(m.summary.length).toBeGreaterThan(5);
  });
});

describe('docs/api.md', () => {
  it('is exactly what the schemas generate (run npm run docs:api after changing a schema)', async () => {
    const { renderApiDoc } = await import('../../src/shared/api-doc.js');
    expect(readFileSync(resolve(repoRoot, 'docs/api.md'), 'utf8')).toBe(renderApiDoc());
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

describe('links in the docs', () => {
  const files = [
    'README.md',
    'CHANGELOG.md',
    'bench/README.md',
    'systemd/README.md',
    ...readdirSync(resolve(repoRoot, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];

  it('point at files inside the repository that exist (a clone must stand alone)', () => {
    const problems: string[] = [];
    for (const file of files) {
      const text = readFileSync(resolve(repoRoot, file), 'utf8');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(https?:|mailto:|#)/.test(target!)) continue;
        const path = resolve(repoRoot, dirname(file), target!.split('#')[0]!);
        const inside = relative(repoRoot, path);
        if (inside.startsWith('..') || target!.startsWith('/')) problems.push(`${file}: ${target} leaves the repository`);
        else if (!existsSync(path)) problems.push(`${file}: ${target} does not exist`);
      }
      // The contract used to live in a sibling directory of the clone; nothing may point there.
      if (/\.\.\/shared\b/.test(text)) problems.push(`${file}: mentions the sibling directory 'shared' outside the clone`);
    }
    expect(problems).toEqual([]);
  });
});
