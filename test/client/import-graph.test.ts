// The module graph of src/. The dependency rule: cli → mcp → client → shared; cli → console →
// client (the web console talks to the daemon only as a client); daemon → shared;
// shared does no I/O (no Node APIs); the CLI reaches daemon code only through src/daemon/entry.ts.
// Every import of every source file (static, re-exports and dynamic `import()`) is checked, and
// a planted bad import shows the check fails.
// And the client entry must not load zod: only the daemon validates params, and zod was most of
// the client's import time. A child node process resolves every import through a hook that
// refuses zod, so any path to it (a value import of the method table, say) fails the import
// and names the module that asked for it.

import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/daemon-process.js';

const run = promisify(execFile);

const REFUSE_ZOD = `
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (/\\/node_modules\\/zod\\//.test(resolved.url)) throw new Error('zod was loaded, by ' + context.parentURL);
  return resolved;
}`;

/** Import `file` (relative to the repo) in a fresh node with zod refused; the child's outcome. */
async function importWithoutZod(file: string): Promise<{ ok: boolean; stderr: string }> {
  const entry = pathToFileURL(path.join(repoRoot, file)).href;
  const script = [
    "import { register } from 'node:module';",
    `register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(REFUSE_ZOD)}));`,
    `await import(${JSON.stringify(entry)});`,
  ].join('\n');
  try {
    await run(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot });
    return { ok: true, stderr: '' };
  } catch (err) {
    return { ok: false, stderr: String((err as { stderr?: string }).stderr) };
  }
}

const SRC = path.join(repoRoot, 'src');
type Layer = 'cli' | 'mcp' | 'console' | 'client' | 'shared' | 'daemon';
/** Which layers each layer may import (besides itself). */
const MAY_IMPORT: Record<Layer, Layer[]> = {
  cli: ['mcp', 'console', 'client', 'shared'],
  mcp: ['client', 'shared'],
  console: ['client', 'shared'],
  client: ['shared'],
  shared: [],
  daemon: ['shared'],
};
const DAEMON_ENTRY = 'daemon/entry.ts';

/** Every `.ts` file under src/, relative to it. */
function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return e.name.endsWith('.ts') ? [path.relative(SRC, full)] : [];
  });
}

/** The specifiers a file imports: `import … from`, `export … from`, `import '…'`, `import('…')`. */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(
    /(?:^|[\s;])(?:import|export)\s[^'";]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm,
  ))
    found.push((m[1] ?? m[2] ?? m[3])!);
  return found;
}

/** Imports that break the rule, as `file: specifier (why)`. `files` maps a path under src/ to its text. */
function violations(files: Record<string, string>): string[] {
  const out: string[] = [];
  for (const [file, text] of Object.entries(files)) {
    const layer = file.split(path.sep)[0] as Layer;
    if (!(layer in MAY_IMPORT)) {
      out.push(`${file}: not in a known layer`);
      continue;
    }
    for (const spec of specifiers(text)) {
      if (!spec.startsWith('.')) {
        if (layer === 'shared' && (spec.startsWith('node:') || !['zod'].includes(spec)))
          out.push(`${file}: ${spec} (src/shared does no I/O)`);
        continue;
      }
      const target = path.relative(SRC, path.resolve(SRC, path.dirname(file), spec)).replace(/\.js$/, '.ts');
      const to = target.split(path.sep)[0] as Layer;
      if (target.startsWith('..')) out.push(`${file}: ${spec} (outside src/)`);
      else if (to === layer || MAY_IMPORT[layer].includes(to)) continue;
      else if (layer === 'cli' && to === 'daemon' && target === DAEMON_ENTRY) continue;
      else
        out.push(
          `${file}: ${spec} (${layer} may not import ${to}${layer === 'cli' && to === 'daemon' ? ` except through src/${DAEMON_ENTRY}` : ''})`,
        );
    }
  }
  return out;
}

const ALL = Object.fromEntries(sourceFiles().map((f) => [f, readFileSync(path.join(SRC, f), 'utf8')]));

