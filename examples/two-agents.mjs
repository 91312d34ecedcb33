// Two agents talking through yellod with Coordinators, from setup to a verified transcript.
// From a fresh clone: start a daemon on its defaults in one terminal, run this in another:
//   npm ci && npm start
//   node examples/two-agents.mjs
// With the README quickstart's daemon, export its YELLO_SOCKET and YELLO_DATA_DIR first (this
// script reads the admin token from $YELLO_DATA_DIR/admin.token, like the CLI). It writes nothing.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** One line and a non-zero exit, never a stack: what went wrong and what to do. */
function fail(message, code = 1) {
  console.error(`two-agents: ${message}`);
  process.exit(code);
}
process.on('unhandledRejection', (err) => fail(describe(err)));

function describe(err) {
  if (err?.type === 'CONNECTION_LOST') return `${err.message} (start the daemon first: npm start, or set YELLO_SOCKET to its socket)`;
  return err?.type ? `${err.type}: ${err.message}` : String(err?.message ?? err);
}

// The package's own name resolves to dist/client (package.json "exports"), as in an app that depends on yello.
const { YelloClient, Coordinator, MemoryCursorStore, defaultSocketPath, verifyRecord } = await import('yello').catch(() =>
  fail('the client library is not built: run npm run build (npm start builds it too)', 2),
);

// The CLI's defaults (docs/protocol.md §2): $YELLO_SOCKET or the default socket, $YELLO_DATA_DIR or the default data dir.
const socketPath = process.env.YELLO_SOCKET || defaultSocketPath();
const dataDir = process.env.YELLO_DATA_DIR || join(process.env.XDG_STATE_HOME || join(homedir(), '.local/state'), 'yello');
let adminToken;
try {
  adminToken = readFileSync(join(dataDir, 'admin.token'), 'utf8').trim();
} catch (err) {
  fail(`cannot read the admin token ${join(dataDir, 'admin.token')} (${err.code}): set YELLO_DATA_DIR to the daemon's --data-dir`, 2);
}

try {
  const admin = await YelloClient.connect({ socketPath, token: adminToken });
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
} catch (err) {
  fail(describe(err));
}
