import { resolve } from 'node:path';
import type { Argv } from 'yargs';
import type { Chat, ConversationStart, YelloClient } from '../client/index.js';
import { agentToken, connectAgent, getChat, sessionAgentId, socketPath, type GlobalArgs } from './context.js';
import { CliError, displayText, EXIT } from './output.js';
import { PaneAttachment } from './pane-attachment.js';
import { paneGoneStop } from './pane-presenter.js';
import { shellWord } from './pane-text.js';
import { TmuxPane } from './tmux-pane.js';
import { cliStateDir } from './writer-state.js';
import { allPages, LIST_PAGE } from '../client/list-pages.js';

type AttachArgs = GlobalArgs & {
  tmux: string;
  chat?: string;
  inbox: boolean;
  'tmux-socket'?: string;
  replace: boolean;
  from?: ConversationStart;
};

const FROM = ['acknowledged', 'generation-start', 'end'] as const;

/** How often the pane is looked at between presentations. */
const PANE_CHECK_MS = 1_000;

/** One line on stderr. */
type Say = (line: string) => void;

/**
 * The yello command line the agent's shell runs to reply: the options attach was given that
 * say which daemon, state dir and token file (the pane must find attach's kept claim under the
 * same socket and state dir). `$YELLO_TOKEN` is never written out: the pane needs its own.
 */
function replyCli(args: AttachArgs): string {
  const words = ['yello'];
  if (args.socket) words.push('--socket', resolve(args.socket));
  if (args['state-dir']) words.push('--state-dir', resolve(args['state-dir']));
  if (args['token-file']) words.push('--token-file', resolve(args['token-file']));
  return words.map(shellWord).join(' ');
}

/** All chats of the agent, and every chat opened later (`chats.watch`, again after a reconnect). */
async function attachInbox(client: YelloClient, attachment: PaneAttachment, say: Say): Promise<void> {
  const add = (chat: Chat) =>
    attachment.attach(chat).then(
      ({ ended }) => {
        say(`chat ${chat.id}: typing its peer messages into the pane`);
        void ended.then((why) => {
          if (why) say(why.message);
        });
      },
      (err: unknown) => {
        say(err instanceof Error ? err.message : String(err));
      },
    );
  // This connection has no other watch, so every chats.opened is this one's (also one that
  // arrives before the watch's answer); attach() ignores a chat it already presents.
  client.on('chats.opened', (n) => void add(n.chat));
  const sync = async () => {
    await client.call('chats.watch', {});
    const chats = await allPages(
      (cursor) => client.call('chats.list', { ...cursor, limit: LIST_PAGE }),
      (p) => p.chats,
    );
    await Promise.all(chats.map(add));
  };
  client.on('reconnected', () => {
    sync().catch((err: unknown) => {
      say(`watching for new chats failed after a reconnect: ${err instanceof Error ? err.message : String(err)}`);
    });
  });
  await sync();
}

