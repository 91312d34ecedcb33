import { randomUUID } from 'node:crypto';
import type { Argv } from 'yargs';
import {
  ContinuityBreakError, Coordinator, MemoryCursorStore, type Chat, type ChatBatchNotification, type StoredRecord, type YelloClient,
} from '../client/index.js';
import { connectAgent, connectAny, resolveAgentId, withClient, type GlobalArgs } from './context.js';
import { exportCommand } from './export-command.js';
import { CliError, EXIT, printJson, printObject, printTable } from './output.js';

type A<T = object> = GlobalArgs & T;
const out = (args: GlobalArgs, value: unknown, human: () => void) => (args.json ? printJson(value) : human());

/** One human line for a record. */
export function formatRecord(r: StoredRecord, chat: Chat): string {
  const name = (id: string) => (id === chat.agentA.id ? chat.agentA.username : id === chat.agentB.id ? chat.agentB.username : id);
  const w = r.wrapper;
  const at = `#${r.position}`;
  if (w.type === 'chat.message') return `${w.message.signature.createdAt}  ${name(w.message.fromAgentId)} → ${name(w.message.toAgentId)}  ${at}  ${w.message.content}`;
  if (w.type === 'chat.receipt') return `${''.padEnd(24)}  ${name(w.authorAgentId)} acknowledged ${name(w.receipt.peerStreamId.split(':')[1] ?? '')}'s messages before #${w.receipt.nextPosition}  ${at}`;
  return `${w.fence.claimedAt}  ${name(w.authorAgentId)} claimed the stream (epoch ${w.fence.epoch}${w.fence.replaced ? ', replacing' : ''})  ${at}`;
}

async function readText(args: string[]): Promise<string> {
  // yargs hands a lone "-" to a variadic positional as [], so both mean stdin.
  if (args.length === 0 || (args.length === 1 && args[0] === '-')) {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8').replace(/\n$/, '');
  }
  return args.join(' ');
}

/**
 * A short-lived coordinator: claim (or take over with `replace`), append, release.
 * The claim's fence record is part of the stream, as for any coordinator.
 */
export async function appendOnce(c: YelloClient, chatId: string, records: Parameters<YelloClient['rpc']['streams']['append']>[0]['records'], replace: boolean) {
  const agentId = c.session.agentId!;
  const streamId = `${chatId}:${agentId}`;
  const claim = await c.call('streams.claim', { streamId, replace, reason: 'yello cli' }).catch((err: unknown) => {
    if ((err as { type?: string }).type === 'WRITER_ACTIVE') throw new CliError(`a coordinator holds ${streamId}; pass --replace to take over`, EXIT.error);
    throw err;
  });
  try {
    return await c.call('streams.append', {
      streamId, coordinatorToken: claim.coordinatorToken, generation: claim.generation, expectedPosition: claim.nextPosition,
      operationId: `cli-${randomUUID()}`, records,
    });
  } finally {
    await c.call('streams.release', { streamId, coordinatorToken: claim.coordinatorToken }).catch(() => {});
  }
}

/** Append under a claim the caller already holds (no claim, no release). */
export async function appendWithToken(c: YelloClient, chatId: string, records: Parameters<YelloClient['rpc']['streams']['append']>[0]['records'], coordinatorToken: string) {
  const streamId = `${chatId}:${c.session.agentId!}`;
  const state = await c.call('streams.get', { streamId });
  return c.call('streams.append', {
    streamId, coordinatorToken, generation: state.generation, expectedPosition: state.nextPosition, operationId: `cli-${randomUUID()}`, records,
  });
}

