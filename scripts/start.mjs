// `npm start`: run the daemon from dist/, building first only when dist/ is missing or older
// than src/ (a full build costs 6-15 s on a small machine; an unchanged tree costs nothing).
// The daemon then runs inside this very process rather than as a child, so SIGTERM or SIGINT
// sent to `npm start` reach it directly and nothing is left running behind it.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The first source file whose output is missing or older than it, or null when dist/ is current. */
function staleSource() {
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

const stale = staleSource();
if (stale) {
  process.stderr.write(`yello: dist/ is older than ${stale}; building (npm run build)\n`);
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const build = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}

// What bin/yello would see for `yello daemon <args>`.
process.argv = [process.argv[0], join(root, 'bin', 'yello'), 'daemon', ...process.argv.slice(2)];
await import(pathToFileURL(join(root, 'dist', 'cli', 'main.js')).href);
