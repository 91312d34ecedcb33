// Load for section (f) of run.mjs, in a process of its own so that its CPU is the client's
// alone: N clients run closed loops of one ~100 B chat.message per append against a daemon.
//
//   mode 'coordinator': the client library as an agent embeds it — a `Coordinator` from
//     dist/client per client (own connection, claims its stream, follows the chat), and
//     `await coordinator.send(text)` in a loop.
//   mode 'raw': the bench's bare NDJSON client (the shared raw wire client, as in section (a)) on the same kind
//     of agents, for comparison: claim, then `streams.append` in a loop.
//
// Forked by run.mjs with an IPC channel. In: {cmd: 'start', mode, socketPath, clients: [{token,
// chatId}]}, {cmd: 'run', seconds}, {cmd: 'stop'}. Out: {ok: 'started'}, {ok: 'ran', appends,
// seconds, p50, p99}, {ok: 'stopped'}, or {error}. The parent reads this process's CPU from
// /proc around each 'run'.

import { Coordinator, MemoryCursorStore } from '../dist/client/index.js';
import { appendOne, content, nowMs, openConn, percentile } from './lib.mjs';

let clients = [];
let sent = 0;

/** One client: `append()` sends one message and resolves when the daemon answered it. */
async function startCoordinator(socketPath, { token, chatId }) {
  const coordinator = new Coordinator({
    token,
    chatId,
    socketPath,
    replace: true,
    callTimeoutMs: 30_000,
    adapter: { present() {} },
    cursorStore: new MemoryCursorStore(),
  });
  await coordinator.start();
  return { append: () => coordinator.send(content((sent++).toString(36))), stop: () => coordinator.stop() };
}

async function startRaw(socketPath, { token, chatId }) {
  const conn = await openConn(socketPath, token);
  const streamId = `${chatId}:${conn.helloResult.agentId}`;
  const claim = await conn.request('streams.claim', { streamId, replace: true });
  const co = { conn, streamId, coordinatorToken: claim.coordinatorToken, generation: claim.generation, next: Number(claim.nextPosition) };
  return { append: () => appendOne(co, 1, 30_000), stop: async () => conn.close() };
}

async function run(seconds) {
  const latencies = [];
  const t0 = nowMs();
  const deadline = t0 + seconds * 1000;
  await Promise.all(
    clients.map(async (c) => {
      while (nowMs() < deadline) {
        const s = nowMs();
        await c.append();
        latencies.push(nowMs() - s);
      }
    }),
  );
  return { appends: latencies.length, seconds: (nowMs() - t0) / 1000, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
}

process.on('message', (msg) => {
  const answer = async () => {
    if (msg.cmd === 'start') {
      const start = msg.mode === 'coordinator' ? startCoordinator : startRaw;
      clients = await Promise.all(msg.clients.map((c) => start(msg.socketPath, c)));
      return { ok: 'started' };
    }
    if (msg.cmd === 'run') return { ok: 'ran', ...(await run(msg.seconds)) };
    if (msg.cmd === 'stop') {
      await Promise.all(clients.map((c) => c.stop()));
      clients = [];
      return { ok: 'stopped' };
    }
    throw new Error(`unknown command ${msg.cmd}`);
  };
  answer().then(
    (a) => process.send(a),
    (err) => process.send({ error: String(err?.stack ?? err) }),
  );
});
process.on('disconnect', () => process.exit(0));
