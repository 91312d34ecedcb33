import { createRequire } from 'node:module';
import yargs, { type Argv } from 'yargs';
import { adminCommands } from './admin-commands.js';
import { attachCommand } from './attach-command.js';
import { backupCommands } from './backup-commands.js';
import { chatCommands } from './chat-commands.js';
import { consoleCommand } from './console-command.js';
import type { GlobalArgs } from './context.js';
import type { CliIo, Io } from './io.js';
import { daemonCommand } from './daemon-command.js';
import { demoCommand } from './demo-command.js';
import { doctorCommand } from './doctor-command.js';
import { hookCommand } from './hook-args.js';
import { inboxCommand } from './inbox-command.js';
import { mcpCommand } from './mcp-command.js';
import { metricsCommand } from './metrics-command.js';
import { EXIT, reportError } from './output.js';
import { settleRun } from './run.js';
import { setupCommand } from './setup-command.js';
import { verifyCommand } from './verify-command.js';

export { runCli } from './run.js';

/** package.json's version; yargs' own lookup finds none once yello is installed under node_modules. */
const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

const COMPLETION_HELP = 'print a shell completion script (bash/zsh): yello completion >> ~/.bashrc';

/** A usage failure yargs reported (unknown command or option, missing argument). */
class UsageFailure extends Error {}

/** The part of yargs 18's internals that skipHelpCache replaces. */
interface YargsUsageInternals {
  getInternalMethods(): { getUsageInstance(): { cacheHelpMessage: () => void } };
}

/**
 * yargs 18 renders a command's whole help text as soon as its handler has started
 * (`cacheHelpMessage`, for a showHelp() after the handler, which this program never makes):
 * 60–80 ms of cliui and string-width on the event loop of every command it runs, `yello mcp`
 * and `chats follow` included (a CPU profile, issue 54). `--help` renders its
 * text as before; test/cli/program-help.test.ts checks both.
 */
function skipHelpCache(cli: Argv<GlobalArgs>): void {
  (cli as unknown as YargsUsageInternals).getInternalMethods().getUsageInstance().cacheHelpMessage = () => undefined;
}

/**
 * The `yello` program (yargs): admin tool and agent front end, for every command that
 * runCli (run.ts) does not start on a path of its own. `io` is the run's; `cliIo.exit` ends a
 * run that failed or was stopped at once. Resolves with the exit code.
 */
export async function runProgram(argv: string[], io: Io, cliIo: CliIo): Promise<number> {
  io.guardStdout();
  // yargs' completion command prints the script even when asked for help.
  if (argv[0] === 'completion' && argv.some((a) => a === '--help' || a === '-h')) {
    io.stdout.write(`yello completion\n\n${COMPLETION_HELP}\n`);
    return EXIT.ok;
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
    .exitProcess(false)
    .fail((msg: string | null, err: Error | undefined) => {
      if (err) throw err;
      throw new UsageFailure(msg?.startsWith('Did you mean') ? `unknown command. ${msg}` : (msg ?? ''));
    }) as unknown as Argv<GlobalArgs>;
  skipHelpCache(cli);
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
  // Help, version and completion text comes back here instead of going to console.log.
  let output = '';
  return settleRun(
    io,
    cliIo,
    () =>
      cli
        .help()
        .alias('h', 'help')
        .version(VERSION)
        .wrap(Math.min(110, io.columns || 100))
        .parseAsync(argv, { io } satisfies Pick<GlobalArgs, 'io'>, (_err: unknown, _argv: unknown, text: string) => {
          // Completing a subcommand parses again inside; the outer parse then reports no text.
          output ||= text;
        }),
    (err) => {
      if (!(err instanceof UsageFailure)) return reportError(io, err);
      io.stderr.write(`yello: ${err.message}\n(see yello --help)\n`);
      return EXIT.usage;
    },
    () => {
      if (output) io.stdout.write(output + '\n');
    },
  );
}
