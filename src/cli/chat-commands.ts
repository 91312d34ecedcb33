import type { Argv } from 'yargs';
import type { StoredRecord } from '../client/index.js';
import { connectAny, getChat, resolveAgentId, withClient, type GlobalArgs } from './context.js';
import { exportCommand } from './export-command.js';
import { followCommands } from './follow-command.js';
import { formatRecord } from './format.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';
import { CliError, EXIT, jsonOr, printJson, printObject, printTable } from './output.js';
import { printWholeChat, readWholeChat } from './whole-history.js';
import { sendCommands } from './send-commands.js';

type A<T = object> = GlobalArgs & T;

export { formatRecord };

/** chats …, send, ack. */
export function chatCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return sendCommands(
    y.command('chats', 'Open, list, read and follow chats', (yy: Argv<GlobalArgs>) =>
      followCommands(yy)
        .command(
          'open <peer>',
          'Open (or find) the chat with <peer> (agent); admin: --with <agent>',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('peer', { type: 'string', demandOption: true })
              .option('with', { type: 'string', describe: 'admin: the other agent of the pair' }),
          async (args: A<{ peer: string; with?: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const r =
                c.session.role === 'admin'
                  ? await c.call('chats.open', {
                      agentAId: await resolveAgentId(c, args.peer),
                      agentBId: await resolveAgentId(c, args.with ?? ''),
                    })
                  : await c.call('chats.open', { peerAgentId: await resolveAgentId(c, args.peer) });
              // Only the id on stdout, so `CHAT=$(yello chats open bob)` holds just the id.
              jsonOr(args, r, () => {
                args.io.stdout.write(`${r.chat.id}\n`);
                args.io.stderr.write(
                  `${r.created ? 'created' : 'found'} chat ${r.chat.id} (${r.chat.agentA.username}, ${r.chat.agentB.username})\n`,
                );
              });
            });
          },
        )
        .command(
          'list',
          "The caller's chats (all for admin)",
          (z: Argv<GlobalArgs>) =>
            z
              .option('limit', {
                type: 'number',
                describe: 'one page of at most this many (1-500); without --limit or --cursor every page is printed',
              })
              .option('cursor', { type: 'string', describe: 'continue from the nextCursor a previous page printed' }),
          async (args: A<{ limit?: number; cursor?: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const onePage = args.limit !== undefined || args.cursor !== undefined;
              const r = onePage
                ? await c.call('chats.list', { limit: args.limit ?? 100, ...(args.cursor ? { cursor: args.cursor } : {}) })
                : {
                    chats: await allPages(
                      (cur) => c.call('chats.list', { limit: LIST_PAGE, ...cur }),
                      (p) => p.chats,
                    ),
                    nextCursor: null,
                  };
              jsonOr(args, r, () => {
                printTable(
                  args.io,
                  r.chats.map((ch) => ({ chat: ch.id, a: ch.agentA.username, b: ch.agentB.username, created: ch.createdAt })),
                );
                if (r.nextCursor) args.io.stdout.write(`more: --cursor ${r.nextCursor}\n`);
              });
            });
          },
        )
        .command(
          'show <chatId>',
          'A chat and its two streams',
          (z: Argv<GlobalArgs>) => z.positional('chatId', { type: 'string', demandOption: true }),
          async (args: A<{ chatId: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const r = await getChat(c, args.chatId);
              jsonOr(args, r, () => {
                printObject(args.io, {
                  chat: r.chat.id,
                  a: `${r.chat.agentA.username} (${r.chat.agentAId})`,
                  b: `${r.chat.agentB.username} (${r.chat.agentBId})`,
                  created: r.chat.createdAt,
                });
                printTable(
                  args.io,
                  r.streams.map((s) => ({
                    stream: s.streamId,
                    generation: s.generation,
                    first: s.firstPosition,
                    next: s.nextPosition,
                    acknowledged: s.acknowledged ? s.acknowledged.nextPosition : '-',
                    writer: s.writer.active ? `epoch ${s.writer.epoch}` : 'free',
                  })),
                );
              });
            });
          },
        )
        .command(
          'permissions <chatId>',
          'Who may read, send and claim, and their grants',
          (z: Argv<GlobalArgs>) => z.positional('chatId', { type: 'string', demandOption: true }),
          async (args: A<{ chatId: string }>) => {
            await withClient(connectAny(args), async (c) => {
              const r = await c.call('chats.permissions', { chatId: args.chatId });
              jsonOr(args, r, () => {
                args.io.stdout.write(`policy ${r.policy}\n`);
                printTable(
                  args.io,
                  r.participants.map((p) => ({
                    agent: p.agentId,
                    read: p.canRead,
                    send: p.canSend,
                    claim: p.canClaim,
                    granted: p.grant?.grantedAt ?? '-',
                  })),
                );
              });
            });
          },
        )
        .command(
          'history <chatId>',
          'The transcript (messages of both directions)',
          (z: Argv<GlobalArgs>) =>
            z
              .positional('chatId', { type: 'string', demandOption: true })
              .option('limit', { type: 'number', default: 50, describe: 'entries per page (1–500)' })
              .option('direction', {
                choices: ['backward', 'forward'] as const,
                describe: 'backward (default): the newest entries; forward: from the oldest',
              })
              .option('cursor', { type: 'string', describe: 'continue from the nextCursor a previous page printed' })
              .option('all', { type: 'boolean', default: false, describe: 'page through the whole snapshot' })
              .option('all-generations', {
                type: 'boolean',
                default: false,
                describe: 'the whole conversation: every generation of both streams, sealed ones (before a reset) included, marked',
              }),
          async (
            args: A<{
              chatId: string;
              limit: number;
              direction?: 'backward' | 'forward';
              cursor?: string;
              all: boolean;
              'all-generations': boolean;
            }>,
          ) => {
            if (args['all-generations'] && (args.cursor !== undefined || args.direction !== undefined)) {
              throw new CliError('--all-generations reads the whole chat at once: leave out --cursor and --direction', EXIT.usage);
            }
            await withClient(connectAny(args), async (c) => {
              const { chat, streams } = await getChat(c, args.chatId);
              if (args['all-generations']) {
                const whole = await readWholeChat(c, args.chatId);
                if (args.json) printJson(args.io, whole);
                else printWholeChat(whole, chat, (line) => args.io.stdout.write(line + '\n'));
                return;
              }
              let cursor = args.cursor;
              const direction = args.direction;
              const all: StoredRecord[] = [];
              for (;;) {
                const r = await c.call('chats.history', {
                  chatId: args.chatId,
                  limit: args.limit,
                  ...(cursor ? { cursor } : {}),
                  ...(direction && !cursor ? { direction } : {}),
                });
                // Backward pages come newest page first; keep the transcript ascending overall.
                if ((direction ?? 'backward') === 'backward' && !args.cursor) all.unshift(...r.entries);
                else all.push(...r.entries);
                if (!args.all || !r.nextCursor) {
                  if (args.json) printJson(args.io, { entries: all, nextCursor: r.nextCursor, liveCursor: r.liveCursor });
                  else {
                    for (const e of all) args.io.stdout.write(formatRecord(e, chat) + '\n');
                    if (r.nextCursor) args.io.stdout.write(`more: --cursor ${r.nextCursor}\n`);
                    args.io.stdout.write(`live cursor: ${r.liveCursor}\n`);
                    // chats.history reads the current generations; say so when a reset sealed others.
                    if (streams.some((s) => s.generation !== '1')) {
                      args.io.stderr.write(
                        `earlier generations (sealed by a reset) are not shown: yello chats history ${chat.id} --all-generations\n`,
                      );
                    }
                  }
                  return;
                }
                cursor = r.nextCursor;
              }
            });
          },
        )
        .command(exportCommand)
        .demandCommand(1, 'name a chats subcommand'),
    ),
  );
}
