// The "straightforward pipeline", as a reference peer for row (a): a JSON-RPC server
// (json-rpc-2.0, NDJSON on a Unix socket) that takes the same `streams.append` requests as the
// daemon and does only parse → SHA-256 → ES256 sign → grouped `sync: true` LevelDB batch →
// reply. No validation, fencing, positions, idempotency, PII policy or indexes; one key per
// record. Groups flush as soon as the previous one returns (no timer), at most 64 appends.
// Spawned by run.mjs as `node bench/pipeline-server.mjs <socket> <leveldb-dir>`; stops on SIGTERM.

import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { ClassicLevel } from 'classic-level';
import { JSONRPCServer } from 'json-rpc-2.0';
import { messagePayload } from '../dist/shared/message-signing.js';
import { GroupCommitStore } from './baseline.mjs';
import { serveLines } from './line-server.mjs';

const [socketPath, dbDir] = process.argv.slice(2);
const db = new ClassicLevel(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
await db.open();
const store = new GroupCommitStore(db);
const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const pad = (n) => n.toString().padStart(16, '0');

const rpc = new JSONRPCServer();
rpc.addMethod('session.hello', () => ({ agentId: null }));
rpc.addMethod('streams.append', async (p) => {
  const [chatId, fromAgentId] = p.streamId.split(':');
  const first = Number(p.expectedPosition);
  const ops = p.records.map((r, i) => {
    const contentSha256 = createHash('sha256').update(r.content, 'utf8').digest('base64url');
    const createdAt = new Date().toISOString();
    const value = sign(
      'sha256',
      Buffer.from(messagePayload({ chatId, fromAgentId, toAgentId: 'peer', createdAt, contentSha256 }), 'utf8'),
      {
        key: privateKey,
        dsaEncoding: 'ieee-p1363',
      },
    ).toString('base64url');
    const record = {
      streamId: p.streamId,
      position: String(first + i),
      content: r.content,
      contentSha256,
      signature: { alg: 'ES256', value, createdAt },
    };
    return { type: 'put', key: `r/${p.streamId}/${pad(first + i)}`, value: JSON.stringify(record) };
  });
  await store.write(ops);
  return { streamId: p.streamId, firstPosition: p.expectedPosition, nextPosition: String(first + ops.length) };
});

const server = serveLines(
  socketPath,
  (line, reply) => {
    void rpc.receiveJSON(line).then((answer) => answer && reply(JSON.stringify(answer)));
  },
  () => process.stdout.write('ready\n'),
);
const stop = () => {
  server.close();
  store.close().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
