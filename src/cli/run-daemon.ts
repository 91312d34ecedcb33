import { resolveDaemonSocketPath, resolveDataDir } from '../shared/paths.js';
import type { DaemonArgs } from './daemon-options.js';
import type { Io } from './io.js';
import { errorMessage } from './output.js';
import { pathContext } from './path-context.js';
import { parseMetricsListen } from './metrics-listen.js';

/** A usage error of `yello daemon`: exit 2 with the message. */
class DaemonUsage extends Error {}

/**
 * Run yellod in the foreground until SIGTERM/SIGINT; resolves with the exit code once it has
 * stopped, or at once with a startup failure's own code (the caller ends the process with it).
 */
export async function runDaemon(argv: DaemonArgs, io: Io): Promise<number> {
  try {
    return await run(argv, io);
  } catch (err) {
    if (!(err instanceof DaemonUsage)) throw err;
    io.stderr.write(`yello: ${err.message}\n(see yello daemon --help)\n`);
    return 2;
  }
}

async function run(argv: DaemonArgs, io: Io): Promise<number> {
  const ctx = pathContext(io.env);
  const usage = (message: string): never => {
    throw new DaemonUsage(message);
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
  const signWorkers = argv['sign-workers'];
  if (signWorkers !== undefined && (!Number.isSafeInteger(signWorkers) || signWorkers < 0 || signWorkers > 64))
    usage('--sign-workers must be a whole number from 0 to 64');
  for (const name of ['quota-append-records', 'quota-append-bytes', 'quota-stored-bytes', 'quota-claims-per-minute'] as const) {
    if (!Number.isSafeInteger(argv[name]) || argv[name] < 0) usage(`--${name} must be a whole number (0: no quota)`);
  }
  const metricsListen =
    argv['metrics-listen'] === undefined ? null : parseMetricsListen(argv['metrics-listen'], argv['metrics-allow-remote'] === true);
  if (typeof metricsListen === 'string') usage(metricsListen);
  if (argv['metrics-allow-remote'] === true && metricsListen === null) usage('--metrics-allow-remote needs --metrics-listen HOST:PORT');
  // The flag wins over the environment; the value is checked for its form here (a typo is a
  // usage error) and parsed by the daemon, which never prints it unredacted.
  const store = argv.store ?? io.env.YELLO_STORE ?? null;
  const storeIsLevel = store === null || store === '' || /^leveldb:?$/i.test(store);
  if (!storeIsLevel && !/^postgres(ql)?:\/\//i.test(store))
    usage('--store (or $YELLO_STORE) must be leveldb: or a postgresql://USER@HOST:PORT/DATABASE URL');
  if (argv['store-password-file'] !== undefined && storeIsLevel)
    usage('--store-password-file is for a PostgreSQL store: give --store postgresql://… (or $YELLO_STORE) too');
  // Loaded here so other commands do not pay for LevelDB and pino at startup.
  const { startDaemon, StartupError, EXIT_CODES } = await import('../daemon/entry.js');
  // A stop asked for while starting (systemd, a quick Ctrl-C) is honoured once the store is
  // open, instead of killing the process halfway through opening it.
  // (An object, not a `let`: the flag is set from a signal handler, which narrowing cannot see.)
  const startup = { stopRequested: false };
  const early = () => {
    startup.stopRequested = true;
  };
  const offEarly = io.onSignals(early);
  let daemon;
  try {
    daemon = await startDaemon({
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
      signWorkers,
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
      metricsListen: typeof metricsListen === 'string' ? null : metricsListen,
    });
  } catch (err) {
    offEarly();
    if (err instanceof StartupError) {
      io.stderr.write(`yello: ${err.message}\n`);
      return err.exitCode;
    }
    // Not a known startup failure: still one line, never a stack trace (the log has details).
    io.stderr.write(`yello: the daemon failed to start: ${errorMessage(err)}\n`);
    return EXIT_CODES.internal;
  }
  offEarly();
  const running = daemon;
  return new Promise<number>((resolve) => {
    const shutdown = () => {
      running.stop().then(
        () => {
          resolve(0);
        },
        (err: unknown) => {
          io.stderr.write(`yello: shutdown failed: ${(err as Error).message}\n`);
          resolve(1);
        },
      );
    };
    io.onSignals(shutdown);
    if (startup.stopRequested) shutdown();
  });
}
