// Whether dist/ is current: used by `npm start` (scripts/start.mjs) and by `npm test`'s global
// setup (test/helpers/dist-global-setup.ts), which build only when dist/ is missing or older
// than src/ (a full build costs 6-15 s on a small machine; an unchanged tree costs nothing).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The first source file whose output is missing or older than it, or null when dist/ is current. */
export function staleSource(root = repoRoot) {
  const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : -Infinity);
  const main = join(root, 'dist', 'cli', 'main.js');
  if (mtime(join(root, 'tsconfig.json')) > mtime(main)) return 'tsconfig.json';
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        const found = walk(path);
        if (found) return found;
      } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        const out = join(root, 'dist', relative(join(root, 'src'), path)).replace(/\.ts$/, '.js');
        if (mtime(out) < mtime(path)) return relative(root, path);
      }
    }
    return null;
  };
  return walk(join(root, 'src'));
}

/** Builds dist/ (`tsc -p tsconfig.json`) when it is stale; returns the exit status (0: current or built). */
export function buildIfStale(root = repoRoot) {
  const stale = staleSource(root);
  if (!stale) return 0;
  process.stderr.write(`yello: dist/ is older than ${stale}; building (npm run build)\n`);
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const build = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { cwd: root, stdio: 'inherit' });
  return build.status ?? 1;
}
