import type { Argv } from 'yargs';
import type { Agent } from '../client/index.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';
import { connectAdmin, connectAny, resolveAgentId, withClient, type GlobalArgs } from './context.js';
import { jsonOr, printObject, printTable } from './output.js';
import { SecretFileSink } from './secret-files.js';

type A<T = object> = GlobalArgs & T;
const agentRow = (a: Agent) => ({ id: a.id, username: a.username, name: a.name, pii: a.pii, disabled: a.disabled, created: a.createdAt });

/**
 * Run `create` (which makes a secret shown once) with `--token-out` reserved beforehand, so a
 * refused file costs nothing and a made secret always has a place to go.
 */
async function withTokenOut<T extends { token: string }>(file: string | undefined, force: boolean, create: () => Promise<T>): Promise<T> {
  const sink = file ? SecretFileSink.open(file, force) : null;
  let r: T;
  try {
    r = await create();
  } catch (err) {
    sink?.abort();
    throw err;
  }
  sink?.commit(r.token + '\n');
  return r;
}

/** `yello agents …` (admin). */
export function agentCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command('agents', 'Manage agents (admin)', (yy: Argv<GlobalArgs>) =>
    yy
      .command(
        'add <username>',
        'Create an agent; prints its token once',
        (z: Argv<GlobalArgs>) =>
          z
            .positional('username', { type: 'string', demandOption: true })
            .option('name', { type: 'string', describe: 'display name (default: the username)' })
            .option('image', { type: 'string', describe: 'image URL' })
            .option('token-out', {
              type: 'string',
              describe: 'write the token to this new file (mode 0600) instead of printing it; an existing file is refused',
            })
            .option('force', {
              type: 'boolean',
              default: false,
              describe: 'with --token-out: replace an existing file (by a new one, atomically)',
            })
            .example('$0 agents add alice --name Alice --token-out alice.token', ''),
        async (args: A<{ username: string; name?: string; image?: string; 'token-out'?: string; force: boolean }>) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await withTokenOut(args['token-out'], args.force, () =>
              c.call('agents.create', {
                username: args.username,
                name: args.name ?? args.username,
                ...(args.image ? { image: args.image } : {}),
              }),
            );
            const shown = args['token-out'] ? { agent: r.agent, tokenFile: args['token-out'] } : r;
            jsonOr(args, shown, () => {
              printObject(args.io, agentRow(r.agent));
              if (args['token-out']) args.io.stdout.write(`token written to ${args['token-out']} (0600)\n`);
              else args.io.stdout.write(`token     ${r.token}\n(shown once: store it now)\n`);
            });
          });
        },
      )
      .command(
        'list',
        'List agents',
        (z: Argv<GlobalArgs>) => z,
        async (args: A) => {
          await withClient(connectAny(args), async (c) => {
            const r = {
              agents: await allPages(
                (cursor) => c.call('agents.list', { limit: LIST_PAGE, ...cursor }),
                (p) => p.agents,
              ),
            };
            jsonOr(args, r, () => {
              printTable(args.io, r.agents.map(agentRow));
            });
          });
        },
      )
      .command(
        'show <agent>',
        'Show one agent (id or username)',
        (z: Argv<GlobalArgs>) => z.positional('agent', { type: 'string', demandOption: true }),
        async (args: A<{ agent: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const r = await c.call('agents.get', { agentId: await resolveAgentId(c, args.agent) });
            jsonOr(args, r, () => {
              printObject(args.io, agentRow(r.agent));
            });
          });
        },
      )
      .command(
        'rotate-token <agent>',
        'Issue a new token; the old one stops working at once',
        (z: Argv<GlobalArgs>) =>
          z
            .positional('agent', { type: 'string', demandOption: true })
            .option('token-out', { type: 'string', describe: 'write the token to this new file (0600); an existing file is refused' })
            .option('force', {
              type: 'boolean',
              default: false,
              describe: 'with --token-out: replace an existing file (by a new one, atomically)',
            }),
        async (args: A<{ agent: string; 'token-out'?: string; force: boolean }>) => {
          await withClient(connectAdmin(args), async (c) => {
            const agentId = await resolveAgentId(c, args.agent);
            const r = await withTokenOut(args['token-out'], args.force, () => c.call('agents.rotateToken', { agentId }));
            jsonOr(args, args['token-out'] ? { tokenFile: args['token-out'] } : r, () =>
              args.io.stdout.write(
                args['token-out'] ? `token written to ${args['token-out']} (0600)\n` : `token  ${r.token}\n(shown once)\n`,
              ),
            );
          });
        },
      )
      .command(
        'disable <agent>',
        'Disable an agent (its token stops working)',
        (z: Argv<GlobalArgs>) => z.positional('agent', { type: 'string', demandOption: true }),
        async (args: A<{ agent: string }>) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await c.call('agents.disable', { agentId: await resolveAgentId(c, args.agent) });
            jsonOr(args, r, () => {
              printObject(args.io, agentRow(r.agent));
            });
          });
        },
      )
      .command(
        'policy <agent> <pii>',
        'Set the outbound PII policy: off, redact or reject',
        (z: Argv<GlobalArgs>) =>
          z
            .positional('agent', { type: 'string', demandOption: true })
            .positional('pii', { type: 'string', choices: ['off', 'redact', 'reject'] as const, demandOption: true }),
        async (args: A<{ agent: string; pii: 'off' | 'redact' | 'reject' }>) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await c.call('agents.setPolicy', { agentId: await resolveAgentId(c, args.agent), pii: args.pii });
            jsonOr(args, r, () => {
              printObject(args.io, agentRow(r.agent));
            });
          });
        },
      )
      .demandCommand(1, 'name an agents subcommand'),
  );
}
