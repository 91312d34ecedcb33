// Wake latency of the client library's waits (issue 20): how long after a peer's append returns
// a waiting Conversation.next({waitMs}) and Inbox.wait({waitMs}) return its batch, and that a
// wait over receipts and fences only lasts its waitMs. Prints one table on stdout.
//
//   npm run build && node bench/wake-latency.mjs        # BENCH_WAKE_SAMPLES=200 for more samples

import { ChatWriter, Conversation, Inbox, YelloClient } from '../dist/client/index.js';
import { Daemon, cleanupAll, envNumber, fmt, makeTempDir, median, nowMs, percentile, sleep, table } from './lib.mjs';

const SAMPLES = envNumber('BENCH_WAKE_SAMPLES', 50);
const QUIET_WAIT_MS = 500;

const connect = (daemon, token) => YelloClient.connect({ socketPath: daemon.socketPath, token, clientName: 'bench-wake' });

async function agents(admin) {
  const make = async (name) => {
    const r = await admin.rpc.agents.create({ username: `${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`, name });
    return { id: r.agent.id, token: r.token };
  };
  const alice = await make('alice');
  const bob = await make('bob');
  const { chat } = await admin.rpc.chats.open({ agentAId: alice.id, agentBId: bob.id });
  return { alice, bob, chatId: chat.id };
}

/**
 * `SAMPLES` times: bob waits, alice sends once. Per sample: ms from alice calling send() to
 * bob's wait returning the batch (the durable append included), and to alice's answer.
 */
async function wakes(wait, writer) {
  const wake = [];
  const answer = [];
  for (let i = 0; i < SAMPLES; i++) {
    const waiting = wait().then(() => nowMs());
    await sleep(5); // let the wait begin
    const t0 = nowMs();
    await writer.send(`sample ${i}`);
    answer.push(nowMs() - t0);
    wake.push((await waiting) - t0);
  }
  return { wake, answer };
}

const row = (name, { wake, answer }) => [
  name,
  SAMPLES,
  fmt.ms(median(wake)),
  fmt.ms(percentile(wake, 0.95)),
  fmt.ms(Math.max(...wake)),
  fmt.ms(median(answer)),
];

async function main() {
  const dir = makeTempDir('yb-wake-');
  const daemon = new Daemon(dir);
  await daemon.start();
  const admin = await connect(daemon, daemon.adminToken);
  const rows = [];
  try {
    // Conversation.next
    {
      const { alice, bob, chatId } = await agents(admin);
      const ac = await connect(daemon, alice.token);
      const bc = await connect(daemon, bob.token);
      const conv = await Conversation.open(bc, { chatId });
      const writer = new ChatWriter(ac, { chatId });
      rows.push(row('Conversation.next, a message', await wakes(() => conv.next({ waitMs: 10_000 }), writer)));

      // A fence and a receipt only: alice waits while bob acknowledges her last message (his
      // first write, so his claim's fence too); her wait lasts its waitMs.
      const bobWriter = new ChatWriter(bc, { chatId, conversation: conv });
      const aliceConv = await Conversation.open(ac, { chatId, start: 'end' });
      const t1 = nowMs();
      const aliceQuiet = aliceConv.next({ waitMs: QUIET_WAIT_MS });
      await bobWriter.ack(conv.pending().at(-1));
      const got = await aliceQuiet;
      rows.push([
        `Conversation.next over a fence + receipt (waitMs ${QUIET_WAIT_MS})`,
        1,
        fmt.ms(nowMs() - t1),
        got ? 'WOKE' : 'lasted',
        '',
      ]);
      await aliceConv.close();
      await conv.close();
      await writer.release();
      await bobWriter.release();
      ac.close();
      bc.close();
    }
    // Inbox.wait, the chat opened after the inbox started.
    {
      const { alice, bob } = await agents(admin);
      const bc = await connect(daemon, bob.token);
      const inbox = await Inbox.open(bc);
      const ac = await connect(daemon, alice.token);
      const { chat } = await ac.rpc.chats.open({ peerAgentId: bob.id });
      const writer = new ChatWriter(ac, { chatId: chat.id });
      rows.push(row('Inbox.wait, a chat opened later', await wakes(() => inbox.wait({ waitMs: 10_000 }), writer)));
      await writer.release();
      await inbox.close();
      ac.close();
      bc.close();
    }
  } finally {
    admin.close();
    await daemon.stop();
    cleanupAll();
  }
  console.log(
    table(
      'Wake latency: ms from the sender calling send() to the waiter having the batch (no polling interval); the last column is the send() itself',
      ['wait', 'n', 'wake p50', 'wake p95', 'wake max', 'send() p50'],
      rows,
    ),
  );
}

main().catch((err) => {
  console.error(err);
  cleanupAll();
  process.exit(1);
});
