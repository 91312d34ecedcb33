import { randomBytes } from 'node:crypto';
import type { Argv } from 'yargs';
import { ChatWriter, Conversation, ExportVerifier, YelloClient } from '../client/index.js';
import { formatRecord } from './chat-commands.js';
import { connectAdmin, socketPath, withClient, type GlobalArgs } from './context.js';
import { exportChat } from './export-command.js';
import { CliError, EXIT } from './output.js';

/**
 * `yello demo`: the whole product in one command against a running daemon — two agents, a
 * grant each way, a chat, signed messages, a receipt, the transcript, and its verification.
 */
export function demoCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'demo',
    'Create two agents, a chat and a signed exchange with a receipt, then verify it',
    (z: Argv<GlobalArgs>) => z,
    async (args: GlobalArgs) => {
      await withClient(connectAdmin(args), async (admin) => {
        const suffix = randomBytes(3).toString('hex');
        const alice = await admin.call('agents.create', { username: `alice-${suffix}`, name: 'Alice' });
        const bob = await admin.call('agents.create', { username: `bob-${suffix}`, name: 'Bob' });
        await admin.call('grants.add', { agentId: alice.agent.id, peerAgentId: bob.agent.id });
        await admin.call('grants.add', { agentId: bob.agent.id, peerAgentId: alice.agent.id });
        const a = await YelloClient.connect({ socketPath: socketPath(args), token: alice.token, clientName: 'yello-demo' });
        const b = await YelloClient.connect({ socketPath: socketPath(args), token: bob.token, clientName: 'yello-demo' });
        try {
          const { chat } = await a.call('chats.open', { peerAgentId: bob.agent.id });
          // The library end to end: each agent's writer claims on its first write; bob reads
          // alice's message through his conversation and replies with its receipt atomically.
          const aliceWriter = new ChatWriter(a, { chatId: chat.id });
          const bobWriter = new ChatWriter(b, { chatId: chat.id });
          await aliceWriter.send('Hi Bob, can you review the report?', { messageId: 'demo-1' });
          const bobReads = await Conversation.open(b, { chatId: chat.id });
          const seen = await bobReads.next({ waitMs: 10_000 });
          if (!seen) throw new CliError("demo: bob did not receive alice's message within 10 s", EXIT.error);
          await bobWriter.send('Sure, Alice: reading it now.', { ack: seen, messageId: 'demo-2' });
          await aliceWriter.send('Thanks!', { messageId: 'demo-3' });
          await bobReads.close();
          await aliceWriter.release();
          await bobWriter.release();
          const aStream = bobReads.peerStreamId;

          const history = await admin.call('chats.history', { chatId: chat.id, direction: 'forward' });
          args.io.stdout.write(`chat ${chat.id}: ${chat.agentA.username} ↔ ${chat.agentB.username}\n\ntranscript:\n`);
          for (const e of history.entries) args.io.stdout.write(`  ${formatRecord(e, chat)}\n`);
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
