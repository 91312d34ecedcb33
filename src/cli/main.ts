import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { daemonCommand } from './daemon-command.js';

/** The `yello` program. */
export async function main(argv: string[]): Promise<void> {
  let cli = yargs(argv).scriptName('yello').strict().demandCommand(1, 'name a command; see yello --help').recommendCommands().completion('completion', 'print a shell completion script');
  cli = daemonCommand(cli);
  await cli.help().alias('h', 'help').version().parseAsync();
}

await main(hideBin(process.argv));
