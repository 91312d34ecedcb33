import type { Argv } from 'yargs';
import {
  ContinuityBreakError,
  Conversation,
  remoteError,
  type Chat,
  type ConversationStart,
  type MessageBatch,
  type StoredRecord,
} from '../client/index.js';
import { ERROR_CODES } from '../shared/errors.js';
import { followChat, type ChatFollow, type FollowHandlers } from '../client/chat-follow.js';
import type { PeerHead } from '../client/peer-head.js';
import { breakError } from './break-advice.js';
import { CliWriter } from './cli-writer.js';
import { agentToken, connectAgent, connectAny, getChat, sessionAgentId, withClient, type GlobalArgs } from './context.js';
import { CursorKeeper, startCursor, type CursorArgs } from './cursor-file.js';
import { READ_FROM } from './fast-args.js';
import { formatRecord } from './format.js';
import { CliError, EXIT, printJson } from './output.js';
import { openConversation, unreadNow } from './unread-now.js';
import { peerOf } from '../shared/chat-peers.js';

// send-commands and the hook read the same way; the functions live in unread-now.ts.
export { openConversation, unreadNow };

type FromArg = ConversationStart;
type FollowArgs = GlobalArgs & CursorArgs & { chatId: string; ack: boolean; replace: boolean; 'from-end': boolean; from?: FromArg };
export type ReadArgs = GlobalArgs & { chatId: string; ack: boolean; replace: boolean; wait?: number; from: FromArg };

const FROM = READ_FROM;

/** `chats follow` and `chats read`. */
export function followCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y
    .command(
      'follow <chatId>',
      "Live view of a chat: an agent sees the peer's messages, first those it has not acknowledged; --ack acknowledges each batch shown",
      (z: Argv<GlobalArgs>) =>
        z
          .positional('chatId', { type: 'string', demandOption: true })
          .option('cursor', { type: 'string', describe: 'resume from a compound cursor, given as the token or a file holding it' })
          .option('cursor-in', {
            type: 'string',
            describe: 'resume from the cursor in this file (a missing file: start as without a cursor)',
          })
          .option('cursor-out', { type: 'string', describe: 'after each batch, write its cursor to this file (0600, atomically)' })
          .option('from', {
            choices: FROM,
            describe:
              'agent, without a cursor: acknowledged (default: after your last receipt; unread messages behind a reset are a break), generation-start (after a break: the new generation from its start), end',
          })
          .option('from-end', { type: 'boolean', default: false, describe: 'the same as --from end' })
          .option('ack', {
            type: 'boolean',
            default: false,
            describe: 'acknowledge each batch once shown (claims your stream on the first receipt)',
          })
          .option('replace', {
            type: 'boolean',
            default: false,
            describe: 'with --ack: take over from a coordinator that is connected now',
          })
          .example('$0 --token-file bob.token chats follow chat_… --ack', '')
          .example(
            '$0 --token-file bob.token chats follow chat_… --cursor-in bob.cursor --cursor-out bob.cursor',
            'resume where the last run stopped',
          ),
      (args: FollowArgs) => (agentToken(args) ? followAsAgent(args) : followAsAdmin(args)),
    )
    .command(
      'read <chatId>',
      "Print the peer's messages you have not acknowledged yet, once; --wait waits for one; --ack acknowledges them",
      (z: Argv<GlobalArgs>) =>
        z
          .positional('chatId', { type: 'string', demandOption: true })
          .option('ack', { type: 'boolean', default: false, describe: 'acknowledge what was shown (appends a receipt to your stream)' })
          .option('wait', {
            type: 'number',
            describe: 'when nothing is unread, wait up to SECONDS for a message (receipts never end the wait)',
          })
          .option('from', {
            choices: FROM,
            default: FROM[0],
            describe:
              'acknowledged: after your last receipt; generation-start: after a continuity break, the new generation from its start; end: only what comes next',
          })
          .option('replace', {
            type: 'boolean',
            default: false,
            describe: 'with --ack: take over from a coordinator that is connected now',
          })
          .example('$0 --token-file bob.token chats read chat_… --ack', '')
          .example('$0 --token-file bob.token chats read chat_… --wait 60 --ack', 'block until bob has a message, then acknowledge it'),
      (args: ReadArgs) => runRead(args),
    );
}

