// How a CLI process ends when something outside asks it to: SIGINT, SIGTERM, or a reader that
// went away (`yello status | head -3`). Long-running commands register cleanups (stop a
// coordinator so its claim is released, print the cursor) that run before the exit.

const cleanups = new Set<() => Promise<void> | void>();
let exiting = false;

/** Run `fn` before the process exits on a signal or a closed stdout; returns an unregister function. */
export function onShutdown(fn: () => Promise<void> | void): () => void {
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

/** Run the cleanups (bounded in time), then exit with `code`. Later calls are ignored. */
export function shutdown(code: number, timeoutMs = 5_000): void {
  if (exiting) return;
  exiting = true;
  const all = Promise.allSettled([...cleanups].map(async (fn) => fn()));
  const timer = new Promise((r) => setTimeout(r, timeoutMs).unref());
  void Promise.race([all, timer]).then(() => process.exit(code));
}

/** Whether a shutdown is under way (long-running loops stop reconnecting then). */
export function shuttingDown(): boolean {
  return exiting;
}

/**
 * A closed stdout (EPIPE: the reader exited) ends the command quietly with exit 0, as for any
 * Unix filter, instead of an unhandled 'error' event and a stack trace.
 */
export function installStdoutGuard(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') shutdown(0);
    else {
      process.stderr.write(`yello: cannot write to stdout: ${err.message}\n`);
      shutdown(1);
    }
  });
}

/** SIGINT and SIGTERM end a long-running command cleanly with exit 0. */
export function exitCleanlyOnSignals(): void {
  process.once('SIGINT', () => {
    shutdown(0);
  });
  process.once('SIGTERM', () => {
    shutdown(0);
  });
}
