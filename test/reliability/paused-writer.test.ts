// Paused writer (docs/protocol.md §6.6 streams.claim: "Every earlier token is FENCED from then on"). Fault model:
// SIGSTOP of a client process. A coordinator in its own process (fixtures/writer.mjs, built
// client) claims its stream and appends every ~50 ms; the test freezes it with SIGSTOP, claims
// the same stream with replace: true and appends, then thaws it with SIGCONT. Every append the
// old writer sends after the thaw must fail with FENCED, and nothing of it may be written after
// the new epoch's fence record: after that fence only the new coordinator's operationIds appear.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/daemon-process.js';
import { readFileSync } from 'node:fs';
import { ok, type Result } from '../helpers/wire-fixtures.js';
import { HistoryChecker, readWhole, type AppendInput } from '../helpers/history-checker.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';

const FIXTURE = path.join(repoRoot, 'test/reliability/fixtures/writer.mjs');

const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open'] });
let child: ChildProcess | null = null;

afterEach(async () => {
  // Only the child this test started, by its pid.
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exited;
  }
  child = null;
});

/** One JSON line of fixtures/writer.mjs (`result` when ok, `error` when not). */
interface WriterLine {
  event: 'claimed' | 'send' | 'result' | 'state' | 'unhandled';
  seq: number;
  operationId?: string;
  /** send (raw mode): what it asked for. */
  generation?: string;
  expectedPosition?: string;
  records?: AppendInput[];
  ok?: boolean;
  result?: Result<'streams.append'>;
  error?: { type: string | null; code: number | null; data: { type?: string; epoch?: string; streamId?: string } | null; message: string };
  state?: string;
}

interface WriterProcess {
  proc: ChildProcess;
  lines: WriterLine[];
  stderr: string;
}

function startWriter(token: string, chatId: string, mode: 'raw' | 'coordinator'): WriterProcess {
  const proc = spawn(
    process.execPath,
    [FIXTURE, '--socket', daemon().socketPath, '--token', token, '--chat', chatId, '--mode', mode, '--interval', '50', '--prefix', 'old'],
    {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child = proc;
  const w: WriterProcess = { proc, lines: [], stderr: '' };
  let partial = '';
  proc.stdout.setEncoding('utf8');
  proc.stdout.on('data', (chunk: string) => {
    partial += chunk;
    let nl: number;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      if (line.trim()) w.lines.push(JSON.parse(line) as WriterLine);
    }
  });
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (c: string) => (w.stderr += c));
  return w;
}

/** waitFor, failing at once (with what it said) if the writer exits first. */
function waitForWriter<T>(fn: () => T, what: string, w: WriterProcess, timeoutMs = 15_000): Promise<NonNullable<T>> {
  return waitFor(
    () => {
      if (w.proc.exitCode !== null)
        throw new Error(`writer exited (${w.proc.exitCode}) while waiting for ${what}: ${w.stderr} ${JSON.stringify(w.lines.slice(-5))}`);
      return fn();
    },
    `${what}; writer said ${JSON.stringify(w.lines.slice(-5))} ${w.stderr}`,
    timeoutMs,
  );
}

/** Whether `pid` is stopped (state T in /proc/<pid>/stat). */
function isStopped(pid: number): boolean {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('T') ?? false;
}

const results = (w: WriterProcess) => w.lines.filter((l) => l.event === 'result');
const sends = (w: WriterProcess) => w.lines.filter((l) => l.event === 'send');

/** Two agents (PII policy off) and their chat; returns the author's token and stream. */
async function setupChat(): Promise<{ token: string; agentId: string; chatId: string; streamId: string }> {
  const tag = Math.random().toString(36).slice(2, 8);
  const a = ok(await admin().call('agents.create', { username: `paused-a-${tag}`, name: 'Paused A' }));
  const b = ok(await admin().call('agents.create', { username: `paused-b-${tag}`, name: 'Paused B' }));
  for (const x of [a, b]) ok(await admin().call('agents.setPolicy', { agentId: x.agent.id, pii: 'off' }));
  const chat = ok(await admin().call('chats.open', { agentAId: a.agent.id, agentBId: b.agent.id })).chat;
  return { token: a.token, agentId: a.agent.id, chatId: chat.id, streamId: `${chat.id}:${a.agent.id}` };
}