/** A failure of `next()` as a person reads it. */
function readFailure(err: unknown, chatId: string): unknown {
  return err instanceof ContinuityBreakError ? breakError(err, chatId) : err;
}

function show(args: GlobalArgs, chat: Chat, batch: { records: StoredRecord[] }, json: unknown): void {
  if (args.json) printJson(args.io, json);
  else for (const r of batch.records) args.io.stdout.write(formatRecord(r, chat) + '\n');
}

/**
 * `chats read` (the yargs program's handler and the entry's fast path): the peer's message
 * batches after the agent's latest receipt (the one resume policy: unread messages behind a
 * reset or a trim exit 3, never skipped), printed once; with `--wait`, the next message when
 * there is none; with `--ack`, one receipt for all of them.
 */
export async function runRead(args: ReadArgs): Promise<void> {
  if (args.wait !== undefined && !(args.wait >= 0)) throw new CliError('--wait takes a number of seconds (0 or more)', EXIT.usage);
  await withClient(connectAgent(args), async (c) => {
    const { chat } = await getChat(c, args.chatId);
    const { conversation, head } = await openConversation(c, chat, { start: args.from });
    try {
      let batches: MessageBatch[];
      try {
        batches = await unreadNow(conversation, head);
        if (batches.length === 0 && args.wait) {
          const next = await conversation.next({ waitMs: args.wait * 1000 });
          if (next) batches = [next, ...(await unreadNow(conversation, head))];
        }
      } catch (err) {
        throw readFailure(err, chat.id);
      }
      const last = batches.at(-1);
      let acknowledged: { generation: string; nextPosition: string } | null = null;
      if (args.ack && last) {
        await CliWriter.for(args, c, conversation.ownStreamId).run({ replace: args.replace, release: false }, (w) => w.ack(last));
        acknowledged = { generation: last.generation, nextPosition: last.nextPosition };
      }
      const records = batches.flatMap((b) => b.records);
      const start = head.start();
      if (args.json) {
        printJson(args.io, {
          chatId: chat.id,
          streamId: conversation.peerStreamId,
          generation: last?.generation ?? start.generation,
          fromPosition: batches[0]?.fromPosition ?? start.position,
          nextPosition: last?.nextPosition ?? start.position,
          records,
          acknowledged,
        });
        return;
      }
      for (const r of records) args.io.stdout.write(formatRecord(r, chat) + '\n');
      if (records.length === 0)
        args.io.stderr.write(
          args.wait ? `yello: no new message within ${args.wait} s\n` : 'yello: no new message (nothing unacknowledged)\n',
        );
      if (acknowledged)
        args.io.stderr.write(`yello: acknowledged ${conversation.peerStreamId} before position ${acknowledged.nextPosition}\n`);
    } finally {
      head.close();
      await conversation.close();
    }
  });
}

/**
 * `chats follow` as an agent: the conversation's message batches as they come (the library
 * rides through daemon restarts and resumes from its cursor); with `--ack`, a receipt after
 * each one shown. The peer's receipts are a line on stderr, not output.
 */
