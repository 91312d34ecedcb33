import { chmodSync, existsSync, lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { errors } from '../shared/errors.js';
import type { Audit, AuditFields } from './audit.js';
import { Connection } from './connection.js';
import { EXIT_CODES } from './exit-codes.js';
import type { RpcServer } from './rpc-server.js';
import { openFileLimit, socketFd, socketInode } from './socket-fd.js';

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

/** Options of the listening side. */
export interface SocketServerOptions {
  maxLineBytes: number;
  maxConnections: number;
  maxUnsentBytes: number;
  audit: Audit;
  onConnection?: (c: Connection) => void;
}

/** How long a connection refused at the cap may stay open for its client to read the refusal. */
const REFUSAL_LINGER_MS = 1_000;

/**
 * File descriptors kept free below RLIMIT_NOFILE: a connection whose fd lands in this margin is
 * refused, visibly, so that LevelDB and the daemon's own files still find one.
 */
export function fdHeadroom(limit: number): number {
  return Math.min(64, Math.max(8, Math.floor(limit / 8)));
}

/**
 * The listening side: accepts connections up to a cap and hands them to `Connection`.
 *
 * At EMFILE, libuv (under Node's `net.Server`) accepts and closes every pending connection
 * itself, with a spare fd it keeps for that, and tells nobody: those clients see a silent close
 * and the daemon never sees them. So the daemon refuses, with a RATE_LIMITED line and an audit
 * line, any connection whose fd comes within `fdHeadroom` of the limit; EMFILE is then reached
 * only if something else takes the fds. When Node does report an accept error (the spare fd
 * could not be had), it is logged once per burst, never thrown.
 */
export class SocketServer {
  readonly #server: Server;
  readonly #connections = new Set<Connection>();
  readonly #log: Logger;
  readonly #audit: Audit;

  constructor(rpc: RpcServer, log: Logger, opts: SocketServerOptions) {
    this.#log = log;
    this.#audit = opts.audit;
    this.#server = createServer((socket: Socket) => {
      const refusal = this.#refusal(socket, opts.maxConnections);
      if (refusal) {
        this.#refuse(socket, refusal);
        return;
      }
      const conn = new Connection(socket, rpc, log, { maxLineBytes: opts.maxLineBytes, maxUnsentBytes: opts.maxUnsentBytes, audit: opts.audit });
      this.#connections.add(conn);
      conn.onClose(() => this.#connections.delete(conn));
      opts.onConnection?.(conn);
    });
  }

  #refusal(socket: Socket, maxConnections: number): { reason: 'MAX_CONNECTIONS' | 'FILE_DESCRIPTORS'; what: string; fields: AuditFields } | null {
    if (this.#connections.size >= maxConnections) {
      return { reason: 'MAX_CONNECTIONS', what: `connections (max ${maxConnections})`, fields: { max: maxConnections } };
    }
    const fd = socketFd(socket);
    const limit = openFileLimit();
    if (fd !== null && limit !== null && fd >= limit - fdHeadroom(limit)) {
      return { reason: 'FILE_DESCRIPTORS', what: `open files (fd ${fd} of ${limit})`, fields: { fd, fdLimit: limit, headroom: fdHeadroom(limit) } };
    }
    return null;
  }

  /**
   * One RATE_LIMITED line, then close. At the connection cap the socket lingers (reading and
   * dropping input) until the client closes or REFUSAL_LINGER_MS pass, so a client that wrote
   * first still reads the line rather than a reset. Short of descriptors, the fd is closed as
   * soon as the line is written, before the next pending connection is accepted (the write
   * callback runs in this callback's tick queue): a burst of refusals must not itself reach
   * EMFILE, where libuv drops the rest unseen. A client that wrote before reading may then see a
   * reset instead of the line; the refusal is in the audit log either way.
   */
  #refuse(socket: Socket, refusal: { reason: 'MAX_CONNECTIONS' | 'FILE_DESCRIPTORS'; what: string; fields: AuditFields }): void {
    this.#audit.burst('connection.refused', refusal.reason, {
      reason: refusal.reason, connections: this.#connections.size, socketInode: socketInode(socketFd(socket)), ...refusal.fields,
    });
    const e = errors.rateLimited(1000, refusal.what);
    const line = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: e.code, message: e.message, data: e.toData() } }) + '\n';
    socket.on('error', () => undefined);
    if (refusal.reason === 'FILE_DESCRIPTORS') {
      socket.write(line, () => socket.destroy());
      return;
    }
    socket.end(line);
    socket.resume();
    setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS).unref();
  }

  #onServerError(err: NodeJS.ErrnoException): void {
    if (err.code === 'EMFILE' || err.code === 'ENFILE') {
      this.#audit.burst('accept.failed', err.code, { code: err.code, connections: this.#connections.size, fdLimit: openFileLimit() });
      return;
    }
    this.#log.error({ err: { message: err.message, code: err.code, syscall: err.syscall } }, 'socket server error');
  }

  /** Listen on a path with `mode`, created under a restrictive umask so it is never wider. */
  listenPath(path: string, mode: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const previous = process.umask(0o777 & ~mode);
      this.#server.once('error', reject);
      this.#server.listen(path, () => {
        process.umask(previous);
        this.#server.off('error', reject);
        this.#server.on('error', (err) => this.#onServerError(err));
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
        this.#server.on('error', (err) => this.#onServerError(err));
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
