import { resolve } from 'node:path';
import type { Argv } from 'yargs';
import { resolveDataDir } from '../shared/paths.js';
import { connectAdmin, withClient, type GlobalArgs } from './context.js';
import { CliError, EXIT, printJson } from './output.js';
import { pathContext } from './path-context.js';

/** `symlinks followed: secret.key -> /vault/secret.key, …` */
function followedLine(followed: Array<{ name: string; target: string }>): string {
  return `symlinks of the data dir followed: ${followed.map((f) => `${f.name} -> ${f.target}`).join(', ')}`;
}

/**
 * `yello backup <dir>` (through the running daemon: one consistent snapshot while it serves)
 * and `yello restore <dir>` (the daemon stopped: checked, then swapped in, the old state kept).
 * docs/operations.md says what a backup holds and how to use both.
 */
export function backupCommands(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y
    .command(
      'backup <dir>',
      'Write a consistent backup of the running daemon (store, signing keys, admin token, token secret) to a new directory (admin)',
      (z: Argv<GlobalArgs>) =>
        z
          .positional('dir', { type: 'string', demandOption: true, describe: 'a directory that does not exist yet (its parent must)' })
          .example('$0 backup /var/backups/yello/$(date +%F)', 'a dated backup, taken while agents keep writing')
          .epilogue(
            'The backup holds secrets (signing keys, admin token): keep it as private as the data dir. Restore with `yello restore`.',
          ),
      async (args: GlobalArgs & { dir: string }) => {
        const path = resolve(args.dir);
        await withClient(connectAdmin(args), async (c) => {
          const m = await c.call('daemon.backup', { path });
          if (args.json) printJson(args.io, { path, manifest: m });
          else {
            args.io.stdout.write(`${path}\n`);
            args.io.stderr.write(
              `backup written: ${m.records} records of ${m.streams.length} streams, ${m.entries} entries (${m.bytes} bytes), with ${m.files.join(', ')}\n`,
            );
            if (m.followed?.length) args.io.stderr.write(`${followedLine(m.followed)}; the backup holds the files they led to\n`);
          }
        });
      },
    )
    .command(
      'restore <dir>',
      "Replace a stopped daemon's store, keys and secrets with a backup, after checking it (admin; the data dir's previous state is kept aside)",
      (z: Argv<GlobalArgs>) =>
        z
          .positional('dir', { type: 'string', demandOption: true, describe: 'a directory `yello backup` wrote' })
          .example('$0 restore /var/backups/yello/2026-12-01 --data-dir /var/lib/yello', 'restore, with the daemon stopped')
          .epilogue(
            'Stop the daemon first (a daemon holding the data dir, on LevelDB or PostgreSQL, is named and the restore refused). A backup whose manifest names anything but its own files, or that holds a symlink, is refused before anything is copied. Exit codes: 0 restored, 1 refused (nothing changed), 2 usage.',
          ),
      async (args: GlobalArgs & { dir: string }) => {
        const dataDir = resolveDataDir(args['data-dir'], pathContext(args.io.env));
        // Daemon code, loaded only for this command (as `yello doctor` does offline).
        const { restoreBackup, RestoreError } = await import('../daemon/entry.js');
        try {
          const r = await restoreBackup(resolve(args.dir), dataDir);
          if (args.json) printJson(args.io, { dataDir, setAside: r.setAside, manifest: r.manifest, counts: r.report.counts });
          else {
            args.io.stdout.write(
              `restored ${r.manifest.records} records of ${r.manifest.streams.length} streams (backup of ${r.manifest.createdAt}) into ${dataDir}; the doctor found no problems\n`,
            );
            if (r.manifest.followed?.length)
              args.io.stdout.write(`${followedLine(r.manifest.followed)} when backed up; they are restored as files\n`);
            if (r.setAside)
              args.io.stdout.write(`the previous store, keys and secrets are in ${r.setAside} (remove it once the restore is confirmed)\n`);
          }
        } catch (err) {
          if (err instanceof RestoreError) throw new CliError(err.message, EXIT.error);
          throw err;
        }
      },
    );
}
