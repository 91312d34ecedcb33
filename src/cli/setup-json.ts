// Edits of the agents' JSON configuration files (Claude Code's ~/.claude.json, .mcp.json and
// settings.json; Codex's hooks.json; Gemini CLI's settings.json) that touch only what yello
// setup adds: jsonc-parser (Microsoft's, the one VS Code edits settings with) computes the
// minimal text edit at one path, so every other byte, comments and formatting included, stays
// as it was. A whole-file JSON.parse/stringify would reformat the user's file and lose the
// comments Gemini CLI's settings may hold.
import {
  applyEdits,
  findNodeAtLocation,
  modify,
  parse,
  parseTree,
  printParseErrorCode,
  type FormattingOptions,
  type Node,
  type ParseError,
} from 'jsonc-parser';
import { CliError, EXIT } from './output.js';

export const HOOK_EVENT_NAMES = ['SessionStart', 'UserPromptSubmit', 'Stop'] as const;

/** One command hook as Claude Code's settings.json and Codex's hooks.json both take it. */
export interface CommandHook {
  type: 'command';
  command: string;
  timeout: number;
}

interface MatcherGroup {
  matcher?: string;
  hooks?: Array<Partial<CommandHook>>;
}

/** The indentation and line ends the file already uses (two spaces and \n for a new file). */
function formatting(text: string): FormattingOptions {
  const indent = /\n([ \t]+)\S/.exec(text)?.[1] ?? '  ';
  const tabs = indent.startsWith('\t');
  return { insertSpaces: !tabs, tabSize: tabs ? 1 : indent.length, eol: text.includes('\r\n') ? '\r\n' : '\n' };
}

