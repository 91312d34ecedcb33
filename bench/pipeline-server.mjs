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

const [socketPath, dbDir, mode = 'pipeline'] = process.argv.slice(2);
const db = new ClassicLevel(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
await db.open();
// The contract floor writes the way the daemon does (chained batches: cheaper per op); the
// pipeline as the issue measured it.
const store = new GroupCommitStore(db, { chained: mode === 'contract' });
const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const pad = (n) => n.toString().padStart(16, '0');

const rpc = new JSONRPCServer();
rpc.addMethod('session.hello', () => ({ agentId: null }));
if (mode === 'contract') rpc.addMethod('streams.append', contractAppend);
else
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

// The least any implementation of docs/protocol.md's streams.append does beyond the pipeline,
// with every shortcut a real daemon could not take: the fence and the idempotency sets live in
// memory only (no reads), nothing is validated beyond field types, no PII policy, no quotas,
// no sessions, no checksums, no metrics. What it adds: the fence and position check, the
// request digest (a replayed operation must be told from a reused id), the record's wrapper,
// a message-id key, an operation key and the stream's head key in the same batch, and the
// contract's answer, which carries the stored records.
const streams = new Map();
const seenMessages = new Set();
// BENCH_FLOOR_OFF=answer,keys,digest leaves a part out, to price it (bench/floor.mjs).
const floorOff = new Set((process.env.BENCH_FLOOR_OFF ?? '').split(',').filter(Boolean));
async function contractAppend(p) {
  if (typeof p.streamId !== 'string' || !Array.isArray(p.records) || p.records.length === 0) throw new Error('bad params');
  let s = streams.get(p.streamId);
  if (!s) streams.set(p.streamId, (s = { token: p.coordinatorToken, generation: p.generation, next: 0, ops: new Map() }));
  if (s.token !== p.coordinatorToken || s.generation !== p.generation) throw new Error('STALE_COORDINATOR');
  const digest = floorOff.has('digest')
    ? p.operationId
    : createHash('sha256').update(JSON.stringify(p.records), 'utf8').digest('base64url');
  const replay = s.ops.get(p.operationId);
  if (replay) {
    if (replay !== digest) throw new Error('OPERATION_CONFLICT');
    throw new Error('replay not modelled');
  }
  const first = Number(p.expectedPosition);
  if (first !== s.next) throw new Error('POSITION_CONFLICT');
  for (const r of p.records) if (seenMessages.has(`${p.streamId}/${r.messageId}`)) throw new Error('DUPLICATE');
  const [chatId, authorAgentId] = p.streamId.split(':');
  const ops = [];
  const records = p.records.map((r, i) => {
    const contentSha256 = createHash('sha256').update(r.content, 'utf8').digest('base64url');
    const createdAt = new Date().toISOString();
    const value = sign(
      'sha256',
      Buffer.from(messagePayload({ chatId, fromAgentId: authorAgentId, toAgentId: 'peer', createdAt, contentSha256 }), 'utf8'),
      { key: privateKey, dsaEncoding: 'ieee-p1363' },
    ).toString('base64url');
    const position = String(first + i);
    const record = {
      streamId: p.streamId,
      generation: p.generation,
      position,
      wrapper: {
        version: 2,
        type: 'chat.message',
        chatId,
        authorAgentId,
        operationId: p.operationId,
        recordIndex: i,
        message: {
          messageId: r.messageId,
          toAgentId: 'peer',
          createdAt,
          content: r.content,
          contentSha256,
          signature: { kid: 'k1', alg: 'ES256', value, createdAt },
        },
      },
    };
    ops.push({ type: 'put', key: `r/${p.streamId}/${pad(first + i)}`, value: JSON.stringify(record) });
    if (!floorOff.has('keys')) ops.push({ type: 'put', key: `m/${p.streamId}/${r.messageId}`, value: position });
    return record;
  });
  const next = first + records.length;
  if (!floorOff.has('keys')) {
    ops.push({ type: 'put', key: `o/${p.streamId}/${p.operationId}`, value: `${digest} ${first} ${next}` });
    ops.push({ type: 'put', key: `h/${p.streamId}`, value: `${p.generation} ${next}` });
  }
  s.next = next;
  s.ops.set(p.operationId, digest);
  for (const r of p.records) seenMessages.add(`${p.streamId}/${r.messageId}`);
  await store.write(ops);
  const answer = {
    streamId: p.streamId,
    generation: p.generation,
    operationId: p.operationId,
    firstPosition: p.expectedPosition,
    nextPosition: String(next),
  };
  return floorOff.has('answer') ? answer : { ...answer, records, duplicate: false, redactions: [] };
}

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
