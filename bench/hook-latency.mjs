// Wall time of `yello hook` (issue 50, point 2): an agent runs it at every turn, so with nothing
// unread it must be quick (target p50 ≤ 150 ms). Measured as the agent runs it, a new node
// process per call with the hook JSON on stdin, against a real daemon where the agent has three
// chats, all read and acknowledged. Beside it in the same run, interleaved: bare `node -e 0`
// (the floor), node loading the hook's modules and nothing else, and `yello --version` (the
// yargs program), so the table says what the time goes to. Prints one table on stdout.
//
//   npm run build && node bench/hook-latency.mjs        # BENCH_HOOK_RUNS=100 for more runs

import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ChatWriter, Conversation, YelloClient } from '../dist/client/index.js';
import { Daemon, cleanupAll, envNumber, fmt, makeTempDir, median, nowMs, percentile, repoRoot, table, yelloBin } from './lib.mjs';

const RUNS = envNumber('BENCH_HOOK_RUNS', 30);
const CHATS = 3;

const connect = (daemon, token) => YelloClient.connect({ socketPath: daemon.socketPath, token, clientName: 'bench-hook' });

/** bob and CHATS peers, one chat each; each peer wrote once and bob acknowledged it: nothing unread. */
async function world(daemon, admin) {
  const make = async (name) => {
    const r = await admin.rpc.agents.create({ username: `${name}-${process.pid}`, name });
    return { id: r.agent.id, token: r.token };
  };
  const bob = await make('bob');
  const bc = await connect(daemon, bob.token);
  for (let i = 0; i < CHATS; i++) {
    const peer = await make(`peer${i}`);
    const { chat } = await admin.rpc.chats.open({ agentAId: peer.id, agentBId: bob.id });
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
  return bob;
}

function timed(args, input) {
  const t0 = nowMs();
  const r = spawnSync(process.execPath, args, { input, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  const ms = nowMs() - t0;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return { ms, stdout: r.stdout, stderr: r.stderr };
}

async function main() {
  const dir = makeTempDir('yb-hook-');
  const daemon = new Daemon(dir);
  await daemon.start();
  const admin = await connect(daemon, daemon.adminToken);
  try {
    const bob = await world(daemon, admin);
    const tokenFile = path.join(dir, 'bob.token');
    writeFileSync(tokenFile, bob.token + '\n', { mode: 0o600 });
    const stateDir = path.join(dir, 'state');
    const hookArgs = (event) => [
      yelloBin,
      'hook',
      'claude-code',
      event,
      '--socket',
      daemon.socketPath,
      '--token-file',
      tokenFile,
      '--state-dir',
      stateDir,
    ];
    const input = (event) =>
      JSON.stringify({
        session_id: 'bench',
        transcript_path: '/tmp/t.jsonl',
        cwd: repoRoot,
        hook_event_name: event,
        prompt: 'hi',
        stop_hook_active: false,
      });
    const hookModules = pathToFileURL(path.join(repoRoot, 'dist/cli/hook-command.js')).href;
    const variants = [
      ['node -e 0 (the floor)', () => timed(['-e', '0'])],
      ['node loading the hook modules only', () => timed(['--input-type=module', '-e', `await import(${JSON.stringify(hookModules)})`])],
      ['yello hook … UserPromptSubmit, nothing unread', () => timed(hookArgs('UserPromptSubmit'), input('UserPromptSubmit'))],
      ['yello hook … Stop, nothing unread', () => timed(hookArgs('Stop'), input('Stop'))],
      ['yello --version (the yargs program)', () => timed([yelloBin, '--version'])],
    ];
    const first = timed(hookArgs('UserPromptSubmit'), input('UserPromptSubmit'));
    if (first.stdout !== '' || first.stderr !== '') throw new Error(`the hook should print nothing here: ${first.stdout}${first.stderr}`);
    const samples = variants.map(() => []);
    for (let i = 0; i < RUNS; i++) variants.forEach(([, run], v) => samples[v].push(run().ms));
    const floor = median(samples[0]);
    const rows = variants.map(([name], v) => [
      name,
      RUNS,
      fmt.ms(median(samples[v])),
      fmt.ms(percentile(samples[v], 0.95)),
      fmt.ratio(median(samples[v]) / floor),
      fmt.ms(median(samples[v]) - floor),
    ]);
    console.log(
      table(
        `yello hook wall time, a new process per call (bob: ${CHATS} chats, all acknowledged; interleaved runs; target: hook p50 ≤ 150 ms)`,
        ['command', 'n', 'p50 ms', 'p95 ms', 'p50 / node -e 0', 'p50 over the floor'],
        rows,
      ),
    );
  } finally {
    admin.close();
    await daemon.stop();
    cleanupAll();
  }
}

main().catch((err) => {
  console.error(err);
  cleanupAll();
  process.exit(1);
});
