// Entry of `yello` (bin/yello, the systemd unit). `yello daemon` with plain options starts
// without loading yargs, which is most of a CLI start; everything else goes to the full program.
import { parseDaemonArgsFast } from './daemon-options.js';

const args = process.argv.slice(2);
const daemonArgs = args[0] === 'daemon' ? parseDaemonArgsFast(args.slice(1)) : null;
if (daemonArgs) {
  const { runDaemon } = await import('./run-daemon.js');
  await runDaemon(daemonArgs);
} else {
  const { runCli } = await import('./program.js');
  await runCli(args);
}
