// Entry of `yello` (bin/yello, the systemd unit). The commands an agent runs at every turn
// (`hook`, and the plain forms of `send`, `inbox`, `status`) start without loading yargs, which
// would be most of their time (run.ts); so does `yello daemon` with plain options. Everything
// else goes to the full program.
import { processIo } from './process-io.js';

const args = process.argv.slice(2);
const daemonArgs = args[0] === 'daemon' ? (await import('./daemon-options.js')).parseDaemonArgsFast(args.slice(1)) : null;
if (daemonArgs) {
  const [{ runDaemon }, { Io }] = await Promise.all([import('./run-daemon.js'), import('./io.js')]);
  process.exit(await runDaemon(daemonArgs, new Io(processIo)));
} else {
  const { runCli } = await import('./run.js');
  process.exitCode = await runCli(args, processIo);
}
