import { pino, type Logger } from 'pino';

/** The logger the MCP server's parts share (pino's call shape). */
export type McpLog = Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;

/**
 * pino JSON on stderr: stdout is the MCP channel and must carry nothing else. Code never logs
 * tokens or message content; redaction is the second line of defence, as in the daemon.
 * `destination`: where the lines go instead (a server in a test worker).
 */
export function createMcpLogger(level: string, destination: pino.DestinationStream = pino.destination({ dest: 2, sync: true })): Logger {
  return pino(
    {
      level,
      base: { service: 'yello-mcp', pid: process.pid },
      redact: {
        paths: ['token', '*.token', 'coordinatorToken', '*.coordinatorToken', 'content', '*.content', 'text', '*.text', 'params'],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