describe('the dependency rule (cli → mcp → client → shared; cli → console → client; daemon → shared; cli → daemon only via src/daemon/entry.ts)', () => {
  it('every import of src/ keeps it', () => {
    expect(Object.keys(ALL).length).toBeGreaterThan(50);
    expect(violations(ALL)).toEqual([]);
  });

  it('the check fails on planted bad imports', () => {
    const planted = {
      [path.join('client', 'planted.ts')]: "import { runCli } from '../cli/program.js';",
      [path.join('mcp', 'planted.ts')]: "export { x } from '../cli/x.js';",
      [path.join('daemon', 'planted.ts')]: "const m = await import('../client/index.js');",
      [path.join('shared', 'planted.ts')]: "import { readFile } from 'node:fs/promises';\nimport '../client/errors.js';",
      [path.join('console', 'planted.ts')]:
        "import { connectAdmin } from '../cli/context.js';\nimport { x } from '../mcp/x.js';\nimport { y } from '../daemon/entry.js';",
      [path.join('client', 'planted2.ts')]: "import { startConsole } from '../console/console-server.js';",
      [path.join('cli', 'planted.ts')]:
        "import { startDaemon } from '../daemon/daemon.js';\nimport { EXIT_CODES } from '../daemon/entry.js';",
    };
    expect(violations({ ...ALL, ...planted })).toEqual([
      `${path.join('client', 'planted.ts')}: ../cli/program.js (client may not import cli)`,
      `${path.join('mcp', 'planted.ts')}: ../cli/x.js (mcp may not import cli)`,
      `${path.join('daemon', 'planted.ts')}: ../client/index.js (daemon may not import client)`,
      `${path.join('shared', 'planted.ts')}: node:fs/promises (src/shared does no I/O)`,
      `${path.join('shared', 'planted.ts')}: ../client/errors.js (shared may not import client)`,
      `${path.join('console', 'planted.ts')}: ../cli/context.js (console may not import cli)`,
      `${path.join('console', 'planted.ts')}: ../mcp/x.js (console may not import mcp)`,
      `${path.join('console', 'planted.ts')}: ../daemon/entry.js (console may not import daemon)`,
      `${path.join('client', 'planted2.ts')}: ../console/console-server.js (client may not import console)`,
      `${path.join('cli', 'planted.ts')}: ../daemon/daemon.js (cli may not import daemon except through src/daemon/entry.ts)`,
    ]);
  });
});

// The storage seams inside the daemon (issue 53): an adapter (store/leveldb, store/postgres)
// imports neither the other adapter nor the RPC layer, and nothing outside the adapters imports
// one but the composition root (store/backend/) and the CLI's entry (daemon/entry.ts: offline
// doctor and restore, which are LevelDB's).
const ADAPTERS = ['leveldb', 'postgres'].map((a) => path.join('daemon', 'store', a) + path.sep);
const COMPOSITION_ROOTS = [path.join('daemon', 'store', 'backend') + path.sep, path.join('daemon', 'entry.ts')];

function seamViolations(files: Record<string, string>): string[] {
  const out: string[] = [];
  for (const [file, text] of Object.entries(files)) {
    if (!file.startsWith(path.join('daemon') + path.sep)) continue;
    const own = ADAPTERS.find((a) => file.startsWith(a));
    for (const spec of specifiers(text)) {
      if (!spec.startsWith('.')) continue;
      const target = path.relative(SRC, path.resolve(SRC, path.dirname(file), spec)).replace(/\.js$/, '.ts');
      const adapter = ADAPTERS.find((a) => target.startsWith(a));
      if (own && target.startsWith(path.join('daemon', 'rpc') + path.sep)) out.push(`${file}: ${spec} (an adapter imports the RPC layer)`);
      else if (own && adapter && adapter !== own) out.push(`${file}: ${spec} (an adapter imports the other adapter)`);
      else if (!own && adapter && !COMPOSITION_ROOTS.some((r) => file.startsWith(r)))
        out.push(`${file}: ${spec} (only the composition root imports an adapter)`);
    }
  }
  return out;
}

describe('the storage seams (adapters apart from each other and from the RPC layer; only the composition root imports one)', () => {
  it('every import of src/daemon keeps them', () => {
    expect(seamViolations(ALL)).toEqual([]);
  });

  it('the check fails on planted bad imports', () => {
    const planted = {
      [path.join('daemon', 'store', 'postgres', 'planted.ts')]:
        "import { StartupError } from '../../rpc/socket-server.js';\nimport { K } from '../leveldb/key-layout.js';",
      [path.join('daemon', 'rpc', 'planted.ts')]: "import type { WalIncident } from '../store/leveldb/recovery-check.js';",
      [path.join('daemon', 'store', 'backend', 'planted.ts')]: "import { LevelStore } from '../leveldb/level-store.js';",
    };
    expect(seamViolations({ ...ALL, ...planted })).toEqual([
      `${path.join('daemon', 'store', 'postgres', 'planted.ts')}: ../../rpc/socket-server.js (an adapter imports the RPC layer)`,
      `${path.join('daemon', 'store', 'postgres', 'planted.ts')}: ../leveldb/key-layout.js (an adapter imports the other adapter)`,
      `${path.join('daemon', 'rpc', 'planted.ts')}: ../store/leveldb/recovery-check.js (only the composition root imports an adapter)`,
    ]);
  });
});

describe('client module graph', () => {
  it('importing the built client entry (dist/client/index.js) does not load zod', async () => {
    const r = await importWithoutZod('dist/client/index.js');
    expect(r.stderr).toBe('');
    expect(r.ok).toBe(true);
  });

  it('the check sees zod when it is loaded (the method table imports it)', async () => {
    const r = await importWithoutZod('dist/shared/methods.js');
    expect(r.ok).toBe(false);
    expect(r.stderr).toContain('zod was loaded, by');
    expect(r.stderr).toContain('dist/shared/methods.js');
  });
});
