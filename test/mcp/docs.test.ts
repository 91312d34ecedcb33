// docs/mcp.md agrees with what `yello mcp` serves: the JSON schemas block is exactly the
// server's tools/list (asked of a running server through the SDK client), the tool table names
// every tool, and every error type the MCP layer can answer is explained.
// `UPDATE_MCP_DOCS=1 npx vitest run test/mcp/docs.test.ts` rewrites the schemas block.

import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { yelloBin } from '../helpers/cli-runner.js';
import { makeTempDir, repoRoot } from '../helpers/daemon-process.js';

const DOC = path.join(repoRoot, 'docs/mcp.md');
const BEGIN = '<!-- tool-schemas:begin -->';
const END = '<!-- tool-schemas:end -->';

/** JSON indented by two, with every object or array that fits in 100 characters on one line. */
function pretty(value: unknown, indent = ''): string {
  const flat = JSON.stringify(value);
  if (value === null || typeof value !== 'object' || flat.length + indent.length <= 100) return flat;
  const inner = indent + '  ';
  if (Array.isArray(value)) return `[\n${value.map((v) => inner + pretty(v, inner)).join(',\n')}\n${indent}]`;
  return `{\n${Object.entries(value)
    .map(([k, v]) => `${inner}${JSON.stringify(k)}: ${pretty(v, inner)}`)
    .join(',\n')}\n${indent}}`;
}

function render(tools: Tool[]): string {
  const json = (v: unknown) => ['```json', pretty(v), '```'].join('\n');
  return tools
    .map((t) =>
      [
        `### \`${t.name}\``,
        '',
        t.description ?? '',
        '',
        'Input:',
        '',
        json(t.inputSchema),
        '',
        'Output (`structuredContent`):',
        '',
        json(t.outputSchema),
      ].join('\n'),
    )
    .join('\n\n');
}

let tools: Tool[];
beforeAll(async () => {
  // No daemon is needed to list tools: the server starts and connects on first use.
  const dir = await makeTempDir('ymd-');
  const client = new Client({ name: 'docs-check', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [yelloBin, 'mcp', '--log-level', 'silent'],
      env: { YELLO_SOCKET: path.join(dir, 'nobody.sock'), YELLO_TOKEN: 'yello_agt_not-a-real-token' },
      stderr: 'ignore',
    }),
  );
  try {
    tools = (await client.listTools()).tools;
  } finally {
    await client.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

describe('docs/mcp.md', () => {
  it('holds exactly the JSON schemas tools/list returns', () => {
    const doc = fs.readFileSync(DOC, 'utf8');
    const start = doc.indexOf(BEGIN);
    const end = doc.indexOf(END);
    expect(start).toBeGreaterThan(0);
    expect(end).toBeGreaterThan(start);
    const block = `${BEGIN}\n\n${render(tools)}\n\n${END}`;
    if (process.env.UPDATE_MCP_DOCS) fs.writeFileSync(DOC, doc.slice(0, start) + block + doc.slice(end + END.length));
    else expect(doc.slice(start, end + END.length)).toBe(block);
  });

  it('lists every tool in its table', () => {
    const doc = fs.readFileSync(DOC, 'utf8');
    const table = [...doc.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    expect(new Set(table)).toEqual(new Set(tools.map((t) => t.name)));
  });

  it('explains every error type the MCP layer answers', () => {
    const doc = fs.readFileSync(DOC, 'utf8');
    const sources = ['tool-errors.ts', 'chat-session.ts', 'agent-sessions.ts', 'tools.ts']
      .map((f) => fs.readFileSync(path.join(repoRoot, 'src/mcp', f), 'utf8'))
      .join('\n');
    const types = new Set([
      ...[...sources.matchAll(/new ToolFailure\(\s*'([A-Z_]+)'/g)].map((m) => m[1]!),
      ...[...sources.matchAll(/type: '([A-Z_]+)'/g)].map((m) => m[1]!),
    ]);
    // Internal to the server: a stopped server, an admin token (refused at start), a bug.
    for (const internal of ['STOPPED', 'BAD_TOKEN', 'INTERNAL', 'CONTINUITY_BREAK', 'FENCED']) types.delete(internal);
    expect(types.size).toBeGreaterThan(10);
    const errorsSection = doc.slice(doc.indexOf('## 4. Errors'), doc.indexOf('## 5.'));
    const missing = [...types].filter((t) => !errorsSection.includes(`\`${t}\``));
    expect(missing).toEqual([]);
    for (const t of ['CONTINUITY_BREAK', 'FENCED', 'WRITER_ACTIVE', 'OUTCOME_UNKNOWN', 'PAUSED']) expect(doc).toContain(`\`${t}\``);
  });
});
