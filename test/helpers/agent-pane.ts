// A scripted terminal agent in a tmux pane of a tmux server of its own (tmux -S in a temp dir):
// test/fixtures/tmux-agent.mjs asks for bracketed paste and raw input, as agent TUIs do, logs
// every paste, and (AGENT_REPLY=1) answers each with the real `yello send <chat> --ack`.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cliEnv } from './cli-runner.js';
import { makeTempDir, repoRoot } from './daemon-process.js';
import { waitFor } from './wait.js';
import { uniq } from './wire-fixtures.js';

export const hasTmux = (() => {
  try {
    execFileSync('tmux', ['-V']);
    return true;
  } catch {
    return false;
  }
})();

const AGENT = path.join(repoRoot, 'test/fixtures/tmux-agent.mjs');

export interface AgentEvent {
  event: 'ready' | 'paste' | 'typed' | 'reply';
  n?: number;
  text?: string;
  enter?: boolean;
  code?: number;
  stdout?: string;
  stderr?: string;
}

/** A tmux server of the test's own, with one pane running the scripted agent. */
export class AgentPane {
  paneId = '';
  log = '';
  private constructor(
    readonly dir: string,
    readonly socket: string,
    readonly env: Record<string, string>,
  ) {}

  static async start(env: Record<string, string>): Promise<AgentPane> {
    const dir = await makeTempDir('yl-tmux-');
    const pane = new AgentPane(dir, path.join(dir, 'tmux.sock'), env);
    pane.log = path.join(dir, `agent-${uniq('log')}.jsonl`);
    pane.paneId = pane
      .tmux([
        'new-session',
        '-d',
        '-s',
        'agent',
        '-P',
        '-F',
        '#{pane_id}',
        '-x',
        '200',
        '-y',
        '50',
        `${process.execPath} ${AGENT} ${pane.log}`,
      ])
      .trim();
    await pane.ready();
    return pane;
  }

  /** tmux on this server; the server (started by the first call) hands `env` to the pane. */
  tmux(args: string[]): string {
    const env = cliEnv({ ...this.env, TMUX: undefined, TERM: 'xterm-256color' });
    return execFileSync('tmux', ['-S', this.socket, '-f', '/dev/null', ...args], { env, encoding: 'utf8' });
  }

  /** Replace the pane's process by a new agent (its own log). */
  async respawn(): Promise<void> {
    this.log = path.join(this.dir, `agent-${uniq('log')}.jsonl`);
    this.tmux(['respawn-pane', '-k', '-t', this.paneId, `${process.execPath} ${AGENT} ${this.log}`]);
    await this.ready();
  }

  async ready(): Promise<void> {
    await waitFor(() => this.events().some((e) => e.event === 'ready'), 'the agent in the pane to be ready');
  }

  events(): AgentEvent[] {
    if (!fs.existsSync(this.log)) return [];
    return fs
      .readFileSync(this.log, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as AgentEvent);
  }

  pastes(): AgentEvent[] {
    return this.events().filter((e) => e.event === 'paste');
  }

  waitPaste(n: number, what = `paste ${n}`): Promise<AgentEvent> {
    return waitFor(() => this.pastes()[n - 1], what, 20_000);
  }

  waitReply(n: number): Promise<AgentEvent> {
    return waitFor(() => this.events().find((e) => e.event === 'reply' && e.n === n), `the agent's reply ${n}`, 30_000);
  }

  close(): void {
    try {
      this.tmux(['kill-server']);
    } catch {
      /* already gone */
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
