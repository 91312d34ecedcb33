// Two agents talking through yellod with Coordinators, from setup to a verified transcript.
// Run against a daemon you started (see README):
//   YELLO_SOCKET=/tmp/y.sock YELLO_DATA_DIR=/tmp/ydata node examples/two-agents.mjs
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { YelloClient, Coordinator, MemoryCursorStore, verifyRecord } from '../dist/client/index.js';

const socketPath = process.env.YELLO_SOCKET;
const dataDir = process.env.YELLO_DATA_DIR;
if (!socketPath || !dataDir) {
  console.error("set YELLO_SOCKET and YELLO_DATA_DIR (the daemon's --socket and --data-dir)");
  process.exit(2);
}
const admin = await YelloClient.connect({ socketPath, token: readFileSync(join(dataDir, 'admin.token'), 'utf8').trim() });
const tag = randomBytes(3).toString('hex');
const alice = await admin.rpc.agents.create({ username: `alice-${tag}`, name: 'Alice' });
const bob = await admin.rpc.agents.create({ username: `bob-${tag}`, name: 'Bob' });
await admin.rpc.grants.add({ agentId: alice.agent.id, peerAgentId: bob.agent.id });
await admin.rpc.grants.add({ agentId: bob.agent.id, peerAgentId: alice.agent.id });
const { chat } = await admin.rpc.chats.open({ agentAId: alice.agent.id, agentBId: bob.agent.id });

const received = { alice: [], bob: [] };
let done;
const finished = new Promise((r) => (done = r));

// Bob answers every message he is shown, acknowledging it in the same append.
const bobCoordinator = new Coordinator({
  socketPath,
  token: bob.token,
  chatId: chat.id,
  cursorStore: new MemoryCursorStore(),
  adapter: {
    async present(batch) {
      for (const r of batch.records) {
        if (r.wrapper.type !== 'chat.message') continue;
        received.bob.push(r.wrapper.message.content);
        await bobCoordinator.reply(`got "${r.wrapper.message.content}"`, { ack: batch });
      }
    },
  },
});
// Alice reads Bob's answers and acknowledges them explicitly.
const aliceCoordinator = new Coordinator({
  socketPath,
  token: alice.token,
  chatId: chat.id,
  cursorStore: new MemoryCursorStore(),
  adapter: {
    async present(batch) {
      for (const r of batch.records) if (r.wrapper.type === 'chat.message') received.alice.push(r.wrapper.message.content);
      await aliceCoordinator.ack(batch);
      if (received.alice.length === 2) done();
    },
  },
});
await bobCoordinator.start();
await aliceCoordinator.start();
await aliceCoordinator.send('hello, bob');
await aliceCoordinator.send('are you there?');
await finished;

const jwks = await admin.fetchJwks();
const { entries } = await admin.rpc.chats.history({ chatId: chat.id, direction: 'forward' });
for (const e of entries) {
  verifyRecord(e, jwks); // throws VerificationError on any mismatch
  const m = e.wrapper.message;
  console.log(`${m.signature.createdAt}  ${m.fromAgentId === alice.agent.id ? 'alice' : 'bob  '}: ${m.content}`);
}
console.log(`${entries.length} messages, all signatures verified`);
await aliceCoordinator.stop();
await bobCoordinator.stop();
admin.close();
