import { chmodSync, lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { errors } from '../shared/errors.js';
import { ownedDirectoryProblem } from '../shared/socket-trust.js';
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
 * Longest socket path the platform takes, in bytes: `sun_path` is 108 bytes on Linux and 104
 * on the BSDs and macOS, including the terminating NUL. Node does not refuse a longer path: it
 * truncates it, listens on the truncated name and leaves that file behind.
 */
export const MAX_SOCKET_PATH_BYTES = process.platform === 'linux' ? 107 : 103;

/** The directory mode for a socket of `socketMode`: 0700, or 0750 when the group may connect. */
export function socketDirMode(socketMode: number): number {
  return socketMode & 0o070 ? 0o750 : 0o700;
}

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

/** Refuse a socket path the kernel cannot bind as given. */
function checkSocketPathLength(path: string): void {
  const bytes = Buffer.byteLength(path);
  if (bytes > MAX_SOCKET_PATH_BYTES) {
    throw new StartupError(`socket path is ${bytes} bytes, over the platform limit of ${MAX_SOCKET_PATH_BYTES}: ${path}`, EXIT_CODES.config);
  }
}

/** Startup error for an errno met on the socket path. */
function socketPathError(err: unknown, what: string): StartupError | unknown {
  const code = errnoOf(err);
  if (code === 'ENOTDIR') return new StartupError(`${what}: a parent of it is not a directory`, EXIT_CODES.config);
  if (code === 'EACCES' || code === 'EPERM') return new StartupError(`${what}: permission denied`, EXIT_CODES.permissionDenied);
  return err;
}

/**
 * Make sure the socket directory exists and is safe: created here as 0700 (0750 when the
 * socket mode gives the group access), or, if it exists, a real directory owned by this uid
 * or root that neither group nor others can write. Anything else would let another local user
 * swap the socket for their own and collect tokens (docs/security.md).
 */
function ensureSocketDir(dir: string, socketMode: number | undefined): void {
  let stat;
  try {
    stat = lstatSync(dir);
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw socketPathError(err, `socket directory ${dir}`);
  }
  if (stat === undefined) {
    // Without the socket mode the right directory mode is unknown: leave it to listenPath.
    if (socketMode === undefined) return;
    const mode = socketDirMode(socketMode);
    try {
      mkdirSync(dir, { recursive: true, mode });
      chmodSync(dir, mode);
    } catch (err) {
      throw socketPathError(err, `cannot create socket directory ${dir}`);
    }
    // Checked again below: someone may have created it first, between lstat and mkdir.
    stat = lstatSync(dir);
  }
  if (!stat.isDirectory() && !stat.isSymbolicLink()) throw new StartupError(`socket directory ${dir} is not a directory`, EXIT_CODES.config);
  const problem = ownedDirectoryProblem({ isDirectory: stat.isDirectory(), isSymbolicLink: stat.isSymbolicLink(), uid: stat.uid, mode: stat.mode }, process.getuid?.() ?? 0);
  if (problem) throw new StartupError(`unsafe socket directory ${dir}: ${problem}`, EXIT_CODES.config);
}

/**
 * Prepare the socket path: refuse a path over the platform's length limit or under a file;
 * refuse an unsafe directory (see {@link ensureSocketDir}; it is created here when
 * `socketMode` is given, else by {@link SocketServer.listenPath}); replace a stale socket of
 * a dead daemon, refuse a live one. Only sockets are ever removed.
 */
export async function prepareSocketPath(path: string, log: Logger, socketMode?: number): Promise<void> {
  checkSocketPathLength(path);
  ensureSocketDir(dirname(path), socketMode);
  let stat;
  try {
    stat = lstatSync(path);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return;
    throw socketPathError(err, `socket path ${path}`);
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

  /**
   * Listen on a path with `mode`, created under a restrictive umask so it is never wider.
   * The path's length and directory are checked again here (the directory gets the mode
   * `mode` calls for, if it is created here), so no caller can listen on an unsafe path.
   */
  listenPath(path: string, mode: number): Promise<void> {
    try {
      checkSocketPathLength(path);
      ensureSocketDir(dirname(path), mode);
    } catch (err) {
      return Promise.reject(err as Error);
    }
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
