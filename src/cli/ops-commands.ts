import type { Argv } from 'yargs';
import { settleKept } from './cli-writer.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';
import { connectAdmin, connectAny, withClient, type GlobalArgs } from './context.js';
import { jsonOr, printObject, printTable } from './output.js';

type A<T = object> = GlobalArgs & T;

/** `yello keys …`. */
export function keyCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command('keys', 'Signing keys', (yy: Argv<GlobalArgs>) =>
    yy
      .command(
        'list',
        'The JWKS (use --json for a file `verify` can read)',
        (z: Argv<GlobalArgs>) => z,
        async (args: A) => {
          await withClient(connectAny(args), async (c) => {
            const r = await c.call('keys.list', {});
            jsonOr(args, r, () => {
              printTable(
                args.io,
                r.keys.map((k) => ({ kid: k.kid, status: k.status, created: k.createdAt })),
              );
            });
          });
        },
      )
      .command(
        'rotate',
        'Generate a new signing key (admin)',
        (z: Argv<GlobalArgs>) => z,
        async (args: A) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await c.call('keys.rotate', {});
            jsonOr(args, r, () => args.io.stdout.write(`active kid ${r.kid}\n`));
          });
        },
      )
      .demandCommand(1, 'name a keys subcommand'),
  );
}

/** `yello ops …`. */
export function opsCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command('ops', 'Operations (append outcomes)', (yy: Argv<GlobalArgs>) =>
    yy
      .command(
        'show <streamId> <operationId>',
        'Whether an operation committed, and where',
        (z: Argv<GlobalArgs>) =>
          z
            .positional('streamId', { type: 'string', demandOption: true })
            .positional('operationId', { type: 'string', demandOption: true }),
        async (args: A<{ streamId: string; operationId: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const r = await c.call('operations.get', { streamId: args.streamId, operationId: args.operationId });
            settleKept(args, c, args.streamId, args.operationId, r.state);
            jsonOr(args, r, () => {
              printObject(args.io, r as unknown as Record<string, unknown>);
            });
          });
        },
      )
      .command(
        'list <streamId>',
        'Committed operations of a stream',
        (z: Argv<GlobalArgs>) =>
          z
            .positional('streamId', { type: 'string', demandOption: true })
            .option('limit', {
              type: 'number',
              describe: 'one page of at most this many (1-500); without --limit or --cursor every page is printed',
            })
            .option('cursor', { type: 'string', describe: 'continue from the nextCursor a previous page printed' }),
        async (args: A<{ streamId: string; limit?: number; cursor?: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const onePage = args.limit !== undefined || args.cursor !== undefined;
            const r = onePage
              ? await c.call('operations.list', {
                  streamId: args.streamId,
                  limit: args.limit ?? 100,
                  ...(args.cursor ? { cursor: args.cursor } : {}),
                })
              : {
                  operations: await allPages(
                    (cur) => c.call('operations.list', { streamId: args.streamId, limit: LIST_PAGE, ...cur }),
                    (p) => p.operations,
                  ),
                  nextCursor: null,
                };
            jsonOr(args, r, () => {
              printTable(
                args.io,
                r.operations.map((o) => ({
                  operation: o.operationId,
                  state: o.state,
                  generation: o.generation,
                  first: o.firstPosition,
                  next: o.nextPosition,
                  committed: o.committedAt,
                })),
              );
              if (r.nextCursor) args.io.stdout.write(`more: --cursor ${r.nextCursor}\n`);
            });
          });
        },
      )
      .demandCommand(1, 'name an ops subcommand'),
  );
}
