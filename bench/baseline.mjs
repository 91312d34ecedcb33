// In-process baselines: what the same work costs without the daemon, its RPC and its
// bookkeeping. The daemon's figures are shown as ratios against these.

import { generateKeyPairSync, sign } from 'node:crypto';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { contentSha256 } from '../dist/daemon/crypto/hashing.js';
import { messagePayload } from '../dist/shared/message-signing.js';
import { content, contentBytes, nowMs, percentile } from './lib.mjs';

/** Appends per synced batch, at most (the daemon's group commit is at most one batch in flight). */
export const BASELINE_GROUP = 64;

const pad = (n) => n.toString().padStart(16, '0');

/**
 * LevelDB with group commit, stripped to the bone: appends queue up while one `sync: true`
 * batch is in flight; the next batch takes up to BASELINE_GROUP of them.
 */
export class GroupCommitStore {
  #queue = [];
  #flushing = false;

  /** `chained`: write each group through the chained batch form (the daemon's), not the array form. */
  constructor(db, { chained = false } = {}) {
    this.db = db;
    this.chained = chained;
  }

  static async open(dir) {
    const db = new ClassicLevel(path.join(dir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    return new GroupCommitStore(db);
  }

  write(ops) {
    return new Promise((resolve, reject) => {
      this.#queue.push({ ops, resolve, reject });
      if (!this.#flushing) void this.#flush();
    });
  }

  async #flush() {
    this.#flushing = true;
    while (this.#queue.length > 0) {
      const group = this.#queue.splice(0, BASELINE_GROUP);
      try {
        if (this.chained) {
          const batch = this.db.batch();
          for (const g of group) for (const op of g.ops) batch.put(op.key, op.value);
          await batch.write({ sync: true });
        } else await this.db.batch(group.length === 1 ? group[0].ops : group.flatMap((g) => g.ops), { sync: true });
      } catch (err) {
        for (const g of [...group, ...this.#queue.splice(0)]) g.reject(err);
        break;
      }
      for (const g of group) g.resolve();
    }
    this.#flushing = false;
  }

  close() {
    return this.db.close();
  }
}

/** Baseline writers, each with its own stream (one signing key for all, like the daemon). */
export function makeWriters(n) {
  return Array.from({ length: n }, (_, i) => makeWriter(i));
}

function makeWriter(index) {
  const chatId = `chat_bench${index}`;
  const from = `agt_writer${index}`;
  const to = 'agt_sink';
  return { chatId, from, to, streamId: `${chatId}:${from}`, next: 0 };
}

/**
 * Durable appends in-process: per append, SHA-256 of the content, an ES256 signature
 * (node:crypto, IEEE P1363) over the §5 payload, and a put of the signed record in a grouped
 * `sync: true` batch. The `writers` (from makeWriters) run closed loops that share `total`
 * appends (bounded by `maxMs` too). Returns { appends, seconds, perSecond, p50, p99 } (ms).
 */
export async function runBaselineAppends(store, key, { writers: ws, total, maxMs, bytes = contentBytes() }) {
  const latencies = [];
  let issued = 0;
  const t0 = nowMs();
  const deadline = t0 + maxMs;
  await Promise.all(
    ws.map(async (w) => {
      while (issued < total && nowMs() < deadline) {
        issued++;
        const s = nowMs();
        const position = w.next++;
        const text = content(position.toString(36), bytes);
        const sha = contentSha256(text);
        const createdAt = new Date().toISOString();
        const value = sign(
          'sha256',
          Buffer.from(messagePayload({ chatId: w.chatId, fromAgentId: w.from, toAgentId: w.to, createdAt, contentSha256: sha }), 'utf8'),
          {
            key,
            dsaEncoding: 'ieee-p1363',
          },
        ).toString('base64url');
        const record = {
          streamId: w.streamId,
          generation: '1',
          position: String(position),
          wrapper: {
            version: 2,
            chatId: w.chatId,
            authorAgentId: w.from,
            operationId: `op-${position}`,
            recordIndex: 0,
            type: 'chat.message',
            message: {
              chatId: w.chatId,
              fromAgentId: w.from,
              toAgentId: w.to,
              clientMessageId: sha,
              content: text,
              contentSha256: sha,
              signature: { kid: 'bench', alg: 'ES256', value, createdAt },
            },
          },
        };
        await store.write([{ type: 'put', key: `r/${w.streamId}/${pad(1)}/${pad(position)}`, value: JSON.stringify(record) }]);
        latencies.push(nowMs() - s);
      }
    }),
  );
  const seconds = (nowMs() - t0) / 1000;
  return {
    appends: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

export function baselineKey() {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
}

/**
 * The floor of a history page: on the daemon's own LevelDB (daemon stopped), two range reads of
 * up to `limit` records (one per stream), JSON-decoded and merged by createdAt, first `limit`.
 * `from` is per stream: null = backward from the end, a number = forward from that position.
 * Records are stored compact (store format 2: `['m', operationId, recordIndex, clientMessageId,
 * content, contentSha256, kid, signature, createdAt]` for a message, src/daemon/store/record-layout.ts)
 * or, exceptionally, as full records; both are read, neither is expanded (the floor skips that).
 */
export async function rawHistoryPage(db, streamIds, from, limit) {
  const sides = await Promise.all(
    streamIds.map(async (id, i) => {
      const prefix = `r/${id}/${pad(1)}/`;
      const opts =
        from[i] === null
          ? { gte: prefix, lt: prefix.slice(0, -1) + '0', reverse: true, limit }
          : { gte: prefix + pad(from[i]), lt: prefix.slice(0, -1) + '0', limit };
      const author = id.slice(id.indexOf(':') + 1);
      const rows = await db.iterator(opts).all();
      return rows.map(([k, v]) => messageOf(JSON.parse(v.slice(8)), author, Number(k.slice(k.lastIndexOf('/') + 1)))).filter(Boolean);
    }),
  );
  const backward = from[0] === null;
  const all = [...sides[0], ...sides[1]].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.position - b.position));
  return backward ? all.slice(-limit) : all.slice(0, limit);
}

/** A stored message's merge key and position, or null for receipts and fences. */
function messageOf(stored, author, position) {
  if (Array.isArray(stored)) return stored[0] === 'm' ? { key: stored[8] + '\n' + author, position, stored } : null;
  if (stored.wrapper.type !== 'chat.message') return null;
  return { key: stored.wrapper.message.signature.createdAt + '\n' + stored.wrapper.message.fromAgentId, position, stored };
}
