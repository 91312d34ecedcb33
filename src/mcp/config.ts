/** The `mcpServers` entry MCP clients (Claude Desktop, Claude Code, Cursor, …) read. */
export interface McpClientConfig {
  mcpServers: Record<string, { command: string; args: string[]; env: Record<string, string> }>;
}

/** The `mcpServers` key of an agent's server: `yello-<username>`, so two agents in one client do not collide. */
export function mcpServerName(username: string): string {
  return `yello-${username}`;
}

/**
 * The configuration snippet `yello mcp --print-config` prints: absolute paths to node, the
 * yello program, the socket and the token file, under the key `serverName`. It names the token
 * file and never contains the token, so the snippet can be pasted, shared and committed
 * without leaking a credential.
 */
export function mcpClientConfig(o: {
  serverName: string;
  nodePath: string;
  binPath: string;
  socketPath: string;
  tokenFile: string;
  callTimeoutMs?: number;
  /** `yello mcp --channel`: the server also pushes peer messages into a Claude Code session. */
  channel?: boolean;
}): McpClientConfig {
  return {
    mcpServers: {
      [o.serverName]: {
        command: o.nodePath,
        args: [
          o.binPath,
          'mcp',
          ...(o.channel ? ['--channel'] : []),
          ...(o.callTimeoutMs !== undefined ? ['--call-timeout-ms', String(o.callTimeoutMs)] : []),
        ],
        env: { YELLO_SOCKET: o.socketPath, YELLO_TOKEN_FILE: o.tokenFile },
      },
    },
  };
}

/**
 * The command that starts Claude Code with `serverName` loaded as a channel. Channels are a
 * research preview: a channel that is not on Anthropic's allowlist is loaded with
 * `--dangerously-load-development-channels server:<name>`, and being in the MCP configuration
 * alone is not enough (code.claude.com/docs/en/channels-reference).
 */
export function claudeChannelCommand(serverName: string): string {
  return `claude --dangerously-load-development-channels server:${serverName}`;
}
