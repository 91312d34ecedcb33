// Two agents talking through yellod with Coordinators, from setup to a verified transcript.
// From a fresh clone: start a daemon on its defaults in one terminal, run this in another:
//   npm ci && npm start
//   node examples/two-agents.mjs
// With the README quickstart's daemon, export its YELLO_SOCKET and YELLO_DATA_DIR first (this
// script reads the admin token from $YELLO_DATA_DIR/admin.token, like the CLI). It writes nothing
// to disk. Its agents, example-alice and example-bob, are made by the first run and reused by
// every later one (with fresh tokens), so runs leave no agents behind; one run at a time.
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
  // The example's own agents: made once, then found again, each time with a fresh token.
  async function exampleAgent(username, name) {
    try {
      const { agent } = await admin.rpc.agents.get({ username });
      if (agent.disabled) fail(`the agent ${username} is disabled: this example reuses it; use a fresh data dir`);
      return { agent, token: (await admin.rpc.agents.rotateToken({ agentId: agent.id })).token };
    } catch (err) {
      if (err?.type !== 'NOT_FOUND') throw err;
      return admin.rpc.agents.create({ username, name });
    }
  }
  const alice = await exampleAgent('example-alice', 'Alice');
  const bob = await exampleAgent('example-bob', 'Bob');
  // Idempotent, as chats.open is (it finds the chat of an earlier run).
  await admin.rpc.grants.add({ agentId: alice.agent.id, peerAgentId: bob.agent.id });
  await admin.rpc.grants.add({ agentId: bob.agent.id, peerAgentId: alice.agent.id });
  const { chat, streams } = await admin.rpc.chats.get({
    chatId: (await admin.rpc.chats.open({ agentAId: alice.agent.id, agentBId: bob.agent.id })).chat.id,
  });
  // Where this run starts in each stream: the transcript below shows this run's messages only.
  const runStart = new Map(streams.map((s) => [s.streamId, { generation: s.generation, position: BigInt(s.nextPosition) }]));
  const thisRun = (e) => {
    const start = runStart.get(e.streamId);
    return !start || e.generation !== start.generation || BigInt(e.position) >= start.position;
  };

  const received = { alice: [], bob: [] };
  let done;
  const finished = new Promise((r) => (done = r));

  // Bob answers every message he is shown, acknowledging it in the same append.
  const bobCoordinator = new Coordinator({
    socketPath,
    token: bob.token,
    chatId: chat.id,
    cursorStore: new MemoryCursorStore(),
    start: 'end', // this run's messages only (an earlier run may have been stopped midway)
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
    start: 'end',
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
  const entries = [];
  let cursor;
  do {
    const page = await admin.rpc.chats.history({ chatId: chat.id, direction: 'forward', ...(cursor ? { cursor } : {}) });
    entries.push(...page.entries.filter(thisRun));
    cursor = page.nextCursor;
  } while (cursor);
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
