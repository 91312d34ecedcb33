// The storage port's conformance suite (port-conformance.ts) on PostgreSQL, and what only a
// shared database has: two daemons' stores on one database deciding unique keys in the
// transaction, and each seeing the other's directory rows after the notice. One throwaway
// cluster for the file: the conformance suite's stores share one database emptied before each;
// each pair of "daemons" gets a fresh database.
//
// "Two daemons" are two PostgresStores over two pools on one database, each with its own
// caches, as two yellod processes would have.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StorePort } from '../../src/daemon/store/port/store-port.js';
import type { AgentRow, ChatRow, StoredRecord } from '../../src/daemon/store/port/values.js';
import { openPool, resolveStoreUrl } from '../../src/daemon/store/postgres/connection.js';
import { encodeRow, RowKey } from '../../src/daemon/store/postgres/row-codec.js';
import { openPostgresStore, type PostgresStore } from '../../src/daemon/store/postgres/store.js';
import { newStreamMeta } from '../../src/daemon/store/stream-meta.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';
import { silentLog } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';
import { portConformance } from './port-conformance.js';
import { outcomeOf } from '../../src/daemon/store/port/stream-port.js';

if (!pgAvailable()) {
  // Only off CI (CI installs PostgreSQL and pgAvailable() is then always true).
  console.warn('test/store/port-postgres-conformance.test.ts skipped: no PostgreSQL server binaries under /usr/lib/postgresql');
}

const run = promisify(execFile);
const killChild = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/directory-kill-child.mjs');

let cluster: FileDatabases | undefined;
let databases = 0;

/** A fresh, empty database; its name. */
async function freshDatabase(): Promise<string> {
  const name = `p${++databases}`;
  await cluster!.createDatabase(name);
  return name;
}

/**
 * An injected commit failure: a trigger on the operations table that raises while the
 * `fail_next` table has a row. The transaction then has no "committed", which the store treats
 * as an unknown outcome (as a lost connection; the real one is tested below in a child process).
 */
async function armableFailure(database: string): Promise<void> {
  await cluster!.psql(
    `create table fail_next (armed boolean);
     create function fail_next() returns trigger language plpgsql as $$
       begin if exists (select 1 from fail_next) then raise exception 'injected commit failure'; end if; return new; end $$;
     create trigger fail_next after insert on operations for each row execute function fail_next();`,
    database,
  );
}

/** Every table of the schema (schema.ts), and the test's own. */
const TABLES = [
  'heads',
  'records',
  'operations',
  'message_ids',
  'agents',
  'usernames',
  'tokens',
  'grants',
  'chats',
  'pairs',
  'members',
  'keys',
  'corruption_marks',
  'meta',
  'fail_next',
];

/** Apply the schema (what openPostgresStore does first), so that the test's trigger has its table. */
async function migrateDatabase(database: string): Promise<void> {
  const store = await openPostgresStore({ url: cluster!.url(database), log: silentLog });
  await store.close();
}

