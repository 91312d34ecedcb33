// Entry of `yello` (bin/yello, the systemd unit). Two commands start without loading yargs,
// which is most of a CLI start: `yello daemon` with plain options, and `yello hook`, which an
// agent runs at every turn. Everything else goes to the full program.
// The one place that hands the real process to the CLI: its streams, environment and signals,
// and process.exit for a run that fails or is stopped.
import { parseDaemonArgsFast } from './daemon-options.js';
import { isHookCommand } from './hook-args.js';
import { Io, type CliIo } from './io.js';

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
const daemonArgs = args[0] === 'daemon' ? parseDaemonArgsFast(args.slice(1)) : null;
if (daemonArgs) {
  const { runDaemon } = await import('./run-daemon.js');
  process.exit(await runDaemon(daemonArgs, new Io(processIo)));
} else if (isHookCommand(args)) {
  const { runHook } = await import('./hook-command.js');
  process.exitCode = await runHook(args, new Io(processIo));
} else {
  const { runCli } = await import('./program.js');
  process.exitCode = await runCli(args, processIo);
}
