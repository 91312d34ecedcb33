import type { Argv } from 'yargs';
import {
  ConnectionLostError,
  ContinuityBreakError,
  Coordinator,
  FencedError,
  remoteError,
  StorageFailureError,
  YelloClientError,
  type Chat,
  type ChatBatchNotification,
  type PeerBatch,
  type StoredRecord,
  type YelloClient,
} from '../client/index.js';
import { ERROR_CODES } from '../shared/errors.js';
import { CliWriter } from './cli-writer.js';
import {
  connectAgent,
  connectAny,
  agentToken,
  getChat,
  sessionAgentId,
  socketPath,
  streamsOf,
  withClient,
  type GlobalArgs,
} from './context.js';
import { CursorKeeper, startCursor, type CursorArgs } from './cursor-file.js';
import { formatRecord } from './format.js';
import { CliError, EXIT, printJson } from './output.js';
import { exitCleanlyOnSignals, onShutdown, shuttingDown } from './shutdown.js';
import { cliStateDir, WriterStore } from './writer-state.js';

type FollowArgs = GlobalArgs & CursorArgs & { chatId: string; ack: boolean; replace: boolean; 'from-end': boolean };
type ReadArgs = GlobalArgs & { chatId: string; ack: boolean; replace: boolean };

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5_000;

/** `chats follow` and `chats read`. */
export function followCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y
    .command(
      'follow <chatId>',
      'Live view of a chat: an agent first sees what it has not acknowledged yet; --ack acknowledges each batch shown',
      (z: Argv<GlobalArgs>) =>
        z
          .positional('chatId', { type: 'string', demandOption: true })
          .option('cursor', { type: 'string', describe: 'resume from a compound cursor, given as the token or a file holding it' })
          .option('cursor-in', {
            type: 'string',
            describe: 'resume from the cursor in this file (a missing file: start as without a cursor)',
          })
          .option('cursor-out', { type: 'string', describe: 'after each batch, write its cursor to this file (0600, atomically)' })
          .option('from-end', {
            type: 'boolean',
            default: false,
            describe: 'without a cursor: start at the current ends (default for an agent: where its last receipt left off)',
          })
          .option('ack', {
            type: 'boolean',
            default: false,
            describe: 'acknowledge peer batches once shown (runs a coordinator that claims your stream)',
          })
          .option('replace', { type: 'boolean', default: false, describe: 'with --ack: take over from a live coordinator' })
          .example('$0 --token-file bob.token chats follow chat_… --ack', '')
          .example(
            '$0 --token-file bob.token chats follow chat_… --cursor-in bob.cursor --cursor-out bob.cursor',
            'resume where the last run stopped',
          ),
      (args: FollowArgs) => (args.ack ? followWithAck(args) : follow(args)),
    )
    .command(
      'read <chatId>',
      "Print the peer's messages you have not acknowledged yet, once; --ack acknowledges them",
      (z: Argv<GlobalArgs>) =>
        z
          .positional('chatId', { type: 'string', demandOption: true })
          .option('ack', { type: 'boolean', default: false, describe: 'acknowledge what was shown (appends a receipt to your stream)' })
          .option('replace', { type: 'boolean', default: false, describe: 'with --ack: take over from a live coordinator' })
          .example('$0 --token-file bob.token chats read chat_… --ack', ''),
      (args: ReadArgs) => read(args),
    );
}

function show(args: GlobalArgs, chat: Chat, b: ChatBatchNotification): void {
  if (args.json) printJson(b);
  else for (const r of b.records) process.stdout.write(formatRecord(r, chat) + '\n');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const backoff = (attempt: number) => Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** (attempt - 1));

/**
 * `chats follow` without --ack: a subscription that survives daemon restarts. After a lost
 * connection it dials again with backoff and re-follows from the cursor of the last batch it
 * printed, so nothing is skipped or repeated; one stderr line per attempt and per resume.
 */
