import type { Argv } from 'yargs';
import { connectAdmin, withClient, type GlobalArgs } from './context.js';
import { printJson } from './output.js';

/**
 * `yello metrics`: one Prometheus scrape through the socket (`daemon.metrics`, admin), printed
 * as the text exposition format, e.g. for node_exporter's textfile collector or a cron job; a
 * Prometheus server scrapes `yello daemon --metrics-listen` instead.
 */
export function metricsCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'metrics',
    "Print the daemon's Prometheus metrics (text exposition format) through the socket (admin)",
    (z: Argv<GlobalArgs>) =>
      z
        .example('$0 metrics | grep ^yello_appends_total', 'appends committed since the daemon started')
        .epilogue(
          'Metric names: docs/operations.md "Metrics". --json prints {contentType, text}. A Prometheus server can scrape the daemon directly: yello daemon --metrics-listen 127.0.0.1:9464.',
        ),
    async (args: GlobalArgs) => {
      const scrape = await withClient(connectAdmin(args), (c) => c.call('daemon.metrics', {}));
      if (args.json) printJson(args.io, scrape);
      else args.io.stdout.write(scrape.text);
    },
  );
}
