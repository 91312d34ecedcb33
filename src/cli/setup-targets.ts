import { join } from 'node:path';
import { homeDir } from './path-context.js';
import { HOOK_EVENT_NAMES, removeHooks, removeMcpServer, setHooks, setMcpServer } from './setup-json.js';
import { removeMcpBlock, setMcpBlock } from './setup-toml.js';

export const SETUP_AGENTS = ['claude-code', 'codex', 'gemini'] as const;
export type SetupAgent = (typeof SETUP_AGENTS)[number];
export type Scope = 'project' | 'user';

/** What setup writes for one agent: the MCP server and, for the agents with command hooks, the hooks. */
export interface SetupSpec {
  agent: SetupAgent;
  scope: Scope;
  projectDir: string;
  serverName: string;
  server: { command: string; args: string[]; env: Record<string, string> };
  /** The `yello hook` command per event (each ends with {@link hookMarker}), or null without --hooks. */
  hooks: Record<string, string> | null;
  /** The environment whose $HOME, $CLAUDE_CONFIG_DIR and $CODEX_HOME say where the files are. */
  env: Readonly<Record<string, string | undefined>>;
}

/** One file setup edits and the two edits it knows for it. */
export interface FileTarget {
  path: string;
  privateFile: boolean;
  add(text: string): { text: string; changes: string[] };
  remove(text: string): { text: string; changes: string[] };
}

/** Hook timeout written into the configuration, in seconds (the hook gives up itself after 8 s). */
export const HOOK_TIMEOUT_S = 10;

/** The shell comment that ends every hook command setup writes: how `--remove` knows its own. */
export const hookMarker = (serverName: string) => `# yello setup: ${serverName}`;

/** A word for a POSIX shell, quoted when it needs it. */
export function shellWord(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The command a hook runs: node, the yello program, `hook <agent> <event>`, socket and token file; then the marker. */
export function hookCommands(o: {
  nodePath: string;
  binPath: string;
  agent: 'claude-code' | 'codex';
  socketPath: string;
  tokenFile: string;
  serverName: string;
}): Record<string, string> {
  const run = [o.nodePath, o.binPath, 'hook', o.agent].map(shellWord).join(' ');
  const tail = `--socket ${shellWord(o.socketPath)} --token-file ${shellWord(o.tokenFile)} ${hookMarker(o.serverName)}`;
  return Object.fromEntries(HOOK_EVENT_NAMES.map((e) => [e, `${run} ${e} ${tail}`]));
}

const lines = (r: { text: string; change: string | null }) => ({ text: r.text, changes: r.change ? [r.change] : [] });

function jsonMcp(path: string, privateFile: boolean, s: SetupSpec): FileTarget {
  return {
    path,
    privateFile,
    add: (text) => lines(setMcpServer(text, path, s.serverName, s.server)),
    remove: (text) => lines(removeMcpServer(text, path, s.serverName)),
  };
}

function jsonHooks(path: string, privateFile: boolean, s: SetupSpec, hooks: Record<string, string>): FileTarget {
  const marker = hookMarker(s.serverName);
  return {
    path,
    privateFile,
    add: (text) => setHooks(text, path, hooks, marker, HOOK_TIMEOUT_S),
    remove: (text) => removeHooks(text, path, marker),
  };
}

/**
 * The files of each agent (its own documentation's locations) that setup edits, for the scope:
 * - Claude Code: the MCP server in `~/.claude.json` (user; `$CLAUDE_CONFIG_DIR/.claude.json`
 *   when set) or the project's `.mcp.json`; hooks in `~/.claude/settings.json` (user;
 *   `$CLAUDE_CONFIG_DIR/settings.json`) or the project's `.claude/settings.json`.
 * - Codex: `[mcp_servers.<name>]` in `~/.codex/config.toml` (`$CODEX_HOME`) or the project's
 *   `.codex/config.toml`; hooks in `hooks.json` beside it.
 * - Gemini CLI: `mcpServers` in `~/.gemini/settings.json` or the project's `.gemini/settings.json`.
 * Removal works on the same list, whatever was written.
 */
export function fileTargets(s: SetupSpec): FileTarget[] {
  const env = s.env;
  const home = homeDir(env);
  const user = s.scope === 'user';
  const targets: FileTarget[] = [];
  if (s.agent === 'claude-code') {
    const configDir = env.CLAUDE_CONFIG_DIR || null;
    targets.push(jsonMcp(user ? join(configDir ?? home, '.claude.json') : join(s.projectDir, '.mcp.json'), user, s));
    const settings = user ? join(configDir ?? join(home, '.claude'), 'settings.json') : join(s.projectDir, '.claude', 'settings.json');
    if (s.hooks) targets.push(jsonHooks(settings, user, s, s.hooks));
    else targets.push({ ...jsonHooks(settings, user, s, {}), add: (text) => ({ text, changes: [] }) });
  } else if (s.agent === 'codex') {
    const dir = user ? env.CODEX_HOME || join(home, '.codex') : join(s.projectDir, '.codex');
    const config = join(dir, 'config.toml');
    targets.push({
      path: config,
      privateFile: user,
      add: (text) => lines(setMcpBlock(text, config, s.serverName, s.server)),
      remove: (text) => lines(removeMcpBlock(text, s.serverName)),
    });
    const hooksFile = join(dir, 'hooks.json');
    if (s.hooks) targets.push(jsonHooks(hooksFile, user, s, s.hooks));
    else targets.push({ ...jsonHooks(hooksFile, user, s, {}), add: (text) => ({ text, changes: [] }) });
  } else {
    targets.push(jsonMcp(user ? join(home, '.gemini', 'settings.json') : join(s.projectDir, '.gemini', 'settings.json'), user, s));
  }
  return targets;
}
