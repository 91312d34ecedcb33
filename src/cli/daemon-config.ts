import { resolveDaemonSocketPath, resolveDataDir, type PathContext } from '../shared/paths.js';
import type { DaemonConfig } from '../daemon/entry.js';
import type { DaemonArgs } from './daemon-options.js';
import { parseMetricsListen } from './metrics-listen.js';

/** A `yello daemon` flag (or its environment variable) with a bad value: a usage error, exit 2. */
export class DaemonUsageError extends Error {}

/**
 * The daemon's configuration from its parsed flags and the environment (`ctx.env`): every
 * value checked for its form here, so a typo is a usage error before anything is opened. The
 * store URL itself is parsed by the daemon, which never prints it unredacted.
 */
export function daemonConfig(argv: DaemonArgs, ctx: PathContext): DaemonConfig {
  const usage = (message: string): never => {
    throw new DaemonUsageError(message);
  };
  const socketMode = Number.parseInt(argv['socket-mode'], 8);
  if (!/^[0-7]{1,4}$/.test(argv['socket-mode']) || socketMode > 0o777) usage('--socket-mode must be an octal mode such as 0660');
  for (const name of [
    'max-line-bytes',
    'max-connections',
    'max-unsent-bytes',
    'max-output-bytes',
    'hello-timeout-ms',
    'max-pending-hellos',
    'max-sessions-per-agent',
  ] as const) {
    if (!Number.isSafeInteger(argv[name]) || argv[name] < 1) usage(`--${name} must be a positive integer`);
  }
  for (const name of ['retention-max-records', 'retention-max-age-seconds'] as const) {
    if (!Number.isSafeInteger(argv[name]) || argv[name] < 0) usage(`--${name} must be a whole number (0: no limit)`);
  }
  if (!Number.isSafeInteger(argv['retention-interval-seconds']) || argv['retention-interval-seconds'] < 1)
    usage('--retention-interval-seconds must be a positive integer');
  for (const name of ['quota-append-records', 'quota-append-bytes', 'quota-stored-bytes', 'quota-claims-per-minute'] as const) {
    if (!Number.isSafeInteger(argv[name]) || argv[name] < 0) usage(`--${name} must be a whole number (0: no quota)`);
  }
  for (const name of ['pg-answer-deadline-ms', 'metrics-idle-ms'] as const) {
    const ms = argv[name];
    if (ms !== undefined && (!Number.isSafeInteger(ms) || ms < 1)) usage(`--${name} must be a positive integer`);
  }
  const signWorkers = argv['sign-workers'];
  if (signWorkers !== undefined && (!Number.isSafeInteger(signWorkers) || signWorkers < 0 || signWorkers > 64))
    usage('--sign-workers must be a whole number from 0 to 64');
  const metricsListen =
    argv['metrics-listen'] === undefined ? null : parseMetricsListen(argv['metrics-listen'], argv['metrics-allow-remote'] === true);
  if (typeof metricsListen === 'string') usage(metricsListen);
  if (argv['metrics-allow-remote'] === true && metricsListen === null) usage('--metrics-allow-remote needs --metrics-listen HOST:PORT');
  // The flag wins over the environment.
  const store = argv.store ?? ctx.env.YELLO_STORE ?? null;
  const storeIsLevel = store === null || store === '' || /^leveldb:?$/i.test(store);
  if (!storeIsLevel && !/^postgres(ql)?:\/\//i.test(store))
    usage('--store (or $YELLO_STORE) must be leveldb: or a postgresql://USER@HOST:PORT/DATABASE URL');
  if (argv['store-password-file'] !== undefined && storeIsLevel)
    usage('--store-password-file is for a PostgreSQL store: give --store postgresql://… (or $YELLO_STORE) too');
  return {
    socketPath: resolveDaemonSocketPath(argv.socket, ctx),
    dataDir: resolveDataDir(argv['data-dir'], ctx),
    logLevel: argv['log-level'],
    socketMode,
    maxLineBytes: argv['max-line-bytes'],
    maxConnections: argv['max-connections'],
    maxUnsentBytes: argv['max-unsent-bytes'],
    maxOutputBytes: argv['max-output-bytes'],
    helloTimeoutMs: argv['hello-timeout-ms'],
    maxPendingHellos: argv['max-pending-hellos'],
    maxSessionsPerAgent: argv['max-sessions-per-agent'],
    quotas: {
      appendRecordsPerSecond: argv['quota-append-records'],
      appendBytesPerSecond: argv['quota-append-bytes'],
      storedBytes: argv['quota-stored-bytes'],
      claimsPerMinute: argv['quota-claims-per-minute'],
    },
    policy: argv.policy as 'grants' | 'open',
    retention: {
      maxRecords: argv['retention-max-records'] || null,
      maxAgeMs: argv['retention-max-age-seconds'] ? argv['retention-max-age-seconds'] * 1000 : null,
      force: argv['retention-unacknowledged'] === 'trim',
      intervalMs: argv['retention-interval-seconds'] * 1000,
    },
    store: storeIsLevel ? null : store,
    storePasswordFile: argv['store-password-file'] ?? null,
    faultFailSyncFile: argv['fault-fail-sync-file'] ?? null,
    pgAnswerDeadlineMs: argv['pg-answer-deadline-ms'],
    metricsIdleMs: argv['metrics-idle-ms'],
    metricsListen: typeof metricsListen === 'string' ? null : metricsListen,
    ...(signWorkers !== undefined ? { signWorkers } : {}),
  };
}
