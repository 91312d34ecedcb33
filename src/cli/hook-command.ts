import { readFileSync } from 'node:fs';
import { UnauthenticatedError } from '../client/errors.js';
import { YelloClient } from '../client/yello-client.js';
import { resolveSocketPath } from '../shared/paths.js';
import { HOOK_USAGE, parseHookArgs, type HookArgs } from './hook-args.js';
import { parseHookInput, readHookStdin, type HookInput } from './hook-input.js';
import { renderContext, renderStop } from './hook-render.js';
import { HookStateStore, type SessionShown } from './hook-state.js';
import { isAfter } from '../shared/positions.js';
import { unreadByChat } from './hook-unread.js';
import { pathContext } from './path-context.js';
import type { Io } from './io.js';
import { cliStateDir } from './writer-state.js';
import { selfOf } from '../shared/chat-peers.js';

/** A hook that has not answered by then prints nothing: the agent's turn must not wait on yello. */
const DEADLINE_MS = 8000;
const CALL_TIMEOUT_MS = 5000;

/** One line on stderr; a hook never fails the agent's turn for yello's sake. */
function note(io: Io, text: string): void {
  io.stderr.write(`yello hook: ${text}\n`);
}

/** The agent token: `--token-file`, `$YELLO_TOKEN_FILE`, `$YELLO_TOKEN`; or why there is none. */
function hookToken(args: HookArgs, env: Io['env']): string | { error: string } {
  const file = args.tokenFile ?? env.YELLO_TOKEN_FILE;
  if (file) {
    let token: string;
    try {
      token = readFileSync(file, 'utf8').trim();
    } catch (err) {
      return { error: `cannot read the token file ${file}: ${(err as Error).message}; no messages shown` };
    }
    return token || { error: `the token file ${file} is empty; no messages shown` };
  }
  return env.YELLO_TOKEN?.trim() || { error: 'no agent token (--token-file, $YELLO_TOKEN_FILE or $YELLO_TOKEN); no messages shown' };
}

/** Why connecting failed, in one line that says what to do. */
function connectProblem(err: unknown, socket: string): string {
  if (err instanceof UnauthenticatedError)
    return `the daemon at ${socket} refused the agent token (unknown, rotated or disabled); no messages shown. Check with: yello --token-file FILE inbox`;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ECONNREFUSED')
    return `no daemon answers at ${socket} (${code}); no messages shown. Start it (yello daemon), or check --socket / $YELLO_SOCKET`;
  return `cannot reach the daemon at ${socket}: ${(err as Error).message}; no messages shown`;
}

function merge(into: SessionShown, from: SessionShown): SessionShown {
  const out = { ...into };
  for (const [k, s] of Object.entries(from)) if (!out[k] || isAfter(s, out[k])) out[k] = s;
  return out;
}

async function present(io: Io, args: HookArgs, input: HookInput, client: YelloClient, socket: string): Promise<void> {
  const agentId = client.session.agentId;
  if (client.session.role !== 'agent' || !agentId) {
    note(io, 'the token is the admin token; a hook acts as one agent: give it that agent token file. No messages shown');
    return;
  }
  const chats = await unreadByChat(client);
  const store = new HookStateStore(cliStateDir(args.stateDir, io.env), { socket, agentId, agent: args.agent, sessionId: input.sessionId });
  if (input.event === 'Stop') {
    const shown = store.load();
    const stop = renderStop(chats, shown);
    if (!stop) return;
    // Remembered before it is asked: if it cannot be remembered, it is not asked (no stop loop).
    try {
      store.save(merge(shown, stop.asked));
    } catch (err) {
      note(io, `cannot keep the session state (${(err as Error).message}); not asking to continue`);
      return;
    }
    io.stdout.write(JSON.stringify({ decision: 'block', reason: stop.reason }) + '\n');
    return;
  }
  if (input.event === 'SessionStart') store.pruneStale();
  const first = chats[0]?.chat;
  const me = first ? selfOf(first, agentId).username : agentId;
  const context = renderContext(chats, me);
  if (!context) return;
  try {
    store.save(merge(store.load(), context.shown));
  } catch (err) {
    note(io, `cannot keep the session state (${(err as Error).message}); a Stop may name these messages again`);
  }
  io.stdout.write(JSON.stringify({ hookSpecificOutput: { hookEventName: input.event, additionalContext: context.text } }) + '\n');
}

/**
 * `yello hook <agent> <event>` (docs/agents.md): the exit code. Usage errors are
 * exit 1 (a non-blocking error for both agents; exit 2 would block the prompt or the stop);
 * everything at run time is exit 0, with at most one line on stderr.
 */
export async function runHook(argv: readonly string[], io: Io): Promise<number> {
  const args = parseHookArgs(argv);
  if (args === 'help') {
    io.stdout.write(HOOK_USAGE);
    return 0;
  }
  if ('error' in args) {
    io.stderr.write(`yello hook: ${args.error}\n(see yello hook --help)\n`);
    return 1;
  }
  const stdin = await readHookStdin(io.stdin);
  if (typeof stdin !== 'string') {
    note(io, stdin.error);
    return 0;
  }
  const input = parseHookInput(stdin, args.event);
  if ('error' in input) {
    note(io, input.error);
    return 0;
  }
  // A stop that a Stop hook already turned into a continuation ends: at most one per turn.
  if (input.stopHookActive) return 0;
  const token = hookToken(args, io.env);
  if (typeof token !== 'string') {
    note(io, token.error);
    return 0;
  }
  const socket = resolveSocketPath(args.socket, pathContext(io.env));
  const deadline = setTimeout(() => {
    note(io, `no answer within ${DEADLINE_MS} ms; no messages shown`);
    io.shutdown(0);
  }, DEADLINE_MS);
  deadline.unref();
  let client: YelloClient;
  try {
    client = await YelloClient.connect({
      socketPath: socket,
      token,
      clientName: `yello-hook-${args.agent}`,
      callTimeoutMs: CALL_TIMEOUT_MS,
    });
  } catch (err) {
    clearTimeout(deadline);
    note(io, connectProblem(err, socket));
    return 0;
  }
  try {
    await present(io, args, input, client, socket);
  } catch (err) {
    note(io, `${(err as Error).message}; no messages shown`);
  } finally {
    clearTimeout(deadline);
    client.close();
  }
  return 0;
}
