import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { CliError, EXIT } from './output.js';

/** A process, as this host tells it apart from any later one with the same pid. */
export interface ProcessId {
  pid: number;
  /** The kernel's start time of the process (clock ticks since boot): a reused pid has another. */
  startTime: string;
  /** Its command name, for messages. */
  command: string;
}

/** What a pane is at attach time: its own process, and the agent in its foreground. */
export interface PaneIdentity {
  /** tmux's unique id of the pane (`%N`). */
  paneId: string;
  /** How a person names it (`session:window.pane`). */
  name: string;
  /** The process tmux started in the pane (`#{pane_pid}`). */
  pane: ProcessId;
  /** The leader of the pane's foreground process group: the agent that reads what is typed. */
  agent: ProcessId;
}

/** Whether the agent of {@link PaneIdentity} can be typed to now. */
export type PaneCheck = { ok: true } | { ok: false; gone: boolean; why: string };

/** The fields of /proc/PID/stat after the command name, and the command name; null when there is no such process. */
async function procStat(pid: number): Promise<{ fields: string[]; command: string } | null> {
  let text: string;
  try {
    text = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name is in parentheses and may itself hold spaces or parentheses.
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  return { command: text.slice(open + 1, close), fields: text.slice(close + 2).split(' ') };
}

/** The process `pid` (start time from /proc, field 22), or null when it is gone. */
async function processId(pid: number): Promise<ProcessId | null> {
  const st = await procStat(pid);
  const startTime = st?.fields[19];
  return st && startTime ? { pid, startTime, command: st.command } : null;
}

/** The foreground process group of the terminal whose session `pid` leads (field 8, `tpgid`). */
async function foregroundGroup(pid: number): Promise<number | null> {
  const tpgid = Number((await procStat(pid))?.fields[5]);
  return Number.isInteger(tpgid) && tpgid > 0 ? tpgid : null;
}

const same = (a: ProcessId | null, b: ProcessId) => a !== null && a.pid === b.pid && a.startTime === b.startTime;
const describe = (p: ProcessId) => `${p.command} (pid ${p.pid})`;

/**
 * One tmux pane as `yello attach --tmux` types into it: found once, then checked before every
 * paste (the pane is there, runs the same process, and the agent found at attach time is in its
 * foreground), and typed to with bracketed paste. Process facts come from /proc (Linux).
 */
export class TmuxPane {
  readonly identity: PaneIdentity;
  readonly #server: TmuxServer;

  private constructor(identity: PaneIdentity, server: TmuxServer) {
    this.identity = identity;
    this.#server = server;
  }

  /** Find `target` (any tmux target: `%3`, `work:1.0`) on the server at `socket` (tmux -S; default: tmux's own choice, `$TMUX` first). */
  static async open(target: string, socket: string | undefined, env: Readonly<Record<string, string | undefined>>): Promise<TmuxPane> {
    if (!(await procStat(process.pid)))
      throw new CliError('yello attach --tmux tells processes apart through /proc, which this system lacks (Linux only)', EXIT.error);
    const server: TmuxServer = { socketArgs: socket ? ['-S', socket] : [], env };
    const out = await tmux(server, [
      'display-message',
      '-p',
      '-t',
      target,
      '#{pane_id}\t#{pane_pid}\t#{pane_dead}\t#{session_name}:#{window_index}.#{pane_index}',
    ]).catch((err: unknown) => {
      if (err instanceof CliError) throw new CliError(`no such tmux pane: ${target} (${err.message})`, EXIT.error);
      throw err;
    });
    const [paneId = '', pidText = '', dead = '', name = ''] = out.trim().split('\t');
    // tmux answers an unknown pane with empty fields rather than an error.
    if (!paneId.startsWith('%'))
      throw new CliError(
        `no such tmux pane: ${target} on this tmux server (tmux list-panes -a lists them; see also --tmux-socket)`,
        EXIT.error,
      );
    const gone = `the process of tmux pane ${target} is gone`;
    if (dead === '1') throw new CliError(`${gone} (the pane is dead; respawn it, then attach again)`, EXIT.error);
    const pane = await processId(Number(pidText));
    if (!pane) throw new CliError(`${gone} (pid ${pidText}); start the agent in it, then attach again`, EXIT.error);
    const fg = await foregroundGroup(pane.pid);
    const agent = fg === null ? null : await processId(fg);
    if (!agent) throw new CliError(`cannot tell which process is in the foreground of tmux pane ${target}`, EXIT.error);
    return new TmuxPane({ paneId, name, pane, agent }, server);
  }

  /** Whether the pane still runs the same process, with the same agent in its foreground. */
  async check(): Promise<PaneCheck> {
    const { paneId, pane, agent } = this.identity;
    let out: string;
    try {
      out = await tmux(this.#server, ['display-message', '-p', '-t', paneId, '#{pane_id}\t#{pane_pid}\t#{pane_dead}']);
    } catch (err) {
      if (err instanceof CliError) return { ok: false, gone: true, why: `tmux pane ${paneId} is gone (${err.message})` };
      throw err;
    }
    const [id, pidText, dead] = out.trim().split('\t');
    if (id !== paneId) return { ok: false, gone: true, why: `tmux pane ${paneId} is gone` };
    if (dead === '1') return { ok: false, gone: true, why: `the process of tmux pane ${paneId} exited (the pane is dead)` };
    if (Number(pidText) !== pane.pid || !same(await processId(pane.pid), pane))
      return { ok: false, gone: true, why: `tmux pane ${paneId} runs another process now (was ${describe(pane)}, now pid ${pidText})` };
    const now = await processId(agent.pid);
    if (!same(now, agent)) return { ok: false, gone: true, why: `${describe(agent)} in tmux pane ${paneId} exited` };
    const fg = await foregroundGroup(pane.pid);
    if (fg !== agent.pid) {
      const other = fg === null ? null : await processId(fg);
      return {
        ok: false,
        gone: false,
        why: `${describe(agent)} is not in the foreground of tmux pane ${paneId} (${other ? describe(other) : 'another process'} is)`,
      };
    }
    return { ok: true };
  }

  /**
   * Type `text` as one bracketed paste (the application sees it as pasted, not typed, when it
   * asked for bracketed paste; newlines become Enter otherwise, as any paste), then Enter.
   */
  async paste(text: string): Promise<void> {
    const buffer = `yello-${randomBytes(6).toString('hex')}`;
    await tmux(this.#server, ['load-buffer', '-b', buffer, '-'], text);
    await tmux(this.#server, ['paste-buffer', '-p', '-d', '-b', buffer, '-t', this.identity.paneId]);
    await tmux(this.#server, ['send-keys', '-t', this.identity.paneId, 'Enter']);
  }
}

/** Which tmux server, and the environment tmux runs in (the CLI run's: its PATH finds tmux, its $TMUX names the server). */
interface TmuxServer {
  socketArgs: string[];
  env: Readonly<Record<string, string | undefined>>;
}

/** Run tmux; its stdout, or a CliError with its own message (no tmux at all: how to get it). */
function tmux(server: TmuxServer, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('tmux', [...server.socketArgs, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...server.env } });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? '');
    child.on('error', (e: NodeJS.ErrnoException) => {
      reject(
        e.code === 'ENOENT'
          ? new CliError(
              'tmux is not installed (or not on PATH): install it (apt-get install tmux) and run the agent in a tmux pane',
              EXIT.error,
            )
          : e,
      );
    });
    child.on('close', (code) => {
      if (code === 0) resolve(out);
      else reject(new CliError(`tmux: ${err.trim() || `exit ${code}`}`, EXIT.error));
    });
  });
}
