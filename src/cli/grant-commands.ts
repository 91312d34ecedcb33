import type { Argv } from 'yargs';
import type { YelloClient } from '../client/index.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';
import { connectAdmin, connectAny, resolveAgentId, withClient, type GlobalArgs } from './context.js';
import { jsonOr, printJson, printObject, printTable } from './output.js';

type A<T = object> = GlobalArgs & T;

/**
 * The username of each of `ids` (an id that no longer resolves stays an id): one `agents.get`
 * per agent for a few, every page of `agents.list` when there are more agents than a page.
 */
async function usernames(c: YelloClient, ids: string[]): Promise<(id: string) => string> {
  const unique = [...new Set(ids)];
  const known = new Map<string, string>();
  if (unique.length > LIST_PAGE) {
    const agents = await allPages(
      (cursor) => c.call('agents.list', { limit: LIST_PAGE, ...cursor }),
      (p) => p.agents,
    );
    for (const a of agents) known.set(a.id, a.username);
  } else {
    const found = await Promise.all(unique.map((agentId) => c.call('agents.get', { agentId }).catch(() => null)));
    for (const r of found) if (r) known.set(r.agent.id, r.agent.username);
  }
  return (id) => known.get(id) ?? id;
}

/** `yello grants …`. */
export function grantCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command('grants', 'Manage grants (who may chat with whom)', (yy: Argv<GlobalArgs>) =>
    yy
      .command(
        'add <agent> <peer>',
        'Let <agent> open a chat with and send to <peer>',
        (z: Argv<GlobalArgs>) =>
          z.positional('agent', { type: 'string', demandOption: true }).positional('peer', { type: 'string', demandOption: true }),
        async (args: A<{ agent: string; peer: string }>) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await c.call('grants.add', {
              agentId: await resolveAgentId(c, args.agent),
              peerAgentId: await resolveAgentId(c, args.peer),
            });
            jsonOr(args, r, () => {
              printObject(args.io, r.grant as unknown as Record<string, unknown>);
            });
          });
        },
      )
      .command(
        ['rm <agent> <peer>', 'remove'],
        'Revoke a grant (applies to the next append)',
        (z: Argv<GlobalArgs>) =>
          z.positional('agent', { type: 'string', demandOption: true }).positional('peer', { type: 'string', demandOption: true }),
        async (args: A<{ agent: string; peer: string }>) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await c.call('grants.remove', {
              agentId: await resolveAgentId(c, args.agent),
              peerAgentId: await resolveAgentId(c, args.peer),
            });
            jsonOr(args, r, () => args.io.stdout.write(r.removed ? 'removed\n' : 'no such grant\n'));
          });
        },
      )
      .command(
        'list [agent]',
        'List grants (an agent sees its own)',
        (z: Argv<GlobalArgs>) => z.positional('agent', { type: 'string' }),
        async (args: A<{ agent?: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const filter = args.agent ? { agentId: await resolveAgentId(c, args.agent) } : {};
            const r = {
              grants: await allPages(
                (cursor) => c.call('grants.list', { ...filter, limit: LIST_PAGE, ...cursor }),
                (p) => p.grants,
              ),
            };
            if (args.json) {
              printJson(args.io, r);
              return;
            }
            // People read names; the ids stay in --json.
            const name = await usernames(
              c,
              r.grants.flatMap((g) => [g.agentId, g.peerAgentId]),
            );
            printTable(
              args.io,
              r.grants.map((g) => ({ agent: name(g.agentId), peer: name(g.peerAgentId), granted: g.grantedAt })),
            );
          });
        },
      )
      .demandCommand(1, 'name a grants subcommand'),
  );
}
