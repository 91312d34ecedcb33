import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Argv } from 'yargs';
import type { DoctorReport } from '../client/index.js';
import { resolveDataDir } from '../shared/paths.js';
import { connectAdmin, withClient, type GlobalArgs } from './context.js';
import { CliError, EXIT, printJson, printTable } from './output.js';
import { pathContext } from './path-context.js';

/**
 * `yello doctor`: the full store check. With the daemon stopped it opens the store itself (the
 * way the daemon does, so a log loss LevelDB reports is acted on, not lost); while a daemon
 * holds the store it asks that daemon (`daemon.check`, admin).
 */
export function doctorCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'doctor',
    'Check the whole store: checksums, heads against records, signatures, operations, indexes (admin; daemon stopped, or through the running daemon)',
    (z: Argv<GlobalArgs>) =>
      z
        .option('mark', {
          type: 'boolean',
          default: true,
          describe: 'mark damaged streams corrupt so nothing is written over them (--no-mark: only report)',
        })
        .example('$0 doctor --data-dir /var/lib/yello', "check a stopped daemon's store")
        .epilogue(
          'Exit codes: 0 no problems, 1 problems found (listed), 2 usage. docs/reliability.md says what to do with a corrupt stream.',
        ),
    async (args: GlobalArgs & { mark: boolean }) => {
      const report = await offline(args).catch(async (err: unknown) => {
        if ((err as { code?: string }).code !== 'LEVEL_LOCKED') throw err;
        args.io.stderr.write('yello doctor: a daemon holds the store; asking it to run the check\n');
        return withClient(connectAdmin(args), (c) => c.call('daemon.check', { mark: args.mark }));
      });
      if (args.json) printJson(args.io, report);
      else printReport(args, report);
      if (report.problems.length > 0) args.io.exitCode = EXIT.error;
    },
  );
}

/** Run the check in this process on a store no daemon holds. */
async function offline(args: GlobalArgs & { mark: boolean }): Promise<DoctorReport> {
  const dataDir = resolveDataDir(args['data-dir'], pathContext(args.io.env));
  // Daemon code, loaded only for this command (as `yello daemon` does).
  const { runDoctorOffline } = await import('../daemon/entry.js');
  try {
    return await runDoctorOffline(dataDir, { mark: args.mark });
  } catch (err) {
    const code = (err as { code?: string; cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code;
    if (code === 'LEVEL_LOCKED') throw Object.assign(new Error('locked'), { code });
    // A data dir with lock/ and no db/ belongs to a daemon on PostgreSQL: no LevelDB to check.
    if (code === 'ENOENT' && existsSync(join(dataDir, 'lock')))
      throw new CliError(
        `the daemon of ${dataDir} stores in PostgreSQL: yello doctor checks LevelDB stores only; check the database with PostgreSQL's own tools (amcheck, pg_checksums)`,
        EXIT.usage,
      );
    if (code === 'ENOENT') throw new CliError(`no store at ${join(dataDir, 'db')}: pass --data-dir (or $YELLO_DATA_DIR)`, EXIT.usage);
    throw err;
  }
}

function printReport(args: GlobalArgs, r: DoctorReport): void {
  const c = r.counts;
  args.io.stdout.write(
    `checked ${c.values} values: ${c.agents} agents, ${c.chats} chats, ${c.streams} streams, ${c.records} records (${c.messages} messages), ${c.operations} operations\n`,
  );
  if (r.problems.length === 0) args.io.stdout.write('no problems found\n');
  else {
    args.io.stdout.write(`${r.problems.length} problem${r.problems.length === 1 ? '' : 's'}:\n`);
    printTable(
      args.io,
      r.problems.map((p) => ({
        kind: p.kind,
        stream: p.streamId ?? '-',
        generation: p.generation ?? '-',
        position: p.position ?? '-',
        detail: p.detail,
      })),
    );
  }
  if (r.corruptStreams.length > 0) {
    args.io.stdout.write('streams marked corrupt (reads stop at fromPosition; writes are refused until `yello streams reset`):\n');
    printTable(
      args.io,
      r.corruptStreams.map((m) => ({
        stream: m.streamId,
        generation: m.generation ?? 'all',
        from: m.fromPosition,
        since: m.detectedAt,
        detail: m.detail,
      })),
    );
  }
}
