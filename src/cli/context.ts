import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeStreamId } from '../shared/ids.js';
import { NotFoundError, UnauthenticatedError, YelloClient, type Chat, type StreamState } from '../client/index.js';
import { resolveDataDir, resolveSocketPath } from '../shared/paths.js';
import type { Io } from './io.js';
import { CliError, EXIT } from './output.js';
import { pathContext } from './path-context.js';
import { peerIdOf } from '../shared/chat-peers.js';

/** Options every command accepts, and the run's I/O (yargs' parse context). */
export interface GlobalArgs {
  io: Io;
  socket?: string;
  'data-dir'?: string;
  'token-file'?: string;
  'admin-token-file'?: string;
  'state-dir'?: string;
  json?: boolean;
}

export function socketPath(args: GlobalArgs): string {
  return resolveSocketPath(args.socket, pathContext(args.io.env));
}

/** The agent token from `--token-file` or `$YELLO_TOKEN`, if any. */
export function agentToken(args: GlobalArgs): string | null {
  if (args['token-file']) {
    try {
      return readFileSync(args['token-file'], 'utf8').trim();
    } catch (err) {
      throw new CliError(`cannot read --token-file ${args['token-file']}: ${(err as Error).message}`, EXIT.usage);
    }
  }
  return args.io.env.YELLO_TOKEN?.trim() || null;
}

/** Where the admin token is read from: `--admin-token-file`, else `<data-dir>/admin.token`. */
export function adminTokenPath(args: GlobalArgs): string {
  return args['admin-token-file'] ?? join(resolveDataDir(args['data-dir'], pathContext(args.io.env)), 'admin.token');
}

/** The admin token from `--admin-token-file`, else `<data-dir>/admin.token`. */
export function adminToken(args: GlobalArgs): string {
  const path = adminTokenPath(args);
  if (!existsSync(path)) {
    throw new CliError(
      `no admin token at ${path}: pass --data-dir or --admin-token-file (or $YELLO_DATA_DIR), or an agent token with --token-file / $YELLO_TOKEN`,
      EXIT.usage,
    );
  }
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (err) {
    throw new CliError(`cannot read the admin token ${path}: ${(err as Error).message}`, EXIT.error);
  }
}

/**
 * Say hello; a refused token says which token was read and how to point at the right one
 * (a forgotten $YELLO_DATA_DIR reads another daemon's admin.token, say).
 */
async function connect(
  args: GlobalArgs,
  token: string,
  source: { admin: string } | { agent: string },
  options: ConnectChoices = {},
): Promise<YelloClient> {
  const socket = socketPath(args);
  try {
    return await YelloClient.connect({ socketPath: socket, token, clientName: 'yello-cli', ...options });
  } catch (err) {
    if (!(err instanceof UnauthenticatedError)) throw err;
    if ('admin' in source) {
      throw new CliError(
        `UNAUTHENTICATED: the daemon at ${socket} did not accept the admin token read from ${source.admin}; point at that daemon's data dir with --data-dir or $YELLO_DATA_DIR, or at its admin.token with --admin-token-file`,
        EXIT.error,
      );
    }
    throw new CliError(
      `UNAUTHENTICATED: the daemon at ${socket} did not accept the agent token from ${source.agent} (unknown, rotated or disabled, or another daemon's; see --socket / $YELLO_SOCKET)`,
      EXIT.error,
    );
  }
}

function agentSource(args: GlobalArgs): { agent: string } {
  return { agent: args['token-file'] ? `--token-file ${args['token-file']}` : '$YELLO_TOKEN' };
}

/** What a long-running command asks of its connection: `reconnect` rides through daemon restarts. */
export interface ConnectChoices {
  reconnect?: boolean;
}

/** Connect as the agent (token given) or else as admin. */
export function connectAny(args: GlobalArgs, options: ConnectChoices = {}): Promise<YelloClient> {
  const token = agentToken(args);
  if (token) return connect(args, token, agentSource(args), options);
  return connect(args, adminToken(args), { admin: adminTokenPath(args) }, options);
}

/** Connect with the agent token; required. */
export function connectAgent(args: GlobalArgs, options: ConnectChoices = {}): Promise<YelloClient> {
  const token = agentToken(args);
  if (!token) throw new CliError('this command acts as an agent: pass --token-file FILE or set $YELLO_TOKEN', EXIT.usage);
  return connect(args, token, agentSource(args), options);
}

/** Connect with the admin token; required. */
export function connectAdmin(args: GlobalArgs, options: ConnectChoices = {}): Promise<YelloClient> {
  return connect(args, adminToken(args), { admin: adminTokenPath(args) }, options);
}

/**
 * The chat and its streams, or `no such chat: <id>`: commands that take a chat id check it
 * first, so a mistyped id is never reported as a stream id the user did not type.
 */
export async function getChat(client: YelloClient, chatId: string): Promise<{ chat: Chat; streams: [StreamState, StreamState] }> {
  try {
    return await client.call('chats.get', { chatId });
  } catch (err) {
    if (err instanceof NotFoundError && err.data.kind === 'chat') throw new CliError(`no such chat: ${chatId}`, EXIT.error);
    throw err;
  }
}

/** The agent an agent session acts as (a command that needs one connected with {@link connectAgent}). */
export function sessionAgentId(client: YelloClient): string {
  const { agentId } = client.session;
  if (agentId === null) throw new CliError('this command acts as an agent: pass --token-file FILE or set $YELLO_TOKEN', EXIT.usage);
  return agentId;
}

/** The caller's own and the peer's stream ids of a chat (agent sessions). */
export function streamsOf(chat: Chat, agentId: string): { own: string; peer: string } {
  return { own: makeStreamId(chat.id, agentId), peer: makeStreamId(chat.id, peerIdOf(chat, agentId)) };
}

/** Run `fn` with a client and always close it. */
export async function withClient<T>(connect: Promise<YelloClient>, fn: (c: YelloClient) => Promise<T>): Promise<T> {
  const client = await connect;
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

/** Accept an agent id or a username. */
export async function resolveAgentId(client: YelloClient, ref: string): Promise<string> {
  // `@bob` is how people (and the MCP tools) name an agent; usernames never start with `@`.
  if (ref.startsWith('@')) ref = ref.slice(1);
  if (ref.startsWith('agt_')) {
    try {
      return (await client.call('agents.get', { agentId: ref })).agent.id;
    } catch {
      /* fall through: maybe a username that starts with agt_ */
    }
  }
  return (await client.call('agents.get', { username: ref })).agent.id;
}