async function follow(args: FollowArgs): Promise<void> {
  const cursor = new CursorKeeper(startCursor(args), args['cursor-out']);
  let client: YelloClient | null = null;
  exitCleanlyOnSignals();
  // Once a shutdown is under way (shuttingDown()), the loop below stops instead of reconnecting.
  onShutdown(() => {
    client?.close();
    cursor.printResumeHint();
  });
  let chat: Chat | null = null;
  let attempt = 0;
  try {
    for (;;) {
      let c: YelloClient;
      try {
        c = await connectAny(args);
      } catch (err) {
        // Not reachable at the start: say so and stop. Lost later: it is coming back.
        if (chat === null || !(err instanceof ConnectionLostError) || shuttingDown()) throw err;
        attempt++;
        const delay = backoff(attempt);
        process.stderr.write(`yello: cannot reach yellod (attempt ${attempt}); retrying in ${delay} ms\n`);
        await sleep(delay);
        continue;
      }
      client = c;
      if (shuttingDown()) {
        c.close();
        return;
      }
      try {
        if (chat === null) chat = (await getChat(c, args.chatId)).chat;
        // Listen before following: the first batches may arrive in the same read as the answer.
        const notifications = c.notifications();
        const start = cursor.current
          ? { cursor: cursor.current }
          : c.session.role === 'agent' && !args['from-end']
            ? { from: 'acknowledged' as const }
            : {};
        const sub = await c.call('chats.follow', { chatId: args.chatId, ...start });
        if (!cursor.current) cursor.set(sub.cursor);
        if (attempt > 0) process.stderr.write(`yello: reconnected; resuming from cursor ${cursor.current}\n`);
        else if (!args.json)
          process.stderr.write(`following ${chat.id} (${chat.agentA.username} ↔ ${chat.agentB.username}); Ctrl-C to stop\n`);
        attempt = 0;
        for await (const n of notifications) {
          if (n.params.subscriptionId !== sub.subscriptionId) continue;
          if (n.method === 'chats.batch') {
            show(args, chat, n.params);
            cursor.set(n.params.cursor);
          } else if (n.method === 'chats.break') {
            if (args.json) printJson(n.params);
            throw new ContinuityBreakError({
              code: ERROR_CODES.CONTINUITY_BREAK,
              message: 'subscription ended',
              data: { type: 'CONTINUITY_BREAK', ...n.params },
            });
          } else if (n.method === 'chats.error') {
            throw remoteError(n.params.error);
          }
        }
      } catch (err) {
        if (shuttingDown()) return;
        if (!(err instanceof ConnectionLostError)) throw err;
      } finally {
        c.close();
      }
      if (shuttingDown()) return;
      attempt++;
      process.stderr.write(`yello: the connection to yellod was lost; reconnecting (attempt ${attempt})\n`);
      await sleep(backoff(attempt));
    }
  } catch (err) {
    if (!(err instanceof ContinuityBreakError)) cursor.printResumeHint();
    throw err;
  }
}

/**
 * `chats follow --ack`: a Coordinator that shows each peer batch and acknowledges it. The
 * coordinator reconnects by itself; a receipt that could not be written while the daemon was
 * going away is written once it is back (receipts are cumulative, a later one covers it), and
 * one whose outcome is unknown is looked up, never blindly resent.
 */
async function followWithAck(args: FollowArgs): Promise<void> {
  const token = agentToken(args);
  if (!token) throw new CliError('--ack acts as an agent: pass --token-file or set $YELLO_TOKEN', EXIT.usage);
  const cursor = new CursorKeeper(startCursor(args), args['cursor-out']);
  const socket = socketPath(args);
  const chat = await withClient(connectAgent(args), async (c) => {
    const { chat } = await getChat(c, args.chatId);
    // The claim `send`/`ack` keep would make the coordinator's claim WRITER_ACTIVE: hand it over.
    const writer = new CliWriter(c, new WriterStore(cliStateDir(args['state-dir'])), socket, streamsOf(chat, sessionAgentId(c)).own);
    if (writer.holdsClaim()) await writer.release().catch(() => {});
    return chat;
  });
  // The newest batch shown but not yet acknowledged, and the one whose receipt's fate is unknown.
  let pending: PeerBatch | null = null;
  let acking: PeerBatch | null = null;
  let uncertain: PeerBatch | null = null;
  let resolving = false;
  const coordinator: Coordinator = new Coordinator({
    token,
    chatId: args.chatId,
    cursorStore: cursor,
    socketPath: socket,
    replace: args.replace,
    reason: 'yello chats follow --ack',
    start: args['from-end'] ? 'end' : 'acknowledged',
    reconnect: { minDelayMs: RECONNECT_MIN_MS, maxDelayMs: RECONNECT_MAX_MS },
    adapter: {
      present: async (b) => {
        show(args, chat, b);
        pending = b;
        await flushAck();
      },
      uncertain: () => {
        uncertain = acking;
        process.stderr.write('yello: the answer to a receipt was lost; checking whether it was written\n');
        void resolveUncertain();
      },
      resolved: (outcome) => {
        process.stderr.write(`yello: the receipt ${outcome.committed ? 'was' : 'was not'} written\n`);
        if (outcome.committed && pending === uncertain) pending = null;
        uncertain = null;
      },
    },
  });
  const flushAck = async (): Promise<void> => {
    const b = pending;
    if (!b || coordinator.state !== 'running') return;
    try {
      acking = b;
      await coordinator.ack(b);
      if (pending === b) pending = null;
    } catch (err) {
      // Left pending, and written when the coordinator is running again.
      if (coordinator.uncertainOperationId !== null || isRetryable(err)) return;
      throw err;
    }
  };
  const resolveUncertain = async (): Promise<void> => {
    if (resolving) return;
    resolving = true;
    try {
      while (coordinator.uncertainOperationId !== null && !['stopped', 'fenced', 'needs-intervention'].includes(coordinator.state)) {
        try {
          await coordinator.resolveUncertain();
        } catch {
          await sleep(RECONNECT_MIN_MS);
        }
      }
    } finally {
      resolving = false;
    }
  };
  coordinator.on('state', ({ state, previous }) => {
    if (state === 'reconnecting') process.stderr.write('yello: the connection to yellod was lost; reconnecting\n');
    if (state === 'running' && previous === 'reconnecting')
      process.stderr.write(`yello: reconnected; resuming from cursor ${cursor.current ?? '-'}\n`);
    if (state === 'running' && pending) {
      void flushAck().catch((err: unknown) => process.stderr.write(`yello: could not acknowledge: ${(err as Error).message}\n`));
    }
  });
  coordinator.on('error', () => {});
  exitCleanlyOnSignals();
  onShutdown(async () => {
    await coordinator.stop();
    cursor.printResumeHint();
  });
  await coordinator.start();
  if (!args.json)
    process.stderr.write(
      `following ${chat.id} (${chat.agentA.username} ↔ ${chat.agentB.username}) as ${coordinator.agentId === chat.agentAId ? chat.agentA.username : chat.agentB.username}, acknowledging what is shown; Ctrl-C to stop\n`,
    );
  try {
    await coordinator.done;
  } catch (err) {
    if (!(err instanceof ContinuityBreakError) && !(err instanceof FencedError)) cursor.printResumeHint();
    throw err;
  }
}

