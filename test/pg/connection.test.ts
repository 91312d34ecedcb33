// The store URL of the PostgreSQL backend: parsed strictly, the password never taken from the
// URL and never printed, PG* environment variables as libpq reads them, and a real connection
// (Unix socket, and a multi-host URL whose first host is down) to a throwaway cluster.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  describeStore,
  isPostgresUrl,
  openPool,
  passfileLookup,
  redactStoreUrl,
  resolveStoreUrl,
  StoreConfigError,
} from '../../src/daemon/store/postgres/connection.js';
import { pgAvailable } from '../helpers/pg-cluster.mjs';
import { FileDatabases } from '../helpers/run-pg.js';

const noEnv = { HOME: '/nonexistent' };

describe('redactStoreUrl', () => {
  it.each([
    ['postgresql://alice:s3cret@db:5432/yello', 'postgresql://alice:***@db:5432/yello'],
    ['postgres://alice:p%40ss@h1:1,h2:2/y?sslmode=require', 'postgres://alice:***@h1:1,h2:2/y?sslmode=require'],
    ['postgresql://a@h/y?password=s3cret&sslmode=require', 'postgresql://a@h/y?password=***&sslmode=require'],
    ['postgresql://a@h/y?passfile=/home/a/.pg&foo=s3cret', 'postgresql://a@h/y?passfile=***&foo=***'],
    ['postgresql://a@h/y#s3cret', 'postgresql://a@h/y#***'],
    ['postgresql://a@h/y?sslmode=require#s3cret', 'postgresql://a@h/y?sslmode=require#***'],
    ['postgresql://a:b:c@d@h/y', 'postgresql://a:***@h/y'],
  ])('%s → %s', (input, out) => {
    expect(redactStoreUrl(input)).toBe(out);
  });

  it('never returns an unparseable input as it is', () => {
    expect(redactStoreUrl('alice:s3cret@db')).toBe('<unparseable store URL>');
  });
});

