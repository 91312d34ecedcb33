// The arguments of `yello hook`, parsed without yargs: a hook runs at every turn of an agent's
// session, and loading yargs (and the program's command modules) would be most of its time.
// (The type import below is erased.)
import type { Argv } from 'yargs';

export const HOOK_AGENTS = ['claude-code', 'codex'] as const;
export const HOOK_EVENTS = ['SessionStart', 'UserPromptSubmit', 'Stop'] as const;
export type HookAgent = (typeof HOOK_AGENTS)[number];
export type HookEvent = (typeof HOOK_EVENTS)[number];

export interface HookArgs {
  agent: HookAgent;
  event: HookEvent;
  socket?: string;
  tokenFile?: string;
  stateDir?: string;
}

/** The global options of the program that take a value (docs/protocol.md §9). */
const VALUED = new Set(['--socket', '--data-dir', '--token-file', '--admin-token-file', '--state-dir']);
const FLAGS = new Set(['--json', '--no-json']);

export const HOOK_USAGE = `yello hook <claude-code|codex> <SessionStart|UserPromptSubmit|Stop>

What an agent's command hook runs (yello setup writes it): reads the hook's JSON on stdin and
prints what that agent documents for the event. SessionStart and UserPromptSubmit add the
unread messages of every chat of the agent as context (framed as untrusted data, bounded in
size, with how to reply and acknowledge). Stop asks the agent to continue once for messages
that arrived and were not shown yet (never twice for the same messages, never when the stop
hook already made it continue). A hook reads only: it never acknowledges and never claims.
When the daemon is down, the token is refused or stdin is not the hook's JSON, it prints
nothing, writes one line on stderr and exits 0.

Options:
  --token-file FILE  the agent's token (else $YELLO_TOKEN_FILE, else $YELLO_TOKEN)
  --socket PATH      the daemon socket (default: $YELLO_SOCKET, $XDG_RUNTIME_DIR/yello/yello.sock, /tmp/yello-$UID/yello.sock)
  --state-dir DIR    where it keeps what each session was shown (default: $XDG_STATE_HOME/yello-cli, ~/.local/state/yello-cli)
  -h, --help         this text

Example: echo '{"session_id":"s1","hook_event_name":"UserPromptSubmit","prompt":"hi"}' | yello hook claude-code UserPromptSubmit --token-file alice.token
`;

/** Whether `argv` (without node and script) runs `yello hook`: its first word that is not an option. */
export function isHookCommand(argv: readonly string[]): boolean {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (VALUED.has(a)) i++;
    else if (!a.startsWith('-')) return a === 'hook';
  }
  return false;
}

/** The parsed arguments, `'help'`, or a usage error (one line). */
export function parseHookArgs(argv: readonly string[]): HookArgs | 'help' | { error: string } {
  const words: string[] = [];
  const options: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '--help' || a === '-h') return 'help';
    if (FLAGS.has(a)) continue;
    const eq = a.indexOf('=');
    const name = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    if (VALUED.has(name)) {
      const value = eq > 0 && name !== a ? a.slice(eq + 1) : argv[++i];
      if (value === undefined || value === '') return { error: `${name} needs a value` };
      options[name] = value;
    } else if (a.startsWith('-')) return { error: `unknown option ${a}` };
    else words.push(a);
  }
  const [command, agent, event, ...rest] = words;
  if (command !== 'hook') return { error: 'not the hook command' };
  if (!HOOK_AGENTS.includes(agent as HookAgent))
    return { error: `name the agent: ${HOOK_AGENTS.join(' or ')} (got ${agent ?? 'nothing'})` };
  if (!HOOK_EVENTS.includes(event as HookEvent)) return { error: `name the event: ${HOOK_EVENTS.join(', ')} (got ${event ?? 'nothing'})` };
  if (rest.length > 0) return { error: `unexpected argument ${rest[0]}` };
  return {
    agent: agent as HookAgent,
    event: event as HookEvent,
    ...(options['--socket'] ? { socket: options['--socket'] } : {}),
    ...(options['--token-file'] ? { tokenFile: options['--token-file'] } : {}),
    ...(options['--state-dir'] ? { stateDir: options['--state-dir'] } : {}),
  };
}

/**
 * `hook` in the yargs program, so that `yello --help` lists it. main.ts and runCli run every
 * `yello hook` before yargs parses; this handler is never reached.
 */
export function hookCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    'hook <agent> <event>',
    "What an agent's command hook runs (claude-code|codex, SessionStart|UserPromptSubmit|Stop): unread messages as context, a Stop that asks once; see yello hook --help",
    (z) => z.positional('agent', { choices: HOOK_AGENTS }).positional('event', { choices: HOOK_EVENTS }),
    () => {
      throw new Error('yello hook is dispatched before the yargs program (main.ts, runCli)');
    },
  );
}
