// The storage engine stays behind the port (src/daemon/store/port/): no module outside
// src/daemon/store/leveldb/ imports classic-level, the key layout or the write ops, and the domain
// (streams/, directory/), the port itself and the engine-neutral store modules import nothing of
// LevelDB at all. The composition root (daemon.ts), the CLI's entry (entry.ts: doctor, restore)
// and LevelDB-specific status (rpc-methods' WAL incidents, startup errors) may name leveldb/.
// A planted bad import shows each rule can fail.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/daemon-process.js';

const SRC = path.join(repoRoot, 'src');
const LEVELDB = path.join('daemon', 'store', 'leveldb') + path.sep;
/** Modules of the engine that only its own directory may import. */
const ENGINE_ONLY = ['key-layout.ts', 'write-ops.ts'].map((f) => LEVELDB + f);
/** Directories and files that must not import LevelDB code at all. */
const NEUTRAL = [
  path.join('daemon', 'streams') + path.sep,
  path.join('daemon', 'directory') + path.sep,
  path.join('daemon', 'store', 'port') + path.sep,
];
const isNeutral = (file: string) => NEUTRAL.some((d) => file.startsWith(d)) || path.dirname(file) === path.join('daemon', 'store');

function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return e.name.endsWith('.ts') ? [path.relative(SRC, full)] : [];
  });
}

function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(
    /(?:^|[\s;])(?:import|export)\s[^'";]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm,
  ))
    found.push((m[1] ?? m[2] ?? m[3])!);
  return found;
}

/** Imports that break the rules, as `file: specifier (why)`; `files` maps a path under src/ to its text. */
function violations(files: Record<string, string>): string[] {
  const out: string[] = [];
  for (const [file, text] of Object.entries(files)) {
    if (file.startsWith(LEVELDB)) continue;
    for (const spec of specifiers(text)) {
      if (spec === 'classic-level' || spec.startsWith('classic-level/') || spec === 'abstract-level') {
        out.push(`${file}: ${spec} (only src/${LEVELDB} uses the LevelDB packages)`);
        continue;
      }
      if (!spec.startsWith('.')) continue;
      const target = path.relative(SRC, path.resolve(SRC, path.dirname(file), spec)).replace(/\.js$/, '.ts');
      if (ENGINE_ONLY.includes(target)) out.push(`${file}: ${spec} (the key layout and write ops stay inside src/${LEVELDB})`);
      else if (target.startsWith(LEVELDB) && isNeutral(file)) out.push(`${file}: ${spec} (goes through the storage port, not LevelDB)`);
    }
  }
  return out;
}

const ALL = Object.fromEntries(sourceFiles().map((f) => [f, readFileSync(path.join(SRC, f), 'utf8')]));

describe('the storage engine stays behind the port', () => {
  it('no module outside store/leveldb/ imports classic-level, key-layout or write-ops; the domain imports no LevelDB code', () => {
    expect(Object.keys(ALL).filter((f) => f.startsWith(LEVELDB)).length).toBeGreaterThan(10);
    expect(violations(ALL)).toEqual([]);
  });

  it('catches planted violations', () => {
    const planted = {
      [path.join('daemon', 'rpc', 'planted.ts')]: "import { ClassicLevel } from 'classic-level';",
      [path.join('daemon', 'runtime', 'planted.ts')]: "import { K } from '../store/leveldb/key-layout.js';",
      [path.join('daemon', 'planted.ts')]: "export { put } from './store/leveldb/write-ops.js';",
      [path.join('daemon', 'streams', 'planted.ts')]: "import type { Storage } from '../store/leveldb/storage.js';",
      [path.join('daemon', 'directory', 'planted.ts')]: "const m = await import('../store/leveldb/level-directory.js');",
      [path.join('daemon', 'store', 'planted.ts')]: "import { LevelStore } from './leveldb/level-store.js';",
      [path.join('daemon', 'store', 'port', 'planted.ts')]: "import type { Db } from '../leveldb/verified-reads.js';",
    };
    expect(violations(planted)).toHaveLength(Object.keys(planted).length);
    // The composition root may build the LevelDB store.
    expect(violations({ [path.join('daemon', 'daemon.ts')]: "import { LevelStore } from './store/leveldb/level-store.js';" })).toEqual([]);
  });
});