describe('resolveStoreUrl', () => {
  it('reads hosts, ports, database and user; several hosts default to read-write', () => {
    const c = resolveStoreUrl('postgresql://yello@db1:5433,db2,[::1]:6000/chats?application_name=x', { env: noEnv });
    expect(c.hosts).toEqual([
      { host: 'db1', port: 5433 },
      { host: 'db2', port: 5432 },
      { host: '::1', port: 6000 },
    ]);
    expect(c).toMatchObject({
      database: 'chats',
      user: 'yello',
      targetSessionAttrs: 'read-write',
      socketDir: undefined,
      applicationName: 'x',
    });
    expect(resolveStoreUrl('postgresql://yello@db1/chats', { env: noEnv }).targetSessionAttrs).toBe('any');
  });

  it('takes a Unix socket directory from ?host=', () => {
    const c = resolveStoreUrl('postgresql://yello@/chats?host=%2Frun%2Fpostgresql&port=5444', { env: noEnv });
    expect(c).toMatchObject({ socketDir: '/run/postgresql', hosts: [{ host: '/run/postgresql', port: 5444 }], sslMode: 'disable' });
  });

  it('fills what the URL leaves out from PG* variables', () => {
    const c = resolveStoreUrl('postgresql://', {
      env: { ...noEnv, PGHOST: 'h', PGPORT: '7000', PGUSER: 'u', PGDATABASE: 'd', PGPASSWORD: 'pw', PGTARGETSESSIONATTRS: 'primary' },
    });
    expect(c).toMatchObject({
      hosts: [{ host: 'h', port: 7000 }],
      user: 'u',
      database: 'd',
      password: 'pw',
      passwordSource: 'PGPASSWORD',
      targetSessionAttrs: 'primary',
    });
  });

  it.each([
    ['postgresql://alice:s3cret@db/y', /holds a password.*--store-password-file/],
    ['postgresql://alice@db/y?password=s3cret', /holds a password/],
    ['postgresql://alice@db/y?sslmod=require', /unknown parameter "sslmod"/],
    ['postgresql://alice@db:99999/y', /port "99999"/],
    ['postgresql://alice@db/y?target_session_attrs=writable', /target_session_attrs=writable/],
    ['postgresql://alice@db/y?sslmode=sure', /sslmode=sure/],
    ['postgresql://alice@/y?host=%2Ftmp,db', /Unix socket directory cannot be one of several hosts/],
    ['mysql://alice@db/y', /not a PostgreSQL URL/],
    ['postgresql://alice@/y', /no host/],
  ])('refuses %s with advice, never echoing a password', (url, why) => {
    let err: unknown;
    try {
      resolveStoreUrl(url, { env: noEnv });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StoreConfigError);
    expect((err as Error).message).toMatch(why);
    expect((err as Error).message).not.toContain('s3cret');
  });

  describe('password files', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(path.join(tmpdir(), 'yello-pgpass-'));
    });
    afterAll(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    it('--store-password-file wins over PGPASSWORD; a trailing newline is not part of it', () => {
      const f = path.join(dir, 'pw');
      writeFileSync(f, 'from-file\n', { mode: 0o600 });
      const c = resolveStoreUrl('postgresql://u@h/d', { passwordFile: f, env: { ...noEnv, PGPASSWORD: 'from-env' } });
      expect(c).toMatchObject({ password: 'from-file', passwordSource: 'password-file' });
      expect(JSON.stringify(describeStore(c))).not.toContain('from-file');
    });

    it('refuses a password file readable by others, saying chmod 600', () => {
      const f = path.join(dir, 'open');
      writeFileSync(f, 'pw');
      chmodSync(f, 0o644);
      expect(() => resolveStoreUrl('postgresql://u@h/d', { passwordFile: f, env: noEnv })).toThrow(/chmod 600/);
      expect(() => resolveStoreUrl('postgresql://u@h/d', { passwordFile: path.join(dir, 'missing'), env: noEnv })).toThrow(/ENOENT/);
    });

    it('reads a libpq passfile from ?passfile=, PGPASSFILE or ~/.pgpass', () => {
      const f = path.join(dir, 'pgpass');
      writeFileSync(f, '# comment\nother:*:*:*:no\nh:5432:d:u:yes\\:colon\n', { mode: 0o600 });
      expect(resolveStoreUrl(`postgresql://u@h/d?passfile=${encodeURIComponent(f)}`, { env: noEnv })).toMatchObject({
        password: 'yes:colon',
        passwordSource: 'passfile',
      });
      expect(resolveStoreUrl('postgresql://u@h/d', { env: { ...noEnv, PGPASSFILE: f } }).password).toBe('yes:colon');
      writeFileSync(path.join(dir, '.pgpass'), '*:*:*:u:home\n', { mode: 0o600 });
      expect(resolveStoreUrl('postgresql://u@h/d', { env: { HOME: dir } })).toMatchObject({ password: 'home', passwordSource: 'passfile' });
      expect(resolveStoreUrl('postgresql://u@h/d', { env: noEnv })).toMatchObject({ password: undefined, passwordSource: 'none' });
    });
  });

  it('passfile lines match on host, port, database and user; a socket is localhost', () => {
    const t = { hosts: [{ host: '/run/pg', port: 5432 }], socketDir: '/run/pg', database: 'd', user: 'u' };
    expect(passfileLookup('localhost:5432:d:u:sock\n', t)).toBe('sock');
    expect(passfileLookup('localhost:5433:d:u:sock\n', t)).toBeUndefined();
    expect(passfileLookup('*:*:e:u:x\n*:*:d:v:y\n', t)).toBeUndefined();
  });

  it('isPostgresUrl tells a URL from a data dir', () => {
    expect(isPostgresUrl('postgresql://u@h/d')).toBe(true);
    expect(isPostgresUrl('POSTGRES://u@h/d')).toBe(true);
    expect(isPostgresUrl('/var/lib/yello')).toBe(false);
  });
});

describe.runIf(pgAvailable())('openPool on a throwaway cluster', () => {
  let cluster: FileDatabases | undefined;
  beforeAll(async () => {
    cluster = await FileDatabases.open();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('connects over the Unix socket', async () => {
    const sql = openPool(resolveStoreUrl(cluster!.url(), { env: noEnv }), { max: 1 });
    try {
      const [row] = await sql<{ a: string }[]>`select current_setting('application_name') as a`;
      expect(row?.a).toBe('yellod');
    } finally {
      await sql.end();
    }
  });

  it('with several hosts, skips one that is down and connects to the next', async () => {
    const dead = 1; // nothing listens on port 1 of the loopback
    const url = `postgresql://${cluster!.user}@127.0.0.1:${dead},127.0.0.1:${cluster!.port}/postgres?sslmode=disable`;
    const sql = openPool(resolveStoreUrl(url, { env: noEnv }), { max: 1 });
    try {
      const [row] = await sql<{ port: number }[]>`select inet_server_port() as port`;
      expect(row?.port).toBe(cluster!.port);
    } finally {
      await sql.end();
    }
  });
});
