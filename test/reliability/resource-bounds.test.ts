// Resource bounds of one ordinary connection (docs/security.md "Limits", docs/protocol.md §3.2).
// These are bounds, not timings: the daemon's resident memory (VmRSS of its process, read from
// /proc/<pid>/status) and whether another client still gets answers while one connection asks
// for far more than it reads. Fault model: a participant that pipelines big requests or
// subscriptions and never reads its socket.
//
//   - 64 `chats.follow` from the start of a chat of 520 records of ~256 KiB, never read:
//     RSS < 200 MB, another connection's `daemon.status` median < 50 ms;
//   - 16 pipelined `chats.history {limit: 500}` on that chat, never read: RSS < 200 MB; once the
//     client reads, every answer arrives and each page is cut at the 1 MiB byte budget;
//   - one 1 MiB line `[0,0,…]` before `session.hello` gets one small error, not an array of
//     hundreds of thousands of errors.
//
// The chat is ~136 MB of records, so that an answer or a catch-up without a byte budget is
// ~130 MB: the bounds above fail by gigabytes, not by a margin, on a daemon that lacks them.

import fs from 'node:fs';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MethodResults } from '../../src/shared/methods.js';
import { WireClient, ok, type Wire, type WireResponse } from '../helpers/wire-fixtures.js';
import { setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';

const MiB = 1_048_576;
const RECORDS = 520;
/** Content per record: the append line stays under the 256 KiB cap with its envelope. */
const CONTENT_CHARS = 261_000;
const RSS_LIMIT_MB = 200;
const STATUS_MEDIAN_MS = 50;
/** How long each scenario watches the daemon after the unread requests went out. */
const WATCH_MS = 4_000;

// A process of its own: its resident memory (/proc/PID/status) is measured.
const { daemon, admin, restart } = useDaemon({ extraArgs: ['--policy', 'open'], process: true });
let chat: ReadingChat;
/** A compound cursor at the chat's start (before the big records). */
let startCursor: string;

function vmRssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

/** What a raw connection reads: answers to hand-written requests, and notifications. */
type Line = WireResponse<MethodResults['chats.history']> & { method?: string };

/**
 * A raw connection that sends lines and reads nothing until `socket.resume()`; from then on
 * every message it reads lands in `lines`, in order.
 */
async function unreadClient(socketPath: string): Promise<{ client: Wire; lines: Line[]; send(values: unknown[]): void }> {
  const client = await WireClient.connect<MethodResults>(socketPath, { paused: true });
  const lines: Line[] = [];
  client.on('message', (m) => lines.push(m as Line));
  const send = (values: unknown[]): void => {
    client.sendRaw(values.map((v) => JSON.stringify(v) + '\n').join(''));
  };
  return { client, lines, send };
}

/**
 * Watches the daemon for WATCH_MS: peak RSS, and `daemon.status` round trips on `other`
 * (a hello'd connection of its own). Returns the peak and the latencies.
 */
async function watch(other: Wire): Promise<{ peakMb: number; latencies: number[] }> {
  const pid = daemon().pid!;
  let peakMb = vmRssMb(pid);
  const latencies: number[] = [];
  const deadline = Date.now() + WATCH_MS;
  const sampler = setInterval(() => {
    if (daemon().running) peakMb = Math.max(peakMb, vmRssMb(pid));
  }, 20);
  try {
    while (Date.now() < deadline && daemon().running) {
      const t = performance.now();
      ok(await other.call('daemon.status', {}, 15_000), 'daemon.status');
      latencies.push(performance.now() - t);
      peakMb = Math.max(peakMb, vmRssMb(pid));
      // Pacing the probes over the watch window (time is the subject): one status every ~25 ms.
      await new Promise((r) => setTimeout(r, 25));
    }
  } finally {
    clearInterval(sampler);
  }
  return { peakMb, latencies };
}

beforeAll(async () => {
  chat = await setupChat(daemon(), admin());
  startCursor = ok(await chat.bob.client.call('chats.follow', { chatId: chat.chatId }), 'chats.follow').cursor;
  const filler = 'lorem ipsum dolor sit amet, consectetur adipiscing elit '.repeat(Math.ceil(CONTENT_CHARS / 56)).slice(0, CONTENT_CHARS);
  // 16 appends in flight at consecutive positions (the daemon admits a connection's requests in
  // order): the setup is CPU-bound, and this lets group commit share the syncs.
  const IN_FLIGHT = 16;
  let next = BigInt(chat.wa.next);
  for (let i = 0; i < RECORDS; i += IN_FLIGHT) {
    const n = Math.min(IN_FLIGHT, RECORDS - i);
    const answers = await Promise.all(
      Array.from({ length: n }, (_, k) =>
        chat.alice.client.call(
          'streams.append',
          {
            streamId: chat.streamA,
            coordinatorToken: chat.wa.token,
            generation: '1',
            expectedPosition: String(next + BigInt(k)),
            operationId: `big-${i + k}`,
            records: [{ type: 'chat.message', messageId: `big.${i + k}`, content: `${i + k} ${filler}` }],
          },
          60_000,
        ),
      ),
    );
    answers.forEach((a) => ok(a, 'streams.append'));
    next += BigInt(n);
  }
}, 180_000);

// Each scenario starts from a freshly started daemon on the same store, so one scenario's heap
// growth is not the next one's baseline.
beforeEach(async () => {
  await restart();
}, 30_000);

describe('one connection that asks for much more than it reads', () => {
  it(`64 stalled chats.follow from the start of ${RECORDS} records of ~256 KiB: RSS < ${RSS_LIMIT_MB} MB, daemon.status elsewhere stays fast`, async () => {
    const baseline = vmRssMb(daemon().pid!);
    const other = await daemon().connectAs();
    const greedy = await unreadClient(daemon().socketPath);
    greedy.send([
      { jsonrpc: '2.0', id: 0, method: 'session.hello', params: { token: chat.bob.token } },
      ...Array.from({ length: 64 }, (_, i) => ({
        jsonrpc: '2.0',
        id: i + 1,
        method: 'chats.follow',
        params: { chatId: chat.chatId, cursor: startCursor },
      })),
    ]);
    const { peakMb, latencies } = await watch(other);
    console.log(
      `[resources] 64 stalled followers: RSS ${baseline.toFixed(0)} MB → peak ${peakMb.toFixed(0)} MB; daemon.status elsewhere: ` +
        `median ${median(latencies).toFixed(1)} ms, max ${Math.max(...latencies).toFixed(1)} ms over ${latencies.length} calls`,
    );
    expect(daemon().running, 'the daemon survived').toBe(true);
    expect(peakMb, 'peak RSS of the daemon').toBeLessThan(RSS_LIMIT_MB);
    expect(median(latencies), 'median daemon.status latency on another connection').toBeLessThan(STATUS_MEDIAN_MS);
    expect(Math.max(...latencies), 'worst daemon.status latency on another connection').toBeLessThan(1_000);

    // The stalled client is slow, not gone: once it reads, its deliveries resume where they paused.
    greedy.client.socket.resume();
    await waitFor(() => greedy.lines.filter((l) => l.method === 'chats.batch').length >= 8, 'deliveries after the client reads', 30_000);
    expect(greedy.client.socket.destroyed, 'the connection stayed open').toBe(false);
    greedy.client.close();
  }, 120_000);

  it(`16 pipelined chats.history {limit: 500} never read: RSS < ${RSS_LIMIT_MB} MB; each page is cut at 1 MiB of records`, async () => {
    const baseline = vmRssMb(daemon().pid!);
    const other = await daemon().connectAs();
    const greedy = await unreadClient(daemon().socketPath);
    greedy.send([
      { jsonrpc: '2.0', id: 0, method: 'session.hello', params: { token: chat.bob.token } },
      ...Array.from({ length: 16 }, (_, i) => ({
        jsonrpc: '2.0',
        id: i + 1,
        method: 'chats.history',
        params: { chatId: chat.chatId, limit: 500 },
      })),
    ]);
    const { peakMb, latencies } = await watch(other);
    console.log(
      `[resources] 16 pipelined chats.history {limit: 500} unread: RSS ${baseline.toFixed(0)} MB → peak ${peakMb.toFixed(0)} MB; daemon.status elsewhere: ` +
        `median ${median(latencies).toFixed(1)} ms, max ${Math.max(...latencies).toFixed(1)} ms`,
    );
    expect(daemon().running, 'the daemon survived').toBe(true);
    expect(peakMb, 'peak RSS of the daemon').toBeLessThan(RSS_LIMIT_MB);
    expect(median(latencies), 'median daemon.status latency on another connection').toBeLessThan(STATUS_MEDIAN_MS);

    greedy.client.socket.resume();
    await waitFor(() => greedy.lines.filter((l) => typeof l.id === 'number' && l.id >= 1).length === 16, 'the 16 history answers', 30_000);
    for (const answer of greedy.lines.filter((l) => typeof l.id === 'number' && l.id >= 1)) {
      const entries = ok(answer, 'chats.history').entries;
      expect(entries.length, 'a page always holds at least one record').toBeGreaterThanOrEqual(1);
      const bytes = entries.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)), 0);
      const last = Buffer.byteLength(JSON.stringify(entries.at(-1)));
      // Cut once the budget is reached: everything before the last record is under 1 MiB.
      expect(bytes - last, 'page bytes before its last record').toBeLessThan(MiB);
      expect(answer.result?.nextCursor, 'a page cut by bytes continues').not.toBeNull();
    }
    greedy.client.close();
  }, 120_000);

  it('a 1 MiB batch of invalid requests before session.hello gets one small error, and others are not stalled', async () => {
    const other = await daemon().connectAs();
    const anon = await unreadClient(daemon().socketPath);
    anon.client.socket.resume();
    const line = '[' + Array.from({ length: 524_000 }, () => '0').join(',') + ']';
    expect(line.length).toBeLessThan(MiB);
    const t = performance.now();
    anon.client.sendRaw(line + '\n');
    await waitFor(() => anon.lines.length >= 1, 'the answer to the batch', 10_000);
    const elapsed = performance.now() - t;
    const status = performance.now();
    ok(await other.call('daemon.status', {}), 'daemon.status');
    const statusMs = performance.now() - status;
    // Anything more that was coming has arrived by the time a sentinel on the same connection is answered.
    anon.client.sendRaw(JSON.stringify({ jsonrpc: '2.0', id: 'sentinel', method: 'daemon.status' }) + '\n');
    await waitFor(() => anon.lines.some((l) => l.id === 'sentinel'), 'the sentinel', 10_000);
    console.log(
      `[resources] 1 MiB [0,0,…] before hello: ${anon.client.bytesReceived} bytes back in ${elapsed.toFixed(0)} ms; daemon.status elsewhere ${statusMs.toFixed(1)} ms`,
    );
    expect(anon.lines[0]!.id).toBeNull();
    expect(anon.lines[0]!.error?.code).toBe(-32600);
    expect(anon.client.bytesReceived, 'bytes answered for the batch line and the sentinel').toBeLessThan(4_096);
    anon.client.close();
  });
});
