import { chmodSync, lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { errors } from '../../shared/errors.js';
import { ownedDirectoryProblem } from '../../shared/socket-trust.js';
import type { Audit, AuditFields } from './audit.js';
import { Admission, type AdmissionOptions } from './admission.js';
import { Connection } from './connection.js';
import type { OutputPool } from './output-pool.js';
import { EXIT_CODES } from '../runtime/exit-codes.js';
import { StartupError } from '../runtime/startup-error.js';
import type { RpcServer } from './rpc-server.js';
import { openFileLimit, socketFd, socketInode } from './socket-fd.js';

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
    s.once('error', () => {
      resolve(false);
    });
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
    throw new StartupError(
      `socket path is ${bytes} bytes, over the platform limit of ${MAX_SOCKET_PATH_BYTES}: ${path}`,
      EXIT_CODES.config,
    );
  }
}

/** Startup error for an errno met on the socket path. */
function socketPathError(err: unknown, what: string): unknown {
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
  if (!stat.isDirectory() && !stat.isSymbolicLink())
    throw new StartupError(`socket directory ${dir} is not a directory`, EXIT_CODES.config);
  const problem = ownedDirectoryProblem(
    { isDirectory: stat.isDirectory(), isSymbolicLink: stat.isSymbolicLink(), uid: stat.uid, mode: stat.mode },
    process.getuid?.() ?? 0,
  );
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

/** Options of the listening side. */
export interface SocketServerOptions extends AdmissionOptions {
  maxLineBytes: number;
  maxUnsentBytes: number;
  /** The daemon-wide memory budget every connection counts against (output-pool.ts). */
  pool?: OutputPool;
  audit: Audit;
  onConnection?: (c: Connection) => void;
  /** A connection refused at accept, with the audit log's reason (metrics). */
  onRefused?: (reason: Refusal['reason']) => void;
}

/** Why a new connection is refused, for its RATE_LIMITED line and the audit log. */
interface Refusal {
  reason: 'MAX_CONNECTIONS' | 'PENDING_HELLOS' | 'FILE_DESCRIPTORS';
  what: string;
  fields: AuditFields;
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
  readonly #admission: Admission;
  readonly #onRefused: ((reason: Refusal['reason']) => void) | undefined;

  constructor(rpc: RpcServer, log: Logger, opts: SocketServerOptions) {
    this.#log = log;
    this.#audit = opts.audit;
    this.#admission = new Admission(opts, opts.audit);
    this.#onRefused = opts.onRefused;
    this.#server = createServer((socket: Socket) => {
      // Room first: the oldest idle connection without a session gives way to the newcomer.
      const room = this.#admission.makeRoom(this.#connections.size);
      const refusal = this.#refusal(socket, room, opts);
      if (refusal) {
        this.#refuse(socket, refusal);
        return;
      }
      const conn = new Connection(socket, rpc, log, {
        maxLineBytes: opts.maxLineBytes,
        maxUnsentBytes: opts.maxUnsentBytes,
        audit: opts.audit,
        pool: opts.pool,
        admitSession: (c, caller) => {
          this.#admission.session(c, caller);
        },
      });
      this.#connections.add(conn);
      conn.onClose(() => this.#connections.delete(conn));
      this.#admission.accepted(conn);
      opts.onConnection?.(conn);
    });
  }

  /** Open connections by the role of their session, read at a metrics scrape. */
  connectionsByRole(): { unauthenticated: number; agent: number; admin: number } {
    const n = { unauthenticated: 0, agent: 0, admin: 0 };
    for (const c of this.#connections) n[c.caller?.role ?? 'unauthenticated']++;
    return n;
  }

  #refusal(socket: Socket, room: boolean, opts: AdmissionOptions): Refusal | null {
    if (!room) {
      if (this.#connections.size >= opts.maxConnections)
        return { reason: 'MAX_CONNECTIONS', what: `connections (max ${opts.maxConnections})`, fields: { max: opts.maxConnections } };
      return {
        reason: 'PENDING_HELLOS',
        what: `connections waiting for session.hello (max ${opts.maxPendingHellos})`,
        fields: { max: opts.maxPendingHellos },
      };
    }
    const fd = socketFd(socket);
    const limit = openFileLimit();
    if (fd !== null && limit !== null && fd >= limit - fdHeadroom(limit)) {
      return {
        reason: 'FILE_DESCRIPTORS',
        what: `open files (fd ${fd} of ${limit})`,
        fields: { fd, fdLimit: limit, headroom: fdHeadroom(limit) },
      };
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
  #refuse(socket: Socket, refusal: Refusal): void {
    this.#onRefused?.(refusal.reason);
    this.#audit.burst('connection.refused', refusal.reason, {
      reason: refusal.reason,
      connections: this.#connections.size,
      socketInode: socketInode(socketFd(socket)),
      ...refusal.fields,
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

  /**
   * Listen on a path with `mode`, created under a restrictive umask so it is never wider.
   * The path's length and directory are checked again here (the directory gets the mode
   * `mode` calls for, if it is created here), so no caller can listen on an unsafe path.
   */
  async listenPath(path: string, mode: number): Promise<void> {
    // Async so that a refused path is a rejection, like a failed listen, never a synchronous throw.
    checkSocketPathLength(path);
    ensureSocketDir(dirname(path), mode);
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      // The umask is the process's: restored as soon as listen() returns, which has bound the
      // path synchronously (a Unix socket path needs no lookup). Kept across the callback, it
      // would narrow every file created meanwhile, and two daemons starting at once in one
      // process would leave each other's mask behind.
      const previous = process.umask(0o777 & ~mode);
      try {
        this.#server.listen(path);
      } finally {
        process.umask(previous);
      }
      this.#server.once('listening', () => {
        this.#server.off('error', reject);
        this.#server.on('error', (err) => {
          this.#onServerError(err);
        });
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
        this.#server.on('error', (err) => {
          this.#onServerError(err);
        });
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
