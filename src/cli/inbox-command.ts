import type { Argv } from 'yargs';
import { Inbox, type InboxEntry, type YelloClientError } from '../client/index.js';
import { connectAgent, withClient, type GlobalArgs } from './context.js';
import { CliError, EXIT, printJson, printTable } from './output.js';

export type InboxArgs = GlobalArgs & { wait?: number };

/**
 * `yello inbox [--wait SECONDS]`: the agent's chats with their unread message counts and last
 * activity; with `--wait`, when nothing is unread, it first waits (up to SECONDS) for a message
 * in any of them, chats opened meanwhile included. The library's Inbox does the waiting.
 */
export function inboxCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'inbox',
    'Your chats with unread message counts and last activity; --wait SECONDS waits for a message in any of them',
    (z: Argv<GlobalArgs>) =>
      z
        .option('wait', {
          type: 'number',
          describe: 'when nothing is unread, wait up to SECONDS for a message in any chat (also one opened meanwhile)',
        })
        .example('$0 --token-file bob.token inbox', '')
        .example('$0 --token-file bob.token inbox --wait 300 --json', 'block until a message arrives anywhere'),
    runInbox,
  );
}

/** What `yello inbox` does once its arguments are read (the yargs program's handler and the entry's fast path). */
export async function runInbox(args: InboxArgs): Promise<void> {
  if (args.wait !== undefined && !(args.wait >= 0)) throw new CliError('--wait takes a number of seconds (0 or more)', EXIT.usage);
  await withClient(connectAgent(args), async (c) => {
    // Read once (no follows where nothing is after the receipt): a command that lists and exits
    // pays per chat two calls, not an inbox's watch and follows (issue 54, command start).
    let chats = await Inbox.listOnce(c);
    if (args.wait && chats.every((e) => e.unreadMessages === 0)) {
      // The inbox follows from the receipts: a message that came since the listing wakes it at once.
      const inbox = await Inbox.open(c);
      try {
        const woke = await inbox.wait({ waitMs: args.wait * 1000 });
        if (woke) chats = await inbox.list();
        else if (!args.json) args.io.stderr.write(`yello: no new message within ${args.wait} s\n`);
      } finally {
        await inbox.close();
      }
    }
    // An Error has no JSON form: a chat that stopped for a person says why in one line.
    const why = (e: InboxEntry) => (e.failure ? `${(e.failure as Partial<YelloClientError>).type ?? 'ERROR'}: ${e.failure.message}` : null);
    if (args.json) {
      printJson(args.io, { chats: chats.map((e) => ({ ...e, failure: why(e) })) });
      return;
    }
    printTable(
      args.io,
      chats.map((e) => ({
        chat: e.chatId,
        peer: e.peer.username,
        unread: e.unreadMessages,
        last: e.lastActivityAt,
        preview: why(e) ?? (e.preview === null ? null : e.preview.length > 60 ? `${e.preview.slice(0, 57)}…` : e.preview),
      })),
      ['chat', 'peer', 'unread', 'last', 'preview'],
    );
  });
}
