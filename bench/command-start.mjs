// Command start (issue 54): wall time of the commands an agent runs at every turn, each a new
// node process as an agent runs it, against a real daemon, beside bare `node -e 0` measured in
// the same run, interleaved (one run of each command in turn, RUNS rounds, every other one in
// reverse order). Target: each median at most 1.6x the median of `node -e 0`. Also the CPU time
// (user + system) each process used, which a loaded machine disturbs less than wall time, and
// `yello --version` (the yargs program, for reference: every other command's start).
//
//   npm run build && node bench/command-start.mjs         # BENCH_COMMAND_RUNS=50 for more runs
//   BENCH_COMMAND_BINS=before=/tmp/old/bin/yello node bench/command-start.mjs
//     also times another build's bin/yello (its own dist/, same daemon), interleaved in the same
//     rounds: an A/B of a change to the CLI's start. Targets apply to this checkout's rows only.
//
// run.mjs runs it as section (h) and checks the target in its target table.

import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChatWriter, Conversation, YelloClient } from '../dist/client/index.js';
import { Daemon, cleanupAll, envNumber, fmt, makeTempDir, median, nowMs, percentile, removeTempDir, table, yelloBin } from './lib.mjs';

/** The issue's bound: each command's median wall time over `node -e 0`'s, same run. */
export const COMMAND_START_MAX = 1.6;
const CHATS = 3;

const connect = (daemon, token) => YelloClient.connect({ socketPath: daemon.socketPath, token, clientName: 'bench-commands' });

/** bob and CHATS peers, one chat each; each peer wrote once and bob acknowledged it: nothing unread. */
async function world(daemon, admin) {
  const make = async (name) => {
    const r = await admin.rpc.agents.create({ username: `${name}-${process.pid}`, name });
    return { id: r.agent.id, token: r.token };
  };
  const bob = await make('bob');
  const bc = await connect(daemon, bob.token);
  let chatId = '';
  for (let i = 0; i < CHATS; i++) {
    const peer = await make(`peer${i}`);
    const { chat } = await admin.rpc.chats.open({ agentAId: peer.id, agentBId: bob.id });
    chatId = chat.id;
    const pc = await connect(daemon, peer.token);
    const pw = new ChatWriter(pc, { chatId: chat.id });
    await pw.send(`hello bob ${i}`);
    await pw.release();
    pc.close();
    const conv = await Conversation.open(bc, { chatId: chat.id });
    const batch = await conv.next({ waitMs: 10_000 });
    const bw = new ChatWriter(bc, { chatId: chat.id, conversation: conv });
    await bw.ack(batch);
    await bw.release();
    await conv.close();
  }
  bc.close();
  return { bob, chatId };
}

/** BENCH_COMMAND_BINS=label=path,...: other builds' bin/yello to time beside this checkout's. */
function otherBins() {
  const spec = process.env.BENCH_COMMAND_BINS ?? '';
  return spec
    .split(',')
    .filter((s) => s !== '')
    .map((s) => {
      const [label, bin] = s.split('=');
      if (!bin) throw new Error(`BENCH_COMMAND_BINS: "${s}" is not label=path`);
      return { label, bin: path.resolve(bin) };
    });
}

