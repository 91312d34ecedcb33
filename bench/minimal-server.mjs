// Startup/RSS floor for row (e): a bare Node process that opens (and locks) a LevelDB and
// answers every NDJSON line on a Unix socket with an empty JSON-RPC result. Spawned by run.mjs
// as `node bench/minimal-server.mjs <socket> <leveldb-dir>`; stops on SIGTERM.

import { rmSync } from 'node:fs';
import net from 'node:net';
import { ClassicLevel } from 'classic-level';

const [socketPath, dbDir] = process.argv.slice(2);
const db = new ClassicLevel(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
await db.open();
rmSync(socketPath, { force: true });
const server = net.createServer((socket) => {
  let buf = '';
  socket.setEncoding('utf8');
  socket.on('error', () => {});
  socket.on('data', (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let id = null;
      try {
        id = JSON.parse(line).id ?? null;
      } catch {
        /* answer anyway */
      }
      socket.write(JSON.stringify({ jsonrpc: '2.0', id, result: {} }) + '\n');
    }
  });
});
server.listen(socketPath);
const stop = () => {
  server.close();
  db.close().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
