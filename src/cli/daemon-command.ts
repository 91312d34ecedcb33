import type { Argv, Options } from 'yargs';
import type { GlobalArgs } from './context.js';
import { DAEMON_OPTIONS, type DaemonArgs } from './daemon-options.js';
import { runDaemon } from './run-daemon.js';

/** `yello daemon`: run yellod in the foreground. */
export function daemonCommand(yargs: Argv<GlobalArgs>): Argv<GlobalArgs> {
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
        .example(
          '$0 daemon --store postgresql://yello@db1:5432,db2:5432/yello --store-password-file /etc/yello/db.password',
          'one database shared by the daemons of several hosts',
        )
        .epilogue(
          'The first example runs on a private socket and data dir. A socket directly in /tmp is refused (exit 78). ' +
            'On PostgreSQL each daemon keeps its own data dir (signing keys, admin.token, secret.key, its lock); ' +
            'exit 69: the database cannot be reached (restarting retries), 77: it refused the credentials, 78: a bad URL or a schema from a newer yello.',
        ),
    async (argv) => {
      const args = argv as unknown as DaemonArgs & GlobalArgs;
      args.io.exit(await runDaemon(args, args.io));
    },
  );
}
