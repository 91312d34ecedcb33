// The one place that hands the real process to the CLI: its streams, environment and signals,
// and process.exit for a run that fails or is stopped.
import type { CliIo } from './io.js';

export const processIo: CliIo = {
  stdout: process.stdout,
  stderr: process.stderr,
  // A getter: the process's stdin is set up only for a command that reads it.
  get stdin() {
    return process.stdin;
  },
  env: process.env,
  columns: process.stdout.columns,
  // The handler runs on the first signal, and later ones are absorbed while it is registered: Ctrl-C
  // on `npm start` sends SIGINT from the terminal and npm forwards another, which, left to the
  // default action, killed the daemon halfway through its stop (socket file left behind).
  // Unregistering drops a signal Node has received but not yet handed to the listener, so a
  // caller keeps one registration for as long as it wants signals (run-daemon.ts).
  onSignals: (handler) => {
    let fired = false;
    const once = () => {
      if (fired) return;
      fired = true;
      handler();
    };
    process.on('SIGINT', once);
    process.on('SIGTERM', once);
    return () => {
      process.off('SIGINT', once);
      process.off('SIGTERM', once);
    };
  },
  exit: (code) => process.exit(code),
};
