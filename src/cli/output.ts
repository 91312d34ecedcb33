import {
  ContinuityBreakError,
  FencedError,
  InvalidParamsError,
  NotFoundError,
  RemoteError,
  YelloClientError,
  ConnectionLostError,
} from '../client/errors.js';
import type { Io } from './io.js';
import { socketAccessAdvice } from './socket-access.js';

/** Exit codes of docs/protocol.md §9. */
export const EXIT = { ok: 0, error: 1, usage: 2, continuity: 3, fenced: 4 } as const;

/** A CLI failure with its exit code; printed as one line, never a stack. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.error,
  ) {
    super(message);
  }
}

/**
 * Text from the daemon or a file (content, names, messages that echo them) as it may appear
 * in human output: one line, no terminal control. Backslash, newline, CR and tab become `\\`,
 * `\n`, `\r`, `\t`; every other C0/C1 control and DEL (so ESC, CSI, OSC, BEL) becomes `\xHH`;
 * bidi embeddings, overrides, isolates and marks and the Unicode line/paragraph separators
 * become `\u{HHHH}`. So no content can start a line of its own, look like a header or another
 * record, or move the cursor, retitle the window or reorder what is shown. `--json` output is
 * JSON and never passes through here.
 */
export function displayText(text: string): string {
  return text.replace(UNSAFE, (ch) => {
    switch (ch) {
      case '\\':
        return '\\\\';
      case '\n':
        return '\\n';
      case '\r':
        return '\\r';
      case '\t':
        return '\\t';
    }
    const code = ch.codePointAt(0) ?? 0;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16).toUpperCase()}}`;
  });
}

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE = /[\\\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** Print rows as an aligned table (human output). */
export function printTable(io: Pick<Io, 'stdout'>, rows: Array<Record<string, unknown>>, columns?: string[]): void {
  const [first] = rows;
  if (first === undefined) {
    io.stdout.write('(none)\n');
    return;
  }
  const cols = (columns ?? Object.keys(first)).map((key) => ({
    key,
    width: Math.max(key.length, ...rows.map((r) => cell(r[key]).length)),
  }));
  const line = (text: (col: { key: string }) => string) =>
    cols
      .map((col) => text(col).padEnd(col.width))
      .join('  ')
      .trimEnd() + '\n';
  io.stdout.write(line((col) => col.key.toUpperCase()));
  for (const r of rows) io.stdout.write(line((col) => cell(r[col.key])));
}

/** A value in human output: strings as they are, other scalars via `String`, objects and null as JSON. */
function plain(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return v;
    case 'object':
      return JSON.stringify(v);
    case 'number':
    case 'bigint':
    case 'boolean':
    case 'undefined':
    case 'symbol':
    case 'function':
      return String(v);
  }
}

/** A table or object cell: `-` for a missing value; text shown as data (`displayText`). */
function cell(v: unknown): string {
  return v === null || v === undefined ? '-' : displayText(plain(v));
}

/** The message of anything thrown: its `message` when it has one, else the value as a string. */
export function errorMessage(err: unknown): string {
  if (typeof err === 'object' && err !== null && 'message' in err && typeof err.message === 'string') return err.message;
  return String(err);
}

/** Print key/value pairs (human output for one object). */
export function printObject(io: Pick<Io, 'stdout'>, obj: Record<string, unknown>): void {
  const width = Math.max(...Object.keys(obj).map((k) => k.length));
  for (const [k, v] of Object.entries(obj)) {
    io.stdout.write(`${k.padEnd(width)}  ${cell(v)}\n`);
  }
}

/** `--json`: `value` as one JSON document; else what `human` prints. */
export function jsonOr(args: { json?: boolean; io: Pick<Io, 'stdout'> }, value: unknown, human: () => void): void {
  if (args.json) printJson(args.io, value);
  else human();
}

/** One JSON document (or line) on stdout. */
export function printJson(io: Pick<Io, 'stdout'>, value: unknown): void {
  io.stdout.write(JSON.stringify(value) + '\n');
}

/** What to do about a failed connection: a refused permission is not a stopped daemon. */
function connectionHint(err: ConnectionLostError): string {
  const cause = err.cause as (NodeJS.ErrnoException & { address?: string }) | undefined;
  const code = cause?.code;
  if (code === 'EACCES' || code === 'EPERM') {
    // The modes and groups on the way to the socket say which group to join, or to log in again.
    const socket = cause?.address ?? cause?.path;
    const advice = socket ? socketAccessAdvice(socket) : null;
    if (advice) return advice;
    return "permission denied: the socket's directory or the socket belong to another user or group; add your user to the socket's group (e.g. sudo usermod -aG yello $USER, effective at the next login) or use your own daemon's --socket";
  }
  return 'is the daemon running? see --socket / $YELLO_SOCKET';
}

/** Map any failure to one stderr line (its text shown as data: it may echo names) and the exit code of §9. */
export function reportError(io: Pick<Io, 'stderr'>, err: unknown): number {
  const say = (text: string) => io.stderr.write(displayText(text.replace(/\n$/, '')) + '\n');
  if (err instanceof CliError) {
    say(`yello: ${err.message}\n`);
    return err.exitCode;
  }
  if (err instanceof ContinuityBreakError) {
    say(
      `yello: continuity break (${err.reason}) on ${String(err.data.streamId)}: expected ${JSON.stringify(err.data.expected)}, actual ${JSON.stringify(err.data.actual)}; this needs intervention\n`,
    );
    return EXIT.continuity;
  }
  if (err instanceof FencedError) {
    say(
      `yello: fenced: the coordinator token is no longer current for ${String(err.data.streamId)} (stream epoch ${String(err.data.epoch)}); it was replaced, released or reset\n`,
    );
    return EXIT.fenced;
  }
  if (err instanceof NotFoundError && err.data.kind === 'chat') {
    say(`yello: no such chat: ${String(err.data.id)}\n`);
    return EXIT.error;
  }
  if (err instanceof InvalidParamsError && typeof err.data.reason === 'string') {
    // The reason is the message; "INVALID_PARAMS: invalid params at P: …" would say it twice.
    const at = typeof err.data.path === 'string' && err.data.path !== '' ? ` at ${err.data.path}` : '';
    say(`yello: ${err.data.reason} (INVALID_PARAMS${at})\n`);
    return EXIT.error;
  }
  if (err instanceof RemoteError) {
    // A detail the message already says (INVALID_PARAMS' reason, often its path) is not repeated.
    const details = Object.entries(err.data)
      .filter(([k, v]) => k !== 'type' && !err.message.includes(plain(v)))
      .map(([k, v]) => `${k}=${plain(v)}`)
      .join(' ');
    say(`yello: ${err.type}: ${err.message}${details ? ` (${details})` : ''}\n`);
    return EXIT.error;
  }
  if (err instanceof ConnectionLostError) {
    say(`yello: ${err.message} (${connectionHint(err)})\n`);
    return EXIT.error;
  }
  if (err instanceof YelloClientError) {
    say(`yello: ${err.type}: ${err.message}\n`);
    return EXIT.error;
  }
  say(`yello: ${errorMessage(err)}\n`);
  return EXIT.error;
}
