import type { Argv, Options } from 'yargs';
import { DAEMON_OPTIONS, type DaemonArgs } from './daemon-options.js';
import { runDaemon } from './run-daemon.js';

/** `yello daemon`: run yellod in the foreground. */
export function daemonCommand(yargs: Argv): Argv {
  return yargs.command(
    'daemon',
    'Run the yello daemon (yellod) in the foreground',
    (y) =>
      y
        .options(DAEMON_OPTIONS as unknown as Record<string, Options>)
        // Global options of the client commands mean nothing to the daemon.
        .hide('token-file')
        .hide('admin-token-file')
        .hide('state-dir')
        .hide('json')
        .example('$0 daemon --socket ~/.yello-test/y.sock --data-dir ~/.yello-test/data', '')
        .epilogue('The example runs on a private socket and data dir. A socket directly in /tmp is refused (exit 78).'),
    (argv) => runDaemon(argv as unknown as DaemonArgs),
  );
}
