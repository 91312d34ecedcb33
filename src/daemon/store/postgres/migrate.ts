// Applying the schema migrations at startup (issue 24). Several daemons share one database and
// may start at once, so the whole check-and-apply runs in one transaction that first takes a
// transaction-level advisory lock: the second daemon waits, then finds the migrations applied.
// DDL is transactional in PostgreSQL, so a daemon killed mid-migration leaves nothing half
// applied, and the lock is released with the transaction (also when the connection dies).

import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { StoreFormatError } from '../store-format-error.js';
import type { Sql } from './connection.js';
import { MIGRATIONS, type Migration } from './schema.js';

/** The advisory lock key of yello's migrations (an arbitrary constant: "yello" in ASCII). */
export const MIGRATION_LOCK = 0x79656c6c6f;

export interface MigrationResult {
  /** The schema version before this call. */
  from: number;
  /** The versions this call applied, in order (empty when another daemon had applied them). */
  applied: number[];
  /** The schema version now. */
  to: number;
}

function digest(m: Migration): string {
  return createHash('sha256').update(m.sql).digest('hex');
}

/**
 * Bring the database to the newest schema this code knows. Refuses (a {@link StoreFormatError},
 * exit 78, nothing changed) a database with a migration this code does not know (a newer yello
 * migrated it) or with a known version whose recorded digest differs (a migration was edited).
 */
export async function migrate(sql: Sql, log?: Logger, migrations: readonly Migration[] = MIGRATIONS): Promise<MigrationResult> {
  const known = [...migrations].sort((a, b) => a.version - b.version);
  known.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migration versions must count from 1 without gaps (found ${m.version} at ${i + 1})`);
  });
  const newest = known.at(-1)?.version ?? 0;
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    // Created only when missing: `create table if not exists` needs CREATE on the schema even
    // when the table is there, and the daemons' least-privilege role has none
    // (docs/multi-host.md; test/failover/least-privilege.test.ts).
    const [found] = await tx<{ exists: boolean }[]>`select to_regclass('schema_migrations') is not null as exists`;
    if (!found?.exists)
      await tx`create table schema_migrations (
      version     integer primary key,
      name        text not null,
      digest      text not null,
      applied_at  timestamptz not null default now()
    )`;
    const rows = await tx<{ version: number; name: string; digest: string }[]>`
      select version, name, digest from schema_migrations order by version`;
    const from = rows.reduce((v, r) => Math.max(v, r.version), 0);
    const unknown = rows.filter((r) => r.version > newest);
    if (unknown.length > 0)
      throw new StoreFormatError(
        `the database has schema version ${from} ("${unknown.at(-1)?.name ?? ''}"), which this yello (schema ${newest}) does not know: a newer version migrated it, and nothing was changed; run that version on every daemon, or restore the database from the backup taken before the upgrade`,
        false,
      );
    for (const r of rows) {
      const m = known[r.version - 1];
      if (m && digest(m) !== r.digest)
        throw new StoreFormatError(
          `schema migration ${r.version} ("${r.name}") in the database differs from the one this yello knows: the database was migrated by a different build; run the release that migrated it`,
          false,
        );
    }
    const applied: number[] = [];
    for (const m of known) {
      if (m.version <= from) continue;
      log?.info({ version: m.version, name: m.name }, 'applying a schema migration');
      await tx.unsafe(m.sql).simple();
      await tx`insert into schema_migrations (version, name, digest) values (${m.version}, ${m.name}, ${digest(m)})`;
      applied.push(m.version);
    }
    return { from, applied, to: Math.max(from, newest) };
  });
}
