// Pins behaviour of src/daemon/crypto/key-rows.ts: the key rows every daemon of a deployment
// publishes, and `keys.list` as the union of them (docs/protocol.md §6 "keys.list",
// docs/multi-host.md). One LevelDB daemon holds only its own rows, so its keys.list is its own JWKS
// and none of this is reached; these are the rows of several daemons in one PostgreSQL database (a
// throwaway cluster, test/helpers/pg-cluster.mjs), each daemon a Signer over its own key dir, as
// daemon.ts builds it. In-process: a mutant costs no daemon start.

import type { JsonWebKey } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyRows, listKeys, publishKeys } from '../../src/daemon/crypto/key-rows.js';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { PostgresKeys } from '../../src/daemon/store/postgres/keys-integrity.js';
import { openPool, resolveStoreUrl, type Sql } from '../../src/daemon/store/postgres/connection.js';
import { migrate } from '../../src/daemon/store/postgres/migrate.js';
import type { PublicJwk } from '../../src/shared/types.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';

/** Lets the millisecond clock move on, so keys made one after the other have different createdAt. */
async function nextMillisecond(): Promise<void> {
  const at = Date.now();
  while (Date.now() <= at + 1) await new Promise((r) => setTimeout(r, 1));
}

describe.skipIf(!pgAvailable())('key rows of several daemons in one PostgreSQL database', () => {
  let cluster: FileDatabases | undefined;
  let dir: string;
  const pools: Sql[] = [];
  let databases = 0;

  beforeAll(async () => {
    cluster = await FileDatabases.open();
    dir = mkdtempSync(path.join(tmpdir(), 'yl-keyrows-'));
  }, 60_000);

  afterAll(async () => {
    for (const sql of pools) await sql.end().catch(() => {});
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  /** The key table of a new database (one per test: each starts with no rows). */
  async function freshKeys(): Promise<PostgresKeys> {
    const name = `keys${++databases}`;
    await cluster!.createDatabase(name);
    const sql = openPool(resolveStoreUrl(cluster!.url(name)), { max: 2 });
    pools.push(sql);
    await migrate(sql);
    return new PostgresKeys(sql);
  }

  const signer = (name: string): Signer => new Signer(path.join(dir, `${name}-${databases}`, 'keys'));

  it("publishes a row per key: the daemon is its first kid, a retired key's retiredAt is when the next was made; keys.list on either daemon is both daemons' keys, oldest first", async () => {
    const keys = await freshKeys();
    const a = signer('a');
    const a1 = a.kid;
    await nextMillisecond();
    const a2 = a.rotate();
    await nextMillisecond();
    const b = signer('b');
    await publishKeys(keys, a);
    await publishKeys(keys, b);

    const [ja1, ja2] = a.jwks().keys as [PublicJwk, PublicJwk];
    const [jb1] = b.jwks().keys as [PublicJwk];
    expect([ja1.kid, ja1.status, ja2.kid, ja2.status]).toEqual([a1, 'retired', a2, 'active']);
    const row = (k: PublicJwk, daemonId: string, retiredAt: string | null) => ({
      kid: k.kid,
      daemonId,
      jwk: { kty: 'EC', crv: 'P-256', x: k.x, y: k.y },
      createdAt: k.createdAt,
      retiredAt,
    });
    expect(keyRows(a)).toEqual([row(ja1, a1, ja2.createdAt), row(ja2, a1, null)]);
    const stored = await keys.all();
    expect(stored).toEqual(
      [row(ja1, a1, ja2.createdAt), row(ja2, a1, null), row(jb1, jb1.kid, null)].sort((x, y) => (x.kid < y.kid ? -1 : 1)),
    );

    // Each daemon lists its own keys as its signer has them and the other's from their rows,
    // every key once, in the order they were made.
    const union = [ja1, ja2, jb1];
    expect(await listKeys(keys, b)).toEqual({ keys: union });
    expect(await listKeys(keys, a)).toEqual({ keys: union });

    // Publishing again after a rotation updates the rows in place.
    await nextMillisecond();
    const b2 = b.rotate();
    await publishKeys(keys, b);
    const jb = b.jwks().keys;
    expect(jb.map((k) => [k.kid, k.status])).toEqual([
      [jb1.kid, 'retired'],
      [b2, 'active'],
    ]);
    expect((await keys.all()).find((r) => r.kid === jb1.kid)).toEqual(row(jb1, jb1.kid, jb[1]!.createdAt));
    const onA = await listKeys(keys, a);
    expect(onA.keys.map((k) => [k.kid, k.status])).toEqual([
      [a1, 'retired'],
      [a2, 'active'],
      [jb1.kid, 'retired'],
      [b2, 'active'],
    ]);
  });

  it('a row without both coordinates is not listed, and keys made in the same millisecond are listed in kid order', async () => {
    const keys = await freshKeys();
    const b = signer('b');
    const [own] = b.jwks().keys as [PublicJwk];
    const foreign = (kid: string, jwk: JsonWebKey, retiredAt: string | null = null) => ({
      kid,
      daemonId: 'other',
      jwk,
      createdAt: own.createdAt,
      retiredAt,
    });
    // '!' and '~' sort before and after every base64url character, so the daemon's own random kid
    // lies between them whatever it is ('-before' did not: a kid can start with '-').
    await keys.publish([
      foreign('~after', { kty: 'EC', crv: 'P-256', x: own.x, y: own.y }, own.createdAt),
      foreign('!before', { kty: 'EC', crv: 'P-256', x: own.y, y: own.x }),
      foreign('no-x', { kty: 'EC', crv: 'P-256', y: own.y }),
      foreign('no-y', { kty: 'EC', crv: 'P-256', x: own.x }),
    ]);
    await publishKeys(keys, b);
    const listed = await listKeys(keys, b);
    expect(listed.keys.map((k) => k.kid)).toEqual(['!before', own.kid, '~after']);
    expect(listed.keys[0]).toEqual({
      kty: 'EC',
      crv: 'P-256',
      x: own.y,
      y: own.x,
      kid: '!before',
      alg: 'ES256',
      use: 'sig',
      status: 'active',
      createdAt: own.createdAt,
    });
    expect(listed.keys[2]).toMatchObject({ kid: '~after', status: 'retired' });
  });
});
