import type { DaemonArgs } from './daemon-options.js';
import { DaemonUsageError, daemonConfig } from './daemon-config.js';
import { errorMessage } from './output.js';
import { pathContext } from './path-context.js';

/**
 * Run yellod in the foreground until SIGTERM/SIGINT; startup failures exit with their own code.
 * What is the process's, and not the daemon's, lives here: the exit codes, the signal handlers,
 * and the net for errors nobody handled (installProcessGuards).
 */
export async function runDaemon(argv: DaemonArgs): Promise<void> {
  let config;
  try {
    config = daemonConfig(argv, pathContext());
  } catch (err) {
    if (!(err instanceof DaemonUsageError)) throw err;
    process.stderr.write(`yello: ${err.message}\n(see yello daemon --help)\n`);
    process.exit(2);
  }
  // Loaded here so other commands do not pay for LevelDB and pino at startup.
  const { startDaemon, StartupError, EXIT_CODES, createLogger, installProcessGuards } = await import('../daemon/entry.js');
  const log = createLogger(config.logLevel);
  installProcessGuards(log);
  // A stop asked for while starting (systemd, a quick Ctrl-C) is honoured once the store is
  // open, instead of killing the process halfway through opening it.
  // (An object, not a `let`: the flag is set from a signal handler, which narrowing cannot see.)
  const startup = { stopRequested: false };
  const early = () => {
    startup.stopRequested = true;
  };
  process.once('SIGTERM', early);
  process.once('SIGINT', early);
  try {
    const daemon = await startDaemon(config, { log });
    const shutdown = () => {
      daemon.stop().then(
        () => process.exit(0),
        (err: unknown) => {
          process.stderr.write(`yello: shutdown failed: ${(err as Error).message}\n`);
          process.exit(1);
        },
      );
    };
    process.off('SIGTERM', early);
    process.off('SIGINT', early);
    process.once('SIGTERM', shutdown);
    process.once('SIGINT', shutdown);
    if (startup.stopRequested) shutdown();
  } catch (err) {
    if (err instanceof StartupError) {
      process.stderr.write(`yello: ${err.message}\n`);
      process.exit(err.exitCode);
    }
    // Not a known startup failure: still one line, never a stack trace (the log has details).
    process.stderr.write(`yello: the daemon failed to start: ${errorMessage(err)}\n`);
    process.exit(EXIT_CODES.internal);
  }
}
