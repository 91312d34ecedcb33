import type { Argv } from 'yargs';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { ConnectionLostError, TimeoutError, type MethodResults } from '../client/index.js';
import { adminTokenPath, agentToken, connectAny, socketPath, withClient, type GlobalArgs } from './context.js';
import { CliError, errorMessage, EXIT, jsonOr, printObject, printTable } from './output.js';

type A<T = object> = GlobalArgs & T;
type Result<M extends keyof MethodResults> = MethodResults[M];
export type StatusArgs = A<{ wait?: string }>;

const DEFAULT_WAIT_S = 30;
const WAIT_POLL_MS = 100;

/** Whether something accepts connections on the socket now. */
function listening(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(socket);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => {
      resolve(false);
    });
  });
}

function daemonStatus(args: GlobalArgs): Promise<Result<'daemon.status'>> {
  return withClient(connectAny(args), (c) => c.call('daemon.status', {}));
}

/** `--wait` alone (yargs gives '') means the default; else a positive number of seconds. */
function waitSeconds(value: string): number {
  if (value === '') return DEFAULT_WAIT_S;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new CliError(`--wait takes a number of seconds, not ${JSON.stringify(value)}`, EXIT.usage);
  return n;
}

/**
 * `status --wait`: poll until the daemon answers. Not answering yet means nothing listens on
 * the socket, or (a first start) the daemon has not written its admin.token; anything else
 * (a refused token, an untrusted socket) is an answer or a mistake, and is reported at once.
 */
async function waitForStatus(args: GlobalArgs, seconds: number): Promise<Result<'daemon.status'>> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      return await daemonStatus(args);
    } catch (err) {
      // A daemon writes admin.token before it listens (docs/protocol.md §2.5): with one
      // listening, a missing token file is the wrong --data-dir, which no wait can fix.
      const notYet =
        err instanceof ConnectionLostError ||
        err instanceof TimeoutError ||
        (err instanceof CliError && agentToken(args) === null && !existsSync(adminTokenPath(args)) && !(await listening(socketPath(args))));
      if (!notYet) throw err;
      if (Date.now() + WAIT_POLL_MS > deadline) {
        throw new CliError(`the daemon at ${socketPath(args)} did not answer within ${seconds} s (last: ${errorMessage(err)})`, EXIT.error);
      }
      await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
    }
  }
}

/** `yello status [--wait]`. */
export function statusCommand(y: Argv<GlobalArgs>): Argv<GlobalArgs> {
  return y.command(
    'status',
    'Daemon version, uptime, counts, storage state and active key',
    (z: Argv<GlobalArgs>) =>
      z
        .option('wait', {
          type: 'string',
          describe: `wait up to SECONDS (default ${DEFAULT_WAIT_S}) until the daemon answers; exit 1 with one line if it does not`,
        })
        .example('$0 daemon & $0 status --wait 10 >/dev/null', 'start a daemon and block until it is ready'),
    runStatus,
  );
}

/** What `yello status` does once its arguments are read (the yargs program's handler and the entry's fast path). */
export async function runStatus(args: StatusArgs): Promise<void> {
  const s = args.wait === undefined ? await daemonStatus(args) : await waitForStatus(args, waitSeconds(args.wait));
  jsonOr(args, s, () => {
    printObject(args.io, {
      version: s.version,
      uptime: `${Math.round(s.uptimeMs / 1000)} s`,
      storage: s.storage,
      ...(s.store ? { store: s.store.backend === 'postgresql' ? `postgresql ${s.store.url}` : s.store.backend } : {}),
      policy: s.policy,
      kid: s.kid,
      ...s.counts,
    });
    for (const i of s.integrity.walIncidents)
      args.io.stdout.write(
        `log loss ${i.detectedAt}: LevelDB dropped ${i.bytes} bytes of its write-ahead log; ${i.streams} stream generations marked corrupt\n`,
      );
    if (s.integrity.corruptStreams.length > 0) {
      args.io.stdout.write(`corrupt streams (${s.integrity.corruptStreams.length}; see yello doctor and docs/reliability.md):\n`);
      printTable(
        args.io,
        s.integrity.corruptStreams.map((m) => ({
          stream: m.streamId,
          generation: m.generation ?? 'all',
          from: m.fromPosition,
          detail: m.detail,
        })),
      );
    }
  });
}
