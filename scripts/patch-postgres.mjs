// Applies yello's small fix to the postgres.js driver in node_modules (run by `postinstall`,
// so `npm ci` from the lockfile on a clean clone gets it; idempotent). postgres.js 3.4.9 ends the
// process with an uncaught TypeError when a session dies inside a transaction: sql.begin's own
// ROLLBACK is written after closed() nulled the socket, from a setImmediate callback
// (connection.js nextWrite; porsager/postgres#1208, #1154; fixes #1168/#1209 unreleased). And it
// keeps the dead session's last error (a FATAL 57P01) and rejects the next session's handshake
// with it, which leaves that connection connecting forever. And a session that dies with a
// query out keeps that query as in flight (only a ReadyForQuery would clear it), so sql.end()
// waits its whole timeout for the connection (porsager/postgres#1097, #1130; #1142 proposes
// clearing it in errored(), unreleased): a daemon's stop after a killed backend took its full
// close wait. The fix: nextWrite on a closed connection rejects what it would have written
// (CONNECTION_CLOSED) instead of throwing and forgets it, and closed() forgets the dead
// session's error and its query. And closed() and terminate() kept a cancelled write timer and
// its write, so the connection's next session never sent its startup message and waited out
// connect_timeout (the same defect as LanternOps/breeze#3225 describes); they drop both now.
// Proved by test/pg/driver-connection-loss.test.ts and test/pg/store-close-after-kill.test.ts;
// docs/design/storage-port.md (driver) says why this and not another driver. Any other version
// of postgres.js is left alone, loudly: the patch is for 3.4.9 only (drop it once fixed upstream).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Where `import 'postgres'` resolves from here: node_modules of this checkout, or the one an
// installed yello shares with its parent (hoisted).
let pkgDir;
try {
  pkgDir = path.dirname(path.dirname(fileURLToPath(import.meta.resolve('postgres'))));
} catch {
  process.exit(0); // not installed (nothing to patch)
}
const MARK = '/* yello: patched (scripts/patch-postgres.mjs) */';

const edits = [
  {
    from: '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)',
    to:
      '  function nextWrite(fn) {\n' +
      `    ${MARK}\n` +
      '    if (!socket) {\n' +
      '      clearImmediate(nextWriteTimer)\n' +
      '      chunk = nextWriteTimer = null\n' +
      "      error(Errors.connection('CONNECTION_CLOSED', options))\n" +
      '      return false\n' +
      '    }\n' +
      '    const x = socket.write(chunk, fn)',
  },
  {
    from: '    socket.removeAllListeners()\n    socket = null\n',
    to: '    socket.removeAllListeners()\n    socket = null\n    errorResponse = null\n',
  },
  {
    // On a closed socket no ReadyForQuery will ever clear the query (errored() rejected it), and
    // end() waits for a connection that holds one. Here for a socket that closed after its
    // error event: errored() ran while the socket was still set (see the next edit).
    from: "    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))\n",
    to:
      "    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))\n" + '    query = null\n',
  },
  {
    // The same for a query written after the close (sql.begin's own ROLLBACK of a transaction
    // whose session died, rejected by the first edit): errored() forgets the query it rejects
    // once there is no socket, which no ReadyForQuery can follow. With a socket it keeps it: an
    // errored query's ReadyForQuery is still to come, and must not be taken as the answer of a
    // query started meanwhile.
    from: '    query && queryError(query, err)\n',
    to: '    query && (queryError(query, err), socket || (query = null))\n',
  },
  {
    // A socket closed while a small write waited for its setImmediate: closed() and terminate()
    // cancelled the timer but kept its handle and the write, so the next session's startup
    // message was appended to the stale write and never sent (write() schedules only while no
    // timer is set): that connection got no answer until connect_timeout (the failover suite's
    // 10 s recoveries). Both now drop them, as nextWrite does.
    from: '    incomings = null\n    clearImmediate(nextWriteTimer)\n',
    to: '    incomings = null\n    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n',
  },
  {
    from: '    clearImmediate(nextWriteTimer)\n    if (socket) {\n',
    to: '    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    if (socket) {\n',
  },
];

const { version } = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
if (version !== '3.4.9') {
  console.warn(`scripts/patch-postgres.mjs: postgres ${version} is not 3.4.9; not patched (check whether it still needs the fix)`);
  process.exit(0);
}
for (const dir of ['src', 'cjs/src', 'cf/src']) {
  const file = path.join(pkgDir, dir, 'connection.js');
  if (!existsSync(file)) continue;
  const before = readFileSync(file, 'utf8');
  let text = before;
  // Edit by edit, so a driver patched by an earlier version of this script gets the edits added since.
  for (const e of edits) {
    if (text.includes(e.to)) continue;
    if (!text.includes(e.from)) throw new Error(`scripts/patch-postgres.mjs: ${file} does not have the expected code; not patched`);
    text = text.replace(e.from, e.to);
  }
  if (text !== before) writeFileSync(file, text);
}
