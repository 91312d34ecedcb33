// A real conversation through the three native surfaces (issue 50, docs/agents.md), each driven
// as its agent drives it: alice is a Claude Code session with `yello mcp --channel` on stdio (a
// raw JSON-RPC client written from the channel contract, which answers each pushed batch with
// the MCP tools); bob is a Claude Code session with hooks (the real `yello hook` processes fed
// the JSON Claude Code writes, replying from his shell with `yello send --ack`); carol is a
// terminal agent in a real tmux pane that `yello attach --tmux --inbox` types into (the scripted
// agent answers each paste with `yello send --ack`). Every reply carries its receipt; at the end
// every message is acknowledged and `yello verify` finds both exports clean.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { AgentPane, hasTmux } from '../helpers/agent-pane.js';
import { writeTokenFile, yelloBin, type CliResult, type LongRunningCli } from '../helpers/cli-runner.js';
import { repoRoot } from '../helpers/daemon-process.js';
import { useCli } from '../helpers/use-daemon.js';
import { messageOf, ok, readAll } from '../helpers/wire-fixtures.js';
import { RawMcp, rawText, type RawMessage } from '../mcp/raw-stdio.js';

vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

const { daemon, admin, cli } = useCli();
const CHANNEL = 'notifications/claude/channel';
type Meta = Record<string, string>;
const metaOf = (m: RawMessage) => (m.params as { meta: Meta }).meta;

const hookInput = (event: string, session: string, extra: Record<string, unknown> = {}) => {
  const recorded = JSON.parse(fs.readFileSync(path.join(repoRoot, `test/fixtures/hooks/claude-code.${event}.json`), 'utf8')) as object;
  return JSON.stringify({ ...recorded, session_id: session, ...extra });
};

const running: Array<() => unknown> = [];
afterAll(async () => {
  for (const stop of running.splice(0).reverse()) await stop();
});

