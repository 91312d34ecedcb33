import { randomUUID } from 'node:crypto';
import type { Argv } from 'yargs';
import { receiptFor, type AppendResult, type Chat, type MessageBatch, type ParamsIn, type YelloClient } from '../client/index.js';
import { appendRequestBytes, CliWriter } from './cli-writer.js';
import { connectAgent, getChat, sessionAgentId, streamsOf, withClient, type GlobalArgs } from './context.js';
import type { Io } from './io.js';
import { openConversation, unreadNow } from './follow-command.js';
import { CliError, EXIT, printJson } from './output.js';
import { coordinatorTokenArg, coordinatorTokenOptions } from './stream-commands.js';

type A<T = object> = GlobalArgs & T;
export type SendArgs = A<{
  chatId: string;
  text: string[];
  'message-id'?: string;
  replace: boolean;
  release: boolean;
  lossy: boolean;
  ack: boolean;
  'coordinator-token'?: string;
  'coordinator-token-file'?: string;
}>;
export type AckArgs = A<{ chatId: string; replace: boolean }>;

const fromStdin = (text: string[]) => text.length === 0 || (text.length === 1 && text[0] === '-');

/**
 * The message text: the arguments joined by spaces, or stdin for `-`. Stdin must be UTF-8:
 * bytes that are not would be signed as U+FFFD, a silent change of what was sent, so they are
 * refused unless `lossy`. One trailing newline (what `echo` adds) is dropped.
 */
async function readText({ text, io }: { text: string[]; io: Io }, lossy: boolean): Promise<string> {
  // yargs hands a lone "-" to a variadic positional as [], so both mean stdin.
  if (!fromStdin(text)) return text.join(' ');
  const bytes = await io.readStdin();
  let decoded: string;
  if (lossy) decoded = bytes.toString('utf8');
  else {
    try {
      decoded = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      throw new CliError(
        'stdin is not valid UTF-8; nothing was sent (fix the input, or pass --lossy to send it with each bad byte replaced by U+FFFD)',
        EXIT.usage,
      );
    }
  }
  return decoded.replace(/\n$/, '');
}

/** Append under a claim the caller holds and manages itself (`--coordinator-token-file`): no claim, no takeover. */
async function appendWithToken(
  c: YelloClient,
  streamId: string,
  records: ParamsIn<'streams.append'>['records'],
  coordinatorToken: string,
): Promise<AppendResult> {
  const state = await c.call('streams.get', { streamId });
  const params = {
    streamId,
    coordinatorToken,
    generation: state.generation,
    expectedPosition: state.nextPosition,
    operationId: `cli-${randomUUID()}`,
    records,
  };
  const limit = c.session.limits.maxAppendRequestBytes;
  if (appendRequestBytes(params) > limit)
    throw new CliError(
      `the message is too large: the append request would be ${appendRequestBytes(params)} bytes, over the daemon's limit of ${limit} bytes (nothing was sent)`,
      EXIT.error,
    );
  return c.call('streams.append', params);
}

/**
 * The last peer batch holding a message that the agent has not acknowledged, or null: a
 * receipt for it covers every message the peer has sent so far (receipts are cumulative).
 */
async function lastUnread(c: YelloClient, chat: Chat): Promise<MessageBatch | null> {
  const { conversation, head } = await openConversation(c, chat, { start: 'acknowledged' });
  try {
    return (await unreadNow(conversation, head)).at(-1) ?? null;
  } finally {
    head.close();
    await conversation.close();
  }
}

const ackLine = (b: MessageBatch) => `acknowledged ${b.streamId} before position ${b.nextPosition}\n`;

