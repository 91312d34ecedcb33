// One daemon-wide memory budget for queued answers and pending reads (issue 21, finding 6;
// docs/security.md "Memory budget"). Fault model: many connections that pipeline 16
// `chats.history {limit: 500}` over ~255 KB messages and never read. The per-connection caps
// held on 32fc3a5, but nothing bounded their sum: RSS 1.9–2.2 GB at 64 such connections. Here:
// the daemon's peak VmRSS (/proc/<pid>/status) stays under RSS_LIMIT_MB, another client's
// calls keep answering, and the connections the daemon sheds are audited with their reason.
// (bench/limits.mjs measures 64 and 320 connections and the other figures of docs/security.md.)

import fs from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { MethodResults } from '../../src/shared/methods.js';
import { WireClient, ok, type Wire } from '../helpers/wire-fixtures.js';
import { setupChat, type ReadingChat } from '../helpers/reading-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';

const CONNECTIONS = 64;
const RECORDS = 40;
const CONTENT_CHARS = 255_000;
/**
 * The bound one run must keep. Its peak depends on when V8's major GC comes, since the pages'
 * large strings die only there: 312–402 MB over 17 runs with the 32 MiB budget (docs/security.md;
 * the 400 MB target is bench/limits.mjs's, on a quiet machine). What this guards against is far
 * above: 520–686 MB when a string left unread held 3 bytes per character (issue 52), 1.9–2.2 GB
 * with no daemon-wide budget. The default budget itself is pinned in test/unit/daemon-options.
 */
const RSS_LIMIT_MB = 450;
/** Watch at least this long, then until the daemon has done what it will do (its CPU goes quiet), at most MAX_WATCH_MS. */
const WATCH_MS = 5_000;
const MAX_WATCH_MS = 40_000;

// A process of its own: its resident memory (/proc/PID/status) is measured.
const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open', '--max-sessions-per-agent', '1000'], process: true });
let chat: ReadingChat;

/** CPU time of `pid` so far, in clock ticks (utime + stime of /proc/<pid>/stat). */
function cpuTicks(pid: number): number {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return Number(f[11]) + Number(f[12]);
}

function vmRssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

beforeAll(async () => {
  chat = await setupChat(daemon(), admin());
  const filler = 'lorem ipsum dolor sit amet '.repeat(Math.ceil(CONTENT_CHARS / 27)).slice(0, CONTENT_CHARS);
  for (let i = 0; i < RECORDS; i++) {
    ok(
      await chat.alice.client.call('streams.append', {
        streamId: chat.streamA,
        coordinatorToken: chat.wa.token,
        generation: '1',
        expectedPosition: String(BigInt(chat.wa.next) + BigInt(i)),
        operationId: `big-${i}`,
        records: [{ type: 'chat.message', messageId: `big.${i}`, content: `${i} ${filler}` }],
      }),
      'streams.append',
    );
  }
}, 60_000);

describe('many connections that never read their answers', () => {
  it(`${CONNECTIONS} connections × 16 pipelined chats.history {limit: 500}, never read: peak RSS < ${RSS_LIMIT_MB} MB; another client keeps answering`, async () => {
    const pid = daemon().pid!;
    const baseline = vmRssMb(pid);
    const other = await daemon().connectAs();
    const reader = await daemon().connectAs(chat.alice.token);
    const greedy: Wire[] = [];
    for (let c = 0; c < CONNECTIONS; c++) {
      const w = await WireClient.connect<MethodResults>(daemon().socketPath, { paused: true });
      greedy.push(w);
      w.sendRaw(
        [
          { jsonrpc: '2.0', id: 0, method: 'session.hello', params: { token: chat.bob.token } },
          ...Array.from({ length: 16 }, (_, i) => ({
            jsonrpc: '2.0',
            id: i + 1,
            method: 'chats.history',
            params: { chatId: chat.chatId, limit: 500 },
          })),
        ]
          .map((m) => JSON.stringify(m) + '\n')
          .join(''),
      );
    }
    let peakMb = baseline;
    const sampler = setInterval(() => {
      if (daemon().running) peakMb = Math.max(peakMb, vmRssMb(pid));
    }, 20);
    const latencies: number[] = [];
    // A client that reads still gets its page: it competes for CPU with the greedy reads, not for memory.
    const th = performance.now();
    const history = reader.call('chats.history', { chatId: chat.chatId, limit: 5 }, 30_000).then((r) => {
      expect(ok(r, 'chats.history').entries.length).toBeGreaterThan(0);
      return performance.now() - th;
    });
    const started = performance.now();
    // The machine is shared: the greedy work may take long to run. The bound must hold once it
    // has all run, so the watch lasts until the daemon's CPU use drops under 10% for 1 s.
    let lastTicks = cpuTicks(pid);
    let lastCheck = performance.now();
    let quiet = false;
    try {
      while (performance.now() - started < MAX_WATCH_MS && !(quiet && performance.now() - started >= WATCH_MS)) {
        if (performance.now() - lastCheck >= 1_000) {
          const ticks = cpuTicks(pid);
          quiet = (ticks - lastTicks) / ((performance.now() - lastCheck) / 10) < 0.1;
          lastTicks = ticks;
          lastCheck = performance.now();
        }
        const t = performance.now();
        ok(await other.call('daemon.status', {}, 15_000), 'daemon.status');
        latencies.push(performance.now() - t);
        // Pacing the probes over the watch window (time is the subject).
        await new Promise((r) => setTimeout(r, 25));
      }
    } finally {
      clearInterval(sampler);
    }
    const historyMs = await history;
    const sorted = [...latencies].sort((a, b) => a - b);
    const p99 = sorted[Math.floor(sorted.length * 0.99)] ?? NaN;
    const shed = daemon().stdoutLines.filter((l) => l.includes('"reason":"MEMORY_BUDGET"')).length;
    console.log(
      `[memory-budget] ${CONNECTIONS} never-reading connections: RSS ${baseline.toFixed(0)} MB → peak ${peakMb.toFixed(0)} MB; ` +
        `watched ${((performance.now() - started) / 1000).toFixed(1)} s; daemon.status elsewhere p50 ${sorted[Math.floor(sorted.length / 2)]?.toFixed(1)} ms p99 ${p99.toFixed(1)} ms; ` +
        `a reading client's chats.history ${historyMs.toFixed(0)} ms; ${shed} connections shed (MEMORY_BUDGET)`,
    );
    expect(daemon().running, 'the daemon survived').toBe(true);
    expect(peakMb, 'peak RSS of the daemon').toBeLessThan(RSS_LIMIT_MB);
    // Loose: the bound is on memory; this machine's CPU is shared (seen: p99 1.6 s at load 20 on 2 cores).
    expect(p99, 'p99 of daemon.status on another connection').toBeLessThan(5_000);
    for (const w of greedy) w.close();
  }, 90_000);
});
