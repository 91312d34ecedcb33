import { parseArgs } from 'node:util';
import { DEFAULT_MAX_LINE_BYTES } from '../shared/paths.js';

/** One option of `yello daemon`. Both the yargs command and the fast start path read this table. */
export interface DaemonOption {
  type: 'string' | 'number' | 'boolean';
  describe: string;
  default?: string | number;
  choices?: readonly string[];
  hidden?: boolean;
}

export const DAEMON_OPTIONS = {
  socket: {
    type: 'string',
    describe: 'Unix socket path (default: $YELLO_SOCKET, systemd socket, $XDG_RUNTIME_DIR/yello/yello.sock, /tmp/yello-$UID/yello.sock)',
  },
  'data-dir': {
    type: 'string',
    describe: 'data directory (default: $YELLO_DATA_DIR, $STATE_DIRECTORY, $XDG_STATE_HOME/yello, ~/.local/state/yello)',
  },
  store: {
    type: 'string',
    describe:
      'where the chats are stored (default: $YELLO_STORE, else LevelDB in <data-dir>/db): leveldb: for that default, or ' +
      'postgresql://USER@HOST:PORT/DATABASE (several HOST:PORT for failover; ?host=/socket/dir for a Unix socket), shared by the ' +
      'daemons of several hosts. Never put the password in the URL: use --store-password-file, a passfile or PGPASSWORD',
  },
  'store-password-file': {
    type: 'string',
    describe: 'a file (mode 0600) holding only the PostgreSQL password of --store (default: PGPASSWORD, then the passfile ~/.pgpass)',
  },
  'log-level': {
    type: 'string',
    default: 'info',
    choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
    describe: 'pino log level (JSON lines on stdout)',
  },
  'socket-mode': { type: 'string', default: '0660', describe: 'octal mode of the socket file' },
  'max-line-bytes': { type: 'number', default: DEFAULT_MAX_LINE_BYTES, describe: 'longest accepted request line' },
  'max-connections': { type: 'number', default: 2048, describe: 'concurrent connections before new ones are refused with RATE_LIMITED' },
  'max-unsent-bytes': { type: 'number', default: 16_777_216, describe: 'output one connection may leave unread before it is closed' },
  'max-output-bytes': {
    type: 'number',
    default: 33_554_432,
    describe:
      'daemon-wide budget of answers being made and left unread, over all connections (the biggest consumers wait, then are closed)',
  },
  'hello-timeout-ms': {
    type: 'number',
    default: 5_000,
    describe: 'a connection without a successful session.hello this long after connecting is closed',
  },
  'max-pending-hellos': {
    type: 'number',
    default: 64,
    describe: 'connections without a session at once; past it the oldest idle one is closed',
  },
  'max-sessions-per-agent': { type: 'number', default: 64, describe: 'sessions one agent may hold at once' },
  'sign-workers': {
    type: 'number',
    describe:
      'worker threads that sign the messages of busy moments (default: one per CPU core beyond two, at most 4; 0: in the thread pool of libuv)',
  },
  'quota-append-records': { type: 'number', default: 1_000, describe: 'records one agent may append per second, sustained (0: no quota)' },
  'quota-append-bytes': {
    type: 'number',
    default: 16_777_216,
    describe: 'append request bytes one agent may send per second, sustained (0: no quota)',
  },
  'quota-stored-bytes': { type: 'number', default: 4_294_967_296, describe: 'bytes of records one agent may have stored (0: no quota)' },
  'quota-claims-per-minute': { type: 'number', default: 60, describe: 'streams.claim calls one agent may make per minute (0: no quota)' },
  'retention-max-records': {
    type: 'number',
    default: 0,
    describe: 'retention: keep at most this many records of each stream, trimming the oldest (0: no limit)',
  },
  'retention-max-age-seconds': {
    type: 'number',
    default: 0,
    describe: 'retention: trim records older than this many seconds (0: no limit)',
  },
  'retention-unacknowledged': {
    type: 'string',
    choices: ['keep', 'trim'],
    default: 'keep',
    describe: "retention: keep records the peer has not acknowledged (default), or trim them too (streams.trim's force)",
  },
  'retention-interval-seconds': { type: 'number', default: 600, describe: 'retention: seconds between runs of the policy' },
  policy: {
    type: 'string',
    choices: ['grants', 'open'],
    default: 'grants',
    describe: 'grants: chats and sends need a grant; open: every agent may chat with every other',
  },
  'metrics-listen': {
    type: 'string',
    describe:
      'also serve Prometheus metrics over HTTP (GET /metrics only) on HOST:PORT, e.g. 127.0.0.1:9464; a loopback address only, ' +
      'unless --metrics-allow-remote (default: off; `yello metrics` scrapes through the socket either way)',
  },
  'metrics-allow-remote': {
    type: 'boolean',
    describe:
      'let --metrics-listen bind a non-loopback address (0.0.0.0, a LAN address): the endpoint has no TLS and no authentication, so anyone who can reach it reads the metrics',
  },
  'fault-fail-sync-file': { type: 'string', hidden: true, describe: 'tests only: once this file exists, synced writes fail' },
  'pg-answer-deadline-ms': {
    type: 'number',
    hidden: true,
    describe: 'tests only: how long a PostgreSQL store waits for an answer before an unknown outcome or UNAVAILABLE (default 5000)',
  },
  'metrics-idle-ms': {
    type: 'number',
    hidden: true,
    describe: 'tests only: how long a --metrics-listen connection without a request is kept (default 10000)',
  },
} as const satisfies Record<string, DaemonOption>;

type OptionName = keyof typeof DAEMON_OPTIONS;
type OptionValue<O> = O extends { type: 'number' } ? number : O extends { type: 'boolean' } ? boolean : string;

/** Parsed `yello daemon` options, typed from the table: defaults applied, choices checked. */
export type DaemonArgs = {
  -readonly [K in OptionName]: (typeof DAEMON_OPTIONS)[K] extends { default: unknown }
    ? OptionValue<(typeof DAEMON_OPTIONS)[K]>
    : OptionValue<(typeof DAEMON_OPTIONS)[K]> | undefined;
};

/**
 * `yello daemon` arguments parsed without loading yargs (~150 ms of module loading and help
 * layout at every start). Returns null for anything but plain, valid options (help, version,
 * unknown or repeated flags, bad numbers or choices, camelCase aliases): the caller then takes
 * the full yargs path, whose messages and behaviour stay the reference.
 */
export function parseDaemonArgsFast(args: string[]): DaemonArgs | null {
  let values: Record<string, string | boolean | Array<string | boolean> | undefined>;
  try {
    const options = Object.fromEntries(
      Object.entries(DAEMON_OPTIONS).map(([name, spec]) => [
        name,
        { type: spec.type === 'boolean' ? ('boolean' as const) : ('string' as const) },
      ]),
    );
    ({ values } = parseArgs({ args, options, strict: true, allowPositionals: false }));
  } catch {
    return null;
  }
  const out: Record<string, string | number | boolean | undefined> = {};
  for (const [name, spec] of Object.entries(DAEMON_OPTIONS) as Array<[OptionName, DaemonOption]>) {
    const raw = values[name];
    if (raw === undefined) {
      out[name] = spec.default;
      continue;
    }
    if (spec.type === 'boolean') {
      if (raw !== true) return null;
      out[name] = raw;
      continue;
    }
    if (typeof raw !== 'string') return null;
    if (spec.choices && !spec.choices.includes(raw)) return null;
    if (spec.type === 'number') {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n)) return null;
      out[name] = n;
    } else {
      out[name] = raw;
    }
  }
  return out as unknown as DaemonArgs;
}
