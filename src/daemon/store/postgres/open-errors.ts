// What a failed start on PostgreSQL tells the operator (docs/protocol.md §2.7): one line naming
// the store by its redacted URL, what to do, and an exit code that says whether restarting can
// help. The database being down is transient (systemd restarts the daemon: exit 69); wrong
// credentials, a missing database and a schema from a newer yello are not (77, 78).

import { EXIT_CODES } from '../../runtime/exit-codes.js';
import { StartupError } from '../../runtime/startup-error.js';
import { redactStoreUrl, scrubStoreUrl } from './url-redaction.js';

/** SQLSTATEs of a server that cannot take connections right now (starting, stopping, full, in recovery). */
const UNAVAILABLE_STATES = new Set(['57P03', '57P01', '57P02', '53300', '08006', '08001', '08004']);
/** SQLSTATEs of credentials or privileges refused. */
const AUTH_STATES = new Set(['28P01', '28000', '42501']);
/** Socket-level failures to reach the server (node errno codes and postgres.js's own). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOENT',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);

/**
 * The startup error for `err` thrown while opening the PostgreSQL store at `url`, or null when
 * it is not a database failure (the caller maps it the general way, then `scrubbedStartup`).
 * The message names the store by its redacted URL, and the driver's text is scrubbed of it.
 */
export function postgresStartupFailure(err: unknown, url: string): StartupError | null {
  const shown = redactStoreUrl(url);
  const e = err as { code?: unknown; message?: unknown; name?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  const detail = scrubStoreUrl(typeof e.message === 'string' ? e.message.replace(/\s+/g, ' ').trim() : String(err), url);
  const cannot = `cannot open the store ${shown}`;
  if (AUTH_STATES.has(code) || code === 'SASL_SIGNATURE_MISMATCH' || code === 'AUTH_TYPE_NOT_IMPLEMENTED')
    return new StartupError(
      `${cannot}: the database refused the credentials or privileges of this user (${detail}); check the user in the URL, the password (--store-password-file, a passfile or PGPASSWORD), pg_hba.conf and the role's grants`,
      EXIT_CODES.permissionDenied,
    );
  if (code === '3D000')
    return new StartupError(
      `${cannot}: ${detail}; create it (createdb, or CREATE DATABASE) or name another one in the URL`,
      EXIT_CODES.config,
    );
  if (UNREACHABLE_CODES.has(code) || UNAVAILABLE_STATES.has(code))
    return new StartupError(
      `${cannot}: the database cannot be reached (${code}: ${detail}); check that PostgreSQL runs and that the host, port or socket directory in the URL are right (restarting the daemon retries)`,
      EXIT_CODES.databaseUnavailable,
    );
  return null;
}

/** A startup error whose message (built from a driver's or the system's text) is scrubbed of the store URL's password. */
export function scrubbedStartup(failure: StartupError, url: string): StartupError {
  const message = scrubStoreUrl(failure.message, url);
  return message === failure.message ? failure : new StartupError(message, failure.exitCode);
}
