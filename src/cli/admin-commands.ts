import type { Argv } from 'yargs';
import { agentCommands } from './agent-commands.js';
import type { GlobalArgs } from './context.js';
import { grantCommands } from './grant-commands.js';
import { keyCommands, opsCommands } from './ops-commands.js';
import { statusCommand } from './status-command.js';
import { streamCommands } from './stream-commands.js';

/** status, agents, grants, keys, streams, ops. */
export function adminCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return opsCommands(streamCommands(keyCommands(grantCommands(agentCommands(statusCommand(y))))));
}
