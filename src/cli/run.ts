// One run of the CLI, in-process (tests) or as the process (main.ts): the commands an agent runs
// at every turn start here without the yargs program. `yello hook` (hook-args.ts) and the plain
// forms of `send`, `ack`, `inbox`, `status` and `chats read` (fast-args.ts) go straight to their
// handlers, which are the program's own; everything else, help and usage errors included, goes
// to the program.
import { parseFastCommand, type FastCommand } from './fast-args.js';
import { isHookCommand } from './hook-args.js';
import { Io, type CliIo } from './io.js';
import { reportError } from './output.js';

/**
 * The `yello` CLI: `argv` is without node and script; everything the run reads and writes goes
 * through `cliIo`, whose `exit` (the entry's process.exit) ends a run that failed or was stopped
 * at once. Resolves with the exit code.
 */
export async function runCli(argv: string[], cliIo: CliIo): Promise<number> {
  const io = new Io(cliIo);
  if (isHookCommand(argv)) {
    const { runHook } = await import('./hook-command.js');
    return runHook(argv, io);
  }
  const fast = parseFastCommand(argv);
  try {
    if (fast) {
      io.guardStdout();
      return await settleRun(
        io,
        cliIo,
        () => runFast(fast, io),
        (err) => reportError(io, err),
      );
    }
    const { runProgram } = await import('./program.js');
    return await runProgram(argv, io, cliIo);
  } finally {
    io.close();
  }
}

/** The program's own handler of a fast command, with the arguments it would have parsed. */
async function runFast(fast: FastCommand, io: Io): Promise<void> {
  switch (fast.command) {
    case 'status':
      return (await import('./status-command.js')).runStatus({ ...fast.args, io });
    case 'inbox':
      return (await import('./inbox-command.js')).runInbox({ ...fast.args, io });
    case 'send':
      return (await import('./send-commands.js')).runSend({ ...fast.args, io });
    case 'ack':
      return (await import('./send-commands.js')).runAck({ ...fast.args, io });
    case 'chats read':
      return (await import('./follow-command.js')).runRead({ ...fast.args, io });
  }
}

/**
 * How a run ends once its command settles, for the program and a fast command alike: a
 * shutdown under way (signal, closed stdout) ends it with its own code, even while the command
 * still waits; else the command's exit code. `fail` maps what the command threw to an exit code;
 * `after` runs once the command returned (the program prints its help text there). A failure, or
 * a command that asked to end the process, ends it through `cliIo.exit`.
 */
export async function settleRun(
  io: Io,
  cliIo: CliIo,
  command: () => Promise<unknown>,
  fail: (err: unknown) => number,
  after?: () => void,
): Promise<number> {
  let code: number;
  try {
    const stopped = await Promise.race([command().then(() => null), io.stopped]);
    if (stopped !== null) return stopped;
    after?.();
    if (io.shuttingDown) return await io.stopped;
    if (!io.endsProcess) return io.exitCode;
    code = io.exitCode;
  } catch (err) {
    code = fail(err);
  }
  cliIo.exit?.(code);
  return code;
}