describe.runIf(pgAvailable())('PostgreSQL', () => {
  beforeAll(async () => {
    cluster = await FileDatabases.open();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  // One database for the suite, emptied before each store (creating a database per test costs
  // seconds of fsync on a loaded machine); the previous test's store is closed by then.
  let conformanceDb: Promise<string> | undefined;
  portConformance('PostgreSQL', async () => {
    conformanceDb ??= (async () => {
      const name = await freshDatabase();
      await migrateDatabase(name);
      await armableFailure(name);
      return name;
    })();
    const database = await conformanceDb;
    await cluster!.psql(`truncate ${TABLES.join(', ')}`, database);
    const store = await openPostgresStore({ url: cluster!.url(database), log: silentLog });
    return {
      store,
      failNextCommit: async () => {
        await cluster!.psql('insert into fail_next values (true)', database);
      },
      close: async () => {
        await store.close().catch(() => {});
      },
    };
  });

  describe('two daemons on one database', () => {
    const now = () => new Date().toISOString();
    const id = (prefix: string) => `${prefix}${randomUUID().replaceAll('-', '')}`;
    const agentRow = (username = id('u')): AgentRow => ({
      id: id('agt_'),
      username,
      name: username,
      image: null,
      disabled: false,
      pii: 'redact',
      createdAt: now(),
      tokenHash: id('th'),
    });
    const chatRow = (a: AgentRow, b: AgentRow): ChatRow => {
      const [x, y] = a.id < b.id ? [a, b] : [b, a];
      return { id: id('chat_'), agentAId: x.id, agentBId: y.id, createdAt: now() };
    };
    const headsOf = (row: ChatRow) =>
      [
        newStreamMeta(row.id, row.agentAId, row.agentBId, row.createdAt),
        newStreamMeta(row.id, row.agentBId, row.agentAId, row.createdAt),
      ] as const;

    const opened: PostgresStore[] = [];
    afterAll(async () => {
      for (const s of opened) await s.close().catch(() => {});
    });

    async function daemons(): Promise<{ a: PostgresStore; b: PostgresStore; database: string }> {
      const database = await freshDatabase();
      const [a, b] = await Promise.all([
        openPostgresStore({ url: cluster!.url(database), log: silentLog, applicationName: 'yellod-a' }),
        openPostgresStore({ url: cluster!.url(database), log: silentLog, applicationName: 'yellod-b' }),
      ]);
      opened.push(a, b);
      return { a, b, database };
    }

    it('a username both daemons take at once is one agent: the other is a duplicate naming it', async () => {
      const { a, b, database } = await daemons();
      const [x, y] = [agentRow('carol'), agentRow('carol')];
      // Neither cache knows the other's admission: the unique constraint decides in the transaction.
      const [ox, oy] = await Promise.all([outcomeOf(a.directory.createAgent(x)), outcomeOf(b.directory.createAgent(y))]);
      const outcomes = [ox, oy].map((o) => o.status).sort();
      expect(outcomes).toEqual(['duplicate', 'ok']);
      const winner = ox.status === 'ok' ? x : y;
      const loser = ox.status === 'ok' ? b : a;
      expect(ox.status === 'ok' ? oy : ox).toEqual({ status: 'duplicate', existing: winner.id });
      // The loser knows the holder at once (it read it in the transaction).
      expect(loser.directory.agentIdByUsername('carol', 'committed')).toBe(winner.id);
      expect(loser.directory.agent(winner.id, 'committed')).toEqual(winner);
      expect(await cluster!.psql(`select count(*) from usernames where username = 'carol'`, database)).toBe('1');
      expect(await cluster!.psql('select count(*) from agents', database)).toBe('1');
      // And once it knows, its own admission answers the duplicate without a transaction.
      expect(await outcomeOf(loser.directory.createAgent(agentRow('carol')))).toEqual({ status: 'duplicate', existing: winner.id });
    });

    it('two daemons creating the same pair at once make one chat; the other finds it, with its heads', async () => {
      const { a, b, database } = await daemons();
      const [p, q] = [agentRow(), agentRow()];
      expect(await outcomeOf(a.directory.createAgent(p))).toEqual({ status: 'ok' });
      expect(await outcomeOf(a.directory.createAgent(q))).toEqual({ status: 'ok' });
      const [ra, rb] = [chatRow(p, q), chatRow(p, q)];
      const [oa, ob] = await Promise.all([
        outcomeOf(a.directory.createChat(ra, headsOf(ra))),
        outcomeOf(b.directory.createChat(rb, headsOf(rb))),
      ]);
      expect([oa.status, ob.status].sort()).toEqual(['duplicate', 'ok']);
      const won = oa.status === 'ok' ? ra : rb;
      const lost = oa.status === 'ok' ? rb : ra;
      const loser = oa.status === 'ok' ? b : a;
      expect(oa.status === 'ok' ? ob : oa).toEqual({ status: 'duplicate', existing: won.id });
      expect(loser.directory.chat(won.id)).toEqual(won);
      expect(loser.directory.chat(lost.id)).toBeUndefined();
      expect(loser.directory.chatOfPair(won.agentAId, won.agentBId, 'admitted')).toBe(won.id);
      for (const h of headsOf(won)) expect(loser.streams.head(h.streamId, 'committed')).toMatchObject({ nextPosition: 0 });
      expect(loser.streams.head(headsOf(lost)[0].streamId, 'committed')).toBeUndefined();
      expect(await cluster!.psql('select count(*) from chats', database)).toBe('1');
      expect(await cluster!.psql('select count(*) from heads', database)).toBe('2');
      expect(await cluster!.psql('select count(*) from members', database)).toBe('2');
      expect(loser.counts()).toMatchObject({ chats: 1, streams: 2 });
    });

    it("an agent, a token rotation, a grant and a chat made through one daemon reach the other's synchronous reads", async () => {
      const { a, b, database } = await daemons();
      const [p, q] = [agentRow(), agentRow()];
      expect(await outcomeOf(a.directory.createAgent(p))).toEqual({ status: 'ok' });
      expect(await outcomeOf(a.directory.createAgent(q))).toEqual({ status: 'ok' });
      await waitFor(() => b.directory.agentIdByToken(q.tokenHash) === q.id, 'b to learn the token of q');
      expect(b.directory.agent(p.id, 'committed')).toEqual(p);
      expect(b.directory.agentIdByUsername(p.username, 'committed')).toBe(p.id);
      expect(b.counts().agents).toBe(2);

      const rotated = { ...p, tokenHash: id('th') };
      expect(await outcomeOf(a.directory.updateAgent(rotated, p))).toEqual({ status: 'ok' });
      await waitFor(() => b.directory.agentIdByToken(rotated.tokenHash) === p.id, 'b to learn the new token');
      expect(b.directory.agentIdByToken(p.tokenHash)).toBeUndefined();
      expect(b.directory.agent(p.id, 'committed')).toEqual(rotated);
      // A disable deletes the token row (the commits of every daemon check it): b forgets the token.
      const disabled = { ...rotated, disabled: true };
      expect(await outcomeOf(a.directory.updateAgent(disabled, rotated))).toEqual({ status: 'ok' });
      await waitFor(() => b.directory.agent(p.id, 'committed')?.disabled === true, 'b to learn the disable');
      expect(b.directory.agentIdByToken(rotated.tokenHash)).toBeUndefined();
      expect(await cluster!.psql(`select count(*) from tokens where agent_id = '${p.id}'`, database)).toBe('0');

      const grant = { agentId: p.id, peerAgentId: q.id, grantedAt: now() };
      expect(await outcomeOf(a.directory.putGrant(grant))).toEqual({ status: 'ok' });
      await waitFor(() => b.directory.grant(p.id, q.id, 'admitted'), 'b to see the grant');
      expect(b.directory.grant(p.id, q.id, 'committed')).toEqual(grant);
      expect(await outcomeOf(a.directory.deleteGrant(p.id, q.id))).toEqual({ status: 'ok' });
      await waitFor(() => b.directory.grant(p.id, q.id, 'committed') === undefined, 'b to see the grant go');

      const row = chatRow(p, q);
      expect(await outcomeOf(a.directory.createChat(row, headsOf(row)))).toEqual({ status: 'ok' });
      await waitFor(() => b.directory.chat(row.id), 'b to see the chat');
      expect(b.directory.chatOfPair(row.agentAId, row.agentBId, 'committed')).toBe(row.id);
      for (const h of headsOf(row)) expect(b.streams.head(h.streamId, 'committed')).toEqual(h);
      expect(await b.directory.chatIds(p.id, { limit: 10 })).toEqual([row.id]);
      expect(b.counts()).toMatchObject({ agents: 2, chats: 1, streams: 2 });
      // b's own create-or-find of the pair now answers a's chat, without a transaction.
      const again = chatRow(p, q);
      expect(await outcomeOf(b.directory.createChat(again, headsOf(again)))).toEqual({ status: 'duplicate', existing: row.id });
    });

    it('a chat committed elsewhere whose notice never came is loaded when a page lists it', async () => {
      const { a, b, database } = await daemons();
      const [p, q] = [agentRow(), agentRow()];
      expect(await outcomeOf(a.directory.createAgent(p))).toEqual({ status: 'ok' });
      expect(await outcomeOf(a.directory.createAgent(q))).toEqual({ status: 'ok' });
      const row = chatRow(p, q);
      // Written as a daemon would, but without its pg_notify: b cannot have heard of it.
      const sql = openPool(resolveStoreUrl(cluster!.url(database)), { max: 1 });
      try {
        await sql.begin(async (tx) => {
          await tx`insert into chats (chat_id, body) values (${row.id}, ${encodeRow(RowKey.chat(row.id), row)})`;
          await tx`insert into pairs (a, b, chat_id, body)
            values (${row.agentAId}, ${row.agentBId}, ${row.id}, ${encodeRow(RowKey.pair(row.agentAId, row.agentBId), row.id)})`;
          for (const m of [row.agentAId, row.agentBId])
            await tx`insert into members (agent_id, chat_id, body) values (${m}, ${row.id}, ${encodeRow(RowKey.member(m, row.id), '')})`;
          for (const h of headsOf(row))
            await tx`insert into heads (stream_id, chat_id, author, peer, generation, first_position, next_position, writer_epoch, meta)
              values (${h.streamId}, ${h.chatId}, ${h.authorAgentId}, ${h.peerAgentId}, 1, 0, 0, 0, ${encodeRow(RowKey.head(h.streamId), h)})`;
        });
      } finally {
        await sql.end({ timeout: 1 });
      }
      expect(b.directory.chat(row.id)).toBeUndefined();
      expect(await b.directory.chatIds(p.id, { limit: 10 })).toEqual([row.id]);
      // chats.list expands every id of the page synchronously: it must be there now.
      expect(b.directory.chat(row.id)).toEqual(row);
      expect(b.directory.chatOfPair(row.agentAId, row.agentBId, 'committed')).toBe(row.id);
      expect(b.streams.head(headsOf(row)[0].streamId, 'committed')).toEqual(headsOf(row)[0]);
      expect(b.counts()).toMatchObject({ chats: 1, streams: 2 });
    });

    it('appends committed through one daemon are counted by the other once their notice arrives', async () => {
      const { a, b } = await daemons();
      const [p, q] = [agentRow(), agentRow()];
      expect(await outcomeOf(a.directory.createAgent(p))).toEqual({ status: 'ok' });
      expect(await outcomeOf(a.directory.createAgent(q))).toEqual({ status: 'ok' });
      const row = chatRow(p, q);
      expect(await outcomeOf(a.directory.createChat(row, headsOf(row)))).toEqual({ status: 'ok' });
      const head = a.streams.head(headsOf(row)[0].streamId, 'committed')!;
      const next = { ...structuredClone(head), nextPosition: 2 };
      const records = [0, 1].map((position): StoredRecord => ({
        streamId: head.streamId,
        generation: '1',
        position: String(position),
        wrapper: {
          version: 2 as const,
          chatId: head.chatId,
          authorAgentId: head.authorAgentId,
          operationId: 'op1',
          recordIndex: position,
          type: 'chat.message' as const,
          message: {
            chatId: head.chatId,
            fromAgentId: head.authorAgentId,
            toAgentId: head.peerAgentId,
            clientMessageId: `m${position}`,
            content: 'hi',
            contentSha256: 'a'.repeat(64),
            signature: { kid: 'k1', alg: 'ES256' as const, value: 'sig', createdAt: now() },
          },
        },
      }));
      const outcome = await outcomeOf(
        a.streams.admit({
          kind: 'append',
          expect: { streamId: head.streamId, generation: 1, nextPosition: 0, writerEpoch: 0 },
          next,
          records,
          operation: {
            operationId: 'op1',
            generation: 1,
            firstPosition: 0,
            nextPosition: 2,
            committedAt: now(),
            requestDigest: 'd',
            redactions: [],
          },
          messageIds: [
            ['m0', 0],
            ['m1', 1],
          ],
          ready: null,
        }),
      );
      expect(outcome).toEqual({ status: 'ok' });
      expect(a.counts().records).toBe(2);
      await waitFor(() => b.counts().records === 2, "b to count a's records");
      expect(b.counts()).toEqual({ agents: 2, chats: 1, streams: 2, records: 2 });
    });

    it('a session killed during a directory commit is an unknown outcome, and the whole store turns read-only', async () => {
      const database = await freshDatabase();
      // A child process (the built dist/): the driver may end a process whose session died in a
      // transaction (test/pg/driver-connection-loss.test.ts); here it must not.
      const { stdout } = await run(process.execPath, [killChild, cluster!.url(database)], { timeout: 60_000 });
      expect(JSON.parse(stdout)).toEqual({
        status: 'unknown',
        reason: 'WRITE_FAILED',
        outcome: 'unknown',
        readOnly: true,
        refused: 'READ_ONLY',
        streamsRefused: 'READ_ONLY',
        agentsInTable: 0,
      });
    }, 90_000);

    it('daemon.backup is refused on PostgreSQL, saying to use pg_dump or point-in-time recovery', async () => {
      const { a } = await daemons();
      const target = path.join(tmpdir(), `yello-never-written-${randomUUID()}`);
      const refused = (await (a as StorePort)
        .backup(target, { dataDir: tmpdir(), daemonVersion: 'test' })
        .catch((e: unknown) => e)) as Error;
      expect(refused).toMatchObject({ type: 'STORAGE_FAILURE', details: { reason: 'UNSUPPORTED', outcome: 'not-written' } });
      expect(refused.message).toMatch(/pg_dump.*point-in-time recovery/s);
      expect(existsSync(target)).toBe(false);
    });
  });
});
