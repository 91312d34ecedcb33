import { createRequire } from 'node:module';
import yargs, { type Argv } from 'yargs';
import { adminCommands } from './admin-commands.js';
import { attachCommand } from './attach-command.js';
import { backupCommands } from './backup-commands.js';
import { chatCommands } from './chat-commands.js';
import { consoleCommand } from './console-command.js';
import type { GlobalArgs } from './context.js';
import { daemonCommand } from './daemon-command.js';
import { demoCommand } from './demo-command.js';
import { doctorCommand } from './doctor-command.js';
import { hookCommand } from './hook-args.js';
import { inboxCommand } from './inbox-command.js';
import { mcpCommand } from './mcp-command.js';
import { metricsCommand } from './metrics-command.js';
import { EXIT, reportError } from './output.js';
import { setupCommand } from './setup-command.js';
import { installStdoutGuard } from './shutdown.js';
import { verifyCommand } from './verify-command.js';

/** package.json's version; yargs' own lookup finds none once yello is installed under node_modules. */
const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

const COMPLETION_HELP = 'print a shell completion script (bash/zsh): yello completion >> ~/.bashrc';

/** The `yello` program (yargs): admin tool and agent front end. `argv` is without node and script. */
export async function runCli(argv: string[]): Promise<void> {
  installStdoutGuard();
  // yargs' completion command prints the script even when asked for help.
  if (argv[0] === 'completion' && argv.some((a) => a === '--help' || a === '-h')) {
    process.stdout.write(`yello completion\n\n${COMPLETION_HELP}\n`);
    return;
  }
  let cli = yargs(argv)
    .scriptName('yello')
    .usage(
      '$0 <command> [options]\n\nDurable, signed two-party chats for agents. Agent commands take --token-file or $YELLO_TOKEN; admin commands read <data-dir>/admin.token.',
    )
    .option('socket', {
      type: 'string',
      global: true,
      describe: 'daemon socket (default: $YELLO_SOCKET, $XDG_RUNTIME_DIR/yello/yello.sock, /tmp/yello-$UID/yello.sock)',
    })
    .option('data-dir', {
      type: 'string',
      global: true,
      describe: 'data dir holding admin.token (default: $YELLO_DATA_DIR, …, ~/.local/state/yello)',
    })
    .option('token-file', { type: 'string', global: true, describe: 'file with an agent token (or set $YELLO_TOKEN)' })
    .option('admin-token-file', { type: 'string', global: true, describe: 'file with the admin token' })
    .option('state-dir', {
      type: 'string',
      global: true,
      describe: "the CLI's own state: the claims send/ack keep (default: $XDG_STATE_HOME/yello-cli, ~/.local/state/yello-cli)",
    })
    .option('json', {
      type: 'boolean',
      global: true,
      default: false,
      describe: 'machine output: one JSON document (JSON lines for follow)',
    })
    .strict()
    .demandCommand(1, 'name a command')
    .recommendCommands()
    .completion('completion', COMPLETION_HELP)
    .epilogue('Exit codes: 0 ok, 1 error, 2 usage, 3 continuity break needing intervention, 4 fenced.')
    // yargs passes a null message when a handler threw, and no error for a usage failure
    // (its typings claim both are always there).
    .fail((msg: string | null, err: Error | undefined) => {
      if (err) throw err;
      const text = msg?.startsWith('Did you mean') ? `unknown command. ${msg}` : msg;
      process.stderr.write(`yello: ${text}\n(see yello --help)\n`);
      process.exit(EXIT.usage);
    }) as unknown as Argv<GlobalArgs>;
  cli = daemonCommand(cli);
  cli = adminCommands(cli);
  cli = chatCommands(cli);
  cli = inboxCommand(cli);
  cli = verifyCommand(cli);
  cli = demoCommand(cli);
  cli = doctorCommand(cli);
  cli = backupCommands(cli);
  cli = mcpCommand(cli);
  cli = metricsCommand(cli);
  cli = consoleCommand(cli);
  cli = attachCommand(cli);
  cli = hookCommand(cli);
  cli = setupCommand(cli);
  try {
    await cli
      .help()
      .alias('h', 'help')
      .version(VERSION)
      .wrap(Math.min(110, process.stdout.columns || 100))
      .parseAsync();
  } catch (err) {
    process.exit(reportError(err));
  }
}
