import { createReadStream, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Argv } from 'yargs';
import { ExportVerifier, type Jwks } from '../client/index.js';
import type { GlobalArgs } from './context.js';
import { CliError, displayText, EXIT, printJson } from './output.js';

export function verifyCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'verify <file>',
    "Verify an export offline: signatures of messages and checkpoints, hashes, and that each stream generation is exactly its checkpoint's range (docs/protocol.md §5.9)",
    (z: Argv<GlobalArgs>) =>
      z
        .positional('file', { type: 'string', demandOption: true, describe: 'JSON lines from `chats export` ("-" for stdin)' })
        .option('jwks', { type: 'string', demandOption: true, describe: 'JWKS file from `keys list --json`' })
        .example('$0 chats export chat_… > chat.jsonl && $0 keys list --json > jwks.json && $0 verify chat.jsonl --jwks jwks.json', ''),
    async (args: GlobalArgs & { file: string; jwks: string }) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(readFileSync(args.jwks, 'utf8'));
      } catch (err) {
        throw new CliError(`cannot read input: ${(err as Error).message}`, EXIT.usage);
      }
      if (!hasKeyList(parsed)) throw new CliError(`${args.jwks} is not a JWKS ({"keys": [...]})`, EXIT.usage);
      const jwks = parsed;
      // yargs turns a lone "-" positional into ''.
      const stdin = args.file === '-' || args.file === '';
      const input = stdin ? args.io.stdin : createReadStream(args.file, 'utf8');
      const verifier = new ExportVerifier(jwks);
      try {
        // Line by line: an export of a long chat is never held in memory whole.
        for await (const line of createInterface({ input, crlfDelay: Infinity })) verifier.line(line);
      } catch (err) {
        throw new CliError(`cannot read input: ${(err as Error).message}`, EXIT.usage);
      }
      const result = verifier.result();
      if (args.json) printJson(args.io, result);
      else {
        for (const p of result.problems) {
          // An export is untrusted input: what it names is shown as data.
          args.io.stdout.write(
            displayText(
              `line ${p.line}: ${p.streamId ?? '?'} generation ${p.generation ?? '?'} position ${p.position ?? '-'}: ${p.kind}: ${p.problem}`,
            ) + '\n',
          );
        }
        const n = result.problems.length;
        args.io.stdout.write(
          `${count(result.records, 'record')}, ${count(result.messages, 'message')}, ${count(result.checkpoints, 'checkpoint')} checked, ${count(n, 'problem')}\n`,
        );
      }
      if (result.problems.length > 0) args.io.exitCode = EXIT.error;
    },
  );
}

/** The shape check `verify` makes before use: a `keys` array (each key is checked when it is used). */
function hasKeyList(value: unknown): value is Jwks {
  return typeof value === 'object' && value !== null && 'keys' in value && Array.isArray(value.keys);
}

/** `1 message`, `2 messages`. */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
