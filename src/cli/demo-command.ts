import { randomBytes, randomUUID } from 'node:crypto';
import type { Argv } from 'yargs';
import { makeStreamId } from '../shared/ids.js';
import { ExportVerifier, YelloClient } from '../client/index.js';
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
          const aStream = makeStreamId(chat.id, alice.agent.id);
          const bStream = makeStreamId(chat.id, bob.agent.id);
          const aClaim = await a.call('streams.claim', { streamId: aStream });
          const bClaim = await b.call('streams.claim', { streamId: bStream });
          const sent = await a.call('streams.append', {
            streamId: aStream,
            coordinatorToken: aClaim.coordinatorToken,
            generation: aClaim.generation,
            expectedPosition: aClaim.nextPosition,
            operationId: `demo-${randomUUID()}`,
            records: [{ type: 'chat.message', messageId: 'demo-1', content: 'Hi Bob, can you review the report?' }],
          });
          const seen = await b.call('streams.read', { streamId: aStream, generation: '1', fromPosition: '0' });
          await b.call('streams.append', {
            streamId: bStream,
            coordinatorToken: bClaim.coordinatorToken,
            generation: bClaim.generation,
            expectedPosition: bClaim.nextPosition,
            operationId: `demo-${randomUUID()}`,
            records: [
              { type: 'chat.message', messageId: 'demo-2', content: 'Sure, Alice: reading it now.' },
              {
                type: 'chat.receipt',
                peerStreamId: aStream,
                peerGeneration: seen.generation,
                nextPosition: seen.nextPosition,
                batchId: seen.batchId,
              },
            ],
          });
          await a.call('streams.append', {
            streamId: aStream,
            coordinatorToken: aClaim.coordinatorToken,
            generation: aClaim.generation,
            expectedPosition: sent.nextPosition,
            operationId: `demo-${randomUUID()}`,
            records: [{ type: 'chat.message', messageId: 'demo-3', content: 'Thanks!' }],
          });
          await a.call('streams.release', { streamId: aStream, coordinatorToken: aClaim.coordinatorToken });
          await b.call('streams.release', { streamId: bStream, coordinatorToken: bClaim.coordinatorToken });

          const history = await admin.call('chats.history', { chatId: chat.id, direction: 'forward' });
          process.stdout.write(`chat ${chat.id}: ${chat.agentA.username} ↔ ${chat.agentB.username}\n\ntranscript:\n`);
          for (const e of history.entries) process.stdout.write(`  ${formatRecord(e, chat)}\n`);
          const state = await admin.call('streams.get', { streamId: aStream });
          process.stdout.write(
            `\n${alice.agent.username}'s stream acknowledged by ${bob.agent.username} up to position ${state.acknowledged?.nextPosition ?? '-'}\n`,
          );
          const verifier = new ExportVerifier(await admin.call('keys.list', {}));
          for await (const item of exportChat(admin, chat.id)) {
            if ('record' in item) verifier.line(JSON.stringify(item.record));
            else if ('checkpoint' in item) verifier.line(JSON.stringify({ checkpoint: item.checkpoint }));
          }
          const result = verifier.result();
          process.stdout.write(
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
