import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createMcpServer, type McpServerOptions } from './create-server.js';
import { createMcpLogger } from './log.js';
import { frameError } from './request-gate.js';
import { StdinLines } from './stdin-lines.js';

export type { McpServerOptions } from './create-server.js';
export { INSTRUCTIONS } from './instructions.js';

/**
 * Serve MCP on stdio for one agent until the client goes away (stdin ends) or a signal arrives;
 * then stop every chat session (releasing its claim) and resolve with the exit code.
 * Stdout carries MCP messages only; logs go to stderr. The server itself is
 * {@link createMcpServer}'s; this adds the stdio framing and the process's lifetime.
 */
export async function runMcpServer(options: McpServerOptions): Promise<number> {
  const log = createMcpLogger(options.logLevel);
  // Anything printed to stdout would corrupt the MCP channel: route stray console output to stderr.
  console.log =
    console.info =
    console.debug =
      (...args: unknown[]) => {
        console.error(...args);
      };

  const server = await createMcpServer({ ...options, log });
  if (server.setupFailure) {
    // A person reads here what every tool tells the model.
    const info = server.setupFailure;
    process.stderr.write(`yello mcp: ${info.type}: ${info.message}. ${info.action}\n`);
  }

  // Our own framing in front of the SDK's: an oversized line is answered, not fatal, and a line
  // the SDK would drop unanswered (not JSON, a batch, not a message) is answered as the
  // specification says. The checks of the messages themselves are the server's (its gate).
  const stdinLines = process.stdin.pipe(new StdinLines((line) => process.stdout.write(line), undefined, frameError));
  const transport = new StdioServerTransport(stdinLines);
  const ended = new Promise<string>((resolve) => {
    process.stdin.once('end', () => {
      resolve('stdin closed');
    });
    process.stdout.once('error', (err: Error) => {
      resolve(`stdout failed: ${err.message}`);
    });
    process.once('SIGTERM', () => {
      resolve('SIGTERM');
    });
    process.once('SIGINT', () => {
      resolve('SIGINT');
    });
    transport.onclose = () => {
      resolve('transport closed');
    };
  });
  await server.connect(transport);
  log.info({ channel: options.channel === true }, 'serving MCP on stdio');
  const why = await ended;
  log.info({ why }, 'stopping: releasing chat claims');
  await server.close();
  return 0;
}