/**
 * Freeze the writer, take over with replace: true, append as the new coordinator, thaw it, and
 * let it keep trying. Returns what the checks need.
 */
async function freezeReplaceThaw(w: WriterProcess, token: string, streamId: string, checker: HistoryChecker | null) {
  await waitForWriter(() => results(w).filter((r) => r.ok).length >= 5, 'five acknowledged appends of the old writer', w);
  process.kill(w.proc.pid!, 'SIGSTOP');
  await waitFor(() => isStopped(w.proc.pid!), 'the writer to stop');
  // Its stdout is a pipe, written synchronously, so every line it wrote is in the pipe now; one
  // turn of the event loop (its poll phase) reads them before we count.
  await new Promise((r) => setImmediate(r));
  const sentBeforeStop = sends(w).length;

  const me = await daemon().connectAs(token);
  const claim = ok(await me.call('streams.claim', { streamId, replace: true, reason: 'paused writer test' }), 'streams.claim replace');
  const fencePosition = (BigInt(claim.nextPosition) - 1n).toString();
  let next = claim.nextPosition;
  const newOps: string[] = [];
  const appendNew = async (n: number): Promise<void> => {
    const operationId = `new-${newOps.length + 1}`;
    const records: AppendInput[] = Array.from({ length: n }, (_, i) => ({
      type: 'chat.message',
      messageId: `${operationId}.${i}`,
      content: `new coordinator ${operationId} #${i}`,
    }));
    const h = checker?.invoke('new', { streamId, generation: claim.generation, expectedPosition: next, operationId, records });
    const r = ok(
      await me.call('streams.append', {
        streamId,
        coordinatorToken: claim.coordinatorToken,
        generation: claim.generation,
        expectedPosition: next,
        operationId,
        records,
      }),
      operationId,
    );
    if (h) checker!.ok(h, r);
    next = r.nextPosition;
    newOps.push(operationId);
  };
  await appendNew(1);
  await appendNew(2);
  await appendNew(1);

  process.kill(w.proc.pid!, 'SIGCONT');
  await waitForWriter(() => results(w).filter((r) => r.seq > sentBeforeStop).length >= 8, 'eight answers to the thawed writer', w);
  // The new coordinator keeps working while the old one spins.
  await appendNew(1);
  await appendNew(3);
  await waitForWriter(() => results(w).filter((r) => r.seq > sentBeforeStop).length >= 12, 'more answers to the thawed writer', w);
  process.kill(w.proc.pid!, 'SIGKILL');
  await new Promise((r) => {
    if (w.proc.exitCode !== null || w.proc.signalCode !== null) r(null);
    else w.proc.once('exit', r);
  });
  return { sentBeforeStop, claim, fencePosition, newOps, next };
}