/** chats …, send, ack. */
export function chatCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y
    .command('chats', 'Open, list, read and follow chats', (yy: Argv<GlobalArgs>) =>
      yy
        .command('open <peer>', 'Open (or find) the chat with <peer> (agent); admin: --with <agent>', (z: Argv<GlobalArgs>) => z
          .positional('peer', { type: 'string', demandOption: true })
          .option('with', { type: 'string', describe: 'admin: the other agent of the pair' }),
        async (args: A<{ peer: string; with?: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const r = c.session.role === 'admin'
              ? await c.call('chats.open', { agentAId: await resolveAgentId(c, args.peer), agentBId: await resolveAgentId(c, args.with ?? '') })
              : await c.call('chats.open', { peerAgentId: await resolveAgentId(c, args.peer) });
            out(args, r, () => process.stdout.write(`${r.chat.id}${r.created ? ' (created)' : ''}\n`));
          });
        })
        .command('list', "The caller's chats (all for admin)", (z: Argv<GlobalArgs>) => z.option('limit', { type: 'number', default: 100 }).option('cursor', { type: 'string' }), async (args: A<{ limit: number; cursor?: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const r = await c.call('chats.list', { limit: args.limit, ...(args.cursor ? { cursor: args.cursor } : {}) });
            out(args, r, () => {
              printTable(r.chats.map((ch) => ({ chat: ch.id, a: ch.agentA.username, b: ch.agentB.username, created: ch.createdAt })));
              if (r.nextCursor) process.stdout.write(`more: --cursor ${r.nextCursor}\n`);
            });
          });
        })
        .command('show <chatId>', 'A chat and its two streams', (z: Argv<GlobalArgs>) => z.positional('chatId', { type: 'string', demandOption: true }), async (args: A<{ chatId: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const r = await c.call('chats.get', { chatId: args.chatId });
            out(args, r, () => {
              printObject({ chat: r.chat.id, a: `${r.chat.agentA.username} (${r.chat.agentAId})`, b: `${r.chat.agentB.username} (${r.chat.agentBId})`, created: r.chat.createdAt });
              printTable(r.streams.map((s) => ({ stream: s.streamId, generation: s.generation, first: s.firstPosition, next: s.nextPosition, acknowledged: s.acknowledged ? s.acknowledged.nextPosition : '-', writer: s.writer.active ? `epoch ${s.writer.epoch}` : 'free' })));
            });
          });
        })
        .command('permissions <chatId>', 'Who may read, send and claim, and their grants', (z: Argv<GlobalArgs>) => z.positional('chatId', { type: 'string', demandOption: true }), async (args: A<{ chatId: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const r = await c.call('chats.permissions', { chatId: args.chatId });
            out(args, r, () => {
              process.stdout.write(`policy ${r.policy}\n`);
              printTable(r.participants.map((p) => ({ agent: p.agentId, read: p.canRead, send: p.canSend, claim: p.canClaim, granted: p.grant?.grantedAt ?? '-' })));
            });
          });
        })
        .command('history <chatId>', 'The transcript (messages of both directions)', (z: Argv<GlobalArgs>) => z
          .positional('chatId', { type: 'string', demandOption: true })
          .option('limit', { type: 'number', default: 50 })
          .option('direction', { choices: ['backward', 'forward'] as const })
          .option('cursor', { type: 'string' })
          .option('all', { type: 'boolean', default: false, describe: 'page through the whole snapshot' }),
        async (args: A<{ chatId: string; limit: number; direction?: 'backward' | 'forward'; cursor?: string; all: boolean }>) => {
          await withClient(connectAny(args), async (c) => {
            const { chat } = await c.call('chats.get', { chatId: args.chatId });
            let cursor = args.cursor;
            let direction = args.direction;
            const all: StoredRecord[] = [];
            for (;;) {
              const r = await c.call('chats.history', { chatId: args.chatId, limit: args.limit, ...(cursor ? { cursor } : {}), ...(direction && !cursor ? { direction } : {}) });
              // Backward pages come newest page first; keep the transcript ascending overall.
              if ((direction ?? 'backward') === 'backward' && !args.cursor) all.unshift(...r.entries);
              else all.push(...r.entries);
              if (!args.all || !r.nextCursor) {
                if (args.json) printJson({ entries: all, nextCursor: r.nextCursor, liveCursor: r.liveCursor });
                else {
                  for (const e of all) process.stdout.write(formatRecord(e, chat) + '\n');
                  if (r.nextCursor) process.stdout.write(`more: --cursor ${r.nextCursor}\n`);
                  process.stdout.write(`live cursor: ${r.liveCursor}\n`);
                }
                return;
              }
              cursor = r.nextCursor;
            }
          });
        })
        .command('follow <chatId>', 'Live view of a chat; --ack acknowledges each presented batch', (z: Argv<GlobalArgs>) => z
          .positional('chatId', { type: 'string', demandOption: true })
          .option('cursor', { type: 'string', describe: 'resume from a compound cursor' })
          .option('ack', { type: 'boolean', default: false, describe: 'acknowledge peer batches once shown (claims your stream)' })
          .option('replace', { type: 'boolean', default: false, describe: 'with --ack: take over from a live coordinator' })
          .example('$0 --token-file bob.token chats follow chat_… --ack', ''),
        (args: A<{ chatId: string; cursor?: string; ack: boolean; replace: boolean }>) => follow(args))
        .command(exportCommand)
        .demandCommand(1, 'name a chats subcommand'))
    .command('send <chatId> <text..>', 'Send a message (claims your stream, appends, releases); text "-" reads stdin', (z: Argv<GlobalArgs>) => z
      .positional('chatId', { type: 'string', demandOption: true })
      .positional('text', { type: 'string', array: true, demandOption: true })
      .option('message-id', { type: 'string', describe: 'your id for the message (idempotency); default random' })
      .option('replace', { type: 'boolean', default: false, describe: 'take over from a live coordinator' })
      .option('coordinator-token', { type: 'string', describe: 'append under an existing claim (from `streams claim`) instead of claiming; a stale one exits 4' })
      .example('$0 --token-file alice.token send chat_… "hello, bob"', '')
      .example('T=$($0 --json streams claim chat_…:agt_… | jq -r .coordinatorToken); $0 send chat_… hi --coordinator-token "$T"', 'send under a claim you hold'),
    async (args: A<{ chatId: string; text: string[]; 'message-id'?: string; replace: boolean; 'coordinator-token'?: string }>) => {
      const text = await readText(args.text);
      await withClient(connectAgent(args), async (c) => {
        const records = [{ type: 'chat.message' as const, messageId: args['message-id'] ?? randomUUID(), content: text }];
        const r = args['coordinator-token'] ? await appendWithToken(c, args.chatId, records, args['coordinator-token']) : await appendOnce(c, args.chatId, records, args.replace);
        out(args, r, () => {
          process.stdout.write(`sent at position ${r.firstPosition} of ${r.streamId}\n`);
          for (const red of r.redactions) process.stdout.write(`redacted ${red.count} × ${red.kind}\n`);
        });
      });
    })
    .command('ack <chatId>', "Acknowledge everything the peer has sent so far (appends a receipt)", (z: Argv<GlobalArgs>) => z
      .positional('chatId', { type: 'string', demandOption: true })
      .option('replace', { type: 'boolean', default: false }),
    async (args: A<{ chatId: string; replace: boolean }>) => {
      await withClient(connectAgent(args), async (c) => {
        const me = c.session.agentId!;
        const { chat } = await c.call('chats.get', { chatId: args.chatId });
        const peerStreamId = `${chat.id}:${chat.agentAId === me ? chat.agentBId : chat.agentAId}`;
        const peer = await c.call('streams.get', { streamId: peerStreamId });
        let from = peer.acknowledged && peer.acknowledged.generation === peer.generation ? peer.acknowledged.nextPosition : peer.firstPosition;
        if (BigInt(from) < BigInt(peer.firstPosition)) from = peer.firstPosition;
        let last: { batchId: string; nextPosition: string } | null = null;
        while (BigInt(from) < BigInt(peer.nextPosition)) {
          const b = await c.call('streams.read', { streamId: peerStreamId, generation: peer.generation, fromPosition: from });
          last = b;
          from = b.nextPosition;
        }
        if (!last) {
          out(args, { acknowledged: null }, () => process.stdout.write('nothing new to acknowledge\n'));
          return;
        }
        const r = await appendOnce(c, args.chatId, [{ type: 'chat.receipt', peerStreamId, peerGeneration: peer.generation, nextPosition: last.nextPosition, batchId: last.batchId }], args.replace);
        out(args, r, () => process.stdout.write(`acknowledged ${peerStreamId} before position ${last!.nextPosition}\n`));
      });
    });
}

