import { homedir } from 'node:os';
import type { Argv } from 'yargs';
import { resolveDataDir, resolveSocketPath, DEFAULT_MAX_LINE_BYTES, type PathContext } from '../shared/paths.js';

/** The process facts path resolution needs. */
export function pathContext(): PathContext {
  return { env: process.env, uid: process.getuid?.() ?? 0, home: homedir(), pid: process.pid };
}

/** `yello daemon`: run yellod in the foreground. */
export function daemonCommand(yargs: Argv): Argv {
  return yargs.command(
    'daemon',
    'Run the yello daemon (yellod) in the foreground',
    (y) =>
      y
        .option('socket', { type: 'string', describe: 'Unix socket path (default: $YELLO_SOCKET, systemd socket, $XDG_RUNTIME_DIR/yello/yello.sock, /tmp/yello-$UID/yello.sock)' })
        .option('data-dir', { type: 'string', describe: 'data directory (default: $YELLO_DATA_DIR, $STATE_DIRECTORY, $XDG_STATE_HOME/yello, ~/.local/state/yello)' })
        .option('log-level', { type: 'string', default: 'info', choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] })
        .option('socket-mode', { type: 'string', default: '0660', describe: 'octal mode of the socket file' })
        .option('max-line-bytes', { type: 'number', default: DEFAULT_MAX_LINE_BYTES, describe: 'longest accepted request line' })
        .option('max-connections', { type: 'number', default: 2048, describe: 'concurrent connections before new ones are refused with RATE_LIMITED' })
        .option('policy', { type: 'string', choices: ['grants', 'open'], default: 'grants', describe: 'grants: chats and sends need a grant; open: every agent may chat with every other' })
        .option('fault-fail-sync-file', { type: 'string', hidden: true, describe: 'tests only: once this file exists, synced writes fail' })
        .example('$0 daemon --socket /tmp/y.sock --data-dir ./data', 'run on a private socket and data dir'),
    async (argv) => {
      const ctx = pathContext();
      const socketMode = Number.parseInt(String(argv['socket-mode']), 8);
      if (!Number.isInteger(socketMode) || socketMode < 0 || socketMode > 0o777) {
        process.stderr.write(`yello: --socket-mode must be an octal mode such as 0660\n`);
        process.exit(2);
      }
      // Loaded here so other commands do not pay for LevelDB and pino at startup.
      const { startDaemon } = await import('../daemon/daemon.js');
      const { StartupError } = await import('../daemon/socket-server.js');
      try {
        const daemon = await startDaemon({
          socketPath: resolveSocketPath(argv.socket, ctx, true),
          dataDir: resolveDataDir(argv['data-dir'], ctx),
          logLevel: argv['log-level'],
          socketMode,
          maxLineBytes: argv['max-line-bytes'],
          maxConnections: argv['max-connections'],
          policy: argv.policy as 'grants' | 'open',
          faultFailSyncFile: argv['fault-fail-sync-file'] ?? null,
        });
        const shutdown = () => {
          daemon.stop().then(
            () => process.exit(0),
            (err: unknown) => {
              process.stderr.write(`yello: shutdown failed: ${(err as Error).message}\n`);
              process.exit(1);
            },
          );
        };
        process.once('SIGTERM', shutdown);
        process.once('SIGINT', shutdown);
      } catch (err) {
        if (err instanceof StartupError) {
          process.stderr.write(`yello daemon: ${err.message}\n`);
          process.exit(err.exitCode);
        }
        throw err;
      }
    },
  );
}