describe('paused writer: SIGSTOP of a coordinator process, replace, SIGCONT', () => {
  it('fences every later append of the raw writer and writes nothing of it after the new fence', async () => {
    const { token, streamId, chatId } = await setupChat();
    const checker = new HistoryChecker({ exactContent: true, strictOrigin: true });
    const w = startWriter(token, chatId, 'raw');
    const { sentBeforeStop, claim, fencePosition, newOps, next } = await freezeReplaceThaw(w, token, streamId, checker);

    // Every append sent after the thaw failed with FENCED, naming the new epoch.
    const after = results(w).filter((r) => r.seq > sentBeforeStop);
    expect(after.length).toBeGreaterThanOrEqual(12);
    for (const r of after) {
      expect(r.ok, `old append ${r.operationId} after SIGCONT: ${JSON.stringify(r)}`).toBe(false);
      expect({ type: r.error!.type, code: r.error!.code, epoch: r.error!.data?.epoch, streamId: r.error!.data?.streamId }).toEqual({
        type: 'FENCED',
        code: 4090,
        epoch: claim.epoch,
        streamId,
      });
    }

    // The history: the old writer's appends (sent before the freeze, acknowledged or not) and the new ones.
    for (const s of sends(w)) {
      const h = checker.invoke('old', {
        streamId,
        generation: s.generation!,
        expectedPosition: s.expectedPosition!,
        operationId: s.operationId!,
        records: s.records!,
      });
      const r = results(w).find((x) => x.seq === s.seq);
      if (!r) checker.info(h, 'no answer before the writer was killed');
      else if (r.ok) checker.ok(h, r.result!);
      else checker.fail(h, { code: r.error!.code!, message: r.error!.message, data: r.error!.data ?? undefined });
    }
    const report = await checker.check(admin(), [streamId]);
    expect(report.problems).toEqual([]);
    expect(report.lost).toBe(0);

    // Read the stream: the new fence, then only the new coordinator's operations.
    const st = ok(await admin().call('streams.get', { streamId }));
    expect(st.nextPosition).toBe(next);
    expect(st.writer).toMatchObject({ epoch: claim.epoch, active: true });
    const records = await readWhole(admin(), streamId, st.generation, st.firstPosition, st.nextPosition);
    const fence = records.find((r) => r.position === fencePosition);
    expect(fence?.wrapper).toMatchObject({
      type: 'chat.writer-fence',
      operationId: `fence.${claim.epoch}`,
      fence: { epoch: claim.epoch, replaced: true },
    });
    const laterOps = records.filter((r) => BigInt(r.position) > BigInt(fencePosition)).map((r) => r.wrapper.operationId);
    expect([...new Set(laterOps)]).toEqual(newOps);
    const oldRecords = records.filter((r) => r.wrapper.operationId.startsWith('old-'));
    expect(oldRecords.length).toBeGreaterThanOrEqual(5);
    for (const r of oldRecords) expect(BigInt(r.position) < BigInt(fencePosition), `old record at ${r.position}`).toBe(true);
    console.log(
      `[paused-writer raw] old appends sent ${sends(w).length} (before SIGSTOP ${sentBeforeStop}), fenced after SIGCONT ${after.length}, old records ${oldRecords.length}, new ops ${newOps.length}`,
    );
  }, 60_000);

  it('the library Coordinator in the thawed process also ends fenced and writes nothing after the new fence', async () => {
    const { token, streamId, chatId } = await setupChat();
    const w = startWriter(token, chatId, 'coordinator');
    const { sentBeforeStop, claim, fencePosition, newOps } = await freezeReplaceThaw(w, token, streamId, null);

    const after = results(w).filter((r) => r.seq > sentBeforeStop);
    for (const r of after) {
      expect(r.ok, `old coordinator send ${r.seq} after SIGCONT: ${JSON.stringify(r)}`).toBe(false);
      expect(r.error!.type, JSON.stringify(r)).toBe('FENCED');
    }
    expect(w.lines.some((l) => l.event === 'state' && l.state === 'fenced')).toBe(true);

    const st = ok(await admin().call('streams.get', { streamId }));
    const records = await readWhole(admin(), streamId, st.generation, st.firstPosition, st.nextPosition);
    expect(records.find((r) => r.position === fencePosition)?.wrapper).toMatchObject({
      type: 'chat.writer-fence',
      fence: { epoch: claim.epoch, replaced: true },
    });
    const laterOps = records.filter((r) => BigInt(r.position) > BigInt(fencePosition)).map((r) => r.wrapper.operationId);
    expect([...new Set(laterOps)]).toEqual(newOps);
    // Every message the old coordinator had acknowledged is there, before the fence.
    const acked = results(w).filter((r) => r.ok);
    expect(acked.length).toBeGreaterThanOrEqual(5);
    for (const r of acked) {
      const stored = records.filter((x) => x.wrapper.operationId === r.operationId);
      expect(stored.map((x) => x.position)).toEqual([r.result!.firstPosition]);
      expect(BigInt(r.result!.firstPosition) < BigInt(fencePosition)).toBe(true);
    }
  }, 60_000);
});