async function attach(args: AttachArgs): Promise<void> {
  const { io } = args;
  // Shown as data: it may echo names and reasons others wrote.
  const say: Say = (line) => io.stderr.write(displayText(`yello attach: ${line}`) + '\n');
  let stopping = false;
  /** Print why it stopped and end with its code (once: the first reason wins). */
  const stopWith = (err: CliError): void => {
    if (stopping) return;
    stopping = true;
    say(err.message);
    io.shutdown(err.exitCode);
  };
  if (!args.chat === !args.inbox) throw new CliError('name what to present: --chat <chatId> or --inbox (all chats)', EXIT.usage);
  const token = agentToken(args);
  if (!token) throw new CliError('yello attach acts as an agent: pass --token-file FILE or set $YELLO_TOKEN', EXIT.usage);
  const pane = await TmuxPane.open(args.tmux, args['tmux-socket'], io.env);
  const client = await connectAgent(args, { reconnect: true });
  const socket = socketPath(args);
  const attachment = new PaneAttachment({
    token,
    socket,
    stateDir: cliStateDir(args['state-dir'], io.env),
    agentId: sessionAgentId(client),
    client,
    pane,
    cli: replyCli(args),
    replace: args.replace,
    ...(args.from ? { from: args.from } : {}),
    say,
  });
  io.exitCleanlyOnSignals();
  io.onShutdown(async () => {
    await attachment.stop();
    client.close();
  });
  client.on('disconnected', (err) => {
    if (!client.reconnecting) stopWith(new CliError(`the connection to yellod ended for good: ${err.message}`, EXIT.error));
  });
  void attachment.paneGone.then(stopWith);
  // Between presentations too: an agent that is gone must not keep its stream held (its other
  // tools would be refused with WRITER_ACTIVE until the next message came).
  const watch = setInterval(() => {
    void pane.check().then(
      (c) => {
        if (!c.ok && c.gone) stopWith(paneGoneStop(c.why));
      },
      () => {},
    );
  }, PANE_CHECK_MS);
  io.onShutdown(() => {
    clearInterval(watch);
  });
  const { identity } = pane;
  const where = `tmux pane ${identity.paneId} (${identity.name}), agent ${identity.agent.command} pid ${identity.agent.pid}`;
  if (args.chat) {
    const { chat } = await getChat(client, args.chat);
    const { ended } = await attachment.attach(chat);
    say(`typing the peer messages of chat ${chat.id} into ${where}; the agent replies with: ${replyCli(args)} send ${chat.id} --ack "…"`);
    const why = await ended;
    if (why) stopWith(why);
  } else {
    say(`typing the peer messages of every chat into ${where}, chats opened later included`);
    await attachInbox(client, attachment, say);
  }
  // Runs until a signal, the pane's end or the connection's end (each exits through shutdown).
  await new Promise<never>(() => {});
}

/** `yello attach --tmux <pane> (--chat <id> | --inbox)`. */
export function attachCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'attach',
    'Present an agent\'s chats in the tmux pane it runs in: each peer batch typed as data (bracketed paste, then Enter); it replies with "yello send --ack" from its shell',
    (z: Argv<GlobalArgs>) =>
      z
        .option('tmux', {
          type: 'string',
          demandOption: 'name the tmux pane the agent runs in: --tmux %3 or --tmux session:window.pane',
          describe: "the agent's pane: %N (tmux display -p '#{pane_id}' inside it) or session:window.pane",
        })
        .option('chat', { type: 'string', describe: 'present this chat' })
        .option('inbox', { type: 'boolean', default: false, describe: 'present every chat of the agent, chats opened later included' })
        .option('tmux-socket', { type: 'string', describe: "the tmux server's socket (tmux -S); default: $TMUX, else tmux's own" })
        .option('replace', {
          type: 'boolean',
          default: false,
          describe: 'take the stream over from a coordinator of this agent connected now (it is fenced)',
        })
        .option('from', {
          choices: FROM,
          describe:
            'where to start instead of where an earlier attach to the same agent process stopped: acknowledged (after your last receipt), generation-start (after a break), end',
        })
        .example('$0 --token-file carol.token attach --tmux %3 --inbox', '')
        .example('$0 --token-file carol.token attach --tmux work:0.1 --chat chat_…', '')
        .epilogue(
          'attach claims the agent\'s stream and keeps the claim where the CLI finds it, so the agent\'s own "yello send" and "yello ack" in the pane (same socket and state dir) append under it. Typing is not acknowledging: the agent acknowledges with "yello send <chat> --ack …" or "yello ack <chat>". It stops when the pane\'s process ends or another coordinator takes the stream (exit 4), and pauses while an append of unknown outcome is unsettled ("yello ops show") or another process is in the pane\'s foreground. See docs/agents.md.',
        ),
    (args: AttachArgs) => attach(args),
  );
}
