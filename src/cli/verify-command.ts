import { readFileSync } from 'node:fs';
import type { Argv } from 'yargs';
import { verifyRecord, type Jwks, type StoredRecord } from '../client/index.js';
import type { GlobalArgs } from './context.js';
import { CliError, EXIT, printJson } from './output.js';

/** One problem found in an export, with where it is. */
export interface Problem {
  line: number;
  streamId: string | null;
  generation: string | null;
  position: string | null;
  problem: string;
}

/**
 * Check an export offline: every message's hash and signature (by kid, against the JWKS), and
 * that each stream generation's positions are contiguous. Reports every problem, not the first.
 */
export function verifyExport(text: string, jwks: Jwks): { records: number; messages: number; problems: Problem[] } {
  const problems: Problem[] = [];
  const last = new Map<string, bigint>();
  let records = 0;
  let messages = 0;
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let r: StoredRecord;
    try {
      r = JSON.parse(line) as StoredRecord;
    } catch {
      problems.push({ line: i + 1, streamId: null, generation: null, position: null, problem: 'not JSON' });
      return;
    }
    records++;
    const at = { line: i + 1, streamId: r.streamId ?? null, generation: r.generation ?? null, position: r.position ?? null };
    if (!r.wrapper || typeof r.position !== 'string' || !/^(0|[1-9]\d*)$/.test(r.position)) {
      problems.push({ ...at, problem: 'not a stored record' });
      return;
    }
    const key = `${r.streamId}/${r.generation}`;
    const pos = BigInt(r.position);
    const prev = last.get(key);
    if (prev !== undefined && pos !== prev + 1n) problems.push({ ...at, problem: pos <= prev ? `position repeats or goes back (after ${prev})` : `gap: positions ${prev + 1n}..${pos - 1n} missing` });
    last.set(key, pos);
    if (r.wrapper.type === 'chat.message') {
      messages++;
      try {
        verifyRecord(r, jwks);
      } catch (err) {
        problems.push({ ...at, problem: (err as Error).message.replace(/^position \S+: /, '') });
      }
    }
  });
  return { records, messages, problems };
}

export function verifyCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command('verify <file>', 'Verify an export offline: hashes, signatures, kid and contiguity (gaps inside each stream generation; an export does not prove nothing came after its end)', (z: Argv<GlobalArgs>) => z
    .positional('file', { type: 'string', demandOption: true, describe: 'JSON lines from `chats export` ("-" for stdin)' })
    .option('jwks', { type: 'string', demandOption: true, describe: 'JWKS file from `keys list --json`' })
    .example('$0 chats export chat_… > chat.jsonl && $0 keys list --json > jwks.json && $0 verify chat.jsonl --jwks jwks.json', ''),
  (args: GlobalArgs & { file: string; jwks: string }) => {
    let text: string;
    let jwks: Jwks;
    try {
      // yargs turns a lone "-" positional into ''.
      text = readFileSync(args.file === '-' || args.file === '' ? 0 : args.file, 'utf8');
      jwks = JSON.parse(readFileSync(args.jwks, 'utf8')) as Jwks;
    } catch (err) {
      throw new CliError(`cannot read input: ${(err as Error).message}`, EXIT.usage);
    }
    if (!Array.isArray(jwks?.keys)) throw new CliError(`${args.jwks} is not a JWKS ({"keys": [...]})`, EXIT.usage);
    const result = verifyExport(text, jwks);
    if (args.json) printJson(result);
    else {
      for (const p of result.problems) process.stdout.write(`line ${p.line}: ${p.streamId ?? '?'} generation ${p.generation ?? '?'} position ${p.position ?? '?'}: ${p.problem}\n`);
      process.stdout.write(`${result.records} records, ${result.messages} messages checked, ${result.problems.length} problem${result.problems.length === 1 ? '' : 's'}\n`);
    }
    if (result.problems.length > 0) process.exitCode = EXIT.error;
  });
}
