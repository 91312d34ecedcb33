// Entry of `yello` (bin/yello, the systemd unit). Two commands start without loading yargs,
// which is most of a CLI start: `yello daemon` with plain options, and `yello hook`, which an
// agent runs at every turn. Everything else goes to the full program.
import { parseDaemonArgsFast } from './daemon-options.js';
import { isHookCommand } from './hook-args.js';

const args = process.argv.slice(2);
const daemonArgs = args[0] === 'daemon' ? parseDaemonArgsFast(args.slice(1)) : null;
if (daemonArgs) {
  const { runDaemon } = await import('./run-daemon.js');
  await runDaemon(daemonArgs);
} else if (isHookCommand(args)) {
  const { runHook } = await import('./hook-command.js');
  process.exitCode = await runHook(args);
} else {
  const { runCli } = await import('./program.js');
  await runCli(args);
}