/** User + system CPU of this process's waited-for children so far, in ms (/proc/self/stat, 10 ms ticks). */
function childrenCpuMs() {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

/** One process to completion: its wall time (spawn → reaped) and CPU time; it must exit 0. */
function timed(args, input) {
  const c0 = childrenCpuMs();
  const t0 = nowMs();
  const r = spawnSync(process.execPath, args, { input, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  const ms = nowMs() - t0;
  if (r.status !== 0) throw new Error(`node ${args.join(' ')} exited ${r.status ?? r.signal}: ${r.stderr}`);
  return { ms, cpuMs: childrenCpuMs() - c0, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Starts a daemon of its own, sets up bob's chats, and times each command `runs` times,
 * interleaved. Resolves with one row per command: name, whether the target applies, samples.
 */
export async function benchCommandStart({ runs = 30, log = () => undefined } = {}) {
  const dir = makeTempDir('yb-cmd-');
  const daemon = new Daemon(dir);
  await daemon.start();
  const admin = await connect(daemon, daemon.adminToken);
  try {
    const { bob, chatId } = await world(daemon, admin);
    const tokenFile = path.join(dir, 'bob.token');
    writeFileSync(tokenFile, bob.token + '\n', { mode: 0o600 });
    const stateDir = path.join(dir, 'state');
    const agent = ['--socket', daemon.socketPath, '--token-file', tokenFile];
    const hook = (yelloBin, event) => ({
      args: [yelloBin, 'hook', 'claude-code', event, ...agent, '--state-dir', stateDir],
      input: JSON.stringify({
        session_id: 'bench',
        transcript_path: '/tmp/t.jsonl',
        cwd: dir,
        hook_event_name: event,
        prompt: 'hi',
        stop_hook_active: false,
      }),
    });
    const commands = (yelloBin, label, target) => [
      { name: `${label}yello hook claude-code UserPromptSubmit, nothing unread`, target, ...hook(yelloBin, 'UserPromptSubmit') },
      { name: `${label}yello hook claude-code Stop, nothing unread`, target, ...hook(yelloBin, 'Stop') },
      { name: `${label}yello inbox --json (${CHATS} chats)`, target, args: [yelloBin, ...agent, 'inbox', '--json'] },
      { name: `${label}yello send <chat> <text>`, target, args: [yelloBin, ...agent, '--state-dir', stateDir, 'send', chatId, 'ping'] },
      // Reported, not among the targets: what an agent that reads and acknowledges with the CLI runs per turn.
      { name: `${label}yello chats read <chat>, nothing unread`, target: false, args: [yelloBin, ...agent, 'chats', 'read', chatId] },
      { name: `${label}yello ack <chat>, nothing new`, target: false, args: [yelloBin, ...agent, '--state-dir', stateDir, 'ack', chatId] },
      {
        name: `${label}yello status (admin)`,
        target,
        args: [yelloBin, '--socket', daemon.socketPath, '--data-dir', daemon.dataDir, 'status'],
      },
      { name: `${label}yello --version (the yargs program)`, target: false, args: [yelloBin, '--version'] },
    ];
    const variants = [
      { name: 'node -e 0 (the floor)', args: ['-e', '0'] },
      ...commands(yelloBin, '', true),
      ...otherBins().flatMap(({ label, bin }) => commands(bin, `[${label}] `, false)),
    ];
    // A first run of each: the send claims bob's stream (later sends reuse the claim), and each
    // hook checks it prints nothing when nothing is unread.
    for (const v of variants) {
      const r = timed(v.args, v.input);
      if (v.input !== undefined && (r.stdout !== '' || r.stderr !== ''))
        throw new Error(`${v.name} should print nothing: ${r.stdout}${r.stderr}`);
    }
    const samples = variants.map(() => ({ ms: [], cpuMs: 0 }));
    // Every other round in reverse order: what runs just before a command (a send's fsync on
    // the daemon, a heavy yargs start) is then the same for every command over the rounds.
    const forward = variants.map((_, k) => k);
    const backward = [...forward].reverse();
    for (let i = 0; i < runs; i++) {
      for (const k of i % 2 === 0 ? forward : backward) {
        const r = timed(variants[k].args, variants[k].input);
        samples[k].ms.push(r.ms);
        samples[k].cpuMs += r.cpuMs;
      }
      if ((i + 1) % 10 === 0) log(`(h) ${i + 1}/${runs} rounds`);
    }
    const floor = median(samples[0].ms);
    const floorCpu = samples[0].cpuMs / runs;
    return {
      runs,
      rows: variants.map((v, k) => ({
        name: v.name,
        target: v.target === true,
        p50: median(samples[k].ms),
        p95: percentile(samples[k].ms, 0.95),
        ratio: median(samples[k].ms) / floor,
        cpuMs: samples[k].cpuMs / runs,
        cpuRatio: samples[k].cpuMs / runs / floorCpu,
      })),
    };
  } finally {
    admin.close();
    await daemon.stop();
    removeTempDir(dir);
  }
}

/** The table of a {@link benchCommandStart} result. */
export function commandStartTable(h) {
  return table(
    `(h) command start: wall time of a new node process per command (spawn → exit, stdio piped), median of ${h.runs} interleaved runs, against a daemon where bob has ${CHATS} chats, all acknowledged; cpu = user + system of the process, mean; target: each yello hook/inbox/send/status p50 ≤ ${fmt.ratio(COMMAND_START_MAX)} node -e 0's`,
    ['command', 'p50 ms', 'p95 ms', 'p50 / node -e 0', 'cpu ms', 'cpu / node -e 0'],
    h.rows.map((r) => [r.name, fmt.ms(r.p50), fmt.ms(r.p95), fmt.ratio(r.ratio), fmt.ms(r.cpuMs), fmt.ratio(r.cpuRatio)]),
  );
}

/** The target rows of run.mjs's target check: [target, measured, threshold, met]. */
export function commandStartTargets(h) {
  const floor = h.rows[0];
  return h.rows
    .filter((r) => r.target)
    .map((r) => [
      `start: ${r.name.replace(/^yello /, '').replace(/ \(.*\)$|, nothing unread$/, '')}`,
      `${fmt.ratio(r.ratio)} (${fmt.ms(r.p50)} vs ${fmt.ms(floor.p50)} ms; cpu ${fmt.ratio(r.cpuRatio)})`,
      `≤ ${fmt.ratio(COMMAND_START_MAX)} node -e 0`,
      r.ratio <= COMMAND_START_MAX,
    ]);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const runs = envNumber('BENCH_COMMAND_RUNS', 30);
  const log = (m) => process.stderr.write(`${m}\n`);
  benchCommandStart({ runs, log }).then(
    (h) => {
      console.log(commandStartTable(h));
      for (const [target, measured, threshold, ok] of commandStartTargets(h))
        console.log(`${ok ? 'met    ' : 'NOT MET'}  ${target}: ${measured} (${threshold})`);
    },
    (err) => {
      console.error(err);
      cleanupAll();
      process.exit(1);
    },
  );
}