/** The file's value (an object), or a usage error naming the file and what is wrong. */
export function parseJsonObject(text: string, file: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  const errors: ParseError[] = [];
  const value: unknown = parse(text, errors, { allowTrailingComma: true, disallowComments: false });
  const first = errors[0];
  if (first) {
    const line = text.slice(0, first.offset).split('\n').length;
    throw new CliError(
      `${file} is not valid JSON (${printParseErrorCode(first.error)} at line ${line}); nothing was changed: fix the file, then run yello setup again`,
      EXIT.usage,
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new CliError(`${file} does not hold a JSON object; nothing was changed`, EXIT.usage);
  return value as Record<string, unknown>;
}

/** The text with `value` at `path` by jsonc-parser (formatted as the file is); the fallback of the two below. */
function edit(text: string, path: (string | number)[], value: unknown, insert = false): string {
  const base = text.trim() === '' ? '{}\n' : text;
  const out = applyEdits(base, modify(base, path, value, { formattingOptions: formatting(base), isArrayInsertion: insert }));
  return out.endsWith('\n') ? out : out + '\n';
}

/**
 * Appends a member (`key: value` to an object, `value` to an array at `parentPath`) after its
 * last one, on a line of its own with that member's indentation: only the new text goes in.
 * (jsonc-parser's formatted insert reformats the line of the member before it, and its plain
 * insert writes the value on one line.) A parent written on one line gets the member on that
 * line; an empty parent is left to {@link edit}.
 */
function append(text: string, parentPath: (string | number)[], key: string | null, value: unknown): string {
  const parent = findNodeAtLocation(parseTree(text) as Node, parentPath);
  const last = parent?.children?.at(-1);
  const fallback = () => edit(text, key === null ? [...parentPath, -1] : [...parentPath, key], value, key === null);
  if (!last) return fallback();
  const indent = text.slice(text.lastIndexOf('\n', last.offset - 1) + 1, last.offset);
  const at = last.offset + last.length;
  const member = (body: string) => (key === null ? body : `${JSON.stringify(key)}: ${body}`);
  // A parent written on one line stays on one line.
  if (!/^[ \t]+$/.test(indent)) return text.slice(0, at) + ', ' + member(JSON.stringify(value)) + text.slice(at);
  const f = formatting(text);
  const eol = f.eol ?? '\n';
  const body = JSON.stringify(value, null, f.insertSpaces ? ' '.repeat(f.tabSize ?? 2) : '\t').replace(/\n/g, eol + indent);
  return text.slice(0, at) + ',' + eol + indent + member(body) + text.slice(at);
}

/**
 * Takes the member at `path` out with the separator before it (or after it, for a first
 * member): the exact inverse of {@link append}, and no other byte moves. An only member goes
 * with the whitespace around it.
 */
function cut(text: string, path: (string | number)[]): string {
  const value = findNodeAtLocation(parseTree(text) as Node, path);
  if (!value) return text;
  const node = value.parent?.type === 'property' ? value.parent : value;
  const siblings = node.parent?.children ?? [node];
  const i = siblings.indexOf(node);
  const prev = siblings[i - 1];
  const next = siblings[i + 1];
  const container = node.parent;
  if (prev) return text.slice(0, prev.offset + prev.length) + text.slice(node.offset + node.length);
  if (next) return text.slice(0, node.offset) + text.slice(next.offset);
  if (!container) return text;
  return text.slice(0, container.offset + 1) + text.slice(container.offset + container.length - 1);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Puts `entry` at `mcpServers.<name>`; the new text and what changed (nothing when it is there already). */
export function setMcpServer(text: string, file: string, name: string, entry: unknown): { text: string; change: string | null } {
  const servers = parseJsonObject(text, file).mcpServers;
  if (servers !== undefined && !isObject(servers))
    throw new CliError(`${file}: mcpServers is not an object; nothing was changed`, EXIT.usage);
  const current = servers?.[name];
  if (JSON.stringify(current) === JSON.stringify(entry)) return { text, change: null };
  const out =
    current !== undefined
      ? edit(text, ['mcpServers', name], entry)
      : servers
        ? append(text, ['mcpServers'], name, entry)
        : append(text.trim() === '' ? '{}\n' : text, [], 'mcpServers', { [name]: entry });
  return { text: out, change: `${current === undefined ? 'added' : 'updated'} mcpServers."${name}"` };
}

/** Takes `mcpServers.<name>` out (and `mcpServers` when nothing else is left in it). */
export function removeMcpServer(text: string, file: string, name: string): { text: string; change: string | null } {
  const servers = parseJsonObject(text, file).mcpServers;
  if (!isObject(servers) || !(name in servers)) return { text, change: null };
  const emptied = Object.keys(servers).length === 1;
  return { text: cut(text, emptied ? ['mcpServers'] : ['mcpServers', name]), change: `removed mcpServers."${name}"` };
}

/** Where the hooks that end with `marker` are: [event, group index, hook index, command]. */
function ours(hooks: unknown, marker: string): Array<[string, number, number, string]> {
  const found: Array<[string, number, number, string]> = [];
  if (!isObject(hooks)) return found;
  for (const [event, groups] of Object.entries(hooks)) {
    if (!Array.isArray(groups)) continue;
    (groups as MatcherGroup[]).forEach((g, gi) => {
      if (!isObject(g) || !Array.isArray(g.hooks)) return;
      g.hooks.forEach((h, hi) => {
        if (isObject(h) && typeof h.command === 'string' && h.command.endsWith(marker)) found.push([event, gi, hi, h.command]);
      });
    });
  }
  return found;
}

/**
 * Puts one command hook per event (`commands[event]`, each ending with `marker`) into `hooks`,
 * as a matcher group of its own appended to the event's list; a hook of ours already there is
 * updated in place. Every other hook stays.
 */
export function setHooks(
  text: string,
  file: string,
  commands: Record<string, string>,
  marker: string,
  timeout: number,
): { text: string; changes: string[] } {
  const changes: string[] = [];
  for (const [event, command] of Object.entries(commands)) {
    const root = parseJsonObject(text, file);
    const hooks = root.hooks;
    if (hooks !== undefined && !isObject(hooks)) throw new CliError(`${file}: hooks is not an object; nothing was changed`, EXIT.usage);
    const mine = ours(hooks, marker).find(([e]) => e === event);
    const hook: CommandHook = { type: 'command', command, timeout };
    if (mine) {
      const [, gi, hi] = mine;
      const current = ((hooks?.[event] as MatcherGroup[])[gi]?.hooks ?? [])[hi];
      if (JSON.stringify(current) === JSON.stringify(hook)) continue;
      text = edit(text, ['hooks', event, gi, 'hooks', hi], hook);
      changes.push(`updated hooks.${event} (yello hook)`);
      continue;
    }
    const list = hooks?.[event];
    if (list !== undefined && !Array.isArray(list))
      throw new CliError(`${file}: hooks.${event} is not a list; nothing was changed`, EXIT.usage);
    text = list
      ? append(text, ['hooks', event], null, { hooks: [hook] })
      : hooks
        ? append(text, ['hooks'], event, [{ hooks: [hook] }])
        : append(text.trim() === '' ? '{}\n' : text, [], 'hooks', { [event]: [{ hooks: [hook] }] });
    changes.push(`added hooks.${event} (yello hook)`);
  }
  return { text, changes };
}

/**
 * Takes out every hook whose command ends with `marker`: its matcher group when the group holds
 * nothing else, the event's list when that is left empty, and `hooks` when nothing is left.
 */
export function removeHooks(text: string, file: string, marker: string): { text: string; changes: string[] } {
  const changes: string[] = [];
  for (;;) {
    const hooks = parseJsonObject(text, file).hooks;
    const last = ours(hooks, marker).at(-1);
    if (!last || !isObject(hooks)) return { text, changes };
    const [event, gi, hi] = last;
    const groups = hooks[event] as MatcherGroup[];
    const groupAlone = (groups[gi]?.hooks ?? []).length === 1;
    const path: (string | number)[] =
      groupAlone && groups.length === 1
        ? Object.keys(hooks).length === 1
          ? ['hooks']
          : ['hooks', event]
        : groupAlone
          ? ['hooks', event, gi]
          : ['hooks', event, gi, 'hooks', hi];
    text = cut(text, path);
    changes.push(`removed hooks.${event} (yello hook)`);
  }
}
