// `npm start`: run the daemon from dist/, building first only when dist/ is missing or older
// than src/ (a full build costs 6-15 s on a small machine; an unchanged tree costs nothing).
// The daemon then runs inside this very process rather than as a child, so SIGTERM or SIGINT
// sent to `npm start` reach it directly and nothing is left running behind it.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildIfStale, repoRoot as root } from './stale-dist.mjs';

const status = buildIfStale(root);
if (status !== 0) process.exit(status);

// What bin/yello would see for `yello daemon <args>`.
process.argv = [process.argv[0], join(root, 'bin', 'yello'), 'daemon', ...process.argv.slice(2)];
await import(pathToFileURL(join(root, 'dist', 'cli', 'main.js')).href);