/** A failed receipt that a later attempt may write: nothing was written, or the coordinator is between connections. */
function isRetryable(err: unknown): boolean {
  if (err instanceof StorageFailureError) return err.data.outcome === 'not-written';
  if (err instanceof ConnectionLostError) return !err.outcomeUnknown;
  return err instanceof YelloClientError && err.transient;
}

/**
 * `chats read`: the peer's records after the caller's own latest receipt for the peer stream's
 * current generation (from position 0 without one), read once up to the stream's end. Records
 * that were trimmed before they were acknowledged are a continuity break, never skipped.
 */
async function read(args: ReadArgs): Promise<void> {
  await withClient(connectAgent(args), async (c) => {
    const { chat } = await getChat(c, args.chatId);
    const { own, peer } = streamsOf(chat, sessionAgentId(c));
    const state = await c.call('streams.get', { streamId: peer });
    const acked = state.acknowledged?.generation === state.generation ? state.acknowledged.nextPosition : '0';
    const records: StoredRecord[] = [];
    let last: { batchId: string; nextPosition: string } | null = null;
    // Read at least once, also when nothing seems new: the daemon then vouches for the head
    // (a corruption mark there, or a receipt beyond it, is STORAGE_FAILURE/CORRUPT, not "nothing").
    for (let from = acked; ;) {
      const b = await c.call('streams.read', { streamId: peer, generation: state.generation, fromPosition: from });
      if (b.records.length === 0) break;
      records.push(...b.records);
      last = b;
      from = b.nextPosition;
      if (BigInt(from) >= BigInt(state.nextPosition)) break;
    }
    let acknowledged: { generation: string; nextPosition: string } | null = null;
    if (args.ack && last) {
      await new CliWriter(c, new WriterStore(cliStateDir(args['state-dir'])), socketPath(args), own).append(
        [
          {
            type: 'chat.receipt',
            peerStreamId: peer,
            peerGeneration: state.generation,
            nextPosition: last.nextPosition,
            batchId: last.batchId,
          },
        ],
        { replace: args.replace, release: false },
      );
      acknowledged = { generation: state.generation, nextPosition: last.nextPosition };
    }
    if (args.json) {
      printJson({
        chatId: chat.id,
        streamId: peer,
        generation: state.generation,
        fromPosition: acked,
        nextPosition: last?.nextPosition ?? acked,
        records,
        acknowledged,
      });
      return;
    }
    for (const r of records) process.stdout.write(formatRecord(r, chat) + '\n');
    if (records.length === 0) process.stderr.write('yello: nothing unacknowledged\n');
    if (acknowledged) process.stderr.write(`yello: acknowledged ${peer} before position ${acknowledged.nextPosition}\n`);
  });
}
