// Channel latency (issue 50 point 1): how long after a peer's append is answered a client of
// `yello mcp --channel` has the `notifications/claude/channel` event. The server is the real one
// (createMcpServer from dist/, the same code `yello mcp --channel` runs) connected to an MCP client
// over the SDK's InMemoryTransport, so the figure is the daemon's push, the channel's checks
// (one chats.get per event) and the MCP framing, without a pipe to a child process. Baseline,
// in the same run and for the same appends: a bare Inbox.wait of the same agent (the library's
// wake). Prints one table on stdout; target: channel p50 ≤ 100 ms.
//
//   npm run build && node bench/channel-latency.mjs        # BENCH_CHANNEL_SAMPLES=200 for more samples

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { pino } from 'pino';
import { ChatWriter, Inbox, YelloClient } from '../dist/client/index.js';
import { createMcpServer } from '../dist/mcp/create-server.js';
import { Daemon, cleanupAll, envNumber, fmt, makeTempDir, median, nowMs, percentile, sleep, table } from './lib.mjs';

const SAMPLES = envNumber('BENCH_CHANNEL_SAMPLES', 50);
/** Longer than the channel's pace (200 ms between rounds), so every sample is a first message after quiet. */
const GAP_MS = 250;

const connect = (daemon, token) => YelloClient.connect({ socketPath: daemon.socketPath, token, clientName: 'bench-channel' });

async function main() {
  const dir = makeTempDir('yb-channel-');
  const daemon = new Daemon(dir);
  await daemon.start();
  const admin = await connect(daemon, daemon.adminToken);
  const make = async (name) => {
    const r = await admin.rpc.agents.create({ username: `${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`, name });
    return { id: r.agent.id, token: r.token };
  };
  const alice = await make('alice');
  const bob = await make('bob');
  const { chat } = await admin.rpc.chats.open({ agentAId: alice.id, agentBId: bob.id });

  const server = await createMcpServer({
    token: bob.token,
    socketPath: daemon.socketPath,
    replace: false,
    resumeAfterBreak: false,
    channel: true,
    log: pino({ level: 'silent' }),
  });
  const client = new Client({ name: 'bench-channel', version: '1.0.0' });
  const waiting = [];
  client.fallbackNotificationHandler = (n) => {
    if (n.method === 'notifications/claude/channel') waiting.shift()?.(nowMs());
    return Promise.resolve();
  };
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);

  const bc = await connect(daemon, bob.token);
  const inbox = await Inbox.open(bc);
  const ac = await connect(daemon, alice.token);
  const writer = new ChatWriter(ac, { chatId: chat.id });

  // Per sample, ms from the send() call (t0) and from its answer (t1) to the event / the wake.
  const channel = { fromCall: [], fromAnswer: [] };
  const wake = { fromCall: [], fromAnswer: [] };
  const answer = [];
  try {
    // One message first, so that the claim's fence and the channel's start are out of the way.
    const warm = new Promise((resolve) => waiting.push(resolve));
    await writer.send('warm-up');
    await warm;
    await inbox.wait({ waitMs: 10_000 });
    for (let i = 0; i < SAMPLES; i++) {
      await sleep(GAP_MS);
      const pushed = new Promise((resolve) => waiting.push(resolve));
      const woke = inbox.wait({ waitMs: 10_000 }).then(() => nowMs());
      const t0 = nowMs();
      await writer.send(`sample ${i}`);
      const t1 = nowMs();
      answer.push(t1 - t0);
      const tp = await pushed;
      const tw = await woke;
      channel.fromCall.push(tp - t0);
      channel.fromAnswer.push(tp - t1);
      wake.fromCall.push(tw - t0);
      wake.fromAnswer.push(tw - t1);
    }
  } finally {
    await writer.release();
    await inbox.close();
    ac.close();
    bc.close();
    await client.close();
    await server.close();
    admin.close();
    await daemon.stop();
    cleanupAll();
  }
  const row = (name, v) => [
    name,
    SAMPLES,
    fmt.ms(median(v.fromAnswer)),
    fmt.ms(percentile(v.fromAnswer, 0.95)),
    fmt.ms(Math.max(...v.fromAnswer)),
    fmt.ms(median(v.fromCall)),
    fmt.ms(percentile(v.fromCall, 0.95)),
  ];
  const ratio = median(channel.fromCall) / median(wake.fromCall);
  console.log(
    table(
      `Channel latency, ms to the event received: from the peer's append answered (target p50 ≤ 100 ms), and from its send() call. A push may arrive before the sender has its answer (the daemon notifies followers as it answers), so "from answered" can be negative. Channel / Inbox.wait (p50 from the call): ${fmt.ratio(ratio)}`,
      ['what', 'n', 'p50 (answered)', 'p95 (answered)', 'max (answered)', 'p50 (call)', 'p95 (call)'],
      [
        row('notifications/claude/channel (yello mcp --channel)', channel),
        row('Inbox.wait of the same agent (baseline)', wake),
        ['the peer send() itself (durable append)', SAMPLES, '', '', '', fmt.ms(median(answer)), fmt.ms(percentile(answer, 0.95))],
      ],
    ),
  );
}

main().catch((err) => {
  console.error(err);
  cleanupAll();
  process.exit(1);
});
