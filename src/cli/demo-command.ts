import { randomBytes } from 'node:crypto';
import type { Argv } from 'yargs';
import { ChatWriter, Conversation, ExportVerifier, NotFoundError, YelloClient, type Agent } from '../client/index.js';
import { formatRecord } from './chat-commands.js';
import { connectAdmin, socketPath, withClient, type GlobalArgs } from './context.js';
import { exportChat } from './export-command.js';
import { CliError, EXIT } from './output.js';

/** The demo's two agents: made by the first run, reused by every later one (their tokens rotated). */
const DEMO_AGENTS = [
  { username: 'demo-alice', name: 'Alice (yello demo)' },
  { username: 'demo-bob', name: 'Bob (yello demo)' },
] as const;

/**
 * The agent `username`, made if missing, with a fresh token: the admin rotates it, since the
 * token of an earlier run was shown to nobody. A disabled one cannot speak: the demo says so.
 */
async function demoAgent(admin: YelloClient, username: string, name: string): Promise<{ agent: Agent; token: string; made: boolean }> {
  try {
    const { agent } = await admin.call('agents.get', { username });
    if (agent.disabled)
      throw new CliError(
        `demo: the agent ${username} of an earlier demo was disabled; the demo needs it (or a daemon without it)`,
        EXIT.error,
      );
    const { token } = await admin.call('agents.rotateToken', { agentId: agent.id });
    return { agent, token, made: false };
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
    const { agent, token } = await admin.call('agents.create', { username, name });
    return { agent, token, made: true };
  }
}

/**
 * `yello demo`: the whole product in one command against a running daemon — two agents, a
 * grant each way, a chat, signed messages, a receipt, the transcript, and its verification.
 * Run again, it reuses its agents and chat instead of leaving two more agents behind each time.
 */
export function demoCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'demo',
    'Create two agents, a chat and a signed exchange with a receipt, then verify it',
    (z: Argv<GlobalArgs>) => z,
    async (args: GlobalArgs) => {
      await withClient(connectAdmin(args), async (admin) => {
        const run = randomBytes(3).toString('hex');
        const alice = await demoAgent(admin, DEMO_AGENTS[0].username, DEMO_AGENTS[0].name);
        const bob = await demoAgent(admin, DEMO_AGENTS[1].username, DEMO_AGENTS[1].name);
        if (!alice.made || !bob.made)
          args.io.stderr.write(
            `yello demo: reusing the agents ${alice.agent.username} and ${bob.agent.username} of an earlier demo (new tokens)\n`,
          );
        await admin.call('grants.add', { agentId: alice.agent.id, peerAgentId: bob.agent.id });
        await admin.call('grants.add', { agentId: bob.agent.id, peerAgentId: alice.agent.id });
        const a = await YelloClient.connect({ socketPath: socketPath(args), token: alice.token, clientName: 'yello-demo' });
        const b = await YelloClient.connect({ socketPath: socketPath(args), token: bob.token, clientName: 'yello-demo' });
        try {
          const { chat } = await a.call('chats.open', { peerAgentId: bob.agent.id });
          // What earlier demos wrote stays in the chat: this run's transcript starts at the heads now.
          const before = new Map((await admin.call('chats.get', { chatId: chat.id })).streams.map((s) => [s.streamId, s]));
          // The library end to end: each agent's writer claims on its first write; bob reads
          // alice's message through his conversation and replies with its receipt atomically.
          const aliceWriter = new ChatWriter(a, { chatId: chat.id });
          const bobWriter = new ChatWriter(b, { chatId: chat.id });
          await aliceWriter.send('Hi Bob, can you review the report?', { messageId: `demo-${run}-1` });
          const bobReads = await Conversation.open(b, { chatId: chat.id });
          const seen = await bobReads.next({ waitMs: 10_000 });
          if (!seen) throw new CliError("demo: bob did not receive alice's message within 10 s", EXIT.error);
          await bobWriter.send('Sure, Alice: reading it now.', { ack: seen, messageId: `demo-${run}-2` });
          await aliceWriter.send('Thanks!', { messageId: `demo-${run}-3` });
          await bobReads.close();
          await aliceWriter.release();
          await bobWriter.release();
          const aStream = bobReads.peerStreamId;

          // The newest page (its entries in ascending order) holds all of this run's few records.
          const history = await admin.call('chats.history', { chatId: chat.id, direction: 'backward', limit: 50 });
          args.io.stdout.write(`chat ${chat.id}: ${chat.agentA.username} ↔ ${chat.agentB.username}\n\ntranscript:\n`);
          const thisRun = history.entries.filter((e) => {
            const s = before.get(e.streamId);
            return !s || e.generation !== s.generation || BigInt(e.position) >= BigInt(s.nextPosition);
          });
          for (const e of thisRun) args.io.stdout.write(`  ${formatRecord(e, chat)}\n`);
          const state = await admin.call('streams.get', { streamId: aStream });
          args.io.stdout.write(
            `\n${alice.agent.username}'s stream acknowledged by ${bob.agent.username} up to position ${state.acknowledged?.nextPosition ?? '-'}\n`,
          );
          const verifier = new ExportVerifier(await admin.call('keys.list', {}));
          for await (const item of exportChat(admin, chat.id)) {
            if ('record' in item) verifier.line(JSON.stringify(item.record));
            else if ('checkpoint' in item) verifier.line(JSON.stringify({ checkpoint: item.checkpoint }));
          }
          const result = verifier.result();
          args.io.stdout.write(
            `verified: ${result.records} records, ${result.messages} signed messages, ${result.checkpoints} checkpoints, ${result.problems.length} problems\n`,
          );
          if (result.problems.length > 0) throw new CliError('demo transcript failed verification', EXIT.error);
        } finally {
          a.close();
          b.close();
        }
      });
    },
  );
}