/** send, ack. */
export function sendCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y
    .command(
      'send <chatId> <text..>',
      'Send a message as the writer of your stream (kept between commands, see --state-dir); text "-" reads stdin',
      (z: Argv<GlobalArgs>) =>
        coordinatorTokenOptions(
          z
            .positional('chatId', { type: 'string', demandOption: true })
            .positional('text', { type: 'string', array: true, demandOption: true })
            .option('message-id', { type: 'string', describe: 'your id for the message (idempotency); default random' })
            .option('replace', {
              type: 'boolean',
              default: false,
              describe: 'take over from a coordinator connected now (an abandoned claim is taken over without it)',
            })
            .option('release', {
              type: 'boolean',
              default: false,
              describe: 'give the stream up after sending (the next send claims it again)',
            })
            .option('lossy', {
              type: 'boolean',
              default: false,
              describe: 'with "-": send stdin that is not valid UTF-8, bad bytes replaced by U+FFFD',
            })
            .option('ack', {
              type: 'boolean',
              default: false,
              describe: 'also acknowledge every message the peer has sent so far, in the same append (a reply and its receipt)',
            }),
        )
          .example('$0 --token-file alice.token send chat_… "hello, bob"', '')
          .example('$0 --token-file bob.token send chat_… --ack "thanks, done"', '')
          // Two lines without descriptions: yargs wraps a command that shares its line with one.
          .example('$0 --json streams claim chat_…:agt_… | jq -r .coordinatorToken > my.ct', '')
          .example('$0 send chat_… hi --coordinator-token-file my.ct', '')
          .epilogue('The last two examples send under a claim you hold.'),
      runSend,
    )
    .command(
      'ack <chatId>',
      'Acknowledge every message the peer has sent so far without printing them (appends a receipt)',
      (z: Argv<GlobalArgs>) =>
        z
          .positional('chatId', { type: 'string', demandOption: true })
          .option('replace', { type: 'boolean', default: false, describe: 'take over from another coordinator holding your stream' }),
      runAck,
    );
}

/** What `yello ack` does once its arguments are read (the yargs program's handler and the entry's fast path). */
export async function runAck(args: AckArgs): Promise<void> {
  await withClient(connectAgent(args), async (c) => {
    const { chat } = await getChat(c, args.chatId);
    const last = await lastUnread(c, chat);
    if (!last) {
      if (args.json) printJson(args.io, { acknowledged: null });
      else args.io.stdout.write('nothing new to acknowledge\n');
      return;
    }
    const { own } = streamsOf(chat, sessionAgentId(c));
    const r = await CliWriter.for(args, c, own).run({ replace: args.replace, release: false }, (w) => w.ack(last));
    if (args.json) printJson(args.io, r);
    else args.io.stdout.write(ackLine(last));
  });
}

/** What `yello send` does once its arguments are read (the yargs program's handler and the entry's fast path). */
export async function runSend(args: SendArgs): Promise<void> {
  if ((args['coordinator-token-file'] === '-' || args['coordinator-token-file'] === '') && fromStdin(args.text))
    throw new CliError('stdin cannot be both the text and --coordinator-token-file', EXIT.usage);
  const token = await coordinatorTokenArg(args);
  const text = await readText(args, args.lossy);
  await withClient(connectAgent(args), async (c) => {
    const { chat } = await getChat(c, args.chatId);
    const { own } = streamsOf(chat, sessionAgentId(c));
    const messageId = args['message-id'] ?? randomUUID();
    // Read before the append, so the receipt covers exactly what was there when it was asked.
    const ack = args.ack ? await lastUnread(c, chat) : null;
    const records: ParamsIn<'streams.append'>['records'] = [
      { type: 'chat.message', messageId, content: text },
      ...(ack ? [receiptFor(ack)] : []),
    ];
    let r: AppendResult;
    if (token) r = await appendWithToken(c, own, records, token);
    else {
      const writer = CliWriter.for(args, c, own);
      writer.checkSize(records, await c.call('streams.get', { streamId: own }));
      r = await writer.run({ replace: args.replace, release: args.release }, (w) => w.send(text, { messageId, ...(ack ? { ack } : {}) }));
    }
    const acknowledged = ack ? { streamId: ack.streamId, generation: ack.generation, nextPosition: ack.nextPosition } : null;
    if (args.json) printJson(args.io, args.ack ? { ...r, acknowledged } : r);
    else {
      args.io.stdout.write(`sent at position ${r.firstPosition} of ${r.streamId}\n`);
      for (const red of r.redactions) args.io.stdout.write(`redacted ${red.count} × ${red.kind}\n`);
      if (args.ack) args.io.stdout.write(ack ? ackLine(ack) : 'nothing new to acknowledge\n');
    }
  });
}
