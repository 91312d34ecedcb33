// Opening the PostgreSQL store from a store URL (issue 24): `postgresql://user@host:port/db?…`,
// several hosts for failover (`h1:5432,h2:5432` with `target_session_attrs=read-write`), or a
// Unix socket directory (`postgresql://user@/db?host=/run/postgresql`). The URL is parsed here,
// not by the driver, so that what we do not understand is refused instead of silently ignored,
// and so that a password never comes from the URL: a URL is a command-line argument or an
// environment value that ends up in `ps`, shell history and logs. The password comes from a
// file (`--store-password-file`, or a libpq passfile) or from `PGPASSWORD`.

import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { decodeSafe, holdsPassword, redactStoreUrl, splitStoreUrl } from './url-redaction.js';

export { redactStoreUrl };

/** A store URL or password setting that cannot be used as given (exit 78, configuration). */
export class StoreConfigError extends Error {}

/** Where the password comes from, for the log (never the password itself). */
export type PasswordSource = 'password-file' | 'PGPASSWORD' | 'passfile' | 'none';

export type TargetSessionAttrs = 'any' | 'read-write' | 'read-only' | 'primary' | 'standby' | 'prefer-standby';
type SslMode = 'disable' | 'allow' | 'prefer' | 'require' | 'verify-ca' | 'verify-full';

/** A store URL resolved against the environment: everything needed to connect, plainly typed. */
export interface StoreConnectionConfig {
  /** TCP hosts in the order they are tried, or one Unix socket directory. */
  hosts: Array<{ host: string; port: number }>;
  /** Set when `hosts` is a Unix socket directory (then `hosts` has one entry). */
  socketDir: string | undefined;
  database: string;
  user: string;
  password: string | undefined;
  passwordSource: PasswordSource;
  targetSessionAttrs: TargetSessionAttrs;
  sslMode: SslMode;
  sslRootCert: string | undefined;
  connectTimeoutSeconds: number;
  applicationName: string;
}

