// Codex's config.toml: yello setup adds one `[mcp_servers.<name>]` table as a marked block at
// the end of the file and takes exactly that block out again.
//
// Why a marked block and not a TOML library's parse-and-write: no pinned JavaScript TOML
// library edits a document in place. smol-toml, @iarna/toml and the others parse to plain
// values and stringify them anew, which drops the user's comments, reorders and reformats the
// whole file, and rewrites dates and numbers in their own style: a user's hand-kept config
// would come back as someone else's. A block between two comment lines leaves every other byte
// of the file as it was, is idempotent (the block is replaced in place), is removed exactly,
// and shows the user what yello wrote and how to take it out. A table appended at the end of a
// TOML document is always valid there (a header opens a new table whatever came before), so the
// one thing that can go wrong is a second definition of the same table. smol-toml (pinned) is
// used to read only: to refuse a file that is not valid TOML or that defines the table outside
// the block, and to check that the edited file parses to exactly the entry we meant.
import { parse } from 'smol-toml';
import { CliError, EXIT } from './output.js';

/** An MCP server entry as Codex reads `[mcp_servers.<name>]`: command, args, env. */
export interface TomlMcpEntry {
  command: string;
  args: string[];
  env: Record<string, string>;
}

const begin = (name: string) =>
  `# >>> yello setup: ${name} (remove with: yello setup codex --agent ${name.replace(/^yello-/, '')} --remove)`;
const end = (name: string) => `# <<< yello setup: ${name}`;

/** A TOML basic string: JSON's escapes (\", \\, \n, \uXXXX, …) are all valid TOML escapes. */
const str = (s: string) => JSON.stringify(s);

/** The block's lines: the markers around one table; `name` is a bare key (usernames are [A-Za-z0-9_-]). */
export function mcpBlock(name: string, e: TomlMcpEntry): string {
  const env = Object.entries(e.env)
    .map(([k, v]) => `${k} = ${str(v)}`)
    .join(', ');
  return [
    begin(name),
    `[mcp_servers.${name}]`,
    `command = ${str(e.command)}`,
    `args = [${e.args.map(str).join(', ')}]`,
    `env = { ${env} }`,
    end(name),
    '',
  ].join('\n');
}

/** Where the block of `name` is: [start, end) offsets of its lines, end after its final newline. */
function findBlock(text: string, name: string): [number, number] | null {
  const lines = text.split('\n');
  let offset = 0;
  let start = -1;
  for (const line of lines) {
    const next = offset + line.length + 1;
    if (start < 0 && line.startsWith(`# >>> yello setup: ${name} `)) start = offset;
    else if (start >= 0 && line.trimEnd() === end(name)) return [start, Math.min(next, text.length)];
    offset = next;
  }
  return null;
}

function parsed(text: string, file: string): Record<string, unknown> {
  try {
    return parse(text);
  } catch (err) {
    throw new CliError(
      `${file} is not valid TOML (${(err as Error).message.split('\n')[0]}); nothing was changed: fix it first`,
      EXIT.usage,
    );
  }
}

const serversOf = (doc: Record<string, unknown>) => (doc.mcp_servers ?? {}) as Record<string, unknown>;

/** Adds (or replaces in place) the block of `name`; the new text and what changed. */
export function setMcpBlock(text: string, file: string, name: string, entry: TomlMcpEntry): { text: string; change: string | null } {
  const block = mcpBlock(name, entry);
  const at = findBlock(text, name);
  let out: string;
  if (at) {
    if (text.slice(at[0], at[1]) === block || text.slice(at[0], at[1]) + '\n' === block) return { text, change: null };
    out = text.slice(0, at[0]) + block + text.slice(at[1]);
  } else {
    if (serversOf(parsed(text, file))[name] !== undefined)
      throw new CliError(
        `${file} already defines [mcp_servers.${name}] outside a yello setup block; nothing was changed: remove that table (or rename it), then run yello setup again`,
        EXIT.usage,
      );
    out = text + (text === '' || text.endsWith('\n') ? '' : '\n') + block;
  }
  const check = serversOf(parsed(out, file))[name];
  if (JSON.stringify(check) !== JSON.stringify(entry))
    throw new CliError(
      `${file}: the edited file would not hold the entry as meant (is [mcp_servers] defined unusually?); nothing was changed`,
      EXIT.error,
    );
  return { text: out, change: `${at ? 'updated' : 'added'} [mcp_servers.${name}] (a marked block)` };
}

/** Takes the block of `name` out, byte for byte as it was added. */
export function removeMcpBlock(text: string, name: string): { text: string; change: string | null } {
  const at = findBlock(text, name);
  if (!at) return { text, change: null };
  return { text: text.slice(0, at[0]) + text.slice(at[1]), change: `removed [mcp_servers.${name}] (the marked block)` };
}
