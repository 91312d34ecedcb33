import type { Argv } from 'yargs';
import { DAEMON_OPTIONS, type DaemonArgs, type DaemonOption } from './daemon-options.js';
import { runDaemon } from './run-daemon.js';

/** `yello daemon`: run yellod in the foreground. */
export function daemonCommand(yargs: Argv): Argv {
  return yargs.command(
    'daemon',
    'Run the yello daemon (yellod) in the foreground',
    (y) => {
      let withOptions = y;
      for (const [name, spec] of Object.entries(DAEMON_OPTIONS) as Array<[string, DaemonOption]>) {
        withOptions = withOptions.option(name, { ...spec, choices: spec.choices ? [...spec.choices] : undefined });
      }
      return withOptions.example('$0 daemon --socket /tmp/y.sock --data-dir ./data', 'run on a private socket and data dir');
    },
    (argv) => runDaemon(argv as unknown as DaemonArgs),
  );
}