export interface ResolveOptions {
  /** `--store-password-file`: a file holding only the password (a trailing newline is ignored). */
  passwordFile?: string;
  /** The environment to read PG* variables from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
}

const SCHEMES = ['postgresql:', 'postgres:'];
const SESSION_ATTRS: readonly TargetSessionAttrs[] = ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby'];
const SSL_MODES: readonly SslMode[] = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'];
/** The libpq parameters this store understands; any other is refused (a typo must not be ignored). */
const PARAMS = new Set([
  'host',
  'port',
  'dbname',
  'user',
  'passfile',
  'target_session_attrs',
  'sslmode',
  'sslrootcert',
  'connect_timeout',
  'application_name',
]);

/** Whether a `--store` value names a PostgreSQL store (anything else is a LevelDB data dir). */
export function isPostgresUrl(store: string): boolean {
  return /^postgres(ql)?:\/\//i.test(store);
}

/**
 * Parse a store URL and fill what it leaves out from the PG* environment (`PGHOST`, `PGPORT`,
 * `PGDATABASE`, `PGUSER`, `PGPASSWORD`, `PGPASSFILE`, `PGTARGETSESSIONATTRS`, `PGSSLMODE`,
 * `PGSSLROOTCERT`, `PGCONNECT_TIMEOUT`), as libpq does. Throws {@link StoreConfigError} with
 * what to do.
 */
export function resolveStoreUrl(url: string, options: ResolveOptions = {}): StoreConnectionConfig {
  const env = options.env ?? process.env;
  const shown = redactStoreUrl(url);
  const fail = (why: string): never => {
    throw new StoreConfigError(`store URL ${shown}: ${why}`);
  };
  // The password first, before any piece of the URL can be quoted: it may hold `/ ? # @ :`.
  const split = splitStoreUrl(url);
  if (split && holdsPassword(split))
    fail(
      'it holds a password, which would show in process listings and logs; remove it from the URL and put it in a file given with --store-password-file (mode 0600), in a passfile, or in PGPASSWORD (a URL without a password that has a ":" before an "@": write that "@" as %40)',
    );
  const m = /^([a-z]+:)\/\/([^/?#]*)(\/[^?#]*)?(\?[^#]*)?(#.*)?$/i.exec(url);
  if (!m || !SCHEMES.includes((m[1] ?? '').toLowerCase())) fail('not a PostgreSQL URL; write postgresql://USER@HOST:PORT/DATABASE');
  const [, , authority = '', pathname = '', search = ''] = m as RegExpExecArray;
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at) : '';
  const hostlist = at >= 0 ? authority.slice(at + 1) : authority;
  const params = new Map<string, string>();
  for (const [k, v] of new URLSearchParams(search.slice(1))) {
    if (!PARAMS.has(k))
      fail(
        k === 'password'
          ? 'it holds a password, which would show in process listings and logs; use --store-password-file, a passfile, or PGPASSWORD'
          : `unknown parameter "${k}"; the store understands ${[...PARAMS].join(', ')}`,
      );
    params.set(k, v);
  }

  const user =
    decodeSafe(userinfo) || params.get('user') || env.PGUSER || env.PGUSERNAME || fail('no user; write postgresql://USER@… or set PGUSER');
  const database = decodeSafe(pathname.slice(1)) || params.get('dbname') || env.PGDATABASE || user;

  // Hosts: the authority's list, else the `host` parameter (which may be a socket directory), else PGHOST.
  const defaultPort = parsePort(params.get('port') ?? env.PGPORT ?? '5432', fail);
  let hosts: Array<{ host: string; port: number }> = [];
  if (hostlist) {
    for (const entry of hostlist.split(',')) {
      const hm = /^(\[[^\]]+\]|[^:]*)(?::(\d*))?$/.exec(entry);
      const host = hm?.[1] ? decodeSafe(hm[1].replace(/^\[|\]$/g, '')) : '';
      if (!host) fail(`empty host in "${hostlist}"`);
      hosts.push({ host, port: hm?.[2] ? parsePort(hm[2], fail) : defaultPort });
    }
  } else {
    const list = (params.get('host') ?? env.PGHOST ?? '').split(',').filter(Boolean);
    const ports = (params.get('port') ?? env.PGPORT ?? '').split(',').filter(Boolean);
    if (ports.length > 1 && ports.length !== list.length) fail(`${list.length} hosts but ${ports.length} ports`);
    hosts = list.map((host, i) => ({ host, port: parsePort(ports[ports.length > 1 ? i : 0] ?? '5432', fail) }));
    if (hosts.length === 0) fail('no host; write postgresql://USER@HOST:PORT/DATABASE, or ?host=/socket/dir for a Unix socket');
  }
  const sockets = hosts.filter((h) => h.host.startsWith('/'));
  if (sockets.length > 0 && hosts.length > 1) fail('a Unix socket directory cannot be one of several hosts; list TCP hosts for failover');
  const socketDir = sockets[0]?.host;

  const tsa = (params.get('target_session_attrs') ??
    env.PGTARGETSESSIONATTRS ??
    (hosts.length > 1 ? 'read-write' : 'any')) as TargetSessionAttrs;
  if (!SESSION_ATTRS.includes(tsa)) fail(`target_session_attrs=${tsa} is not one of ${SESSION_ATTRS.join(', ')}`);
  const sslMode = (params.get('sslmode') ?? env.PGSSLMODE ?? (socketDir ? 'disable' : 'prefer')) as SslMode;
  if (!SSL_MODES.includes(sslMode)) fail(`sslmode=${sslMode} is not one of ${SSL_MODES.join(', ')}`);
  const sslRootCert = params.get('sslrootcert') ?? env.PGSSLROOTCERT;
  const timeoutText = params.get('connect_timeout') ?? env.PGCONNECT_TIMEOUT ?? '10';
  const connectTimeoutSeconds = Number(timeoutText);
  if (!Number.isInteger(connectTimeoutSeconds) || connectTimeoutSeconds < 1)
    fail(`connect_timeout=${timeoutText} is not a whole number of seconds ≥ 1`);

  const resolved = { hosts, socketDir, database, user };
  let password: string | undefined;
  let passwordSource: PasswordSource = 'none';
  if (options.passwordFile !== undefined) {
    password = readSecretFile(options.passwordFile, '--store-password-file').replace(/\r?\n$/, '');
    passwordSource = 'password-file';
  } else if (env.PGPASSWORD !== undefined && env.PGPASSWORD !== '') {
    password = env.PGPASSWORD;
    passwordSource = 'PGPASSWORD';
  } else {
    const explicit = params.get('passfile') ?? env.PGPASSFILE;
    const file = explicit ?? path.join(env.HOME ?? homedir(), '.pgpass');
    const found = explicit !== undefined || fileExists(file) ? passfileLookup(readSecretFile(file, 'passfile'), resolved) : undefined;
    if (found !== undefined) {
      password = found;
      passwordSource = 'passfile';
    }
  }

  return {
    ...resolved,
    password,
    passwordSource,
    targetSessionAttrs: tsa,
    sslMode,
    sslRootCert,
    connectTimeoutSeconds,
    applicationName: params.get('application_name') ?? env.PGAPPNAME ?? 'yellod',
  };
}

function parsePort(text: string, fail: (why: string) => never): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < 1 || port > 65535) fail(`port "${text}" is not a number from 1 to 65535`);
  return port;
}

function fileExists(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** A file holding a secret: readable, and not readable by group or others (as libpq asks of a passfile). */
function readSecretFile(file: string, what: string): string {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (err) {
    throw new StoreConfigError(`${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? 'cannot be read'}; give a file that exists`);
  }
  if ((mode & 0o077) !== 0)
    throw new StoreConfigError(
      `${what} ${file} is readable by group or others (mode ${(mode & 0o777).toString(8)}); run chmod 600 ${file}`,
    );
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new StoreConfigError(
      `${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? 'cannot be read'}; make it readable by the daemon's user`,
    );
  }
}

/**
 * The password of the first passfile line (`host:port:database:user:password`, `*` matches
 * anything, `\:` and `\\` escape) that matches one of our hosts. A Unix socket matches the
 * host `localhost`, as in libpq.
 */