async function followAsAgent(args: FollowArgs): Promise<void> {
  const cursor = new CursorKeeper(startCursor(args), args['cursor-out'], args.io.stderr);
  const client = await connectAgent(args, { reconnect: true });
  args.io.exitCleanlyOnSignals();
  let conversation: Conversation | null = null;
  let head: PeerHead | null = null;
  args.io.onShutdown(async () => {
    // With --ack the claim stays kept when the follow ends, as after `send` (docs/protocol.md
    // §9): once no connection is attached it is abandoned, so the agent's other tools take it
    // over without --replace, and the next `send` or follow appends no writer fence. Releasing
    // it here cost two fence records per follow (the release, then the next command's claim).
    head?.close();
    await conversation?.close();
    client.close();
    cursor.printResumeHint();
  });
  try {
    const { chat } = await getChat(client, args.chatId);
    const from: FromArg = args['from-end'] ? 'end' : (args.from ?? 'acknowledged');
    ({ conversation, head } = await openConversation(client, chat, cursor.current ? { cursor: cursor.current } : { start: from }));
    if (!cursor.current) cursor.set(conversation.cursor);
    const peer = peerOf(chat, sessionAgentId(client));
    if (!args.json) {
      args.io.stderr.write(
        `following ${chat.id} (${chat.agentA.username} ↔ ${chat.agentB.username})${args.ack ? ', acknowledging what is shown' : ''}; Ctrl-C to stop\n`,
      );
      conversation.on('peer-acknowledged', (a) =>
        args.io.stderr.write(`yello: ${peer.username} acknowledged your messages before #${a.nextPosition}\n`),
      );
    }
    client.on('reconnecting', ({ attempt, delayMs }) =>
      args.io.stderr.write(
        `yello: the connection to yellod was lost; reconnecting (attempt ${attempt}); retrying in ${Math.round(delayMs)} ms\n`,
      ),
    );
    client.on('reconnected', () => args.io.stderr.write(`yello: reconnected; resuming from cursor ${cursor.current ?? '-'}\n`));
    const writer = args.ack ? CliWriter.for(args, client, conversation.ownStreamId) : null;
    try {
      for await (const batch of conversation) {
        show(args, chat, batch, batch);
        if (writer) await writer.run({ replace: args.replace, release: false }, (w) => w.ack(batch));
        cursor.set(batch.cursor || conversation.cursor);
      }
    } catch (err) {
      if (args.json && err instanceof ContinuityBreakError) printJson(args.io, err.data);
      throw readFailure(err, chat.id);
    }
  } catch (err) {
    if (!(err instanceof CliError && err.exitCode === EXIT.continuity)) cursor.printResumeHint();
    throw err;
  } finally {
    head?.close();
    client.close();
  }
}

/**
 * `chats follow` as the admin: both streams as the daemon delivers them. The client reconnects
 * by itself (its one backoff); after a reconnect the follow is renewed from the cursor of the
 * last batch printed, so nothing is skipped or repeated.
 */
async function followAsAdmin(args: FollowArgs): Promise<void> {
  if (args.ack) throw new CliError('--ack acts as an agent: pass --token-file or set $YELLO_TOKEN', EXIT.usage);
  const cursor = new CursorKeeper(startCursor(args), args['cursor-out'], args.io.stderr);
  const client = await connectAny(args, { reconnect: true });
  args.io.exitCleanlyOnSignals();
  args.io.onShutdown(() => {
    client.close();
    cursor.printResumeHint();
  });
  const { chat } = await getChat(client, args.chatId);
  let current: ChatFollow | null = null;
  let follow: () => Promise<void> = () => Promise.resolve();
  const ended = new Promise<void>((_resolve, reject) => {
    const handlers: FollowHandlers = {
      batch: (b) => {
        show(args, chat, b, b);
        cursor.set(b.cursor);
      },
      break: (b) => {
        if (args.json) printJson(args.io, b);
        reject(
          new ContinuityBreakError({
            code: ERROR_CODES.CONTINUITY_BREAK,
            message: 'subscription ended',
            data: { type: 'CONTINUITY_BREAK', ...b },
          }),
        );
      },
      error: (e) => {
        reject(remoteError(e.error));
      },
    };
    follow = async () => {
      current?.close();
      current = await followChat(client, { chatId: args.chatId, ...(cursor.current ? { cursor: cursor.current } : {}) }, handlers);
      if (!cursor.current) cursor.set(current.cursor);
    };
    client.on('disconnected', (err) => {
      current?.close();
      current = null;
      if (!client.reconnecting) reject(err);
      else args.io.stderr.write('yello: the connection to yellod was lost; reconnecting\n');
    });
    client.on('reconnected', () => {
      args.io.stderr.write(`yello: reconnected; resuming from cursor ${cursor.current ?? '-'}\n`);
      follow().catch(reject);
    });
  });
  try {
    await follow();
    if (!args.json) args.io.stderr.write(`following ${chat.id} (${chat.agentA.username} ↔ ${chat.agentB.username}); Ctrl-C to stop\n`);
    await ended;
  } catch (err) {
    if (!(err instanceof ContinuityBreakError)) cursor.printResumeHint();
    throw err;
  } finally {
    client.close();
  }
}
