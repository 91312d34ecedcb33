// The arguments of `yello send`, `yello ack`, `yello inbox`, `yello status` and `yello chats read`
// in their plain forms, parsed without yargs: an agent runs these at every turn, and loading
// yargs and every command module would be most of their time. Anything this parser is not sure it reads exactly as the yargs
// program does (help, an unknown or repeated option, `--no-…`, `--`, a value starting with `-`,
// `--ack true`, a missing argument) is left to the program: parseFastCommand answers null, and
// the program's own parse, usage errors and help apply. No imports: the entry loads it first.

/** What the program's global options give a handler (context.ts GlobalArgs, without `io`). */
export interface FastGlobals {
  socket?: string;
  'data-dir'?: string;
  'token-file'?: string;
  'admin-token-file'?: string;
  'state-dir'?: string;
  json: boolean;
}

/** Where `chats read` starts (follow-command.ts FROM). */
export const READ_FROM = ['acknowledged', 'generation-start', 'end'] as const;

export type FastCommand =
  | { command: 'status'; args: FastGlobals & { wait?: string } }
  | { command: 'ack'; args: FastGlobals & { chatId: string; replace: boolean } }
  | {
      command: 'chats read';
      args: FastGlobals & { chatId: string; ack: boolean; replace: boolean; wait?: number; from: (typeof READ_FROM)[number] };
    }
  | { command: 'inbox'; args: FastGlobals & { wait?: number } }
  | {
      command: 'send';
      args: FastGlobals & {
        chatId: string;
        text: string[];
        'message-id'?: string;
        'coordinator-token-file'?: string;
        replace: boolean;
        release: boolean;
        lossy: boolean;
        ack: boolean;
      };
    };

type Kind = 'string' | 'boolean' | 'number';

/** The program's global options (program.ts), by kind. */
const GLOBAL: Record<string, Kind> = {
  socket: 'string',
  'data-dir': 'string',
  'token-file': 'string',
  'admin-token-file': 'string',
  'state-dir': 'string',
  json: 'boolean',
};

/** Each fast command's own options (status-command.ts, inbox-command.ts, send-commands.ts, follow-command.ts) and positionals. */
const COMMANDS: Record<FastCommand['command'], { options: Record<string, Kind>; positionals: number }> = {
  status: { options: { wait: 'string' }, positionals: 0 },
  // chatId.
  ack: { options: { replace: 'boolean' }, positionals: 1 },
  // chatId.
  'chats read': { options: { ack: 'boolean', replace: 'boolean', wait: 'number', from: 'string' }, positionals: 1 },
  inbox: { options: { wait: 'number' }, positionals: 0 },
  // chatId, then one or more words of text.
  send: {
    options: {
      'message-id': 'string',
      'coordinator-token-file': 'string',
      replace: 'boolean',
      release: 'boolean',
      lossy: 'boolean',
      ack: 'boolean',
    },
    positionals: 2,
  },
};

const SEND_FLAGS = ['replace', 'release', 'lossy', 'ack'] as const;

/** A number as `--wait` takes it, in the plain spelling both parsers read alike (no exponent, sign or leading zero). */
const PLAIN_NUMBER = /^(?:0|[1-9]\d*)(?:\.\d+)?$/;

/** The one positional of a command that takes a chat id alone, or null (none, more, or "-", which yargs reads otherwise). */
function loneChatId(positionals: readonly string[]): string | null {
  const [chatId, ...more] = positionals;
  return chatId === undefined || chatId === '-' || more.length > 0 ? null : chatId;
}

/** `argv` (without node and script) as a fast command, or null: the yargs program decides. */
export function parseFastCommand(argv: readonly string[]): FastCommand | null {
  const words: string[] = [];
  const values = new Map<string, string | boolean>();
  let spec: (typeof COMMANDS)[FastCommand['command']] | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '-' && spec !== undefined && words.length > 0) {
      words.push(a);
      continue;
    }
    if (!a.startsWith('-')) {
      if (a === '') return null;
      if (spec === undefined) {
        // `chats` names a group: its subcommand word makes the command (`chats read`).
        if (a === 'chats' && words.length === 0) {
          words.push(a);
          continue;
        }
        const name = words.length === 1 ? `${words.pop() ?? ''} ${a}` : a;
        if (!Object.hasOwn(COMMANDS, name)) return null;
        spec = COMMANDS[name as FastCommand['command']];
        words.push(name);
        continue;
      }
      words.push(a);
      continue;
    }
    if (!a.startsWith('--') || a === '--') return null;
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(2, eq) : a.slice(2);
    // An option of the command given before the command: yargs would not know it yet.
    const kind = Object.hasOwn(GLOBAL, name) ? GLOBAL[name] : spec && Object.hasOwn(spec.options, name) ? spec.options[name] : undefined;
    if (kind === undefined || values.has(name)) return null;
    if (kind === 'boolean') {
      const next = argv[i + 1];
      // `--json=false` and `--ack true` are read by yargs, in ways of its own.
      if (eq > 0 || next === 'true' || next === 'false') return null;
      values.set(name, true);
      continue;
    }
    const value = eq > 0 ? a.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '' || value.startsWith('-')) return null;
    if (kind === 'number' && !PLAIN_NUMBER.test(value)) return null;
    values.set(name, value);
  }
  if (spec === undefined) return null;
  const [command, ...positionals] = words as [FastCommand['command'], ...string[]];
  const globals: FastGlobals = { json: values.get('json') === true };
  for (const name of ['socket', 'data-dir', 'token-file', 'admin-token-file', 'state-dir'] as const) {
    const v = values.get(name);
    if (typeof v === 'string') globals[name] = v;
  }
  const str = (name: string) => {
    const v = values.get(name);
    return typeof v === 'string' ? v : undefined;
  };
  switch (command) {
    case 'status':
    case 'inbox': {
      if (positionals.length > 0) return null;
      const wait = str('wait');
      if (command === 'status') return { command, args: { ...globals, ...(wait !== undefined ? { wait } : {}) } };
      return { command, args: { ...globals, ...(wait !== undefined ? { wait: Number(wait) } : {}) } };
    }
    case 'ack': {
      const chatId = loneChatId(positionals);
      if (chatId === null) return null;
      return { command, args: { ...globals, chatId, replace: values.get('replace') === true } };
    }
    case 'chats read': {
      const chatId = loneChatId(positionals);
      const wait = str('wait');
      const from = str('from') ?? READ_FROM[0];
      // Another choice is the program's usage error.
      if (chatId === null || !(READ_FROM as readonly string[]).includes(from)) return null;
      return {
        command,
        args: {
          ...globals,
          chatId,
          ack: values.get('ack') === true,
          replace: values.get('replace') === true,
          ...(wait !== undefined ? { wait: Number(wait) } : {}),
          from: from as (typeof READ_FROM)[number],
        },
      };
    }
    case 'send': {
      const [chatId, ...text] = positionals;
      // A lone `-` is stdin; beside other words yargs reads it otherwise.
      if (chatId === undefined || chatId === '-' || text.length === 0 || (text.includes('-') && text.length > 1)) return null;
      const messageId = str('message-id');
      const tokenFile = str('coordinator-token-file');
      const flags = Object.fromEntries(SEND_FLAGS.map((f) => [f, values.get(f) === true])) as Record<(typeof SEND_FLAGS)[number], boolean>;
      return {
        command,
        args: {
          ...globals,
          chatId,
          text,
          ...(messageId !== undefined ? { 'message-id': messageId } : {}),
          ...(tokenFile !== undefined ? { 'coordinator-token-file': tokenFile } : {}),
          ...flags,
        },
      };
    }
  }
}