export function passfileLookup(
  text: string,
  target: { hosts: Array<{ host: string; port: number }>; socketDir: string | undefined; database: string; user: string },
): string | undefined {
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const fields: string[] = [];
    let cur = '';
    for (let i = 0; i < line.length; i++) {
      const c = line.charAt(i);
      if (c === '\\' && i + 1 < line.length) cur += line.charAt(++i);
      else if (c === ':' && fields.length < 4) {
        fields.push(cur);
        cur = '';
      } else cur += c;
    }
    fields.push(cur);
    if (fields.length !== 5) continue;
    const [host, port, db, user, password] = fields as [string, string, string, string, string];
    const is = (pattern: string, value: string) => pattern === '*' || pattern === value;
    const hostMatches = target.hosts.some((h) => is(host, target.socketDir ? 'localhost' : h.host) && is(port, String(h.port)));
    if (hostMatches && is(db, target.database) && is(user, target.user)) return password;
  }
  return undefined;
}

/** A redacted, one-line description of where the store connects, for the startup log. */
export function describeStore(config: StoreConnectionConfig): Record<string, unknown> {
  return {
    hosts: config.socketDir ? [`${config.socketDir} (socket)`] : config.hosts.map((h) => `${h.host}:${h.port}`),
    database: config.database,
    user: config.user,
    password: config.passwordSource,
    target_session_attrs: config.targetSessionAttrs,
    sslmode: config.sslMode,
  };
}

export type Sql = postgres.Sql;

export interface PoolOptions {
  /** Connections in the pool (the group commit needs few: one transaction at a time per turn). */
  max?: number;
  /** Called with each NOTICE from the server (default: dropped, the daemon logs what matters). */
  onNotice?: (notice: postgres.Notice) => void;
}

/**
 * A postgres.js pool for the store. Connections open lazily; with several hosts, each new
 * connection tries them in order and keeps the first that matches `target_session_attrs`, so
 * after a failover the pool reconnects to the promoted standby.
 */
export function openPool(config: StoreConnectionConfig, options: PoolOptions = {}): Sql {
  const ssl = sslOption(config);
  return postgres({
    // postgres.js takes lists of hosts and ports at run time (its types say one of each).
    host: (config.socketDir ? [config.socketDir] : config.hosts.map((h) => h.host)) as unknown as string,
    port: config.hosts.map((h) => h.port) as unknown as number,
    ...(config.socketDir ? { path: path.join(config.socketDir, `.s.PGSQL.${config.hosts[0]?.port ?? 5432}`) } : {}),
    database: config.database,
    username: config.user,
    // A function: postgres.js would otherwise fall back to PGPASSWORD itself, and the value is
    // not kept on the options object that errors and debug output expose.
    password: () => config.password ?? '',
    ssl,
    max: options.max ?? 4,
    connect_timeout: config.connectTimeoutSeconds,
    idle_timeout: 0,
    target_session_attrs: driverSessionAttrs(config.targetSessionAttrs),
    connection: {
      application_name: config.applicationName,
      // Every statement planned for its own parameters. Cached generic plans were made while the
      // tables were small and kept as they grew: the admission lookups' primary-key probes ran as
      // sequential scans of operations and message_ids (one per append, the CPU per append growing
      // with the table; measured from seq_scan in pg_stat_user_tables), until an ANALYZE. Planning
      // each statement costs less than that from the first few hundred rows on (bench/README.md).
      plan_cache_mode: 'force_custom_plan',
    },
    onnotice: options.onNotice ?? (() => {}),
    // Column names are snake_case in SQL and read as such; bigints come back as strings and are
    // converted where they are read (positions fit in a double). Array types are fetched on
    // connect (the default): the group commit sends its rows as arrays.
  });
}

/**
 * libpq's `read-write` means "not a hot standby, and default_transaction_read_only off";
 * postgres.js 3.4.9 checks only default_transaction_read_only, which a hot standby reports
 * *off*, so it would settle on a standby (found by test/pg/failover.test.ts). Its `primary`
 * checks pg_is_in_recovery(), which is what failover needs; a primary set read-only by default
 * then answers its writes with an error instead of being skipped. `any` is no preference.
 */
function driverSessionAttrs(tsa: TargetSessionAttrs): postgres.Options<Record<string, never>>['target_session_attrs'] {
  if (tsa === 'any') return undefined;
  if (tsa === 'read-write') return 'primary';
  return tsa;
}

function sslOption(config: StoreConnectionConfig): postgres.Options<Record<string, never>>['ssl'] {
  switch (config.sslMode) {
    case 'disable':
      return false;
    case 'allow':
    case 'prefer':
      return 'prefer';
    case 'require':
      return 'require';
    case 'verify-ca':
    case 'verify-full': {
      const ca = config.sslRootCert ? readFileSync(config.sslRootCert, 'utf8') : undefined;
      return {
        rejectUnauthorized: true,
        ...(ca ? { ca } : {}),
        // verify-ca checks the chain only, not that the certificate names the host.
        ...(config.sslMode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}),
      };
    }
  }
}
