import type { Argv } from 'yargs';
import { connectAdmin, type GlobalArgs } from './context.js';
import { CliError, EXIT } from './output.js';

type ConsoleArgs = GlobalArgs & { listen: string; 'allow-remote': boolean };

/** `host:port`, `[v6]:port`; port 0 picks a free one. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  const host = m?.[1] ?? m?.[2];
  if (host === undefined || port > 65535)
    throw new CliError(`--listen ${value}: expected HOST:PORT, e.g. 127.0.0.1:0 or [::1]:8080`, EXIT.usage);
  return { host, port };
}

/** `yello console`: the local web console (docs/console.md). Its server loads only when this command runs. */
export function consoleCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'console',
    'Serve a local web console for the person who watches the agents (admin); prints a one-time sign-in URL; see docs/console.md',
    (z: Argv<GlobalArgs>) =>
      z
        .option('listen', { type: 'string', default: '127.0.0.1:0', describe: 'HOST:PORT to serve on (port 0: any free port)' })
        .option('allow-remote', {
          type: 'boolean',
          default: false,
          describe: 'allow a --listen address that is not loopback (anyone who can reach it and holds the URL signs in)',
        })
        .example('$0 console', 'then open the printed URL in a browser on this host')
        .example('ssh -L 8080:127.0.0.1:8080 host, then on host: $0 console --listen 127.0.0.1:8080', 'from another machine'),
    async (args: ConsoleArgs) => {
      const { host, port } = parseListen(args.listen);
      const { isLoopback } = await import('../console/guard.js');
      if (!isLoopback(host) && !args['allow-remote'])
        throw new CliError(
          `--listen ${args.listen} is not a loopback address: the console serves this host only (use SSH port forwarding, docs/console.md), or pass --allow-remote`,
          EXIT.usage,
        );
      const client = await connectAdmin(args, { reconnect: true });
      const { startConsole } = await import('../console/console-server.js');
      let running;
      try {
        running = await startConsole({ client, host, port });
      } catch (err) {
        client.close();
        throw new CliError(`cannot listen on ${args.listen}: ${(err as Error).message}`, EXIT.error);
      }
      args.io.exitCleanlyOnSignals();
      const r = running;
      args.io.onShutdown(async () => {
        await r.close();
        client.close();
      });
      args.io.stderr.write('yello console: open this URL once (it signs this browser in; keep it secret), Ctrl-C stops:\n');
      args.io.stdout.write(`${r.url}\n`);
      if (r.otherUrls.length > 0)
        args.io.stderr.write(`yello console: the same link under this host's other addresses:\n${r.otherUrls.join('\n')}\n`);
      r.onNewLink((url) => {
        args.io.stderr.write('yello console: signed out or expired; a new one-time sign-in URL:\n');
        args.io.stdout.write(`${url}\n`);
      });
      await new Promise<never>(() => undefined);
    },
  );
}
