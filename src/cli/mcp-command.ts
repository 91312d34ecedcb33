import { readFileSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Argv } from 'yargs';
import { connectAgent, sessionAgentId, socketPath, withClient, type GlobalArgs } from './context.js';
import { CliError, EXIT } from './output.js';

type McpArgs = GlobalArgs & {
  replace: boolean;
  'resume-after-break': boolean;
  'call-timeout-ms'?: number;
  'log-level': string;
  'print-config': boolean;
  check: boolean;
  channel: boolean;
};

/**
 * The username of the agent whose token is in `tokenFile`, asked of the daemon: a token it
 * refuses, or the admin token, is an error here, before it goes into an MCP client's config.
 */
async function checkedUsername(args: GlobalArgs, tokenFile: string): Promise<string> {
  const connecting = connectAgent({ ...args, 'token-file': tokenFile }).catch((err: unknown) => {
    if (err instanceof CliError) throw err;
    throw new CliError(
      `cannot check the token with the daemon at ${socketPath(args)}: ${(err as Error).message}; start the daemon (yello status says whether it runs), or pass --no-check to print the entry unchecked`,
      EXIT.error,
    );
  });
  return withClient(connecting, async (c) => {
    if (c.session.role !== 'agent')
      throw new CliError(
        `${tokenFile} holds the admin token; yello mcp acts as one agent. Give it an agent's token file: yello agents add NAME --token-out FILE (or yello agents rotate-token NAME --token-out FILE)`,
        EXIT.usage,
      );
    return (await c.call('agents.get', { agentId: sessionAgentId(c) })).agent.username;
  });
}

/** Without the check: the server is named after the token file (`alice.token` → `yello-alice`). */
function usernameFromFile(tokenFile: string): string {
  return (
    basename(tokenFile)
      .replace(/\.token$/, '')
      .replace(/[^A-Za-z0-9_.-]/g, '-') || 'agent'
  );
}

/** The agent token and, when it came from a file, that file's absolute path. */
function mcpToken(args: GlobalArgs): { token: string; tokenFile: string | null } {
  const file = args['token-file'] || args.io.env.YELLO_TOKEN_FILE;
  if (file) {
    let token: string;
    try {
      token = readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new CliError(`cannot read the token file ${file}: ${(err as Error).message}`, EXIT.usage);
    }
    if (!token) throw new CliError(`the token file ${file} is empty`, EXIT.usage);
    return { token, tokenFile: resolve(file) };
  }
  const token = args.io.env.YELLO_TOKEN?.trim();
  if (!token)
    throw new CliError('yello mcp acts as an agent: pass --token-file FILE, or set $YELLO_TOKEN_FILE or $YELLO_TOKEN', EXIT.usage);
  return { token, tokenFile: null };
}

/** `yello mcp`: the MCP server on stdio (docs/mcp.md). The SDK loads only when this command runs. */
export function mcpCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'mcp',
    'Serve the Model Context Protocol on stdio for one agent (tools: read_new, acknowledge, send, …); see docs/mcp.md',
    (z: Argv<GlobalArgs>) =>
      z
        .option('replace', {
          type: 'boolean',
          default: false,
          describe: 'take over chats whose stream another coordinator holds (that one is fenced)',
        })
        .option('resume-after-break', {
          type: 'boolean',
          default: false,
          describe: "a person's decision after a continuity break: start such chats at what the peer stream retains",
        })
        .option('call-timeout-ms', {
          type: 'number',
          describe: 'per-call timeout towards the daemon; an append that times out has an unknown outcome (default 10000)',
        })
        .option('log-level', {
          choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
          default: 'info',
          describe: 'stderr log level',
        })
        .option('channel', {
          type: 'boolean',
          default: false,
          describe:
            'also push each new peer message batch into a Claude Code session as a channel event (claude --dangerously-load-development-channels server:yello-<username>); see docs/mcp.md "Channel"',
        })
        .option('print-config', {
          type: 'boolean',
          default: false,
          describe:
            'check the token with the daemon and print the {"mcpServers": {"yello-<username>": …}} JSON for MCP clients (paths, never the token), then exit',
        })
        .option('check', {
          type: 'boolean',
          default: true,
          describe: 'with --print-config: ask the daemon whose token it is (--no-check: name the server after the token file)',
        })
        .example('$0 --token-file alice.token mcp --print-config', 'checks the token, prints the "yello-alice" entry for an MCP client')
        .example('YELLO_TOKEN_FILE=alice.token $0 mcp', 'what the MCP client runs')
        .example(
          '$0 --token-file alice.token mcp --print-config --channel',
          'the entry with --channel, and (on stderr) the claude command that loads it as a channel',
        ),
    async (args: McpArgs) => {
      const timeout = args['call-timeout-ms'];
      if (timeout !== undefined && (!Number.isInteger(timeout) || timeout <= 0))
        throw new CliError('--call-timeout-ms must be a positive integer', EXIT.usage);
      const { token, tokenFile } = mcpToken(args);
      const socket = resolve(socketPath(args));
      if (args['print-config']) {
        if (!tokenFile)
          throw new CliError(
            '--print-config names a token file and never the token: pass --token-file FILE or set $YELLO_TOKEN_FILE',
            EXIT.usage,
          );
        const { claudeChannelCommand, mcpClientConfig, mcpServerName } = await import('../mcp/config.js');
        const username = args.check ? await checkedUsername(args, tokenFile) : usernameFromFile(tokenFile);
        const binPath = fileURLToPath(new URL('../../bin/yello', import.meta.url));
        const serverName = mcpServerName(username);
        args.io.stdout.write(
          JSON.stringify(
            mcpClientConfig({
              serverName,
              nodePath: process.execPath,
              binPath,
              socketPath: socket,
              tokenFile,
              channel: args.channel,
              ...(timeout !== undefined ? { callTimeoutMs: timeout } : {}),
            }),
            null,
            2,
          ) + '\n',
        );
        // On stderr, so that stdout stays one JSON document (`> .mcp.json`).
        if (args.channel)
          args.io.stderr.write(
            `Put the entry under "mcpServers" in the project's .mcp.json (or ~/.claude.json), then start Claude Code with the channel loaded:\n  ${claudeChannelCommand(serverName)}\n`,
          );
        return;
      }
      // The server speaks on the process's own stdin and stdout (src/mcp/server.ts).
      if (args.io.stdout !== process.stdout || args.io.stdin !== process.stdin)
        throw new CliError('yello mcp serves on the process stdin and stdout: run it as its own process', EXIT.usage);
      const { runMcpServer } = await import('../mcp/server.js');
      const code = await runMcpServer({
        token,
        socketPath: socket,
        replace: args.replace,
        resumeAfterBreak: args['resume-after-break'],
        logLevel: args['log-level'],
        channel: args.channel,
        ...(timeout !== undefined ? { callTimeoutMs: timeout } : {}),
      });
      // Coordinators' reconnect timers must not keep a finished server alive.
      args.io.exit(code);
    },
  );
}
