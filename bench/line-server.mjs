// The NDJSON-over-Unix-socket server loop shared by the bench's reference servers
// (minimal-server.mjs, pipeline-server.mjs): node:net only, so the startup floor stays bare.

import { rmSync } from 'node:fs';
import net from 'node:net';

/**
 * Listen on `socketPath` (replacing a stale socket file) and pass every complete line to
 * `onLine(line, reply)`, where `reply(text)` writes `text` + '\n' unless the socket is gone.
 * Returns the net.Server.
 */
export function serveLines(socketPath, onLine, onListening) {
  rmSync(socketPath, { force: true });
  const server = net.createServer((socket) => {
    let buf = '';
    const reply = (text) => {
      if (!socket.destroyed) socket.write(text + '\n');
    };
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        onLine(line, reply);
      }
    });
  });
  server.listen(socketPath, onListening);
  return server;
}
