// Entry of `yello` (bin/yello, the systemd unit). The commands an agent runs at every turn
// (`hook`, and the plain forms of `send`, `inbox`, `status`) start without loading yargs, which
// would be most of their time (run.ts); so does `yello daemon` with plain options. Everything
// else goes to the full program.
// The one place that hands the real process to the CLI: its streams, environment and signals,
// and process.exit for a run that fails or is stopped.
import type { CliIo } from './io.js';

const processIo: CliIo = {
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

const args = process.argv.slice(2);
const daemonArgs = args[0] === 'daemon' ? (await import('./daemon-options.js')).parseDaemonArgsFast(args.slice(1)) : null;
if (daemonArgs) {
  const [{ runDaemon }, { Io }] = await Promise.all([import('./run-daemon.js'), import('./io.js')]);
  process.exit(await runDaemon(daemonArgs, new Io(processIo)));
} else {
  const { runCli } = await import('./run.js');
  process.exitCode = await runCli(args, processIo);
}
