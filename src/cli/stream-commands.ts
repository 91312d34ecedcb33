import type { Argv } from 'yargs';
import type { StreamState } from '../client/index.js';
import { CliWriter } from './cli-writer.js';
import { connectAdmin, connectAgent, connectAny, withClient, type GlobalArgs } from './context.js';
import { CliError, EXIT, jsonOr, printObject } from './output.js';
import { readSecretFile } from './secret-files.js';

type A<T = object> = GlobalArgs & T;
const streamRow = (s: StreamState) => ({
  stream: s.streamId,
  generation: s.generation,
  first: s.firstPosition,
  next: s.nextPosition,
  acknowledged: s.acknowledged ? `${s.acknowledged.generation}/${s.acknowledged.nextPosition}` : '-',
  writer: s.writer.active ? `epoch ${s.writer.epoch}` : `free (epoch ${s.writer.epoch})`,
});

/** Options that would put a coordinator token on the command line (visible in `ps`): refused. */
export function coordinatorTokenOptions<T>(z: Argv<T>): Argv<T> {
  return z
    .option('coordinator-token-file', {
      type: 'string',
      describe: 'file holding a coordinator token (from `streams claim`), or - for stdin',
    })
    .option('coordinator-token', { type: 'string', hidden: true });
}

/** The coordinator token of `--coordinator-token-file`, if given; `--coordinator-token T` is a usage error. */
export async function coordinatorTokenArg(
  args: GlobalArgs & { 'coordinator-token'?: string; 'coordinator-token-file'?: string },
): Promise<string | null> {
  if (args['coordinator-token'] !== undefined) {
    throw new CliError(
      '--coordinator-token puts a secret on the command line, where `ps` shows it; use --coordinator-token-file FILE (or - to read it from stdin)',
      EXIT.usage,
    );
  }
  const file = args['coordinator-token-file'];
  if (file === undefined) return null;
  // yargs turns a lone "-" option value into ''.
  return readSecretFile(file === '' ? '-' : file, '--coordinator-token-file', args.io);
}

/** `yello streams …`. */
export function streamCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command('streams', 'Inspect and administer streams', (yy: Argv<GlobalArgs>) =>
    yy
      .command(
        'show <streamId>',
        'Stream state',
        (z: Argv<GlobalArgs>) => z.positional('streamId', { type: 'string', demandOption: true }),
        async (args: A<{ streamId: string }>) => {
          await withClient(connectAny(args), async (c) => {
            const r = await c.call('streams.get', { streamId: args.streamId });
            jsonOr(args, r, () => {
              printObject(args.io, streamRow(r));
            });
          });
        },
      )
      .command(
        'claim <streamId>',
        'Claim your outbound stream; prints the coordinator token',
        (z: Argv<GlobalArgs>) =>
          z
            .positional('streamId', { type: 'string', demandOption: true })
            .option('replace', { type: 'boolean', default: false, describe: 'take over from a live coordinator' })
            .option('reason', { type: 'string' }),
        async (args: A<{ streamId: string; replace: boolean; reason?: string }>) => {
          await withClient(connectAgent(args), async (c) => {
            const r = await c.call('streams.claim', {
              streamId: args.streamId,
              replace: args.replace,
              ...(args.reason ? { reason: args.reason } : {}),
            });
            jsonOr(args, r, () => {
              printObject(args.io, r);
            });
          });
        },
      )
      .command(
        'release <streamId>',
        "Release the writer claim: an agent releases the claim `send`/`ack` keep (or --coordinator-token-file's); admin releases any",
        (z: Argv<GlobalArgs>) => coordinatorTokenOptions(z.positional('streamId', { type: 'string', demandOption: true })),
        async (args: A<{ streamId: string; 'coordinator-token'?: string; 'coordinator-token-file'?: string }>) => {
          const token = await coordinatorTokenArg(args);
          await withClient(connectAny(args), async (c) => {
            let r;
            if (c.session.role === 'admin')
              r = await c.call('streams.release', { streamId: args.streamId, ...(token ? { coordinatorToken: token } : {}) });
            else r = await CliWriter.for(args, c, args.streamId).release(token ?? undefined);
            jsonOr(args, r, () => {
              printObject(args.io, streamRow(r));
            });
          });
        },
      )
      .command(
        'trim <streamId> <beforePosition>',
        'Drop records below a position (admin)',
        (z: Argv<GlobalArgs>) =>
          z
            .positional('streamId', { type: 'string', demandOption: true })
            .positional('beforePosition', { type: 'string', demandOption: true })
            .option('force', { type: 'boolean', default: false, describe: 'trim past what the peer acknowledged' }),
        async (args: A<{ streamId: string; beforePosition: string; force: boolean }>) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await c.call('streams.trim', { streamId: args.streamId, beforePosition: args.beforePosition, force: args.force });
            jsonOr(args, r, () => args.io.stdout.write(`firstPosition ${r.firstPosition}\n`));
          });
        },
      )
      .command(
        'reset <streamId>',
        'Start a new generation at position 0 (admin); readers must intervene',
        (z: Argv<GlobalArgs>) =>
          z.positional('streamId', { type: 'string', demandOption: true }).option('reason', { type: 'string', demandOption: true }),
        async (args: A<{ streamId: string; reason: string }>) => {
          await withClient(connectAdmin(args), async (c) => {
            const r = await c.call('streams.reset', { streamId: args.streamId, reason: args.reason });
            jsonOr(args, r, () => {
              printObject(args.io, streamRow(r));
            });
          });
        },
      )
      .demandCommand(1, 'name a streams subcommand'),
  );
}
