// Startup/RSS floor for row (e): a bare Node process that opens (and locks) a LevelDB and
// answers every NDJSON line on a Unix socket with an empty JSON-RPC result. Spawned by run.mjs
// as `node bench/minimal-server.mjs <socket> <leveldb-dir>`; stops on SIGTERM.

import { ClassicLevel } from 'classic-level';
import { serveLines } from './line-server.mjs';

const [socketPath, dbDir] = process.argv.slice(2);
const db = new ClassicLevel(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
await db.open();
const server = serveLines(socketPath, (line, reply) => {
  let id = null;
  try {
    id = JSON.parse(line).id ?? null;
  } catch {
    /* answer anyway */
  }
  reply(JSON.stringify({ jsonrpc: '2.0', id, result: {} }));
});
const stop = () => {
  server.close();
  db.close().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