describe.skipIf(!hasTmux)('three agents, three native surfaces', () => {
  it('alice (channel), bob (hooks) and carol (tmux) hold a conversation; every reply carries its receipt; the exports verify', async () => {
    const dir = daemon().dir;
    const agents: Record<string, { id: string; token: string; tokenFile: string }> = {};
    for (const name of ['alice', 'bob', 'carol']) {
      const made = ok(await admin().call('agents.create', { username: name, name }));
      agents[name] = { id: made.agent.id, token: made.token, tokenFile: writeTokenFile(dir, name, made.token) };
    }
    for (const a of Object.values(agents))
      for (const b of Object.values(agents)) if (a !== b) ok(await admin().call('grants.add', { agentId: a.id, peerAgentId: b.id }));
    const { alice, bob, carol } = agents as Record<'alice' | 'bob' | 'carol', { id: string; token: string; tokenFile: string }>;

    // alice: Claude Code's MCP client, with the channel loaded.
    const channel = RawMcp.start(daemon().socketPath, alice.tokenFile, ['--channel', '--log-level', 'warn']);
    running.push(() => channel.close());
    const init = await channel.initialize();
    expect((init.result as { capabilities: { experimental?: object } }).capabilities.experimental).toEqual({ 'claude/channel': {} });
    const open = async (peer: string) => {
      const r = await channel.callTool('open_chat', { peer });
      const chatId = /chat_[a-z0-9]{26}/.exec(rawText(r))?.[0];
      if (!chatId) throw new Error(`open_chat ${peer}: ${rawText(r)}`);
      return chatId;
    };
    const withBob = await open('bob');
    const withCarol = await open('carol');
    for (const [chatId, text] of [
      [withBob, 'bob, can you review PR 12? It touches the parser.'],
      [withCarol, 'carol, is the staging deploy done?'],
    ] as const)
      expect((await channel.callTool('send', { chatId, text })).result?.isError).toBeFalsy();

    // carol: a terminal agent in tmux; attach types each batch into her pane, she answers from her shell.
    const pane = await AgentPane.start({
      ...(cli().env() as Record<string, string>),
      YELLO_TOKEN: carol.token,
      YELLO_BIN: yelloBin,
      AGENT_REPLY: '1',
    });
    running.push(() => {
      pane.close();
    });
    const carolCli = cli().as(carol.tokenFile);
    const attach: LongRunningCli = carolCli.start(['attach', '--tmux', pane.paneId, '--tmux-socket', pane.socket, '--inbox'], {
      timeoutMs: 170_000,
    });
    running.push(() => attach.kill());

    // bob: Claude Code runs his hooks as processes, with its JSON on stdin.
    const bobSession = 'bob-session-1';
    const hook = (event: string, extra: Record<string, unknown> = {}): Promise<CliResult> =>
      cli().run(['hook', 'claude-code', event, '--token-file', bob.tokenFile, '--socket', daemon().socketPath], {
        input: hookInput(event, bobSession, extra),
        process: true,
      });
    const start = await hook('SessionStart');
    expect(start.code, start.stderr).toBe(0);
    const context = (JSON.parse(start.stdout) as { hookSpecificOutput: { additionalContext: string } }).hookSpecificOutput
      .additionalContext;
    expect(context).toContain('"bob, can you review PR 12? It touches the parser."');
    expect(context).toMatch(/<<<PEER-DATA [0-9a-f]{32}/);
    // The model answers from its shell, as the context says: reply and receipt in one append.
    const bobCli = cli().as(bob.tokenFile);
    await bobCli.ok(['send', withBob, '--ack', 'On it: reviewing PR 12 now.']);
    // Nothing new since it was shown: the Stop lets the turn end.
    expect((await hook('Stop')).stdout).toBe('');

    // alice hears bob's reply pushed into her session, and answers it with the batch's receipt.
    const fromBob = await channel.next((m) => m.method === CHANNEL && metaOf(m).from === 'bob', 'bob’s reply pushed to alice', 0, 30_000);
    expect(metaOf(fromBob)).toMatchObject({ event: 'messages', chat_id: withBob, messages: '1' });
    expect((fromBob.params as { content: string }).content).toContain('"On it: reviewing PR 12 now."');
    const thanks = await channel.callTool('send', {
      chatId: withBob,
      text: 'Thanks, bob.',
      acknowledge: true,
      batchId: metaOf(fromBob).batch_id,
    });
    expect(thanks.result?.isError, rawText(thanks)).toBeFalsy();

    // bob is working on something else; at the end of his turn the Stop hook asks him, once, to read it.
    const stop = await hook('Stop');
    const asked = JSON.parse(stop.stdout) as { decision: string; reason: string };
    expect(asked.decision).toBe('block');
    expect(asked.reason).toContain(withBob);
    expect(asked.reason).toContain('alice');
    expect(asked.reason).not.toContain('Thanks, bob.'); // counts and names, never the text
    expect((await hook('Stop', { stop_hook_active: true })).stdout).toBe('');
    expect((await hook('Stop')).stdout).toBe(''); // never twice for the same batch: no stop loop
    const prompt = await hook('UserPromptSubmit');
    expect(
      (JSON.parse(prompt.stdout) as { hookSpecificOutput: { additionalContext: string } }).hookSpecificOutput.additionalContext,
    ).toContain('"Thanks, bob."');
    await bobCli.ok(['ack', withBob]);

    // carol's agent had alice's question typed into its pane, and answered it.
    const pasted = await pane.waitPaste(1, 'alice’s question typed into carol’s pane');
    expect(pasted.text).toContain('"carol, is the staging deploy done?"');
    const carolReply = await pane.waitReply(1);
    expect(carolReply.code, carolReply.stderr).toBe(0);
    const fromCarol = await channel.next(
      (m) => m.method === CHANNEL && metaOf(m).from === 'carol',
      'carol’s reply pushed to alice',
      0,
      30_000,
    );
    const done = await channel.callTool('send', {
      chatId: withCarol,
      text: 'Great, thanks carol.',
      acknowledge: true,
      batchId: metaOf(fromCarol).batch_id,
    });
    expect(done.result?.isError, rawText(done)).toBeFalsy();
    // carol's pane gets alice's thanks and answers again; alice acknowledges that last one without a reply.
    await pane.waitReply(2);
    const last = await channel.next(
      (m) => m.method === CHANNEL && metaOf(m).from === 'carol' && m !== fromCarol && metaOf(m).batch_id !== metaOf(fromCarol).batch_id,
      'carol’s second reply',
      0,
      30_000,
    );
    expect((await channel.callTool('acknowledge', { chatId: withCarol, batchId: metaOf(last).batch_id })).result?.isError).toBeFalsy();

    // Every message is acknowledged by its reader: each stream's receipt covers its last message.
    for (const [chatId, writer, reader] of [
      [withBob, alice, bob],
      [withBob, bob, alice],
      [withCarol, alice, carol],
      [withCarol, carol, alice],
    ] as const) {
      const streamId = `${chatId}:${writer.id}`;
      const records = await readAll(admin(), streamId);
      const lastMessage = records.filter((r) => r.wrapper.type === 'chat.message').at(-1)!;
      const state = ok(await admin().call('streams.get', { streamId }));
      expect(BigInt(state.acknowledged?.nextPosition ?? '0'), `${streamId} read by ${reader.id}`).toBeGreaterThan(
        BigInt(lastMessage.position),
      );
    }
    // Every reply went out together with its receipt (one append: message then receipt).
    for (const [chatId, who] of [
      [withBob, bob],
      [withCarol, carol],
    ] as const) {
      const records = await readAll(admin(), `${chatId}:${who.id}`);
      const firstReply = records.findIndex((r) => r.wrapper.type === 'chat.message');
      expect(records[firstReply + 1]?.wrapper.type).toBe('chat.receipt');
      expect(messageOf(records[firstReply]).content.length).toBeGreaterThan(0);
    }

    // The transcripts verify offline.
    const jwks = path.join(dir, 'jwks.json');
    fs.writeFileSync(jwks, (await cli().ok(['keys', 'list', '--json'])).stdout);
    for (const chatId of [withBob, withCarol]) {
      const file = path.join(dir, `${chatId}.jsonl`);
      await cli().ok(['chats', 'export', chatId, '--out', file]);
      const verified = await cli().run(['verify', file, '--jwks', jwks]);
      expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    }
  });
});
