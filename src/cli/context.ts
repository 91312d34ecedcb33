import { closeSync, existsSync, fchmodSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { YelloClient } from '../client/index.js';
import { resolveDataDir, resolveSocketPath } from '../shared/paths.js';
import { CliError, EXIT } from './output.js';
import { pathContext } from './path-context.js';

/** Options every command accepts. */
export interface GlobalArgs {
  socket?: string;
  'data-dir'?: string;
  'token-file'?: string;
  'admin-token-file'?: string;
  json?: boolean;
}

export function socketPath(args: GlobalArgs): string {
  return resolveSocketPath(args.socket, pathContext(), false)!;
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
  return process.env.YELLO_TOKEN?.trim() || null;
}

/** The admin token from `--admin-token-file`, else `<data-dir>/admin.token`. */
export function adminToken(args: GlobalArgs): string {
  const path = args['admin-token-file'] ?? join(resolveDataDir(args['data-dir'], pathContext()), 'admin.token');
  if (!existsSync(path)) {
    throw new CliError(`no admin token at ${path}: pass --data-dir or --admin-token-file (or $YELLO_DATA_DIR), or an agent token with --token-file / $YELLO_TOKEN`, EXIT.usage);
  }
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (err) {
    throw new CliError(`cannot read the admin token ${path}: ${(err as Error).message}`, EXIT.error);
  }
}

/** Connect as the agent (token given) or else as admin. */
export function connectAny(args: GlobalArgs): Promise<YelloClient> {
  const token = agentToken(args) ?? adminToken(args);
  return YelloClient.connect({ socketPath: socketPath(args), token, clientName: 'yello-cli' });
}

/** Connect with the agent token; required. */
export function connectAgent(args: GlobalArgs): Promise<YelloClient> {
  const token = agentToken(args);
  if (!token) throw new CliError('this command acts as an agent: pass --token-file FILE or set $YELLO_TOKEN', EXIT.usage);
  return YelloClient.connect({ socketPath: socketPath(args), token, clientName: 'yello-cli' });
}

/** Connect with the admin token; required. */
export function connectAdmin(args: GlobalArgs): Promise<YelloClient> {
  return YelloClient.connect({ socketPath: socketPath(args), token: adminToken(args), clientName: 'yello-cli' });
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

/** Write a secret (token) to a file that is 0600 before any byte of the secret lands in it. */
export function writeSecretFile(path: string, content: string): void {
  const fd = openSync(path, 'w', 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
}

/** Accept an agent id or a username. */
export async function resolveAgentId(client: YelloClient, ref: string): Promise<string> {
  if (ref.startsWith('agt_')) {
    try {
      return (await client.call('agents.get', { agentId: ref })).agent.id;
    } catch {
      /* fall through: maybe a username that starts with agt_ */
    }
  }
  return (await client.call('agents.get', { username: ref })).agent.id;
}
