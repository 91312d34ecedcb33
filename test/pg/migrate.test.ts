// Schema migrations of the PostgreSQL store on a real throwaway cluster: applied once, also
// when two daemons start at once (two processes, the built dist/), recorded with a digest, and
// a database migrated by a newer yello refused with advice and left unchanged.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, resolveStoreUrl, type Sql } from '../../src/daemon/store/postgres/connection.js';
import { migrate, type MigrationResult } from '../../src/daemon/store/postgres/migrate.js';
import { MIGRATIONS, SCHEMA_VERSION } from '../../src/daemon/store/postgres/schema.js';
import { PostgresStreams } from '../../src/daemon/store/postgres/stream-store.js';
import { encodeRow, RowKey } from '../../src/daemon/store/postgres/row-codec.js';
import { compactOperation } from '../../src/daemon/store/record-layout.js';
import { StoreFormatError } from '../../src/daemon/store/store-format-error.js';
import { startupFailure } from '../../src/daemon/runtime/startup-errors.js';
import { EXIT_CODES } from '../../src/daemon/runtime/exit-codes.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';

const run = promisify(execFile);
const T = '2026-12-02T03:00:00.000Z';
const child = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/migrate-child.mjs');

describe.runIf(pgAvailable())('schema migrations', () => {
  let cluster: FileDatabases | undefined;
  let n = 0;
  const pools: Sql[] = [];

  beforeAll(async () => {
    cluster = await FileDatabases.open();
  }, 60_000);
  afterAll(async () => {
    for (const p of pools) await p.end();
    await cluster?.stop();
  });

  /** A fresh database and its URL. */
  async function freshDb(): Promise<{ url: string; sql: Sql }> {
    const name = `m${++n}`;
    await cluster!.createDatabase(name);
    const url = cluster!.url(name);
    const sql = openPool(resolveStoreUrl(url), { max: 2 });
    pools.push(sql);
    return { url, sql };
  }

  it('applies every migration to an empty database, once', async () => {
    const { sql } = await freshDb();
    expect(await migrate(sql)).toEqual({ from: 0, applied: MIGRATIONS.map((m) => m.version), to: SCHEMA_VERSION });
    expect(await migrate(sql)).toEqual({ from: SCHEMA_VERSION, applied: [], to: SCHEMA_VERSION });
    const tables = await sql<{ t: string }[]>`select tablename as t from pg_tables where schemaname = 'public' order by 1`;
    expect(tables.map((r) => r.t)).toEqual(
      expect.arrayContaining([
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
        'schema_migrations',
      ]),
    );
    expect(tables.map((r) => r.t)).not.toContain('op_log');
    const [row] = await sql<{ digest: string }[]>`select digest from schema_migrations where version = 1`;
    expect(row?.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  /** A schema 1 database holding one append's operation and its op_log entry, as a schema 1 daemon wrote them. */
  async function schema1WithOperation(): Promise<Sql> {
    const { sql } = await freshDb();
    expect(await migrate(sql, undefined, MIGRATIONS.slice(0, 1))).toEqual({ from: 0, applied: [1], to: 1 });
    const op = {
      operationId: 'op-1',
      generation: 1,
      firstPosition: 0,
      nextPosition: 2,
      committedAt: T,
      requestDigest: 'd',
      redactions: [],
    };
    await sql`insert into operations (stream_id, operation_id, generation, first_position, next_position, body)
      values ('c1:alice', 'op-1', 1, 0, 2, ${encodeRow(RowKey.operation('c1:alice', 'op-1'), compactOperation(op))})`;
    await sql`insert into op_log (stream_id, generation, position, operation_id, body)
      values ('c1:alice', 1, 0, 'op-1', ${encodeRow(RowKey.opLog('c1:alice', 1, 0), 'op-1')})`;
    return sql;
  }

  async function opLogOf(sql: Sql, streamId: string): Promise<unknown[]> {
    const streams = await PostgresStreams.open(sql);
    try {
      const entries: unknown[] = [];
      for await (const e of streams.opLog(streamId)) entries.push(e);
      return entries;
    } finally {
      await streams.close();
    }
  }

  it('upgrades a schema 1 database: op_log becomes an index of operations, and operations.list reads the same entries', async () => {
    const sql = await schema1WithOperation();
    expect(await migrate(sql)).toEqual({ from: 1, applied: [2, 3], to: SCHEMA_VERSION });
    const [gone] = await sql<{ t: string | null }[]>`select to_regclass('op_log')::text as t`;
    expect(gone?.t).toBeNull();
    expect(await opLogOf(sql, 'c1:alice')).toEqual([{ generation: 1, position: 0, operationId: 'op-1' }]);
    // Two operations starting at one position stay impossible (op_log's primary key did that).
    await expect(
      sql`insert into operations (stream_id, operation_id, generation, first_position, next_position, body)
        values ('c1:alice', 'op-2', 1, 0, 1, 'x')`,
    ).rejects.toMatchObject({ code: '23505', constraint_name: 'operations_log' });
  });

  it('upgrades a schema 2 database: a disabled agent loses its token row, an enabled one keeps it (issue 52)', async () => {
    const { sql } = await freshDb();
    await migrate(sql, undefined, MIGRATIONS.slice(0, 2));
    const agent = (id: string, disabled: boolean) => ({
      id,
      username: id,
      name: `Name "disabled":true ${id}`,
      image: null,
      disabled,
      pii: 'redact',
      createdAt: T,
      tokenHash: `hash-${id}`,
    });
    for (const row of [agent('on', false), agent('off', true)]) {
      await sql`insert into agents (agent_id, body) values (${row.id}, ${encodeRow(`a/${row.id}`, row)})`;
      await sql`insert into tokens (token_hash, agent_id, body) values (${row.tokenHash}, ${row.id}, ${encodeRow(`t/${row.tokenHash}`, row.id)})`;
    }
    expect(await migrate(sql)).toEqual({ from: 2, applied: [3], to: SCHEMA_VERSION });
    expect((await sql<{ agent_id: string }[]>`select agent_id from tokens`).map((r) => r.agent_id)).toEqual(['on']);
  });

  it('an operations row whose columns disagree with its checksummed body is corrupt in operations.list', async () => {
    const sql = await schema1WithOperation();
    await migrate(sql);
    await sql`update operations set first_position = 1 where operation_id = 'op-1'`;
    const err = await opLogOf(sql, 'c1:alice').catch((e: unknown) => e);
    expect(err).toMatchObject({ type: 'STORAGE_FAILURE', details: { reason: 'CORRUPT' } });
  });

  it('two processes migrating at once apply each migration once, and both start', async () => {
    const { url, sql } = await freshDb();
    const [a, b] = await Promise.all([run(process.execPath, [child, url, 'slow']), run(process.execPath, [child, url, 'slow'])]);
    const results = [a, b].map((r) => JSON.parse(r.stdout) as MigrationResult);
    expect(results.flatMap((r) => r.applied).sort()).toEqual([1, 2]);
    expect(results.map((r) => r.to)).toEqual([2, 2]);
    const log = await sql<{ version: number }[]>`select version from applied_log order by version`;
    expect(log.map((r) => r.version)).toEqual([1, 2]);
  }, 60_000);

  it("two processes applying yello's own schema at once both succeed", async () => {
    const { url } = await freshDb();
    const out = await Promise.all([run(process.execPath, [child, url, 'real']), run(process.execPath, [child, url, 'real'])]);
    const results = out.map((r) => JSON.parse(r.stdout) as MigrationResult);
    expect(results.flatMap((r) => r.applied)).toEqual(MIGRATIONS.map((m) => m.version));
  }, 60_000);

  it('refuses a database with a newer schema, changing nothing, with exit 78 and advice', async () => {
    const { sql } = await freshDb();
    await migrate(sql);
    await sql`insert into schema_migrations (version, name, digest) values (${SCHEMA_VERSION + 1}, 'from the future', 'x')`;
    const before = await sql`select version from schema_migrations order by 1`;
    const err = await migrate(sql).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreFormatError);
    expect((err as Error).message).toMatch(
      new RegExp(`schema version ${SCHEMA_VERSION + 1}.*does not know.*nothing was changed.*run that version`),
    );
    const failure = startupFailure(err, 'open the store');
    expect(failure.exitCode).toBe(EXIT_CODES.config);
    expect(await sql`select version from schema_migrations order by 1`).toEqual(before);
  });

  it('refuses a database whose applied migration differs from the one the code has', async () => {
    const { sql } = await freshDb();
    await migrate(sql);
    await sql`update schema_migrations set digest = 'edited' where version = 1`;
    await expect(migrate(sql)).rejects.toThrow(/differs from the one this yello knows/);
  });

  it('a migration that fails leaves nothing applied', async () => {
    const { sql } = await freshDb();
    const broken = [
      { version: 1, name: 'ok', sql: 'create table t1 (x int);' },
      { version: 2, name: 'broken', sql: 'create table t2 (x nosuchtype);' },
    ];
    await expect(migrate(sql, undefined, broken)).rejects.toThrow(/nosuchtype/);
    const [row] = await sql<{ n: string }[]>`select count(*) as n from pg_tables where tablename in ('t1', 'schema_migrations')`;
    expect(row?.n).toBe('0');
  });
});
