import type { DaemonArgs } from './daemon-options.js';
import { DaemonUsageError, daemonConfig } from './daemon-config.js';
import type { Io } from './io.js';
import { errorMessage } from './output.js';
import { pathContext } from './path-context.js';

/**
 * Run yellod in the foreground until SIGTERM/SIGINT; resolves with the exit code once it has
 * stopped, or at once with a startup failure's own code (the caller ends the process with it).
 * What is the process's, and not the daemon's, lives here: the signal handlers (through `io`)
 * and, when `io` is the process itself, the net for errors nobody handled.
 */
export async function runDaemon(argv: DaemonArgs, io: Io): Promise<number> {
  let config;
  try {
    config = daemonConfig(argv, pathContext(io.env));
  } catch (err) {
    if (!(err instanceof DaemonUsageError)) throw err;
    io.stderr.write(`yello: ${err.message}\n(see yello daemon --help)\n`);
    return 2;
  }
  // Loaded here so other commands do not pay for LevelDB and pino at startup.
  const { startDaemon, StartupError, EXIT_CODES, createLogger, installProcessGuards } = await import('../daemon/entry.js');
  const log = createLogger(config.logLevel);
  const removeGuards = io.ownsProcess ? installProcessGuards(log) : () => undefined;
  // A stop asked for while starting (systemd, a quick Ctrl-C) is honoured once the store is
  // open, instead of killing the process halfway through opening it. One registration serves
  // the start and the run: handing over from one listener to another dropped a Ctrl-C that Node
  // had received but not yet delivered as the start completed (the daemon then ran on).
  // (An object, not a `let`: the flag is set from a signal handler, which narrowing cannot see.)
  const startup = { stopRequested: false };
  let onStop = () => {
    startup.stopRequested = true;
  };
  const offSignals = io.onSignals(() => {
    onStop();
  });
  let daemon;
  try {
    daemon = await startDaemon(config, { log });
  } catch (err) {
    offSignals();
    removeGuards();
    if (err instanceof StartupError) {
      io.stderr.write(`yello: ${err.message}\n`);
      return err.exitCode;
    }
    // Not a known startup failure: still one line, never a stack trace (the log has details).
    io.stderr.write(`yello: the daemon failed to start: ${errorMessage(err)}\n`);
    return EXIT_CODES.internal;
  }
  const running = daemon;
  return new Promise<number>((resolve) => {
    const shutdown = () => {
      running.stop().then(
        () => {
          removeGuards();
          resolve(0);
        },
        (err: unknown) => {
          io.stderr.write(`yello: shutdown failed: ${(err as Error).message}\n`);
          resolve(1);
        },
      );
    };
    onStop = shutdown;
    if (startup.stopRequested) shutdown();
  });
}
