import type { Writable } from 'node:stream';
import type { Argv, CommandModule } from 'yargs';
import type { YelloClient } from '../client/index.js';
import { exportChat } from '../client/chat-export.js';
import { connectAny, withClient, type GlobalArgs } from './context.js';
import { CliError, displayText, EXIT } from './output.js';
import { OutFile } from './secret-files.js';

export { exportChat, type ExportItem, type Unexportable } from '../client/chat-export.js';

/** Write one line, waiting when the sink's buffer is full (a large export never piles up in memory). */
async function writeLine(sink: Writable, value: unknown): Promise<void> {
  if (!sink.write(JSON.stringify(value) + '\n')) await new Promise<void>((resolve) => sink.once('drain', resolve));
}

type ExportArgs = GlobalArgs & { chatId: string; out?: string; force: boolean };

/** `yello chats export`: a subcommand of `chats`. */
export const exportCommand: CommandModule<GlobalArgs, ExportArgs> = {
  command: 'export <chatId>',
  describe: 'Write every retained record as JSON lines, each stream generation closed by a daemon-signed checkpoint (for `verify`)',
  builder: (z: Argv<GlobalArgs>) =>
    z
      .positional('chatId', { type: 'string', demandOption: true })
      .option('out', { type: 'string', describe: 'new file to write (0600; an existing file or symlink is refused; default stdout)' })
      .option('force', { type: 'boolean', default: false, describe: 'with --out: replace an existing file (by a new one, atomically)' }),
  handler: async (args: ExportArgs) => {
    await withClient(connectAny(args), async (c) => {
      const file = args.out ? OutFile.open(args.out, args.force) : null;
      let written: Written;
      try {
        written = await writeExport(c, args, args.chatId, file ? file.stream : args.io.stdout);
        await file?.commit();
      } catch (err) {
        file?.abort();
        throw err;
      }
      if (args.out) args.io.stderr.write(`${written.records} records and ${written.checkpoints} checkpoints written to ${args.out}\n`);
      if (written.damaged > 0) {
        throw new CliError(
          `the export is incomplete: ${written.damaged} stream generation${written.damaged === 1 ? ' is' : 's are'} damaged (see yello status)`,
          EXIT.error,
        );
      }
    });
  },
};

type Written = { records: number; checkpoints: number; damaged: number };

/** Write the export's lines to `sink`, and each damaged part as one stderr line as it is met. */
async function writeExport(c: YelloClient, args: GlobalArgs, chatId: string, sink: Writable): Promise<Written> {
  const written: Written = { records: 0, checkpoints: 0, damaged: 0 };
  for await (const item of exportChat(c, chatId)) {
    if ('record' in item) {
      await writeLine(sink, item.record);
      written.records++;
    } else if ('checkpoint' in item) {
      await writeLine(sink, { checkpoint: item.checkpoint });
      written.checkpoints++;
    } else {
      const u = item.unexportable;
      written.damaged++;
      const part = u.fromPosition === null ? 'cannot be exported' : `is exported only below position ${u.fromPosition}`;
      args.io.stderr.write(displayText(`yello: ${u.streamId} generation ${u.generation} ${part}: ${u.message}`) + '\n');
    }
  }
  return written;
}
