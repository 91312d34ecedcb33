import { chmodSync, existsSync, lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { errors } from '../shared/errors.js';
import { Connection } from './connection.js';
import { EXIT_CODES } from './exit-codes.js';
import type { RpcServer } from './rpc-server.js';

/** A startup failure with a clear message and the exit code to leave with. */
export class StartupError extends Error {
  constructor(message: string, readonly exitCode: number) {
    super(message);
  }
}

/** Exit code when another daemon holds the store (systemd: RestartPreventExitStatus). */
export const EXIT_STORE_LOCKED = EXIT_CODES.storeLocked;
/** Exit code when LevelDB reports corruption at open (a restart cannot fix it). */
export const EXIT_STORE_CORRUPT = EXIT_CODES.storeCorrupt;
/** Exit code when another daemon is live on the socket path. */
export const EXIT_SOCKET_IN_USE = EXIT_CODES.socketInUse;

/** Whether something accepts connections on `path`. */
function probe(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Prepare the socket path: parent dir 0750 if missing, a stale socket of a dead daemon
 * replaced, a live one refused. Only sockets are ever removed.
 */
export async function prepareSocketPath(path: string, log: Logger): Promise<void> {
  const dir = dirname(path);
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o750 });
    chmodSync(dir, 0o750);
  }
  let stat;
  try {
    stat = lstatSync(path);
  } catch {
    return;
  }
  if (!stat.isSocket()) throw new StartupError(`${path} exists and is not a socket; refusing to replace it`, EXIT_SOCKET_IN_USE);
  if (await probe(path)) throw new StartupError(`another daemon is listening on ${path}`, EXIT_SOCKET_IN_USE);
  log.warn({ socket: path }, 'replacing stale socket file');
  unlinkSync(path);
}

/** The listening side: accepts connections up to a cap and hands them to `Connection`. */
export class SocketServer {
  readonly #server: Server;
  readonly #connections = new Set<Connection>();
  readonly #log: Logger;

  constructor(rpc: RpcServer, log: Logger, opts: { maxLineBytes: number; maxConnections: number; onConnection?: (c: Connection) => void }) {
    this.#log = log;
    this.#server = createServer((socket: Socket) => {
      if (this.#connections.size >= opts.maxConnections) {
        const e = errors.rateLimited(1000, `connections (max ${opts.maxConnections})`);
        socket.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: e.code, message: e.message, data: e.toData() } }) + '\n');
        log.warn({ max: opts.maxConnections }, 'connection refused: cap reached');
        return;
      }
      const conn = new Connection(socket, rpc, log, opts.maxLineBytes);
      this.#connections.add(conn);
      conn.onClose(() => this.#connections.delete(conn));
      opts.onConnection?.(conn);
    });
  }

  /** Listen on a path with `mode`, created under a restrictive umask so it is never wider. */
  listenPath(path: string, mode: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const previous = process.umask(0o777 & ~mode);
      this.#server.once('error', reject);
      this.#server.listen(path, () => {
        process.umask(previous);
        this.#server.off('error', reject);
        chmodSync(path, mode);
        resolve();
      });
    });
  }

  /** Listen on a socket inherited from systemd (fd 3). */
  listenFd(fd: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen({ fd }, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
  }

  /** Stop accepting; existing connections stay until `closeConnections`. */
  stopAccepting(): void {
    this.#server.close();
  }

  closeConnections(): void {
    for (const c of this.#connections) c.end();
    setTimeout(() => {
      for (const c of this.#connections) c.destroy();
    }, 200).unref();
    this.#log.debug({ count: this.#connections.size }, 'closing connections');
  }
}