async function follow(args: A<{ chatId: string; cursor?: string; ack: boolean; replace: boolean }>): Promise<void> {
  const show = (chat: Chat, b: ChatBatchNotification) => {
    if (args.json) printJson(b);
    else for (const r of b.records) process.stdout.write(formatRecord(r, chat) + '\n');
  };
  if (args.ack) {
    const token = (await import('./context.js')).agentToken(args);
    if (!token) throw new CliError('--ack acts as an agent: pass --token-file or set $YELLO_TOKEN', EXIT.usage);
    const store = new MemoryCursorStore();
    if (args.cursor) await store.save(args.chatId, args.cursor);
    let chat: Chat | null = null;
    const coordinator: Coordinator = new Coordinator({
      token, chatId: args.chatId, cursorStore: store, replace: args.replace, reason: 'yello chats follow --ack',
      socketPath: (await import('./context.js')).socketPath(args),
      adapter: {
        present: async (b) => {
          show(chat!, b);
          await coordinator.ack(b);
        },
      },
    });
    await withClient(connectAgent(args), async (c) => {
      chat = (await c.call('chats.get', { chatId: args.chatId })).chat;
    });
    await coordinator.start();
    process.once('SIGINT', () => void coordinator.stop().then(() => process.exit(EXIT.ok)));
    process.once('SIGTERM', () => void coordinator.stop().then(() => process.exit(EXIT.ok)));
    await coordinator.done;
    return;
  }
  const c = await connectAny(args);
  const { chat } = await c.call('chats.get', { chatId: args.chatId });
  // Listen before following: the first batches may arrive in the same read as the answer.
  const notifications = c.notifications();
  const sub = await c.call('chats.follow', { chatId: args.chatId, ...(args.cursor ? { cursor: args.cursor } : {}) });
  if (!args.json) process.stderr.write(`following ${chat.id} (${chat.agentA.username} ↔ ${chat.agentB.username}); Ctrl-C to stop\n`);
  const stop = () => {
    c.close();
    process.exit(EXIT.ok);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  for await (const n of notifications) {
    if (n.params.subscriptionId !== sub.subscriptionId) continue;
    if (n.method === 'chats.batch') show(chat, n.params);
    else {
      if (args.json) printJson(n.params);
      c.close();
      throw new ContinuityBreakError({ code: 4100, message: 'subscription ended', data: { type: 'CONTINUITY_BREAK', ...n.params } });
    }
  }
  throw new CliError('the connection to yellod was lost', EXIT.error);
}
